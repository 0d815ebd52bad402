package main

import (
	"strings"
	"testing"

	"github.com/gload/gload/proto/gloadpb"
)

// FuzzWatchLine feeds arbitrary report JSON to the piped view: it must
// render a line (saying when the report is unreadable), never panic.
func FuzzWatchLine(f *testing.F) {
	for _, s := range []string{
		`{"verdict":{"state":"fed"},"devices":[{"index":0,"sm_median":95}],"clients":[{"client":"a","wait_share":0.01}]}`,
		`{"verdict":{"state":"no GPU visible"},"no_gpu":"x","devices":null}`,
		`{"devices":[{"lost":true}]}`, `[]`, `{`, ``, `{"clients":[{"client":"a\nb"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		line := watchLine(&gloadpb.WatchReport{Json: s, Verdict: "fed"})
		if line == "" || strings.Contains(line, "\n") {
			t.Fatalf("watchLine(%q) = %q", s, line)
		}
	})
}
