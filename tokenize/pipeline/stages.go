package pipeline

// Where a run's time went, stage by stage, so that the summary can say what limited it: the reader (reading and
// decompressing the input: one goroutine per run), the tokenizing workers, or the ordered writer (Arrow encoding
// and disk).

import (
	"fmt"
	"sync/atomic"
	"time"
)

// stageClock is filled by the run's goroutines: each field by one goroutine, except the workers' two.
type stageClock struct {
	readerBusy, readerBlocked time.Duration // reader goroutine: reading records / waiting for room downstream
	workersIdle               atomic.Int64  // all workers: waiting for a chunk (ns)
	workersBlocked            atomic.Int64  // all workers: waiting for the writer to take a tokenized chunk (ns)
	writerWaiting, writerBusy time.Duration // writer goroutine: waiting for the next chunk / writing
	writerOnCloser            time.Duration // writer goroutine, inside writerBusy: waiting for the previous shard's close
}

// Stages says how busy each stage of a run was, as shares of its own time (0..1).
type Stages struct {
	Reader  float64 // share of the reader's time spent reading (1: the input was the bottleneck)
	Workers float64 // share of the workers' time spent tokenizing (not waiting for a chunk, nor for the writer)
	Writer  float64 // share of the writer's time spent writing
	// WriterOnCloser is the share of the writer's time spent waiting for the previous shard's close (flush, fsync,
	// read-back hash, rename) before it could hand over the next: part of Writer.
	WriterOnCloser float64
}

func (c *stageClock) result(workers int) Stages {
	share := func(busy, other time.Duration) float64 {
		if busy+other <= 0 {
			return 0
		}
		return float64(busy) / float64(busy+other)
	}
	var st Stages
	st.Reader = share(c.readerBusy, c.readerBlocked)
	st.Writer = share(c.writerBusy, c.writerWaiting)
	st.WriterOnCloser = share(c.writerOnCloser, c.writerBusy+c.writerWaiting-c.writerOnCloser)
	// The workers' time is the reader's span (they live as long as it feeds them).
	span := (c.readerBusy + c.readerBlocked) * time.Duration(workers)
	idle := time.Duration(c.workersIdle.Load() + c.workersBlocked.Load())
	if span > 0 {
		st.Workers = max(0, 1-float64(idle)/float64(span))
	}
	return st
}

// Bottleneck names the stage that limited the run, with advice; empty when nothing stands out.
func (s Stages) Bottleneck() string {
	switch {
	case s.Reader >= 0.9 && s.Workers < 0.8:
		return fmt.Sprintf("the input: the reader was busy %.0f%% of the time while the workers were %.0f%% busy "+
			"(one reader frames each run's input, and one core decompresses a .gz or single-frame .zst file: split "+
			"the corpus into several files, use plain files, or rewrite it with `gload compress` into frames "+
			"decoded on several cores, to go faster)", 100*s.Reader, 100*s.Workers)
	case s.Writer >= 0.9 && s.Workers < 0.8:
		return fmt.Sprintf("writing: the writer was busy %.0f%% of the time while the workers were %.0f%% busy "+
			"(Arrow encoding and the disk; a faster --out disk helps)", 100*s.Writer, 100*s.Workers)
	case s.Workers >= 0.8:
		return fmt.Sprintf("tokenizing: the workers were busy %.0f%% of the time (more --workers or cores help)", 100*s.Workers)
	}
	return ""
}
