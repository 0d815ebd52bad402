package dataset

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// foreignFixture is testdata/hf/<name>/expected.json.
type foreignFixture struct {
	IDs       [][]int64            `json:"input_ids"` // nil row: null list
	Columns   map[string][]*string `json:"columns"`
	ErrorRows []int                `json:"error_rows"`
}

var foreignFixtures = []struct {
	name     string
	idsTypes []string
	zeroCopy bool
}{
	{"hf_int64_3shards", []string{"list<int64>", "list<int64>", "list<int64>"}, false},
	{"hf_uint16_large", []string{"large_list<uint16>", "large_list<uint16>"}, false},
	{"hf_fixed_int32", []string{"fixed_size_list<int32, 4>"}, true},
	{"pa_mixed", []string{"list<int32>"}, true},
	{"pa_uint32_big", []string{"list<uint32>", "list<uint32>"}, false},
}

// checkForeign opens a dataset written by Hugging Face datasets or pyarrow and
// compares it with its expected.json.
func checkForeign(t *testing.T, dir string, idsTypes []string, zeroCopy bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want foreignFixture
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir, OpenOptions{}) // no WriteIndex: leave testdata alone
	if len(want.ErrorRows) > 0 {
		// An id outside int32 refuses the dataset at open (the shard scan
		// checks every value), naming the shard and the row.
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), ".arrow") || !strings.Contains(err.Error(), "row ") ||
			!strings.Contains(err.Error(), "does not fit in int32") {
			t.Fatalf("Open = %v; want ErrUnsupported naming the shard and row", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Len() != len(want.IDs) {
		t.Fatalf("Len = %d, want %d", d.Len(), len(want.IDs))
	}
	if d.ZeroCopy() != zeroCopy {
		t.Errorf("ZeroCopy = %v", d.ZeroCopy())
	}
	var types []string
	for _, s := range d.Shards() {
		types = append(types, s.IDsType)
	}
	if !slices.Equal(types, idsTypes) {
		t.Errorf("IDsType = %v, want %v", types, idsTypes)
	}
	var buf []int32
	for i, w := range want.IDs {
		if d.Length(i) != len(w) {
			t.Fatalf("Length(%d) = %d, want %d", i, d.Length(i), len(w))
		}
		buf, err = d.AppendTokens(buf[:0], i)
		if slices.Contains(want.ErrorRows, i) || sharesBatch(d, i, want.ErrorRows) {
			// An id outside int32 fails every read of its record batch (it is
			// checked at the batch's first touch).
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("AppendTokens(%d) = %v, want an int32 range error", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("AppendTokens(%d): %v", i, err)
		}
		got := make([]int64, len(buf))
		for j, x := range buf {
			got[j] = int64(x)
		}
		if len(w) == 0 {
			w = []int64{}
		}
		if !slices.Equal(got, w) {
			t.Fatalf("AppendTokens(%d) = %v, want %v", i, got, w)
		}
		v, err := d.Tokens(i)
		if zeroCopy && (err != nil || len(v) != len(w)) {
			t.Errorf("Tokens(%d) = %v, %v", i, v, err)
		}
		if !zeroCopy && !errors.Is(err, ErrNotZeroCopy) {
			t.Errorf("Tokens(%d) = %v, want ErrNotZeroCopy", i, err)
		}
		for name, col := range want.Columns {
			s, ok, err := d.Column(name, i)
			if err != nil || ok != (col[i] != nil) || (ok && s != *col[i]) {
				t.Errorf("Column(%q, %d) = %q, %v, %v; want %v", name, i, s, ok, err, col[i])
			}
		}
	}
}

// sharesBatch reports whether global row i is in the record batch of one of rows.
func sharesBatch(d *Dataset, i int, rows []int) bool {
	where := func(g int) (int, int) {
		k := 0
		for int64(g) >= d.starts[k+1] {
			k++
		}
		return k, d.shards[k].batchFor(int64(g) - d.starts[k])
	}
	k, j := where(i)
	for _, r := range rows {
		if k2, j2 := where(r); k2 == k && j2 == j {
			return true
		}
	}
	return false
}

func TestForeignDatasets(t *testing.T) {
	for _, fx := range foreignFixtures {
		t.Run(fx.name, func(t *testing.T) {
			checkForeign(t, filepath.Join("testdata", "hf", fx.name), fx.idsTypes, fx.zeroCopy)
		})
	}
	t.Run("other_column_types", func(t *testing.T) {
		d, err := Open(filepath.Join("testdata", "hf", "pa_mixed"), OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if got := d.Columns(); !slices.Equal(got, []string{"meta", "tags", "view", "text"}) {
			t.Errorf("Columns = %v", got)
		}
		for _, c := range []string{"meta", "tags", "view"} {
			if _, _, err := d.Column(c, 0); !errors.Is(err, ErrNoColumn) {
				t.Errorf("Column(%q) = %v, want ErrNoColumn", c, err)
			}
		}
	})
}

// TestForeignDatasetsFresh regenerates the fixtures with the installed
// datasets/pyarrow (GLOAD_PYTHON) and checks them the same way, so a new
// Hugging Face release that writes differently is noticed.
func TestForeignDatasetsFresh(t *testing.T) {
	py := pythonPath(t)
	out := t.TempDir()
	if b, err := exec.Command(py, "testdata/make_hf_fixtures.py", out).CombinedOutput(); err != nil {
		t.Fatalf("make_hf_fixtures.py: %v\n%s", err, b)
	}
	for _, fx := range foreignFixtures {
		t.Run(fx.name, func(t *testing.T) {
			checkForeign(t, filepath.Join(out, fx.name), fx.idsTypes, fx.zeroCopy)
		})
	}
}

// TestWideIDsAtFirstTouch: a record batch holding an id outside int32 is
// refused by its first read too (for datasets opened from a cached index,
// which skips the scan), naming the row.
func TestWideIDsAtFirstTouch(t *testing.T) {
	sh, err := openShard(filepath.Join("testdata", "hf", "pa_uint32_big"), "part-b.arrow")
	if err != nil {
		t.Fatal(err)
	}
	defer sh.close()
	m, err := readMessage(sh.data, sh.firstMsg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeIDs(sh.data, m, sh.schema, sh.ids)
	if err != nil {
		t.Fatal(err)
	}
	if r, x, bad := b.firstWideID(); !bad || r != 0 || x != "2147483648" {
		t.Fatalf("firstWideID = %d, %s, %v; want row 0, 2147483648", r, x, bad)
	}
	sh.entry = ShardEntry{Rows: b.rows, Batches: []BatchRef{{Offset: m.start}}}
	sh.cache = make([]atomic.Pointer[batchSlot], 1)
	if _, err := sh.batch(0); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "row 0 of the shard") {
		t.Fatalf("batch(0) = %v; want ErrUnsupported naming row 0", err)
	}
}
