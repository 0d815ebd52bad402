package dataset

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// tailHasher takes a shard's SHA-256 while the shard is being written: a goroutine reads back (from the page cache)
// whatever has reached the file and hashes it, so that Close has only the last piece left to hash. Before, Close
// read the whole shard back after its last write: on the GPU machine's 16 cores that serial 0.5 s per 450 MB shard
// made the ordered writer wait for the previous shard's close 29% of its time (issue 18). It must not touch the
// file's contents or position: it only reads with ReadAt, which is safe beside the writer's Write on one *os.File.
type tailHasher struct {
	f       *os.File
	written atomic.Int64  // bytes that have reached f (a Write returned)
	wake    chan struct{} // a new write, at most one pending
	stop    chan struct{} // closed by finish or cancel
	final   int64         // set before stop is closed: the file's size, or -1 (cancel)
	result  chan tailSum
}

type tailSum struct {
	sum [sha256.Size]byte
	err error
}

var errHashCanceled = errors.New("hash canceled")

func startTailHasher(f *os.File) *tailHasher {
	t := &tailHasher{f: f, wake: make(chan struct{}, 1), stop: make(chan struct{}), result: make(chan tailSum, 1)}
	go t.run()
	return t
}

// Write writes p to the file and tells the hasher (it is the io.Writer under the shard's bufio.Writer).
func (t *tailHasher) Write(p []byte) (int, error) {
	n, err := t.f.Write(p)
	if n > 0 {
		t.written.Add(int64(n))
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return n, err
}

// finish waits for the hash of the file's first size bytes (every byte written, size == what reached the file).
func (t *tailHasher) finish(size int64) ([sha256.Size]byte, error) {
	t.final = size
	close(t.stop)
	r := <-t.result
	return r.sum, r.err
}

// cancel stops the hasher and waits until it no longer reads the file.
func (t *tailHasher) cancel() {
	t.final = -1
	close(t.stop)
	<-t.result
}

func (t *tailHasher) run() {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var off int64
	hashTo := func(end int64) error {
		for off < end {
			n := int(min(int64(len(buf)), end-off))
			k, err := t.f.ReadAt(buf[:n], off)
			h.Write(buf[:k])
			off += int64(k)
			if err != nil {
				return fmt.Errorf("read back at byte %d of %d: %w", off, end, err)
			}
		}
		return nil
	}
	for {
		if err := hashTo(t.written.Load()); err != nil {
			<-t.stop
			t.result <- tailSum{err: err}
			return
		}
		select {
		case <-t.wake:
		case <-t.stop:
			if t.final < 0 {
				t.result <- tailSum{err: errHashCanceled}
				return
			}
			r := tailSum{err: hashTo(t.final)} // (a short read is ReadAt's error)
			h.Sum(r.sum[:0])
			t.result <- r
			return
		}
	}
}
