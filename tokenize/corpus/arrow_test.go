package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "meta", Type: arrow.StructOf(
		arrow.Field{Name: "lang", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
}, nil)

// testRow i of the synthetic table: row 2 has a null text, row 5 an empty
// one, row 6 ill-formed UTF-8; row 3 a null id; row 4 a null meta.
func testText(i int) (string, bool) {
	switch i {
	case 2:
		return "", false
	case 5:
		return "", true
	case 6:
		return "bad \xff!!", true
	}
	return fmt.Sprintf("doc %d", i), true
}

// buildBatch builds rows [from, to) of the synthetic table.
func buildBatch(from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	text := b.Field(0).(*array.StringBuilder)
	id := b.Field(1).(*array.Int64Builder)
	meta := b.Field(2).(*array.StructBuilder)
	tags := b.Field(3).(*array.ListBuilder)
	for i := from; i < to; i++ {
		if s, ok := testText(i); ok {
			text.Append(s)
		} else {
			text.AppendNull()
		}
		if i == 3 {
			id.AppendNull()
		} else {
			id.Append(int64(i * 10))
		}
		if i == 4 {
			meta.AppendNull()
		} else {
			meta.Append(true)
			meta.FieldBuilder(0).(*array.StringBuilder).Append([]string{"en", "fr"}[i%2])
			meta.FieldBuilder(1).(*array.StringBuilder).Append(fmt.Sprintf("body %d", i))
		}
		tags.Append(true)
		vb := tags.ValueBuilder().(*array.StringBuilder)
		for k := 0; k < i%3; k++ {
			vb.Append(fmt.Sprintf("t%d", k))
		}
	}
	return b.NewRecordBatch()
}

const testRows = 8

// pqTestRow is a row of the synthetic table as parquet-go writes it.
type pqTestRow struct {
	Text *string     `parquet:"text,optional"`
	ID   *int64      `parquet:"id,optional"`
	Meta *pqTestMeta `parquet:"meta,optional"`
	Tags []string    `parquet:"tags,list"`
}

type pqTestMeta struct {
	Lang *string `parquet:"lang,optional"`
	Body *string `parquet:"body,optional"`
}

