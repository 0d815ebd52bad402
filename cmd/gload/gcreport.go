package main

// The garbage collector's share of a tokenize run, for its summary: a live heap close to --memory-limit makes the
// GC run back to back (issue 18 measured 1378 collections taking 77 s of CPU in a 36 s run), which the stage
// percentages cannot show — the workers just look busy.

import (
	"fmt"
	"io"
	"runtime/metrics"
)

// gcShareToAdvise: above this share of all CPU the summary advises a larger --memory-limit.
const gcShareToAdvise = 0.10

type gcReport struct {
	cycles uint64
	share  float64 // GC CPU / all CPU of the process so far (runtime/metrics' estimate)
}

func readGC() gcReport {
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	metrics.Read(s)
	var r gcReport
	if s[0].Value.Kind() == metrics.KindUint64 {
		r.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 && s[2].Value.Kind() == metrics.KindFloat64 && s[2].Value.Float64() > 0 {
		r.share = s[1].Value.Float64() / s[2].Value.Float64()
	}
	return r
}

func (r gcReport) print(w io.Writer, memoryLimit string) {
	fmt.Fprintf(w, "gc         %d collections, %.0f%% of the CPU\n", r.cycles, 100*r.share)
	if r.share > gcShareToAdvise {
		fmt.Fprintf(w, "           the live heap was close to --memory-limit %s, so the GC ran often: a larger limit "+
			"(e.g. --memory-limit 2GiB) or fewer --workers is faster\n", memoryLimit)
	}
}
