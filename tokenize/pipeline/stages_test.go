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

// TestStagesWriterOnCloser: the share of the writer's whole time (busy and waiting) it spent waiting for the
// previous shard's close.
func TestStagesWriterOnCloser(t *testing.T) {
	c := stageClock{readerBusy: time.Second, writerBusy: 8 * time.Second, writerWaiting: 2 * time.Second, writerOnCloser: 3 * time.Second}
	if got := c.result(1); got.WriterOnCloser < 0.2999 || got.WriterOnCloser > 0.3001 || got.Writer < 0.7999 || got.Writer > 0.8001 {
		t.Fatalf("Writer %.4f, WriterOnCloser %.4f; want 0.8 and 0.3", got.Writer, got.WriterOnCloser)
	}
}
