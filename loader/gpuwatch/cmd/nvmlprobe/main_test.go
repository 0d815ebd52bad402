package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

// fixedSource is one fake GPU at 95% whose samples carry the wall clock.
type fixedSource struct{ lostAfter int }

func (f *fixedSource) Devices() ([]gpuwatch.DeviceInfo, error) {
	return []gpuwatch.DeviceInfo{{Index: 0, Name: "Fake", UUID: "GPU-fake"}}, nil
}
func (f *fixedSource) Close() error { return nil }
func (f *fixedSource) Sample(i int, since time.Time) (gpuwatch.DeviceSample, error) {
	f.lostAfter--
	if f.lostAfter < 0 {
		return gpuwatch.DeviceSample{}, gpuwatch.ErrDeviceLost
	}
	now := time.Now().Truncate(time.Microsecond)
	return gpuwatch.DeviceSample{Time: now, SM: []gpuwatch.Point{{Time: now, Value: 95}}, PowerW: 500}, nil
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name      string
		open      func() (gpuwatch.Source, error)
		args      []string
		wantErr   error
		samples   int
		failures  int
		reportHas string
	}{
		{
			name: "no GPU", open: gpuwatch.OpenNVML, wantErr: gpuwatch.ErrNoGPU,
		},
		{
			name: "fake GPU", open: func() (gpuwatch.Source, error) { return &fixedSource{lostAfter: 100}, nil },
			args: []string{"-duration", "0s", "-interval", "1ms"}, samples: 1, reportHas: "GPU",
		},
		{
			name: "lost", open: func() (gpuwatch.Source, error) { return &fixedSource{lostAfter: 0}, nil },
			args: []string{"-duration", "0s"}, failures: 1, reportHas: "lost",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "no GPU" {
				if src, err := gpuwatch.OpenNVML(); err == nil {
					src.Close()
					t.Skip("a GPU is visible here")
				}
			}
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut, tc.open)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("run: %v, want %v", err, tc.wantErr)
			}
			tr, rerr := gpuwatch.ReadTrace(&out)
			if rerr != nil {
				t.Fatalf("the output is not a trace: %v\n%s", rerr, out.String())
			}
			if tc.wantErr != nil {
				if tr.NoGPU == "" {
					t.Errorf("no no_gpu reason in the trace")
				}
				return
			}
			if len(tr.Samples) != tc.samples || len(tr.Failures) != tc.failures {
				t.Errorf("%d samples, %d failures; want %d, %d", len(tr.Samples), len(tr.Failures), tc.samples, tc.failures)
			}
			if !strings.Contains(errOut.String(), tc.reportHas) {
				t.Errorf("report on stderr lacks %q:\n%s", tc.reportHas, errOut.String())
			}
		})
	}
}

func TestProbeFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	open := func() (gpuwatch.Source, error) { return &fixedSource{}, nil }
	if err := run(context.Background(), []string{"-interval", "0s"}, &out, &errOut, open); err == nil {
		t.Error("-interval 0s accepted")
	}
	if err := run(context.Background(), []string{"-nope"}, &out, &errOut, open); err == nil {
		t.Error("unknown flag accepted")
	}
}
