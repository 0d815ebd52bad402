package main

// Profiling of any command (hidden flags, for measuring issue 18's scaling): --cpuprofile and --memprofile write
// pprof files, read with `go tool pprof`.

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"
)

type profileOptions struct {
	cpu, mem  string
	heapAfter time.Duration // write mem's profile this long into the command instead (live heap mid-run)
	cpuFile   *os.File
}

func (p *profileOptions) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile (pprof) of the command to this file")
	f.StringVar(&p.mem, "memprofile", "", "write an allocation profile (pprof) at the end of the command to this file")
	f.DurationVar(&p.heapAfter, "memprofile-after", 0, "with --memprofile: write it this long after the start (what is live mid-run) instead of at the end")
	_ = f.MarkHidden("cpuprofile")
	_ = f.MarkHidden("memprofile")
	_ = f.MarkHidden("memprofile-after")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *profileOptions) start() error {
	if p.mem != "" && p.heapAfter > 0 {
		time.AfterFunc(p.heapAfter, func() {
			if err := p.writeHeap(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		})
	}
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	p.cpuFile = f
	return nil
}

// stop ends the CPU profile and writes the allocation profile; it runs whether the command failed or not.
func (p *profileOptions) stop() error {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		p.cpuFile = nil
	}
	if p.mem == "" || p.heapAfter > 0 {
		return nil
	}
	return p.writeHeap()
}

// writeHeap writes the allocation profile (in-use and allocated since the start) after a collection.
func (p *profileOptions) writeHeap() error {
	f, err := os.Create(p.mem)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	runtime.GC()
	werr := pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("--memprofile: %w", werr)
	}
	return nil
}
