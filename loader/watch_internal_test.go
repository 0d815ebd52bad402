package loader

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

func TestWatchInterval(t *testing.T) {
	tests := []struct {
		in   float64
		want time.Duration
		ok   bool
	}{
		{0, time.Second, true},
		{0.25, 250 * time.Millisecond, true},
		{0.001, minWatchInterval, true},
		{1e12, maxWatchInterval, true},
		{-1, 0, false},
	}
	for _, tc := range tests {
		got, err := watchInterval(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("watchInterval(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestQueueCount(t *testing.T) {
	drained := 0
	q := queueCount{drained: func() { drained++ }}
	q.Add(1)
	q.Add(1)
	q.Add(1)
	q.Add(-1)
	q.Add(-1)
	if drained != 0 || q.capacity() != 3 || q.Load() != 1 {
		t.Fatalf("drained %d, capacity %d, count %d", drained, q.capacity(), q.Load())
	}
	q.Add(-1) // the last outstanding batch acknowledged
	if drained != 1 {
		t.Fatalf("drained %d, want 1", drained)
	}
	q.grant(8)
	if q.capacity() != 8 {
		t.Fatalf("granted capacity %d", q.capacity())
	}
}

// BenchmarkWatchMessage measures building one Watch RPC message (report →
// JSON and text) from a 60 s window of fine-grained samples.
func BenchmarkWatchMessage(b *testing.B) {
	f, err := os.Open(filepath.Join("gpuwatch", "testdata", "multi2.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	tr, err := gpuwatch.ReadTrace(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	r, err := gpuwatch.Simulate(tr, gpuwatch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := watchMessage(r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(m.Json) + len(m.Text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := watchMessage(r); err != nil {
			b.Fatal(err)
		}
	}
}
