package main

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
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

func (f filterSet) key() string {
	return strings.Join(f, "\x00")
}

func (f filterSet) String() string {
	return strings.Join(f, "&")
}

// filterStore remembers registered filter sets in arrival order.
type filterStore struct {
	mu   sync.Mutex
	seen map[string]bool
	sets []filterSet
}

func newFilterStore() *filterStore {
	return &filterStore{seen: make(map[string]bool)}
}

// add records set and reports whether it was new.
func (s *filterStore) add(set filterSet) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[set.key()] {
		return false
	}
	s.seen[set.key()] = true
	s.sets = append(s.sets, set)
	return true
}

func (s *filterStore) snapshot() []filterSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sets)
}