func writeParquet(t testing.TB, path string, rowGroup int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := parquet.NewGenericWriter[pqTestRow](f, parquet.MaxRowsPerRowGroup(rowGroup))
	var rows []pqTestRow
	for i := range testRows {
		var r pqTestRow
		if s, ok := testText(i); ok {
			r.Text = &s
		}
		if i != 3 {
			id := int64(i * 10)
			r.ID = &id
		}
		if i != 4 {
			lang, body := []string{"en", "fr"}[i%2], fmt.Sprintf("body %d", i)
			r.Meta = &pqTestMeta{Lang: &lang, Body: &body}
		}
		r.Tags = []string{}
		for k := 0; k < i%3; k++ {
			r.Tags = append(r.Tags, fmt.Sprintf("t%d", k))
		}
		rows = append(rows, r)
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeArrowStream writes rows [from, to) as an IPC stream in batches of
// batch rows, or as an IPC file when fileFormat.
func writeArrowStream(t testing.TB, path string, from, to, batch int, fileFormat bool) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type writer interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w writer
	if fileFormat {
		if w, err = ipc.NewFileWriter(f, ipc.WithSchema(testSchema)); err != nil {
			t.Fatal(err)
		}
	} else {
		w = ipc.NewWriter(f, ipc.WithSchema(testSchema))
	}
	for i := from; i < to; i += batch {
		rec := buildBatch(i, min(i+batch, to))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeHFDir writes a save_to_disk-like directory with two shards (rows
// 0-4 and 5-7), listed in state.json in that order.
func writeHFDir(t testing.TB, dir string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	writeArrowStream(t, filepath.Join(dir, "data-00000-of-00002.arrow"), 0, 5, 2, false)
	writeArrowStream(t, filepath.Join(dir, "data-00001-of-00002.arrow"), 5, testRows, 2, false)
	state := `{"_data_files":[{"filename":"data-00000-of-00002.arrow"},{"filename":"data-00001-of-00002.arrow"}],` +
		`"_fingerprint":"abc","_format_columns":null,"_format_kwargs":{},"_format_type":null,"_output_all_columns":false,"_split":null}`
	os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644)
	os.WriteFile(filepath.Join(dir, "dataset_info.json"), []byte(`{"features":{}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "cache-123.arrow"), []byte("not listed"), 0o644)
}

// wantRows is what reading the synthetic table gives with keep columns
// id, meta.lang, tags, meta, absent.
func wantRows(textField string) (texts []string, cols [][]string, nulls [][]bool) {
	for i := range testRows {
		var text string
		if textField == "meta.body" {
			text = fmt.Sprintf("body %d", i)
			if i == 4 {
				text = "SKIP:not a string"
			}
		} else {
			s, ok := testText(i)
			switch {
			case !ok:
				text = "SKIP:not a string"
			case s == "":
				text = "SKIP:empty document"
			default:
				text = strings.ToValidUTF8(s, "\uFFFD")
			}
		}
		texts = append(texts, text)
		var tagList []string
		for k := 0; k < i%3; k++ {
			tagList = append(tagList, fmt.Sprintf(`"t%d"`, k))
		}
		lang := []string{"en", "fr"}[i%2]
		c := []string{fmt.Sprint(i * 10), lang, "[" + strings.Join(tagList, ",") + "]",
			fmt.Sprintf(`{"lang":"%s","body":"body %d"}`, lang, i), ""}
		n := []bool{false, false, false, false, true}
		if i == 3 {
			c[0], n[0] = "", true
		}
		if i == 4 {
			c[1], n[1], c[3], n[3] = "", true, "", true
		}
		cols = append(cols, c)
		nulls = append(nulls, n)
	}
	return texts, cols, nulls
}

var arrowKeep = []string{"id", "meta.lang", "tags", "meta", "absent"}

func checkRows(t *testing.T, recs []Record, o Options, from int) {
	t.Helper()
	texts, cols, nulls := wantRows(o.TextField)
	if len(recs) != testRows-from {
		t.Fatalf("%d records, want %d", len(recs), testRows-from)
	}
	got := docs(recs, o)
	if !slices.Equal(got, texts[from:]) {
		t.Fatalf("texts = %q, want %q", got, texts[from:])
	}
	e := NewExtractor(o)
	for k, r := range recs {
		i := from + k
		if r.Line != int64(i+1) {
			t.Fatalf("row %d: Line %d", i, r.Line)
		}
		if !slices.Equal(r.Cols, cols[i]) || !slices.Equal(r.Null, nulls[i]) {
			t.Fatalf("row %d: cols %q null %v, want %q %v", i, r.Cols, r.Null, cols[i], nulls[i])
		}
		if d, skip := e.Extract(r); skip == nil && (!slices.Equal(d.Cols, cols[i]) || d.InvalidUTF8 != (i == 6 && o.TextField == "text")) {
			t.Fatalf("row %d: doc %+v", i, d)
		}
	}
}

func TestParquet(t *testing.T) {
	for _, rowGroup := range []int64{3, 100} {
		for _, field := range []string{"text", "meta.body"} {
			t.Run(fmt.Sprintf("rg%d/%s", rowGroup, field), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "t.parquet")
				writeParquet(t, p, rowGroup)
				o := Options{TextField: field, KeepColumns: arrowKeep}
				plan := mustPlan(t, []string{p}, o)
				if plan.Files[0].Format != FormatParquet {
					t.Fatalf("format %s", plan.Files[0].Format)
				}
				for from := 0; from <= testRows; from++ {
					recs, pos, err := readAll(t, plan, Position{File: 0, Record: int64(from)})
					if err != nil {
						t.Fatalf("from %d: %v", from, err)
					}
					checkRows(t, recs, plan.Options(), from)
					for k, ps := range pos {
						if ps != (Position{0, int64(from + k + 1)}) {
							t.Fatalf("Pos after row %d = %+v", from+k, ps)
						}
					}
				}
				if _, err := plan.Open(Position{0, testRows + 1}); !errors.Is(err, ErrPosition) {
					t.Fatalf("Open past the end: %v", err)
				}
			})
		}
	}
}

func TestParquetOversized(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.parquet")
	writeParquet(t, p, 4)
	plan := mustPlan(t, []string{p}, Options{MaxDocBytes: 5})
	recs, _, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	got := docs(recs, plan.Options())
	want := []string{"doc 0", "doc 1", "SKIP:not a string", "doc 3", "doc 4", "SKIP:empty document", "SKIP:too large", "doc 7"}
	if !slices.Equal(got, want) {
		t.Fatalf("docs %q, want %q", got, want)
	}
}

func TestHFDir(t *testing.T) {
	root := t.TempDir()
	ds := filepath.Join(root, "ds")
	writeHFDir(t, ds)
	o := Options{KeepColumns: arrowKeep}
	plan := mustPlan(t, []string{ds}, o)
	if len(plan.Files) != 2 || filepath.Base(plan.Files[0].Path) != "data-00000-of-00002.arrow" || plan.Files[1].Format != FormatHF {
		t.Fatalf("files %+v", plan.Files)
	}
	all, pos, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range all {
		all[k].Line = int64(k + 1) // rows of both shards in one sequence for checkRows
	}
	checkRows(t, all, plan.Options(), 0)
	// Resume at every position.
	for k, from := range append([]Position{{}}, pos...) {
		recs, _, err := readAll(t, plan, from)
		if err != nil {
			t.Fatalf("from %+v: %v", from, err)
		}
		if len(recs) != testRows-k {
			t.Fatalf("from %+v: %d records, want %d", from, len(recs), testRows-k)
		}
		if len(recs) > 0 && string(recs[0].Raw) != string(all[k].Raw) {
			t.Fatalf("from %+v: first %q, want %q", from, recs[0].Raw, all[k].Raw)
		}
	}
	if _, err := plan.Open(Position{0, 6}); !errors.Is(err, ErrPosition) {
		t.Fatalf("Open past shard end: %v", err)
	}
	// A directory holding the dataset is walked into it.
	plan = mustPlan(t, []string{root}, o)
	if len(plan.Files) != 2 {
		t.Fatalf("walk: %+v", plan.Files)
	}
}

func TestArrowFileFormat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.arrow")
	writeArrowStream(t, p, 0, testRows, 3, true)
	o := Options{KeepColumns: arrowKeep}
	plan := mustPlan(t, []string{p}, o)
	for from := 0; from <= testRows; from++ {
		recs, _, err := readAll(t, plan, Position{0, int64(from)})
		if err != nil {
			t.Fatal(err)
		}
		checkRows(t, recs, plan.Options(), from)
	}
}

func TestArrowPlanProblems(t *testing.T) {
	dir := t.TempDir()
	ds := filepath.Join(dir, "ds")
	writeHFDir(t, ds)
	os.Remove(filepath.Join(ds, "data-00001-of-00002.arrow"))
	badState := filepath.Join(dir, "bad")
	os.MkdirAll(badState, 0o755)
	os.WriteFile(filepath.Join(badState, "state.json"), []byte(`{"_data_files":[{"filename":"../escape.arrow"}]}`), 0o644)
	pq := filepath.Join(dir, "t.parquet")
	writeParquet(t, pq, 4)
	_, err := NewPlan([]string{ds, badState, pq}, Options{TextField: "body"})
	var pe *PlanError
	if !errors.As(err, &pe) || len(pe.Problems) != 4 {
		t.Fatalf("err = %v", err)
	}
	wants := []string{"no text column \"body\"", "not found", "not a file inside", "no text column \"body\""}
	for i, w := range wants {
		if !strings.Contains(pe.Problems[i].Error(), w) {
			t.Errorf("problem %d = %v, want %q", i, pe.Problems[i], w)
		}
	}
	_, err = NewPlan([]string{pq}, Options{TextField: "id"})
	if err == nil || !strings.Contains(err.Error(), "has type int64, not string") {
		t.Fatalf("non-string text column: %v", err)
	}
}

func TestCorruptArrow(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.arrow")
	writeArrowStream(t, p, 0, testRows, 2, false)
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)*2/3], 0o644)
	plan := mustPlan(t, []string{p}, Options{})
	recs, _, err := readAll(t, plan, Position{})
	var re *ReadError
	if !errors.As(err, &re) || re.Unit != "row" || re.Line != int64(len(recs))+1 {
		t.Fatalf("truncated stream: %d records, err %v", len(recs), err)
	}
}

// TestParquetLargeDocs reads books-sized documents in a snappy file
// without dictionaries, resuming inside it.
func TestParquetLargeDocs(t *testing.T) {
	const rows, docBytes = 300, 100_000
	type doc struct {
		Text string `parquet:"text,snappy,plain"`
	}
	var docsIn []doc
	for i := range rows {
		docsIn = append(docsIn, doc{fmt.Sprintf("%04d", i) + strings.Repeat("x", docBytes-4)})
	}
	p := filepath.Join(t.TempDir(), "big.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[doc](f, parquet.MaxRowsPerRowGroup(120))
	if _, err := w.Write(docsIn); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	plan := mustPlan(t, []string{p}, Options{})
	recs, _, err := readAll(t, plan, Position{0, 250})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != rows-250 || string(recs[0].Raw[:4]) != "0250" || recs[0].Line != 251 || len(recs[0].Raw) != docBytes {
		t.Fatalf("resumed read: %d records, first line %d", len(recs), recs[0].Line)
	}
}
