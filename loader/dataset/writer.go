package dataset

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/gload/gload/internal/safename"
)

// DefaultRowsPerBatch is the record batch size used when WriterOptions leaves
// it zero (the same as Hugging Face's writer_batch_size).
const DefaultRowsPerBatch = 1000

// WriterOptions describe the dataset being written. All shards of one dataset
// must be written, and finalized, with the same options.
type WriterOptions struct {
	// Columns are extra utf8 columns stored after input_ids (and labels), in this order.
	Columns []string
	// Labels adds the SFT column `labels: list<int32>` after input_ids: one label per token, -100 where the loss
	// is off. Rows are then added with AppendLabeled.
	Labels bool
	// RowsPerBatch is the number of rows per Arrow record batch (default 1000).
	RowsPerBatch int
	// TokenizerHash is stored in gload.index (e.g. hex sha256 of tokenizer.json
	// bytes and flags, computed by the caller).
	TokenizerHash string
	// Special is recorded in dataset_info.json (see [SpecialTokens]); the zero
	// value records nothing.
	Special SpecialTokens
	// ChatTemplateDate, when not "", is recorded in dataset_info.json's "gload" entry as "chat_template_date": the
	// instant (RFC 3339) that strftime_now() returned in every chat template render of the run.
	ChatTemplateDate string
}

// Check reports whether shards can be written with o (column names that are empty, repeated or input_ids are
// refused), so a caller can refuse bad options before it creates anything.
func (o WriterOptions) Check() error {
	_, err := o.normalized()
	return err
}

func (o WriterOptions) normalized() (WriterOptions, error) {
	if o.RowsPerBatch == 0 {
		o.RowsPerBatch = DefaultRowsPerBatch
	}
	if o.RowsPerBatch < 0 {
		return o, fmt.Errorf("%w: RowsPerBatch %d", ErrBadInput, o.RowsPerBatch)
	}
	if len(o.TokenizerHash) > maxTokHashLen {
		return o, fmt.Errorf("%w: tokenizer hash of %d bytes", ErrBadInput, len(o.TokenizerHash))
	}
	if err := o.Special.validate(); err != nil {
		return o, err
	}
	seen := map[string]bool{"input_ids": true, "labels": o.Labels}
	for _, c := range o.Columns {
		if c == "" || !utf8.ValidString(c) || seen[c] {
			return o, fmt.Errorf("%w: column name %q empty, not UTF-8 or repeated", ErrBadInput, c)
		}
		seen[c] = true
	}
	return o, nil
}

// ShardInfo describes one complete shard, as returned by ShardWriter.Close
// and consumed by Finalize.
type ShardInfo struct {
	Name    string     // file name in the dataset directory
	Rows    int64      // rows in the shard
	Tokens  int64      // sum of Lengths
	Bytes   int64      // file size
	Hash    Digest     // SHA-256 of the whole file (its content hash)
	Lengths []uint32   // tokens per row
	Batches []BatchRef // record batch table
}

// ShardName is the name of complete but not yet finalized shard n.
func ShardName(n int) string { return fmt.Sprintf("shard-%05d.arrow", n) }

// DataFileName is the final, Hugging Face name of shard i of n.
func DataFileName(i, n int) string { return fmt.Sprintf("data-%05d-of-%05d.arrow", i, n) }

// ShardWriter writes one shard: an Arrow IPC stream file. It is not safe for
// concurrent use.
type ShardWriter struct {
	dir, tmp, name string
	opts           WriterOptions
	f              *os.File
	bw             *bufio.Writer
	hash           *tailHasher // hashes what reaches f while the shard is written; nil once finished or canceled
	n              int64       // bytes written to bw
	err            error       // sticky write error
	done           bool

	// current batch
	offs  []int32
	vals  []int32
	lvals []int32 // labels, when opts.Labels (their offsets are offs: same lengths)
	soffs [][]int32
	sdata [][]byte
	rows  int // rows in the current batch

	info         ShardInfo
	scratch      []byte
	batchMetaLen int // encoded size of every record batch message's metadata
}

