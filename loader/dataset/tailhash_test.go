package dataset

import (
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// TestTailHasherMatchesTheFile writes files in pieces of random sizes (the hasher reading back beside the writer)
// and checks each hash against the SHA-256 of the file as it lies on disk, with more goroutines busy than cores.
func TestTailHasherMatchesTheFile(t *testing.T) {
	stopLoad := cpuLoad(2 * runtime.GOMAXPROCS(0))
	defer stopLoad()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, size := range []int{0, 1, 4095, 1 << 20, 1<<20 + 1, 5<<20 + 12345} {
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		h := startTailHasher(f)
		for off := 0; off < size; {
			n := min(size-off, 1+rng.IntN(300_000))
			if _, err := h.Write(data[off : off+n]); err != nil {
				t.Fatal(err)
			}
			off += n
			if rng.IntN(4) == 0 {
				runtime.Gosched()
			}
		}
		got, err := h.finish(int64(size))
		if err != nil {
			t.Fatalf("file %d (%d bytes): %v", i, size, err)
		}
		onDisk, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if want := sha256.Sum256(onDisk); got != want || len(onDisk) != size {
			t.Fatalf("file %d (%d bytes, %d on disk): hash %x, want %x", i, size, len(onDisk), got, want)
		}
		f.Close()
	}
}

// TestTailHasherCancelAndShortFile: cancel stops the reader (the file may then close), and a size larger than what
// reached the file is an error, not a hash of fewer bytes.
func TestTailHasherCancelAndShortFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	h := startTailHasher(f)
	if _, err := h.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	h.cancel()
	f.Close()

	f, err = os.OpenFile(filepath.Join(dir, "g"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h = startTailHasher(f)
	if _, err := h.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.finish(10); err == nil {
		t.Fatal("finish(10) of a 3-byte file succeeded")
	}
}

// cpuLoad keeps n goroutines spinning until the returned function is called.
func cpuLoad(n int) func() {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range n {
		wg.Go(func() {
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
					for i := range 10000 {
						x += i
					}
				}
			}
		})
	}
	return func() { close(stop); wg.Wait() }
}
