package dataset

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// labeledRows makes rows whose labels are the ids with every third position masked.
func labeledRows(n, maxLen int) (rows []testRow, labels [][]int32) {
	rows = genRows(n, 1, maxLen, 11)
	for _, r := range rows {
		l := slices.Clone(r.ids)
		for j := range l {
			if j%3 == 0 {
				l[j] = -100
			}
		}
		labels = append(labels, l)
	}
	return rows, labels
}

func writeLabeled(t *testing.T, dir string, rows []testRow, labels [][]int32, opts WriterOptions, perShard int) {
	t.Helper()
	var infos []ShardInfo
	for start := 0; start < len(rows); start += perShard {
		w, err := CreateShard(dir, len(infos), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := start; i < min(start+perShard, len(rows)); i++ {
			cols := rows[i].cols[:len(opts.Columns)]
			if err := w.AppendLabeled(rows[i].ids, labels[i], cols); err != nil {
				t.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := Finalize(dir, infos, opts); err != nil {
		t.Fatal(err)
	}
}

// TestLabelsRoundTrip: a labels column written beside input_ids (several shards and record batches, empty rows
// included) reads back zero-copy, row for row, and string columns after it stay readable.
func TestLabelsRoundTrip(t *testing.T) {
	rows, labels := labeledRows(500, 40)
	dir := t.TempDir()
	opts := WriterOptions{Labels: true, Columns: []string{"id"}, RowsPerBatch: 33}
	writeLabeled(t, dir, rows, labels, opts, 200)
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.HasLabels() || !d.ZeroCopy() {
		t.Fatalf("HasLabels %v ZeroCopy %v", d.HasLabels(), d.ZeroCopy())
	}
	if !slices.Equal(d.Columns(), []string{"id"}) {
		t.Errorf("Columns() = %v, want [id] (labels is not a string column)", d.Columns())
	}
	for i := range rows {
		ids, err := d.Tokens(i)
		if err != nil {
			t.Fatal(err)
		}
		lb, err := d.Labels(i)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := d.AppendLabels(nil, i)
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := d.Column("id", i)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, rows[i].ids) || !slices.Equal(lb, labels[i]) || !slices.Equal(cp, labels[i]) || s != rows[i].cols[0] {
			t.Fatalf("row %d differs", i)
		}
	}
}

// TestLabelsWriterRefuses: mismatched lengths and the wrong Append for the options are errors.
func TestLabelsWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateShard(dir, 0, WriterOptions{Labels: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.AppendLabeled([]int32{1, 2}, []int32{1}, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("short labels: %v", err)
	}
	if err := w.Append([]int32{1, 2}, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("Append on a labels dataset: %v", err)
	}
	w2, err := CreateShard(t.TempDir(), 0, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Abort()
	if err := w2.AppendLabeled([]int32{1}, []int32{1}, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("labels without the option: %v", err)
	}
	if _, err := CreateShard(t.TempDir(), 1, WriterOptions{Labels: true, Columns: []string{"labels"}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("a string column named labels beside the labels column: %v", err)
	}
}

// TestLabelsNoColumn: a dataset without labels says so.
func TestLabelsNoColumn(t *testing.T) {
	dir := t.TempDir()
	writeDataset(t, dir, genRows(10, 0, 5, 1), WriterOptions{}, 10)
	d, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.HasLabels() {
		t.Fatal("HasLabels on a dataset without labels")
	}
	if _, err := d.Labels(0); !errors.Is(err, ErrNoColumn) {
		t.Errorf("Labels: %v", err)
	}
}

// TestLabelsHuggingFace: datasets.load_from_disk shows input_ids and labels as lists of int32, row for row.
func TestLabelsHuggingFace(t *testing.T) {
	for _, py := range pythonPaths(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(py))), func(t *testing.T) {
			rows, labels := labeledRows(120, 30)
			dir := t.TempDir()
			writeLabeled(t, dir, rows, labels, WriterOptions{Labels: true, RowsPerBatch: 50}, 70)
			ids := make([][]int32, len(rows))
			for i, r := range rows {
				ids[i] = r.ids
				if ids[i] == nil {
					ids[i] = []int32{}
				}
				if labels[i] == nil {
					labels[i] = []int32{}
				}
			}
			exp, _ := json.Marshal(map[string]any{"input_ids": ids, "labels": labels})
			ef := filepath.Join(t.TempDir(), "exp.json")
			if err := os.WriteFile(ef, exp, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(py, "testdata/check_hf_labels.py", dir, ef).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "ok") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}