// CreateShard starts shard number shardNum in dir, under the temporary name
// "shard-NNNNN.arrow.tmp" (an existing file of that name, left by a crash, is
// truncated). Close renames it to ShardName(shardNum).
func CreateShard(dir string, shardNum int, opts WriterOptions) (*ShardWriter, error) {
	opts, err := opts.normalized()
	if err != nil {
		return nil, fmt.Errorf("create shard %d in %s: %w", shardNum, dir, err)
	}
	if shardNum < 0 {
		return nil, fmt.Errorf("create shard in %s: %w: shard number %d", dir, ErrBadInput, shardNum)
	}
	name := ShardName(shardNum)
	tmp := filepath.Join(dir, name+".tmp")
	f, err := safename.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644) // read back by Close to hash
	if err != nil {
		return nil, fmt.Errorf("create shard %s: %w", tmp, err)
	}
	w := &ShardWriter{
		dir: dir, tmp: tmp, name: name, opts: opts, f: f,
		soffs: make([][]int32, len(opts.Columns)),
		sdata: make([][]byte, len(opts.Columns)),
	}
	w.hash = startTailHasher(f)
	w.bw = bufio.NewWriterSize(w.hash, 1<<20)
	if b, ok := batchPool.Get().(*batchBufs); ok {
		w.offs, w.vals, w.lvals = b.offs, b.vals, b.lvals
	}
	// The metadata size depends only on the column count, never on values.
	lists := 1
	if opts.Labels {
		lists = 2
	}
	nodes := make([]int64, 2*(2*lists+len(opts.Columns)))
	w.batchMetaLen = len(recordBatchMessage(0, nodes, make([]int64, 2*(4*lists+3*len(opts.Columns))), 0))
	w.resetBatch()
	w.writeMessage(schemaMessage(opts), nil)
	if w.err != nil {
		err := w.err
		return nil, errors.Join(err, w.Abort())
	}
	return w, nil
}

// Append adds one row: its token ids and one string per option column. The ids
// and strings are copied. After a write error every call returns that error
// and the writer must be aborted.
func (w *ShardWriter) Append(ids []int32, cols []string) error {
	if w.opts.Labels {
		return fmt.Errorf("append to shard %s: %w: the dataset has labels (use AppendLabeled)", w.tmp, ErrBadInput)
	}
	return w.add(ids, nil, cols)
}

// AppendLabeled adds one row of a dataset with labels (WriterOptions.Labels): labels has one entry per id.
func (w *ShardWriter) AppendLabeled(ids, labels []int32, cols []string) error {
	if !w.opts.Labels {
		return fmt.Errorf("append to shard %s: %w: labels given for a dataset without a labels column", w.tmp, ErrBadInput)
	}
	if len(labels) != len(ids) {
		return fmt.Errorf("append to shard %s: %w: %d labels for %d ids", w.tmp, ErrBadInput, len(labels), len(ids))
	}
	return w.add(ids, labels, cols)
}

func (w *ShardWriter) add(ids, labels []int32, cols []string) error {
	if w.done {
		return fmt.Errorf("append to shard %s: %w", w.tmp, ErrClosed)
	}
	if w.err != nil {
		return w.err
	}
	if len(cols) != len(w.opts.Columns) {
		return fmt.Errorf("append to shard %s: %w: %d column values for %d columns", w.tmp, ErrBadInput, len(cols), len(w.opts.Columns))
	}
	for i, c := range cols {
		if !utf8.ValidString(c) {
			return fmt.Errorf("append to shard %s: %w: column %q is not valid UTF-8", w.tmp, ErrBadInput, w.opts.Columns[i])
		}
	}
	// Arrow list and string offsets are int32: cut the batch early rather than overflow.
	fits := func() bool {
		if len(w.vals)+len(ids) > math.MaxInt32 {
			return false
		}
		for i, c := range cols {
			if len(w.sdata[i])+len(c) > math.MaxInt32 {
				return false
			}
		}
		return true
	}
	if !fits() {
		if w.rows == 0 {
			return fmt.Errorf("append to shard %s: %w: row too large for one record batch", w.tmp, ErrBadInput)
		}
		w.flushBatch()
	}
	// Batch buffers double when they grow (append grows large slices by 1.25x: five times a batch's bytes
	// allocated and copied before the size settles); batchPool carries them on to the next shard.
	w.vals = append(growDouble(w.vals, len(ids)), ids...)
	w.lvals = append(growDouble(w.lvals, len(labels)), labels...)
	w.offs = append(w.offs, int32(len(w.vals)))
	for i, c := range cols {
		w.sdata[i] = append(w.sdata[i], c...)
		w.soffs[i] = append(w.soffs[i], int32(len(w.sdata[i])))
	}
	w.rows++
	w.info.Rows++
	w.info.Tokens += int64(len(ids))
	w.info.Lengths = append(w.info.Lengths, uint32(len(ids)))
	if w.rows >= w.opts.RowsPerBatch {
		w.flushBatch()
	}
	return w.err
}

// Rows returns the number of rows appended so far.
func (w *ShardWriter) Rows() int64 { return w.info.Rows }

