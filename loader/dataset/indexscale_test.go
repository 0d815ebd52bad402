package dataset

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIndexOpenScale measures opening an index of GLOAD_INDEX_SCALE_ROWS rows (e.g. 100000000; skipped when
// unset): it writes the same synthetic index in format versions 2 and 3 under a temporary directory (removed
// after), then opens each in a fresh process — version 2 as Open did before (read the file, check it all),
// version 3 as Open does now (map it, check the header and block table) — and prints, per version, the open
// time, the process's VmRSS after opening and its peak (VmHWM), and for version 3 the time to read one random
// block's lengths (the first batch's share). See docs/planning-at-scale.md, "The index at scale".
func TestIndexOpenScale(t *testing.T) {
	if v := os.Getenv("GLOAD_INDEX_SCALE_CHILD"); v != "" {
		indexScaleChild(t, v, os.Getenv("GLOAD_INDEX_SCALE_PATH"))
		return
	}
	n, _ := strconv.ParseInt(os.Getenv("GLOAD_INDEX_SCALE_ROWS"), 10, 64)
	if n <= 0 {
		t.Skip("set GLOAD_INDEX_SCALE_ROWS (e.g. 100000000) to measure opening an index of that many rows")
	}
	dir := t.TempDir()
	if os.Getenv("GLOAD_INDEX_SCALE_SPARSE") != "" {
		path := filepath.Join(dir, IndexFile)
		writeSparseIndex(t, path, n)
		runScaleChild(t, "v3", path, n)
		return
	}
	lengths := make([]uint32, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range lengths {
		lengths[i] = 1 + uint32(rng.ExpFloat64()*600)%8192
	}
	ix := &Index{TokenizerHash: "scale"}
	const shardRows = 1 << 22
	for k, start := 0, int64(0); start < n; k, start = k+1, start+shardRows {
		rows := min(shardRows, n-start)
		var tok int64
		for _, l := range lengths[start : start+rows] {
			tok += int64(l)
		}
		ix.Shards = append(ix.Shards, ShardEntry{Name: fmt.Sprintf("data-%05d.arrow", k), Size: 1 << 40,
			Rows: rows, Tokens: tok, Batches: []BatchRef{{Offset: 8}}})
	}
	ix.Lengths = lengths
	v3dir, v2dir := filepath.Join(dir, "v3"), filepath.Join(dir, "v2")
	os.Mkdir(v3dir, 0o755)
	os.Mkdir(v2dir, 0o755)
	start := time.Now()
	if err := WriteIndex(v3dir, ix); err != nil {
		t.Fatal(err)
	}
	t.Logf("v3 written in %v", time.Since(start))
	writeV2File(t, filepath.Join(v2dir, IndexFile), ix)
	ix, lengths = nil, nil
	for _, v := range []string{"v2", "v3"} {
		runScaleChild(t, v, filepath.Join(dir, v, IndexFile), n)
	}
}

// runScaleChild opens the index at path in a fresh process and prints its measurements.
func runScaleChild(t *testing.T, version, path string, n int64) {
	st, _ := os.Stat(path)
	// A cold page cache is not asked for (no root needed): the runs read a file just written.
	cmd := exec.Command(os.Args[0], "-test.run=^TestIndexOpenScale$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GLOAD_INDEX_SCALE_CHILD="+version, "GLOAD_INDEX_SCALE_PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", version, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "{") {
			fmt.Printf("index_open rows=%d file_bytes=%d %s\n", n, st.Size(), line)
		}
	}
}

// writeSparseIndex writes a version-3 index of n rows of length 0 whose lengths are a hole of the file (no disk
// used): a real header and block table at any row count. Its fingerprint field is not computed (Open does not
// read it; Verify would refuse the file).
func writeSparseIndex(t *testing.T, path string, n int64) {
	full, last := summarize(make([]uint32, BlockRows)), summarize(make([]uint32, blockRows(n, NumBlocks(n)-1)))
	tab := blockTable{rows: n, b: make([]byte, 0, NumBlocks(n)*blockEntrySize)}
	for b := range NumBlocks(n) {
		if b == NumBlocks(n)-1 {
			tab.b = appendBlock(tab.b, last)
		} else {
			tab.b = appendBlock(tab.b, full)
		}
	}
	ix := &Index{TokenizerHash: "sparse"}
	for k, start := 0, int64(0); start < n; k, start = k+1, start+1<<30 {
		ix.Shards = append(ix.Shards, ShardEntry{Name: fmt.Sprintf("data-%05d.arrow", k), Size: 1 << 40,
			Rows: min(1<<30, n-start), Batches: []BatchRef{{Offset: 8}}})
	}
	h := ix.encodeHeaderWith(Digest{1}, tab)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(h); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(h)) + 4*n); err != nil {
		t.Fatal(err)
	}
}

// writeV2File writes ix in format version 2, streaming the lengths.
func writeV2File(t *testing.T, path string, ix *Index) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := v2Header(ix, ix.ComputeFingerprint())
	w := bufio.NewWriterSize(f, 1<<20)
	crc := crc32.Update(0, castagnoli, h)
	w.Write(h)
	lb := uint32Bytes(ix.Lengths)
	crc = crc32.Update(crc, castagnoli, lb)
	w.Write(lb)
	w.Write(binary.LittleEndian.AppendUint32(nil, crc))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

func indexScaleChild(t *testing.T, version, path string) {
	res := map[string]any{"version": version}
	start := time.Now()
	switch version {
	case "v2":
		ix, err := readIndexV2(path)
		if err != nil {
			t.Fatal(err)
		}
		res["open_ms"] = msSince(start)
		res["rows"] = ix.Rows()
	case "v3":
		ix, m, err := mapIndex(path)
		if err != nil {
			t.Fatal(err)
		}
		defer unmapFile(m)
		ls := newIndexLengths(path, ix.Lengths, ix.table(), false)
		res["open_ms"] = msSince(start)
		res["rows"], res["tokens"] = ls.Len(), ls.Tokens()
		res["vmrss_open_kb"] = procStatus("VmRSS")
		start = time.Now()
		b := (ls.Len() / 2) >> blockBits
		var sum uint64
		for i := b << blockBits; i < min(ls.Len(), (b+1)<<blockBits); i++ {
			sum += uint64(ls.Length(i))
		}
		res["first_block_ms"] = msSince(start)
		if ls.Err() != nil || int64(sum) != ls.Block(b).Tokens {
			t.Fatalf("block %d: %d tokens, %v", b, sum, ls.Err())
		}
	}
	res["vmrss_kb"], res["vmhwm_kb"] = procStatus("VmRSS"), procStatus("VmHWM")
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// procStatus returns a kB field of /proc/self/status, or -1.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return -1
}
