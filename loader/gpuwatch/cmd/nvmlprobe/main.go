// Command nvmlprobe records the local GPUs through NVML as a gpuwatch trace:
// JSON lines on stdout (the format gpuwatch.ReadTrace reads and
// gpuwatch.NewTraceSource replays), then, on stderr, the report a watcher
// makes of the recording.
//
//	nvmlprobe [-duration 5s] [-interval 1s] [-report=true] > gpu.jsonl
//
// Without a driver or device it writes a devices record saying why and
// exits with status 1.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/gload/gload/loader/gpuwatch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, gpuwatch.OpenNVML); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "nvmlprobe:", err)
		}
		os.Exit(1)
	}
}

// run records for the duration the flags ask, writing the trace to stdout
// and the report to stderr. open opens the source (OpenNVML in main).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, open func() (gpuwatch.Source, error)) error {
	fs := flag.NewFlagSet("nvmlprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 5*time.Second, "how long to record")
	interval := fs.Duration("interval", time.Second, "time between polls")
	report := fs.Bool("report", true, "print the watcher's report of the recording to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *interval <= 0 || *duration < 0 {
		return fmt.Errorf("-interval %s must be > 0 and -duration %s >= 0", *interval, *duration)
	}
	var rec bytes.Buffer // a copy of the trace, for the report
	tw := gpuwatch.NewTraceWriter(io.MultiWriter(stdout, &rec))

	src, err := open()
	if err != nil {
		if werr := tw.Devices(time.Now(), nil, err); werr != nil {
			return errors.Join(err, werr)
		}
		return err
	}
	defer src.Close()
	devs, err := src.Devices()
	if err != nil {
		return errors.Join(err, tw.Devices(time.Now(), nil, err))
	}
	if err := tw.Devices(time.Now(), devs, nil); err != nil {
		return err
	}

	since := make([]time.Time, len(devs))
	poll := func() error {
		for i := range devs {
			s, err := src.Sample(i, since[i])
			if err != nil {
				if werr := tw.Failure(time.Now(), i, err); werr != nil {
					return werr
				}
				continue
			}
			since[i] = newest(since[i], s)
			if err := tw.Sample(i, s); err != nil {
				return err
			}
		}
		return nil
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	end := time.Now().Add(*duration)
	for {
		if err := poll(); err != nil {
			return err
		}
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			end = time.Now()
		case <-t.C:
		}
	}
	if *report {
		tr, err := gpuwatch.ReadTrace(&rec)
		if err != nil {
			return fmt.Errorf("read back the recording: %w", err)
		}
		r, err := gpuwatch.Simulate(tr, gpuwatch.Options{Interval: *interval, MinCoverage: *duration})
		if err != nil {
			return err
		}
		fmt.Fprint(stderr, gpuwatch.Format(r))
	}
	return nil
}

// newest returns the `since` for the next poll: the older of the two series'
// newest samples, so that neither loses any (NVML keeps one last-seen
// timestamp per call; a replay drops what it has seen).
func newest(prev time.Time, s gpuwatch.DeviceSample) time.Time {
	var sm, mem time.Time
	if n := len(s.SM); n > 0 {
		sm = s.SM[n-1].Time
	}
	if n := len(s.MemCtl); n > 0 {
		mem = s.MemCtl[n-1].Time
	}
	switch {
	case sm.IsZero() && mem.IsZero():
		return prev
	case sm.IsZero():
		return mem
	case mem.IsZero() || sm.Before(mem):
		return sm
	}
	return mem
}
