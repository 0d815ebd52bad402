package corpus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// Files under testdata were written by Python tools, so these tests check
// that gload reads what users have:
//
//   - hf_tiny: datasets 5.2.0 Dataset.from_dict(...).save_to_disk(num_shards=2)
//   - pyarrow.parquet: pyarrow 26 write_table(row_group_size=3, zstd), text
//     as large_string, a dictionary column, a struct and a list column
//   - tiny_expected.json: the rows, as Python's json.dump wrote them
//
// The generating script is in testdata/README.md.

type tinyRow struct {
	Text *string           `json:"text"`
	ID   *int64            `json:"id"`
	Meta map[string]string `json:"meta"`
	Tags []string          `json:"tags"`
}

func loadTinyExpected(t *testing.T) []tinyRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "tiny_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []tinyRow
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestPythonWrittenInputs(t *testing.T) {
	rows := loadTinyExpected(t)
	keep := []string{"id", "meta.lang", "tags", "meta"}
	for _, input := range []string{"testdata/hf_tiny", "testdata/pyarrow.parquet"} {
		t.Run(input, func(t *testing.T) {
			o := Options{KeepColumns: keep}
			plan := mustPlan(t, []string{input}, o)
			recs, _, err := readAll(t, plan, Position{})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(rows) {
				t.Fatalf("%d records, want %d", len(recs), len(rows))
			}
			e := NewExtractor(plan.Options())
			for i, r := range recs {
				w := rows[i]
				doc, skip := e.Extract(r)
				switch {
				case w.Text == nil:
					if skip == nil || skip.Reason != NotString {
						t.Fatalf("row %d: want NotString, got %+v %v", i, doc, skip)
					}
					continue
				case *w.Text == "":
					if skip == nil || skip.Reason != Empty {
						t.Fatalf("row %d: want Empty, got %+v %v", i, doc, skip)
					}
					continue
				case skip != nil:
					t.Fatalf("row %d: %v", i, skip)
				}
				if doc.Text != *w.Text {
					t.Errorf("row %d: text %q, want %q", i, doc.Text, *w.Text)
				}
				wantID, wantLang, wantMeta := "", "", ""
				if w.ID != nil {
					wantID = fmt.Sprint(*w.ID)
				}
				if w.Meta != nil {
					wantLang = w.Meta["lang"]
					wantMeta = fmt.Sprintf(`{"lang":%q,"body":%q}`, w.Meta["lang"], w.Meta["body"])
				}
				tags, _ := json.Marshal(w.Tags)
				if w.Tags == nil || len(w.Tags) == 0 {
					tags = []byte("[]")
				}
				want := []string{wantID, wantLang, string(tags), wantMeta}
				if !slices.Equal(doc.Cols, want) {
					t.Errorf("row %d: cols %q, want %q", i, doc.Cols, want)
				}
				wantNull := []bool{w.ID == nil, w.Meta == nil, false, w.Meta == nil}
				if !slices.Contains(wantNull, true) {
					wantNull = nil
				}
				if !slices.Equal(doc.Null, wantNull) {
					t.Errorf("row %d: null %v, want %v", i, doc.Null, wantNull)
				}
			}
		})
	}
}

func TestPyarrowDictionaryColumn(t *testing.T) {
	plan := mustPlan(t, []string{"testdata/pyarrow.parquet"}, Options{KeepColumns: []string{"cat"}})
	recs, _, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if want := []string{"a", "b"}[i%2]; len(r.Cols) != 1 || r.Cols[0] != want {
			t.Fatalf("row %d: cat %q, want %q", i, r.Cols, want)
		}
	}
}

// sharedFixture returns the path of a file in ../shared/fixtures beside
// the repository root, skipping the test when it is absent.
func sharedFixture(t *testing.T, rel string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	p := filepath.Join(root, "..", "shared", "fixtures", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not available: %v", p, err)
	}
	return p
}

// TestParityTexts reads the shared fixture corpus (833 real documents in
// ~260 languages, the Big List of Naughty Strings, source code) and checks
// every text and src against encoding/json.
func TestParityTexts(t *testing.T) {
	p := sharedFixture(t, "parity/texts.jsonl.gz")
	plan := mustPlan(t, []string{p}, Options{KeepColumns: []string{"src"}})
	recs, _, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	e := NewExtractor(plan.Options())
	i := 0
	for sc.Scan() {
		var want struct{ Src, Text string }
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if i >= len(recs) {
			t.Fatalf("only %d records", len(recs))
		}
		doc, skip := e.Extract(recs[i])
		if want.Text == "" {
			if skip == nil || skip.Reason != Empty {
				t.Fatalf("record %d: want Empty, got %v", i, skip)
			}
		} else if skip != nil || doc.Text != want.Text || doc.Cols[0] != want.Src || doc.InvalidUTF8 {
			t.Fatalf("record %d (%s): %v / text equal %v", i, want.Src, skip, doc.Text == want.Text)
		}
		i++
	}
	if i != len(recs) || i != 833 {
		t.Fatalf("%d lines, %d records", i, len(recs))
	}
}
