package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gload/gload/internal/fixtures"
)

// testRow is one row of a synthetic dataset.
type testRow struct {
	ids  []int32
	cols []string
}

// genRows makes n deterministic rows with ncols string columns. Lengths vary
// from 0 to maxLen tokens, ids cover the whole int32 range.
func genRows(n, ncols, maxLen int, seed uint64) []testRow {
	rng := rand.New(rand.NewPCG(seed, 42))
	rows := make([]testRow, n)
	for i := range rows {
		l := rng.IntN(maxLen + 1)
		ids := make([]int32, l)
		for j := range ids {
			ids[j] = int32(rng.Uint32())
		}
		cols := make([]string, ncols)
		for c := range cols {
			switch rng.IntN(4) {
			case 0:
				cols[c] = ""
			case 1:
				cols[c] = fmt.Sprintf("doc-%d-é-\U0001F600", i)
			default:
				cols[c] = fmt.Sprintf("source/%d/%d", c, i)
			}
		}
		rows[i] = testRow{ids, cols}
	}
	return rows
}

// writeDataset writes rows into dir as shards of at most perShard rows and finalizes.
func writeDataset(t testing.TB, dir string, rows []testRow, opts WriterOptions, perShard int) []ShardInfo {
	t.Helper()
	infos := writeShards(t, dir, rows, opts, perShard)
	if err := Finalize(dir, infos, opts); err != nil {
		t.Fatal(err)
	}
	return infos
}

func writeShards(t testing.TB, dir string, rows []testRow, opts WriterOptions, perShard int) []ShardInfo {
	t.Helper()
	var infos []ShardInfo
	for start := 0; start < len(rows); start += perShard {
		w, err := CreateShard(dir, len(infos), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[start:min(start+perShard, len(rows))] {
			if err := w.Append(r.ids, r.cols); err != nil {
				t.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	return infos
}

// checkRows opens dir and compares every row, column and length with rows.
func checkRows(t *testing.T, dir string, rows []testRow, colNames []string, opts OpenOptions) *Dataset {
	t.Helper()
	d, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if d.Len() != len(rows) {
		t.Fatalf("Len = %d, want %d", d.Len(), len(rows))
	}
	var buf []int32
	for i, r := range rows {
		if d.Length(i) != len(r.ids) {
			t.Fatalf("Length(%d) = %d, want %d", i, d.Length(i), len(r.ids))
		}
		got, err := d.Tokens(i)
		if err != nil {
			t.Fatalf("Tokens(%d): %v", i, err)
		}
		if !equalInt32(got, r.ids) {
			t.Fatalf("Tokens(%d) = %v, want %v", i, head(got), head(r.ids))
		}
		buf, err = d.AppendTokens(buf[:0], i)
		if err != nil || !equalInt32(buf, r.ids) {
			t.Fatalf("AppendTokens(%d) = %v, %v; want %v", i, head(buf), err, head(r.ids))
		}
		for c, name := range colNames {
			s, ok, err := d.Column(name, i)
			if err != nil || !ok || s != r.cols[c] {
				t.Fatalf("Column(%q, %d) = %q, %v, %v; want %q", name, i, s, ok, err, r.cols[c])
			}
		}
	}
	return d
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func head(v []int32) []int32 { return v[:min(len(v), 8)] }

// pythonPath returns the project's Python with datasets and pyarrow (fixtures.Python), or skips the test.
func pythonPath(t *testing.T) string {
	t.Helper()
	return fixtures.Python(t, "datasets", "pyarrow")
}

// pythonPaths returns GLOAD_PYTHON and, when set, GLOAD_PYTHON_OLDEST (a
// python with the oldest datasets/pyarrow supported). Under CI=true a missing
// one fails instead of skipping.
func pythonPaths(t *testing.T) []string {
	t.Helper()
	out := []string{pythonPath(t)}
	py := os.Getenv("GLOAD_PYTHON_OLDEST")
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("GLOAD_PYTHON_OLDEST not set under CI=true (make test sets it to .venv-oldest/bin/python)")
		}
		t.Log("GLOAD_PYTHON_OLDEST not set: checking with GLOAD_PYTHON's datasets only")
		return out
	}
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("GLOAD_PYTHON_OLDEST=%s: %v", py, err)
	}
	return append(out, py)
}

// writeExpected writes rows as check_hf.py's expected JSON and returns its path.
func writeExpected(t *testing.T, rows []testRow, colNames []string) string {
	t.Helper()
	ids := make([][]int32, len(rows))
	cols := make(map[string][]string)
	for i, r := range rows {
		ids[i] = r.ids
		if ids[i] == nil {
			ids[i] = []int32{}
		}
		for c, n := range colNames {
			cols[n] = append(cols[n], r.cols[c])
		}
	}
	for _, n := range colNames {
		if cols[n] == nil {
			cols[n] = []string{}
		}
	}
	b, err := json.Marshal(map[string]any{"input_ids": ids, "columns": cols})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expected.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// memDataset opens one in-memory shard as a Dataset, with the index entry ix
// (nil: scan, as Open does without gload.index). A given ix is trusted as a
// freshness stamp would vouch for it, so lying indexes reach the read paths.
func memDataset(name string, data []byte, ix *Index) (*Dataset, error) {
	sh := &shard{name: name, path: name, data: data, size: int64(len(data)), stat: fileStat{Size: int64(len(data))}}
	if err := sh.parseSchema(); err != nil {
		return nil, err
	}
	var st *stamp
	if ix != nil {
		st = &stamp{Version: stampVersion, IndexCRC: fmt.Sprintf("%08x", ix.checksum),
			Shards: []stampShard{{Name: name, fileStat: sh.stat}}}
	}
	d := &Dataset{dir: "mem", shards: []*shard{sh}}
	if err := d.init(ix, st, "test", OpenOptions{}, nil); err != nil {
		return nil, err
	}
	return d, nil
}

// readAll reads every row the way a server and `gload inspect` would and
// checks that what comes back agrees with the index. It reports the first
// inconsistency; errors from corrupt data are fine and must name the shard.
func readAll(d *Dataset, name string) error {
	var buf []int32
	for i := range d.Len() {
		v, err := d.Tokens(i)
		if err != nil && !errors.Is(err, ErrNotZeroCopy) && !strings.Contains(err.Error(), name) {
			return fmt.Errorf("row %d: error does not name the shard: %w", i, err)
		}
		if err == nil && len(v) != d.Length(i) {
			return fmt.Errorf("row %d: %d tokens, index says %d", i, len(v), d.Length(i))
		}
		buf, err = d.AppendTokens(buf[:0], i)
		if err == nil && len(buf) != d.Length(i) {
			return fmt.Errorf("row %d: AppendTokens gave %d tokens, index says %d", i, len(buf), d.Length(i))
		}
		for _, c := range d.Columns() {
			d.Column(c, i)
		}
	}
	return nil
}
