package dataset

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// writeSynthetic writes rows rows of 1..2*avg-1 tokens (no extra columns) in
// shards of perShard rows, and returns the total shard bytes.
func writeSynthetic(b *testing.B, dir string, rows, avg, perShard int) int64 {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, 2*avg)
	for i := range ids {
		ids[i] = int32(rng.IntN(150000))
	}
	var infos []ShardInfo
	var total int64
	for start := 0; start < rows; start += perShard {
		w, err := CreateShard(dir, len(infos), WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for range min(perShard, rows-start) {
			if err := w.Append(ids[:1+rng.IntN(2*avg-1)], nil); err != nil {
				b.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		infos = append(infos, info)
		total += info.Bytes
	}
	if err := Finalize(dir, infos, WriterOptions{}); err != nil {
		b.Fatal(err)
	}
	return total
}

// BenchmarkOpen opens a 1M-row dataset (16 tokens per row on average, 4
// shards): with its gload.index (what `gload serve` does) and by rebuilding
// the index from list offsets. Bytes are the index bytes read, or the shard
// bytes scanned.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	shardBytes := writeSynthetic(b, dir, 1_000_000, 16, 250_000)
	st, err := os.Stat(filepath.Join(dir, IndexFile))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		opts  OpenOptions
		bytes int64
	}{
		{"index", OpenOptions{}, st.Size()},
		{"rebuild", OpenOptions{RebuildIndex: true}, shardBytes},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(bc.bytes)
			for b.Loop() {
				d, err := Open(dir, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				if d.Len() != 1_000_000 {
					b.Fatal("wrong length")
				}
				d.Close()
			}
		})
	}
}

// BenchmarkRead reads rows through Tokens (zero-copy view) and AppendTokens
// (copy), for several row lengths. Bytes are token bytes served.
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{16, 512, 4096} {
		dir := b.TempDir()
		const rows = 2048
		w, err := CreateShard(dir, 0, WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]int32, n)
		for range rows {
			if err := w.Append(ids, nil); err != nil {
				b.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := Finalize(dir, []ShardInfo{info}, WriterOptions{}); err != nil {
			b.Fatal(err)
		}
		d, err := Open(dir, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Tokens/len=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			i := 0
			for b.Loop() {
				if _, err := d.Tokens(i); err != nil {
					b.Fatal(err)
				}
				i = (i + 7) % rows
			}
		})
		b.Run(fmt.Sprintf("AppendTokens/len=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			buf := make([]int32, 0, n)
			i := 0
			for b.Loop() {
				if buf, err = d.AppendTokens(buf[:0], i); err != nil {
					b.Fatal(err)
				}
				i = (i + 7) % rows
			}
		})
		d.Close()
	}
}

// BenchmarkConvert measures AppendTokens' width conversion (Hugging Face
// datasets often store int64 ids). Bytes are int32 bytes produced.
func BenchmarkConvert(b *testing.B) {
	const n = 4096
	for _, c := range []struct {
		width  int
		signed bool
	}{{8, true}, {4, false}, {2, false}} {
		batch := &idsBatch{vals: make([]byte, n*c.width), width: c.width, signed: c.signed}
		b.Run(fmt.Sprintf("width=%d/signed=%v", 8*c.width, c.signed), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(4 * n)
			buf := make([]int32, 0, n)
			for b.Loop() {
				var err error
				if buf, err = batch.appendRange(buf[:0], 0, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend measures the writer. Bytes are token bytes written.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			w, err := CreateShard(b.TempDir(), 0, WriterOptions{Columns: []string{"source"}})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Abort()
			ids := make([]int32, n)
			cols := []string{"corpus/file-000123.jsonl.zst"}
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if err := w.Append(ids, cols); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
