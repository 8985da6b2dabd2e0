package main

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// filterSet is the sorted, deduplicated list of "key=value" (or "key") label
// filters from one protocol line; Docker ANDs them when listing resources.
type filterSet []string

// parseFilterLine decodes one protocol line such as
// "label=a=b&label=c=d". Keys other than "label" are ignored.
func parseFilterLine(line string) (filterSet, error) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return nil, errors.New("empty filter")
	}
	query, err := url.ParseQuery(line)
	if err != nil {
		return nil, fmt.Errorf("invalid filter: %v", err)
	}
	labels := query["label"]
	// Without a label an empty filter would match every resource on the host.
	if len(labels) == 0 {
		return nil, errors.New("no label filter")
	}
	for _, label := range labels {
		if label == "" || strings.HasPrefix(label, "=") {
			return nil, fmt.Errorf("invalid label filter %q", label)
		}
	}
	set := slices.Clone(labels)
	slices.Sort(set)
	return slices.Compact(set), nil
}

func (f filterSet) String() string {
	return strings.Join(f, "&")
}

// checkRunLabel checks the run's label given at start ("key=value"): the only
// filter the reaper accepts. A value is required, since a bare key would
// match every run's resources.
func checkRunLabel(label string) error {
	key, value, ok := strings.Cut(label, "=")
	if !ok || key == "" || value == "" {
		return fmt.Errorf("%q is not a key=value label", label)
	}
	if strings.ContainsAny(label, "\x00\r\n") {
		return fmt.Errorf("%q holds a control character", label)
	}
	return nil
}
