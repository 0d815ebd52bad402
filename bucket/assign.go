package bucket

import "fmt"

// PerRank returns how many batches each of world ranks gets once start
// global batches have been consumed: the remaining R = Len()−start batches
// (0 when start ≥ Len()) divided by world, rounded down under drop and up
// under wrap and keep (under keep only the first R mod world ranks get that
// many: see [Plan.RankBatches]). It returns 0 for world < 1.
func (p *Plan) PerRank(start, world int) int { return perRank(p.nbatch, p.cfg.Remainder, start, world) }

func perRank(nbatch int, remainder Remainder, start, world int) int {
	if world < 1 || start < 0 {
		return 0
	}
	rem := max(nbatch-start, 0)
	if remainder == Wrap || remainder == Keep {
		return (rem + world - 1) / world
	}
	return rem / world
}

// RankBatches returns how many batches rank gets once start global batches
// have been consumed: [Plan.PerRank], except under keep, where the last
// (Len()−start) mod world batches go one each to ranks 0, 1, … and the other
// ranks get one fewer.
func (p *Plan) RankBatches(start, rank, world int) int {
	return rankBatches(p.nbatch, p.cfg.Remainder, start, rank, world)
}

func rankBatches(nbatch int, remainder Remainder, start, rank, world int) int {
	per := perRank(nbatch, remainder, start, world)
	if remainder != Keep || per == 0 || rank < 0 || rank >= world {
		return per
	}
	if start+rank+(per-1)*world >= nbatch {
		return per - 1
	}
	return per
}

// Assign returns the global batch indices one consumer reads, in order, after
// start global batches of the plan have been consumed (the resume state).
//
// The remaining positions start, start+1, … are dealt round-robin: position
// start+j goes to rank j mod world as that rank's batch j div world, and
// within a rank, worker w of workers (0 means 1) takes the rank's batches w,
// w+workers, …, so round-robin over workers yields the rank's batches in
// plan order. Every rank gets [Plan.PerRank] batches. Under drop the last
// (Len()−start) mod world positions are dropped; under wrap the sequence goes
// on past the end of the plan from its start, position q ≥ Len() being plan
// batch q mod Len() (wrapped indices are real plan indices; with fewer
// batches than ranks the plan repeats as often as needed). A start at or past
// Len() leaves nothing.
//
// Resuming with another world or worker count is just another call with the
// consumed count as start: the result is a function of (start, world) only,
// so the positions consumed before (0 … start−1, all of them: a segment that
// stops early never reaches its remainder) and the ones assigned after are
// the whole epoch with nothing repeated. Under drop exactly the last
// (Len()−start) mod world′ batches of the plan are missing, world′ being the
// world size after the resume; under wrap the repeats are exactly the
// wrapped positions. Under keep nothing is dropped or repeated: the last
// positions go to the first ranks, which get one batch more (see
// [Plan.RankBatches]). With lockstep ranks start is a multiple of the old world
// size (steps × world), which rank_step in the wire protocol gives.
func (p *Plan) Assign(start, rank, world, worker, workers int) ([]int, error) {
	return assign(p.nbatch, p.cfg.Remainder, start, rank, world, worker, workers)
}

// assign is [Plan.Assign] for a plan of nbatch global batches.
func assign(nbatch int, remainder Remainder, start, rank, world, worker, workers int) ([]int, error) {
	a, err := Deal(nbatch, remainder, start, rank, world, worker, workers)
	if err != nil {
		return nil, err
	}
	out := make([]int, a.Len())
	for i := range out {
		out[i] = a.At(i)
	}
	return out, nil
}

// Assignment is one consumer's share of an epoch plan as [Plan.Assign] deals it, computed on demand: batch i of
// the consumer is global batch At(i), i in [0, Len()). It holds a few integers, whatever the plan's size.
type Assignment struct {
	nbatch, start, rank, world, worker, workers, n int
}

// Deal returns the [Assignment] that [Plan.Assign] returns as a slice for a plan of nbatch global batches under
// remainder: the same checks, the same batches in the same order.
func Deal(nbatch int, remainder Remainder, start, rank, world, worker, workers int) (Assignment, error) {
	if start < 0 {
		return Assignment{}, cfgErr("start", "must be >= 0, got %d", start)
	}
	if world < 1 || world > maxWorld {
		return Assignment{}, cfgErr("world_size", "must be in [1, %d], got %d", maxWorld, world)
	}
	if rank < 0 || rank >= world {
		return Assignment{}, cfgErr("rank", "must be in [0, %d), got %d", world, rank)
	}
	if workers == 0 {
		workers = 1
	}
	if workers < 0 || workers > maxWorld {
		return Assignment{}, cfgErr("num_workers", "must be in [0, %d], got %d", maxWorld, workers)
	}
	if worker < 0 || worker >= workers {
		return Assignment{}, cfgErr("worker", "must be in [0, %d), got %d", workers, worker)
	}
	a := Assignment{nbatch: nbatch, start: start, rank: rank, world: world, worker: worker, workers: workers}
	if per := rankBatches(nbatch, remainder, start, rank, world); worker < per {
		a.n = (per - worker + workers - 1) / workers
	}
	return a, nil
}

// Len returns the consumer's number of batches.
func (a Assignment) Len() int { return a.n }

// At returns the global batch the consumer reads i-th (i in [0, Len())): position start + rank + (worker +
// i·workers)·world of the round-robin deal, modulo the plan's batches (wrap). It panics for i out of range.
func (a Assignment) At(i int) int {
	if i < 0 || i >= a.n {
		panic(fmt.Sprintf("bucket: assignment index %d out of range [0:%d)", i, a.n))
	}
	q := a.start + a.rank + (a.worker+i*a.workers)*a.world
	return q % a.nbatch
}
