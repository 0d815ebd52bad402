package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestGCReportAdvisesOnlyAboveTheShare(t *testing.T) {
	for _, tc := range []struct {
		share  float64
		advice bool
	}{{0, false}, {0.05, false}, {gcShareToAdvise, false}, {0.25, true}} {
		var b bytes.Buffer
		gcReport{cycles: 7, share: tc.share}.print(&b, "768MiB")
		out := b.String()
		if !strings.HasPrefix(out, "gc         7 collections") {
			t.Errorf("share %v: %q", tc.share, out)
		}
		if got := strings.Contains(out, "--memory-limit 768MiB"); got != tc.advice {
			t.Errorf("share %v: advice %v, want %v: %q", tc.share, got, tc.advice, out)
		}
	}
	if r := readGC(); r.share < 0 || r.share > 1 {
		t.Errorf("readGC share %v out of [0, 1]", r.share)
	}
}
