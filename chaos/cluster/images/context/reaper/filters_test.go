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

func TestCheckRunLabel(t *testing.T) {
	if err := checkRunLabel("chaos-harness=c0123456789"); err != nil {
		t.Errorf("a run label was refused: %v", err)
	}
	for _, label := range []string{
		"",
		"chaos-harness",  // a bare key matches every run
		"chaos-harness=", // so does an empty value
		"=c0123",
		"a=b\nlabel=c",
	} {
		if err := checkRunLabel(label); err == nil {
			t.Errorf("checkRunLabel(%q) succeeded, want error", label)
		}
	}
}