// Bytes returns the size the file would have if it were closed now: bytes
// written so far plus the exact encoded size of the buffered batch and the
// end-of-stream marker. Use it to cut shards by size.
func (w *ShardWriter) Bytes() int64 {
	n := w.n + int64(len(eosMarker))
	if w.rows > 0 {
		padded := func(k int) int64 { return int64(k + pad8(k)) }
		n += 8 + int64(w.batchMetaLen) + padded(4*len(w.offs)) + padded(4*len(w.vals))
		if w.opts.Labels {
			n += padded(4*len(w.offs)) + padded(4*len(w.lvals))
		}
		for i := range w.sdata {
			n += padded(4*len(w.soffs[i])) + padded(len(w.sdata[i]))
		}
	}
	return n
}

// Close writes the last batch and the end-of-stream marker, fsyncs the file and
// renames it to its shard name. On failure the temporary file is removed.
func (w *ShardWriter) Close() (ShardInfo, error) {
	if w.done {
		return ShardInfo{}, fmt.Errorf("close shard %s: %w", w.tmp, ErrClosed)
	}
	if w.rows > 0 {
		w.flushBatch()
	}
	w.write(eosMarker[:])
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("write shard %s: %w", w.tmp, err)
		}
	}
	var sum [sha256.Size]byte
	if w.err == nil {
		// The SHA-256 has been taken while the shard was written, by reading back what reached the file
		// (tailhash.go); what is left of it runs beside fsync. Neither is on the caller's hot path, which only
		// formats and copies into the buffer.
		hashed := make(chan error, 1)
		h, size := w.hash, w.n
		w.hash = nil
		go func() {
			var err error
			sum, err = h.finish(size)
			if err != nil {
				err = fmt.Errorf("hash shard %s: %w", w.tmp, err)
			}
			hashed <- err
		}()
		if err := w.f.Sync(); err != nil {
			w.err = fmt.Errorf("sync shard %s: %w", w.tmp, err)
		}
		if err := <-hashed; err != nil && w.err == nil {
			w.err = err
		}
	}
	if w.err != nil {
		err := w.err
		return ShardInfo{}, errors.Join(err, w.Abort())
	}
	w.done = true
	w.release()
	final := filepath.Join(w.dir, w.name)
	if err := w.f.Close(); err != nil {
		return ShardInfo{}, errors.Join(fmt.Errorf("close shard %s: %w", w.tmp, err), removeQuiet(w.tmp))
	}
	if err := os.Rename(w.tmp, final); err != nil {
		return ShardInfo{}, errors.Join(fmt.Errorf("rename shard %s: %w", w.tmp, err), removeQuiet(w.tmp))
	}
	if err := syncDir(w.dir); err != nil {
		return ShardInfo{}, err
	}
	info := w.info
	info.Name = w.name
	info.Bytes = w.n
	info.Hash = Digest(sum)
	return info, nil
}

// Abort stops writing and removes the temporary file. It does nothing after a
// successful Close.
func (w *ShardWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.release()
	if w.hash != nil {
		w.hash.cancel() // it reads f: stopped before f closes
		w.hash = nil
	}
	err := w.f.Close()
	if err != nil && errors.Is(err, os.ErrClosed) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("abort shard %s: %w", w.tmp, err)
	}
	return errors.Join(err, removeQuiet(w.tmp))
}

func removeQuiet(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// growDouble returns v with room for n more elements, at least doubling its capacity when it must grow.
func growDouble(v []int32, n int) []int32 {
	if cap(v)-len(v) >= n {
		return v
	}
	return slices.Grow(v, max(n, len(v)))
}

// batchBufs are a finished shard's batch buffers, for the next shard: without them every shard regrew its
// buffer of a whole batch's ids (issue 18: a tenth of a tokenize run's allocation and half of its writer's time).
type batchBufs struct{ offs, vals, lvals []int32 }

var batchPool sync.Pool

// release hands the batch buffers on once the writer is done.
func (w *ShardWriter) release() {
	batchPool.Put(&batchBufs{offs: w.offs[:0], vals: w.vals[:0], lvals: w.lvals[:0]})
	w.offs, w.vals, w.lvals = nil, nil, nil
}

func (w *ShardWriter) resetBatch() {
	w.offs = append(w.offs[:0], 0)
	w.vals = w.vals[:0]
	w.lvals = w.lvals[:0]
	for i := range w.soffs {
		w.soffs[i] = append(w.soffs[i][:0], 0)
		w.sdata[i] = w.sdata[i][:0]
	}
	w.rows = 0
}

func (w *ShardWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	n, err := w.bw.Write(b)
	w.n += int64(n)
	if err != nil {
		w.err = fmt.Errorf("write shard %s: %w", w.tmp, err)
	}
}

var (
	eosMarker = [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	zeros     [8]byte
)

// writeMessage frames meta (a Message flatbuffer, padded to 8 bytes) and
// writes it followed by the body parts, each padded to 8 bytes.
func (w *ShardWriter) writeMessage(meta []byte, body [][]byte) {
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[0:], continuationMarker)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(meta)))
	w.write(hdr[:])
	w.write(meta)
	for _, p := range body {
		w.write(p)
		w.write(zeros[:pad8(len(p))])
	}
}

