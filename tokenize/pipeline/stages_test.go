package pipeline

import (
	"strings"
	"testing"
	"time"
)

func TestStagesNameTheBottleneck(t *testing.T) {
	cases := []struct {
		name                                              string
		readBusy, readBlocked, idle, writeWait, writeBusy time.Duration
		want                                              string
	}{
		{"input", 10 * time.Second, 0, 15 * time.Second, 9 * time.Second, time.Second, "the input"},
		{"writer", time.Second, 9 * time.Second, 15 * time.Second, 0, 10 * time.Second, "writing"},
		{"tokenizing", time.Second, 9 * time.Second, time.Second, 8 * time.Second, 2 * time.Second, "tokenizing"},
		{"nothing stands out", 5 * time.Second, 5 * time.Second, 8 * time.Second, 5 * time.Second, 5 * time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := stageClock{readerBusy: tc.readBusy, readerBlocked: tc.readBlocked, writerWaiting: tc.writeWait, writerBusy: tc.writeBusy}
			c.workersIdle.Store(int64(tc.idle))
			got := c.result(2).Bottleneck()
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("Bottleneck() = %q, want prefix %q", got, tc.want)
			}
		})
	}
}
