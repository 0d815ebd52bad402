package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gload/gload/loader/dataset"
	"github.com/gload/gload/tokenize/corpus"
	"github.com/gload/gload/tokenize/normalize"
)

// Chunking of the record stream: one job is at most chunkRecords records or chunkBytes bytes of input.
const (
	chunkRecords = 256
	chunkBytes   = 1 << 20
)

// Stats counts what a run did. Counts are deterministic (the writer accumulates them in input order).
type Stats struct {
	Documents   int64            `json:"documents"`    // records read (including skipped ones)
	Written     int64            `json:"written"`      // documents that gave at least one row
	Rows        int64            `json:"rows"`         // rows written
	Tokens      int64            `json:"tokens"`       // tokens written
	InvalidUTF8 int64            `json:"invalid_utf8"` // documents with ill-formed UTF-8, replaced by U+FFFD
	Truncated   int64            `json:"truncated"`    // documents cut to --max-length
	Split       int64            `json:"split"`        // documents split into several rows
	Skipped     map[string]int64 `json:"skipped"`      // documents skipped, by reason
	InputBytes  int64            `json:"input_bytes"`  // text bytes tokenized
	// TrainedTokens counts labels that are not -100 (chat/SFT datasets).
	TrainedTokens int64 `json:"trained_tokens,omitempty"`
	// LongestRow is the longest row written (tokens); LongRows counts the rows longer than LongRowTokens, which a
	// run without --max-length warns about (one such row makes a batch of gigabytes).
	LongestRow int64 `json:"longest_row,omitempty"`
	LongRows   int64 `json:"long_rows,omitempty"`
}

// LongRowTokens is the row length above which a run without --max-length warns: twice the longest context of
// common models (64k), so that a real long-context corpus stays quiet while a stray 10 MB log file that became a
// 2.4 M-token row does not go unnoticed (its bucketed batch of 8 is 8 × 2.4 M × 4 bytes per key in the client).
const LongRowTokens = 131072

func trained(labels []int32) int64 {
	var n int64
	for _, l := range labels {
		if l != -100 {
			n++
		}
	}
	return n
}

func (s *Stats) skip(reason string) {
	if s.Skipped == nil {
		s.Skipped = make(map[string]int64)
	}
	s.Skipped[reason]++
}