func pad8(n int) int { return (8 - n%8) % 8 }

// flushBatch writes the current batch as one record batch message.
func (w *ShardWriter) flushBatch() {
	if w.err != nil || w.rows == 0 {
		return
	}
	w.info.Batches = append(w.info.Batches, BatchRef{Offset: w.n, FirstRow: w.info.Rows - int64(w.rows)})
	// The int32 parts in little-endian bytes: the slices themselves on a little-endian host (the serial writer
	// copies no token), else encoded into one scratch buffer and sliced up.
	parts := make([][]int32, 0, 3+len(w.soffs))
	parts = append(parts, w.offs, w.vals)
	if w.opts.Labels {
		parts = append(parts, w.lvals)
	}
	parts = append(parts, w.soffs...)
	encoded := make([][]byte, len(parts))
	if hostLittleEndian {
		for i, p := range parts {
			encoded[i] = int32Bytes(p)
		}
	} else {
		w.scratch = w.scratch[:0]
		for _, p := range parts {
			w.scratch = appendInt32s(w.scratch, p)
		}
		at := 0
		for i, p := range parts {
			encoded[i] = w.scratch[at : at+4*len(p)]
			at += 4 * len(p)
		}
	}
	next := 0
	take := func() []byte { // the next part, in the order of parts
		p := encoded[next]
		next++
		return p
	}
	// Body: list validity (absent), list offsets, child validity (absent),
	// values, then per column: validity (absent), offsets, data.
	body := make([][]byte, 0, 8+3*len(w.sdata))
	offs := take()
	body = append(body, nil, offs, nil, take())
	nodes := []int64{int64(w.rows), 0, int64(len(w.vals)), 0}
	if w.opts.Labels {
		body = append(body, nil, offs, nil, take())
		nodes = append(nodes, int64(w.rows), 0, int64(len(w.lvals)), 0)
	}
	for i := range w.sdata {
		body = append(body, nil, take(), w.sdata[i])
	}
	for range w.sdata {
		nodes = append(nodes, int64(w.rows), 0)
	}
	bufs := make([]int64, 0, 2*len(body))
	off := 0
	for _, p := range body {
		bufs = append(bufs, int64(off), int64(len(p)))
		off += len(p) + pad8(len(p))
	}
	w.writeMessage(recordBatchMessage(int64(w.rows), nodes, bufs, int64(off)), body)
	w.resetBatch()
}

// schemaMessage builds the Schema message for a gload shard.
func schemaMessage(opts WriterOptions) []byte {
	field := func(name string, typ uint8, typeTable fbTab, children ...fbObj) fbTab {
		return fbTab{
			fbRef(0, fbString(name)),
			fbScalar(1, 1, 1), // nullable
			fbScalar(2, 1, uint64(typ)),
			fbRef(3, typeTable),
			fbRef(5, fbTables(children)),
		}
	}
	item := field("item", typeInt, fbTab{fbScalar(0, 4, 32), fbScalar(1, 1, 1)})
	fields := fbTables{field("input_ids", typeList, fbTab{}, item)}
	if opts.Labels {
		fields = append(fields, field("labels", typeList, fbTab{}, item))
	}
	for _, c := range opts.Columns {
		fields = append(fields, field(c, typeUtf8, fbTab{}))
	}
	kv := fbTab{fbRef(0, fbString("huggingface")), fbRef(1, fbString(hfSchemaMetadata(opts.Columns, opts.Labels)))}
	schema := fbTab{fbRef(1, fields), fbRef(2, fbTables{kv})}
	return buildFlatbuffer(fbTab{
		fbScalar(0, 2, metadataV5),
		fbScalar(1, 1, msgSchema),
		fbRef(2, schema),
		fbScalar(3, 8, 0),
	})
}

// recordBatchMessage builds a RecordBatch message; nodes and bufs are flat
// (length, null count) and (offset, length) pairs.
func recordBatchMessage(rows int64, nodes, bufs []int64, bodyLen int64) []byte {
	rb := fbTab{
		fbScalar(0, 8, uint64(rows)),
		fbRef(1, fbStructs{per: 2, vals: nodes}),
		fbRef(2, fbStructs{per: 2, vals: bufs}),
	}
	return buildFlatbuffer(fbTab{
		fbScalar(0, 2, metadataV5),
		fbScalar(1, 1, msgRecordBatch),
		fbRef(2, rb),
		fbScalar(3, 8, uint64(bodyLen)),
	})
}
