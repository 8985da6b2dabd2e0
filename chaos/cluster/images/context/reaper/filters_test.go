package main

import (
	"slices"
	"testing"
)

func TestParseFilterLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want filterSet
	}{
		{"single", "label=org.testcontainers.session-id=abc", filterSet{"org.testcontainers.session-id=abc"}},
		{"multiple sorted", "label=z=1&label=a=2", filterSet{"a=2", "z=1"}},
		{"crlf", "label=a=b\r\n", filterSet{"a=b"}},
		{"lf", "label=a=b\n", filterSet{"a=b"}},
		{"percent encoded", "label=a%3Db%26c", filterSet{"a=b&c"}},
		{"duplicates collapse", "label=a=b&label=a=b", filterSet{"a=b"}},
		{"other keys ignored", "name=x&label=a=b", filterSet{"a=b"}},
		{"key only", "label=a", filterSet{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFilterLine(tt.line)
			if err != nil {
				t.Fatalf("parseFilterLine(%q): %v", tt.line, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parseFilterLine(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

func TestParseFilterLineRejectsMalformed(t *testing.T) {
	for _, line := range []string{
		"",
		"\r\n",
		"   ",
		"label=a%zz",   // bad escape
		"name=foo",     // no label: would match everything
		"label=",       // empty label
		"label==value", // empty key
		"label=a=b&label=",
	} {
		if set, err := parseFilterLine(line); err == nil {
			t.Errorf("parseFilterLine(%q) = %q, want error", line, set)
		}
	}
}

func TestFilterStoreDeduplicates(t *testing.T) {
	store := newFilterStore()
	a, _ := parseFilterLine("label=a=1&label=b=2")
	b, _ := parseFilterLine("label=b=2&label=a=1")
	c, _ := parseFilterLine("label=c=3")

	if !store.add(a) {
		t.Error("first add reported duplicate")
	}
	if store.add(b) {
		t.Error("same set in another order was not deduplicated")
	}
	if !store.add(c) {
		t.Error("distinct set reported duplicate")
	}
	if got := store.snapshot(); len(got) != 2 {
		t.Errorf("snapshot has %d sets, want 2: %q", len(got), got)
	}
}
