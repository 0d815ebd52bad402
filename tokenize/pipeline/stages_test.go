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
		blocked                                           time.Duration // workers waiting for the writer
	}{
		// Workers that wait for the writer to take their chunks are not busy: the writer limited the run.
		{"writer, workers blocked on it", time.Second, 9 * time.Second, time.Second, 0, 10 * time.Second, "writing", 8 * time.Second},
		{"input", 10 * time.Second, 0, 15 * time.Second, 9 * time.Second, time.Second, "the input", 0},
		{"writer", time.Second, 9 * time.Second, 15 * time.Second, 0, 10 * time.Second, "writing", 0},
		{"tokenizing", time.Second, 9 * time.Second, time.Second, 8 * time.Second, 2 * time.Second, "tokenizing", 0},
		{"nothing stands out", 5 * time.Second, 5 * time.Second, 8 * time.Second, 5 * time.Second, 5 * time.Second, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := stageClock{readerBusy: tc.readBusy, readerBlocked: tc.readBlocked, writerWaiting: tc.writeWait, writerBusy: tc.writeBusy}
			c.workersIdle.Store(int64(tc.idle))
			c.workersBlocked.Store(int64(tc.blocked))
			got := c.result(2).Bottleneck()
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("Bottleneck() = %q, want prefix %q", got, tc.want)
			}
		})
	}
}
