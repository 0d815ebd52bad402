package gpuwatch

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchWatcher returns a watcher with gpus devices holding a full 60 s
// window of fine-grained samples (6 per second) and clients clients with a
// step every 100 ms.
func benchWatcher(b *testing.B, gpusN, clients int) (*Watcher, *fakeClock) {
	clk := newClock()
	src := &fakeSource{devs: gpus(gpusN)}
	src.sample = func(i int, since time.Time) (DeviceSample, error) {
		now := clk.Now()
		s := DeviceSample{Time: now, PowerW: 600}
		for k := 0; k < 6; k++ {
			t := now.Add(-time.Duration(k) * finePeriod)
			if t.After(since) {
				v := float64((k*37 + i*11) % 100)
				s.SM = append(s.SM, Point{t, v})
				s.MemCtl = append(s.MemCtl, Point{t, v / 2})
			}
		}
		return s, nil
	}
	w := New(src, Options{Now: clk.Now})
	for sec := 0; sec <= 60; sec++ {
		clk.Set(float64(sec))
		for c := range clients {
			for range 10 {
				w.RecordStep(fmt.Sprintf("rank%d", c), 1_000, 99_000, time.Time{})
			}
			w.SetQueue(fmt.Sprintf("rank%d", c), 3, 4)
		}
		w.Poll()
	}
	return w, clk
}

func BenchmarkReport(b *testing.B) {
	for _, size := range []struct{ gpus, clients int }{{1, 1}, {8, 64}} {
		b.Run(fmt.Sprintf("gpus=%d/clients=%d", size.gpus, size.clients), func(b *testing.B) {
			w, _ := benchWatcher(b, size.gpus, size.clients)
			samples := 0
			for _, d := range w.Report().Devices {
				samples += d.Samples
			}
			b.ReportAllocs()
			b.SetBytes(int64(samples) * 16) // two float series per sample
			for b.Loop() {
				_ = w.Report()
			}
		})
	}
}

func BenchmarkRecordStep(b *testing.B) {
	w, clk := benchWatcher(b, 1, 64)
	clk.Set(61)
	now := clk.Now()
	b.ReportAllocs()
	b.SetBytes(24) // wait, step, client time
	for b.Loop() {
		w.RecordStep("rank7", 1_000, 99_000, now)
	}
}

func BenchmarkPoll(b *testing.B) {
	w, clk := benchWatcher(b, 8, 64)
	sec := 61.0
	b.ReportAllocs()
	b.SetBytes(8 * 6 * 32) // 8 GPUs × 6 samples × two points
	for b.Loop() {
		clk.Set(sec)
		sec++
		w.Poll()
	}
}

func BenchmarkReadTrace(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "multi4.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReadTrace(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