// SkippedTotal sums the skipped documents.
func (s *Stats) SkippedTotal() int64 {
	var n int64
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

// Summary is the result of a run.
type Summary struct {
	Stats
	Shards  int
	Out     string
	Wall    time.Duration
	Resumed bool
	Stages  Stages // where the time went, to name the bottleneck
}

// item is one record's result: rows to write, or a skip.
type item struct {
	rows    [][]int32
	labels  [][]int32 // per row, with Options.Chat
	cols    []string
	skip    *corpus.Skip
	reason  string // skip reason when the worker rejects the document (too long, too short, no tokens)
	where   string // file:line for reason
	invalid bool
	trunc   bool
	split   bool
	text    int64
	after   corpus.Position // reader position after this record
	size    int64           // corpus.Record.Size, for the end-to-end count
}

type chunk struct {
	seq     int64
	records []corpus.Record
	size    int // bytes of the records' Raw
	items   []item
	// ids holds the token ids that the items' rows are slices of (rows of chat records excepted): the whole
	// chunk's ids in one arena, which is recycled with the chunk once it is written (chunkPool).
	ids  []int32
	rows [][]int32 // backing of the items' rows
}

// chunkPool hands written chunks back to the reader, so that a run in its steady state allocates no chunk, record
// list, item list or token arena: the items' rows are slices of the chunk's arena, copied by the shard writer,
// and the number of chunks alive is bounded by Options.InflightChunks anyway (issue 18: the ids slice that each
// document grew from nil was a fifth of all allocation).
type chunkPool chan *chunk

// maxKeptIDs bounds the arena kept with a recycled chunk: 3 MiB of ids, above the 2 MiB a full chunk starts with
// (tokenizeChunk reserves half an id per byte; text needs a third or so). An arena that a long document doubled past
// it is dropped: every one of the 4 x workers chunks would otherwise keep the largest arena it ever grew, and with
// the old bound of 16 MiB the live heap of a 16-worker run crept to 850-950 MB, so that the default --memory-limit
// of 768 MiB had the GC running back to back (issue 18: 234-1378 collections on 10 GB, 10 with 4 GiB).
const maxKeptIDs = chunkBytes/2 + chunkBytes/4

func (p chunkPool) get(seq int64) *chunk {
	select {
	case c := <-p:
		c.seq = seq
		return c
	default:
		return &chunk{seq: seq}
	}
}

// put recycles c; nothing may refer to c, its items or their rows any more.
func (p chunkPool) put(c *chunk) {
	clear(c.records) // the worker has cleared them already; a chunk that errored may still hold some
	clear(c.items)
	clear(c.rows)
	c.records, c.items, c.rows, c.size = c.records[:0], c.items[:0], c.rows[:0], 0
	c.ids = c.ids[:0]
	if cap(c.ids) > maxKeptIDs {
		c.ids = nil
	}
	select {
	case p <- c:
	default:
	}
}

// Run tokenizes the inputs into a dataset directory. ctx cancellation stops it cleanly (completed shards stay,
// resumable). On any error nothing under Out looks like a complete dataset.
func Run(ctx context.Context, opts Options) (Summary, error) {
	start := time.Now()
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkOutOutsideInputs(opts.Out, opts.Inputs); err != nil {
		return Summary{}, err
	}
	plan, err := corpus.NewPlan(opts.Inputs, opts.Corpus)
	if err != nil {
		return Summary{}, err
	}
	var task *Task
	if opts.TaskCount > 0 {
		plan, task = taskPlan(&opts, plan)
	}
	lock, err := lockOut(opts.Out, opts.Resume)
	if err != nil {
		return Summary{}, err
	}
	defer lock.Release()
	st, err := prepareOut(&opts, plan)
	if err != nil {
		return Summary{}, err
	}
	if task != nil {
		task.Writer, st.task = st.wopts, task
	}
	sum := Summary{Out: opts.Out, Resumed: st.resumed}
	if st.resumed {
		// The journal's "finished" is a claim, not a proof: finished is what the input and the counts show.
		done, err := proveFinished(plan, &st.j)
		if err != nil {
			return sum, err
		}
		if st.j.Finished && !done {
			log.Warn("the journal says finished, but the input goes on after its position: resuming the run",
				"journal", st.journalPath(), "next_file", st.j.Next.File, "next_record", st.j.Next.Record)
		}
		st.j.Finished = done
	}
	if st.j.Finished {
		// Every record was written before the interruption (proven above); only finalizing remains.
		if err := finalize(&opts, st); err != nil {
			return sum, err
		}
		sum.Stats, sum.Shards, sum.Wall = st.j.Stats, len(st.j.Shards), time.Since(start)
		return sum, nil
	}
	reader, err := plan.Open(st.j.Next)
	if err != nil {
		return sum, err
	}
	defer reader.Close()

	w := &writer{opts: &opts, st: st, log: log, plan: plan, closer: newShardCloser(st, opts.ShardDone), shards: len(st.j.Shards)}
	rl := &readLedger{files: len(plan.Files)}
	prog := newProgress(opts.Progress, opts.Interval, plan.TotalBytes, reader.BytesRead)
	defer prog.stop()
	w.prog = prog

	g, gctx := errgroup.WithContext(ctx)
	jobs := make(chan *chunk, 2*opts.Workers)
	done := make(chan *chunk, 2*opts.Workers)
	inflight := make(chan struct{}, opts.InflightChunks) // bounds memory: chunks read but not yet written
	pool := make(chunkPool, opts.InflightChunks)
	var stages stageClock
	extract := corpus.NewExtractor(opts.Corpus)

	g.Go(func() error { // reader: frames records into chunks
		defer close(jobs)
		var seq int64
		for {
			c := pool.get(seq)
			size := 0
			eof := false
			t0 := time.Now()
			for len(c.records) < chunkRecords && size < chunkBytes {
				rec, err := reader.Next()
				if errors.Is(err, io.EOF) {
					eof = true
					break
				}
				if err != nil {
					return err
				}
				c.records = append(c.records, rec)
				size += len(rec.Raw)
				rl.add(rec.File, rec.Size)
			}
			c.size = size
			if eof {
				rl.eof, rl.filesDone = true, reader.FilesDone()
			}
			t1 := time.Now()
			stages.readerBusy += t1.Sub(t0)
			if len(c.records) == 0 {
				return nil
			}
			select {
			case inflight <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			select {
			case jobs <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
			stages.readerBlocked += time.Since(t1)
			// From here on c belongs to a worker (which releases c.records): only local state decides.
			if testHookChunkQueued != nil {
				testHookChunkQueued()
			}
			seq++
			if eof {
				return nil // the reader hit EOF inside this chunk
			}
		}
	})
	var workersLeft atomic.Int32
	workersLeft.Store(int32(opts.Workers))
	for range opts.Workers {
		g.Go(func() error {
			defer func() {
				if workersLeft.Add(-1) == 0 {
					close(done)
				}
			}()
			var scratch []byte // the text of the worker's current document (corpus.Extractor.ExtractScratch)
			for {
				t0 := time.Now()
				c, ok := <-jobs
				stages.workersIdle.Add(int64(time.Since(t0)))
				if !ok {
					break
				}
				scratch = w.tokenizeChunk(c, extract, scratch)
				t1 := time.Now()
				select {
				case done <- c:
				case <-gctx.Done():
					return gctx.Err()
				}
				stages.workersBlocked.Add(int64(time.Since(t1)))
			}
			return nil
		})
	}
	g.Go(func() error { // ordered writer
		pending := make(map[int64]*chunk)
		var next int64
		for {
			t0 := time.Now()
			c, ok := <-done
			t1 := time.Now()
			stages.writerWaiting += t1.Sub(t0)
			if !ok {
				break
			}
			pending[c.seq] = c
			for {
				c, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if err := w.writeChunk(c); err != nil {
					return err
				}
				pool.put(c)
				<-inflight
			}
			stages.writerBusy += time.Since(t1)
		}
		if gctx.Err() != nil {
			return gctx.Err()
		}
		if len(pending) != 0 {
			return fmt.Errorf("tokenize: internal error: %d chunks never written", len(pending))
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		w.abort()
		prog.stop()
		return sum, err
	}
	if err := w.closeLast(); err != nil {
		return sum, err
	}
	if testHookLedger != nil {
		testHookLedger(rl)
	}
	if err := checkLedgers(rl, &w.ledger, &st.j.Stats, st.j.Shards, func(i int) string { return plan.Files[i].Path }); err != nil {
		return sum, err
	}
	if err := w.markFinished(); err != nil {
		return sum, err
	}
	prog.stop()
	if err := finalize(&opts, st); err != nil {
		return sum, err
	}
	sum.Stats, sum.Shards, sum.Wall = st.j.Stats, len(st.j.Shards), time.Since(start)
	stages.writerOnCloser = w.closer.waited
	sum.Stages = stages.result(opts.Workers)
	return sum, nil
}

// tokenizeChunk extracts and tokenizes every record of c into c.items, the ids into c.ids. scratch holds the
// text of one document at a time; it is returned for the worker's next chunk.
func (w *writer) tokenizeChunk(c *chunk, ex *corpus.Extractor, scratch []byte) []byte {
	o := w.opts
	c.items = slices.Grow(c.items[:0], len(c.records))[:len(c.records)]
	ids := c.ids[:0]
	if cap(ids) == 0 {
		ids = make([]int32, 0, c.size/2) // a fresh chunk: one allocation with room for every document's ids
	}
	// Rows are slices of ids, capped at their end. When an append moves ids, the rows taken before still hold
	// the same values in the old array, which nothing writes again: they stay valid until the chunk is written.
	rows := c.rows[:0]
	for i, rec := range c.records {
		it := &c.items[i]
		it.after = rec.Pos()
		it.size = rec.Size
		if o.Chat != nil {
			w.chatRecord(it, rec, ex)
			continue
		}
		var doc corpus.Doc
		var skip *corpus.Skip
		doc, scratch, skip = ex.ExtractScratch(rec, scratch)
		if skip != nil {
			it.skip = skip
			continue
		}
		it.cols = doc.Cols
		it.invalid = doc.InvalidUTF8
		it.text = int64(len(doc.Text))
		where := func() string { return fmt.Sprintf("%s:%d", rec.Path, rec.Line) }
		if doc.Text == "" {
			it.reason, it.where = "empty", where()
			continue
		}
		start := len(ids)
		if need := len(doc.Text)/2 + 2; cap(ids)-len(ids) < need {
			// Room for most texts' ids (a token per 3 to 5 bytes; EncodeTo appends past this if need be),
			// doubling: append's 1.25x growth would copy a long document's ids over and over.
			ids = slices.Grow(ids, max(need, len(ids)))
		}
		var err error
		ids, err = o.Engine.EncodeTo(ids, doc.Text, o.AddSpecialTokens)
		if err != nil {
			ids = ids[:start]
			it.reason, it.where = "tokenizer error", where()+": "+err.Error()
			if le := (*normalize.LimitError)(nil); errors.As(err, &le) {
				// A tokenizer.json whose normalizers amplify text: skipped, naming the normalizer.
				it.reason = "normalized too large"
			}
			continue
		}
		if o.AppendEOS {
			ids = append(ids, o.EOSID)
		}
		n := len(ids) - start
		if n == 0 {
			it.reason, it.where = "no tokens", where()
			continue
		}
		if o.MaxLength > 0 && n > o.MaxLength {
			switch o.Overflow {
			case OverflowTruncate:
				ids = ids[:start+o.MaxLength] // the cut-off ids are not kept
				n = o.MaxLength
				it.trunc = true
			case OverflowDrop:
				ids = ids[:start]
				it.reason, it.where = "too long", where()
				continue
			case OverflowSplit:
				first := len(rows)
				for at := start; at < len(ids); {
					k := min(len(ids)-at, o.MaxLength)
					if k >= max(o.MinLength, 1) {
						rows = append(rows, ids[at:at+k:at+k])
					}
					at += k
				}
				it.split = true
				if len(rows) == first {
					it.reason, it.where = "too short", where()
					continue
				}
				it.rows = rows[first:len(rows):len(rows)]
				continue
			}
		}
		if n < o.MinLength {
			ids = ids[:start]
			it.reason, it.where = "too short", where()
			continue
		}
		rows = append(rows, ids[start:start+n:start+n])
		it.rows = rows[len(rows)-1 : len(rows) : len(rows)]
	}
	c.ids, c.rows = ids, rows
	clear(c.records) // release raw input early
	c.records = c.records[:0]
	if cap(scratch) > maxKeptScratch {
		scratch = nil
	}
	return scratch
}

// maxKeptScratch bounds the text buffer a worker keeps between chunks.
const maxKeptScratch = 4 << 20

// writer appends rows to the current shard and cuts shards; it runs on one goroutine.
type writer struct {
	opts  *Options
	st    *state
	log   *slog.Logger
	prog  *progress
	plan  *corpus.Plan
	cur   *dataset.ShardWriter
	shown int // skipped documents printed so far
	// curFile is the input file of the current shard's last row: a task cuts shards at file boundaries, any
	// run at the start of a piece after a large file's first (corpus/pieces.go).
	curFile int
	ledger  writeLedger
	// closer fsyncs, renames and journals full shards while the writer fills the next (closer.go); shards counts
	// the shards cut so far, closed or in flight.
	closer *shardCloser
	shards int
}

const showSkips = 5

func (w *writer) writeChunk(c *chunk) error {
	o := w.opts
	s := &w.st.j.Stats
	for i := range c.items {
		it := &c.items[i]
		s.Documents++
		w.ledger.add(it.after.File, it.size)
		if it.skip != nil || it.reason != "" {
			reason, msg := it.reason, ""
			if it.skip != nil {
				reason, msg = it.skip.Reason.String(), it.skip.Error()
			} else {
				msg = fmt.Sprintf("%s: %s", it.where, reason)
			}
			if o.Strict {
				return fmt.Errorf("tokenize: %s (--strict)", msg)
			}
			s.skip(reason)
			w.ledger.skip(reason)
			if w.shown < showSkips {
				w.log.Warn("document skipped", "reason", reason, "detail", msg)
				w.shown++
				if w.shown == showSkips {
					w.log.Warn("further skipped documents are only counted")
				}
			}
			w.st.j.Next = it.after
			continue
		}
		if it.invalid {
			s.InvalidUTF8++
		}
		if it.trunc {
			s.Truncated++
		}
		if it.split {
			s.Split++
		}
		s.InputBytes += it.text
		s.Written++
		w.ledger.written++
		// A task's every file, and any run's every piece after a file's first, starts a new shard: the
		// shards do not depend on the task split (task.go).
		if w.cur != nil && len(it.rows) > 0 && it.after.File != w.curFile &&
			(o.TaskCount > 0 || w.plan.Files[it.after.File].Piece > 1) {
			if err := w.closeShard(); err != nil {
				return err
			}
		}
		if len(it.rows) > 0 {
			w.curFile = it.after.File
		}
		for k, row := range it.rows {
			if w.cur == nil {
				sw, err := dataset.CreateShard(o.Out, w.shards, w.st.wopts)
				if err != nil {
					return err
				}
				w.cur = sw
			}
			if it.labels != nil {
				if err := w.cur.AppendLabeled(row, it.labels[k], it.cols); err != nil {
					return err
				}
				s.TrainedTokens += trained(it.labels[k])
			} else if err := w.cur.Append(row, it.cols); err != nil {
				return err
			}
			s.Rows++
			s.Tokens += int64(len(row))
			if n := int64(len(row)); n > s.LongestRow {
				s.LongestRow = n
			}
			if o.MaxLength == 0 && len(row) > LongRowTokens {
				s.LongRows++
				if s.LongRows <= showSkips {
					w.log.Warn("row longer than any model's context and no --max-length given: a batch holding it "+
						"is huge; pass --max-length N (with --overflow split or truncate) to cut it",
						"tokens", len(row), "file", w.plan.Files[it.after.File].Path, "record", it.after.Record)
				}
			}
			w.ledger.rows++
			w.ledger.tokens += int64(len(row))
			w.prog.add(1, int64(len(row)))
		}
		w.st.j.Next = it.after
		// Cut only between documents, so a shard boundary is a resumable input position.
		if w.cur != nil && w.cur.Bytes() >= o.ShardSize {
			if err := w.closeShard(); err != nil {
				return err
			}
		}
	}
	return nil
}

// closeShard hands the full current shard to the closer; an earlier close's error surfaces here.
func (w *writer) closeShard() error {
	sw := w.cur
	w.cur = nil
	w.shards++
	return w.closer.start(sw, w.st.j)
}

// Test hooks, set only by tests: testHookShardClosed runs after each shard is closed and journaled (on the
// closer's goroutine);
// testHookChunkQueued runs on the reader goroutine right after it handed a chunk to the workers;
// testHookLedger may alter the reader's ledger before the end-to-end check (to prove the check refuses);
// testHookFinalized runs after dataset.Finalize, before the journal is removed: an error stands for a crash there.
var (
	testHookShardClosed, testHookChunkQueued func()
	testHookLedger                           func(*readLedger)
	testHookFinalized                        func() error
)

// closeLast closes the last shard (or writes the empty one of an empty corpus), waits for every close and
// takes the closed shards into the journal.
func (w *writer) closeLast() error {
	if w.cur != nil || w.shards == 0 {
		if w.cur == nil { // an empty corpus still gives a (zero-row) dataset
			sw, err := dataset.CreateShard(w.opts.Out, 0, w.st.wopts)
			if err != nil {
				return err
			}
			w.cur = sw
		}
		if err := w.closeShard(); err != nil {
			return err
		}
	}
	err := w.closer.flush()
	w.st.j.Shards = w.closer.shards
	return err
}

// markFinished journals that every record was written; only finalize remains.
func (w *writer) markFinished() error {
	w.st.j.Finished = true
	return w.st.save()
}

// abort lets a close in flight finish (a full shard stays journaled, so a resume keeps it) and removes the
// unfinished current shard.
func (w *writer) abort() {
	if err := w.closer.flush(); err != nil {
		w.log.Warn("finish closing a shard", "err", err)
	}
	w.st.j.Shards = w.closer.shards
	if w.cur != nil {
		if err := w.cur.Abort(); err != nil {
			w.log.Error("remove unfinished shard", "err", err)
		}
		w.cur = nil
	}
}

func finalize(o *Options, st *state) error {
	if o.TaskCount > 0 {
		if err := writeTask(o.Out, st.task); err != nil {
			return err
		}
	}
	if err := dataset.Finalize(o.Out, st.j.Shards, st.wopts); err != nil {
		return err
	}
	// state.json is in place: the dataset is complete (loader/dataset/doc.go). The journal is bookkeeping now; a
	// crash before its removal leaves a complete dataset that --resume tidies (it finalizes again, idempotently).
	if testHookFinalized != nil {
		if err := testHookFinalized(); err != nil {
			return err
		}
	}
	if err := os.Remove(st.journalPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tokenize: remove %s: %w", st.journalPath(), err)
	}
	return nil
}
