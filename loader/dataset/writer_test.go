package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var roundTripCases = []struct {
	name     string
	rows     int
	batch    int
	perShard int
	cols     []string
	maxLen   int
}{
	{"empty", 0, 0, 10, nil, 5},
	{"one_row", 1, 0, 10, nil, 5},
	{"one_row_cols", 1, 0, 10, []string{"text"}, 5},
	{"batch1", 9, 1, 4, []string{"a", "b"}, 3},
	{"odd_batches", 50, 7, 20, []string{"source"}, 40},
	{"exact_batches", 60, 10, 30, nil, 12},
	{"default_batch", 2500, 0, 1100, []string{"text", "url"}, 20},
	{"empty_rows", 30, 4, 30, []string{"x"}, 0},
	{"long_rows", 12, 5, 5, nil, 5000},
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rows := genRows(tc.rows, len(tc.cols), tc.maxLen, uint64(tc.rows))
			opts := WriterOptions{Columns: tc.cols, RowsPerBatch: tc.batch, TokenizerHash: "tok-" + tc.name}
			infos := writeDataset(t, dir, rows, opts, tc.perShard)
			d := checkRows(t, dir, rows, tc.cols, OpenOptions{})
			if !d.IndexUsed() {
				t.Error("IndexUsed = false right after Finalize")
			}
			if d.TokenizerHash() != opts.TokenizerHash {
				t.Errorf("TokenizerHash = %q", d.TokenizerHash())
			}
			if !d.ZeroCopy() {
				t.Error("ZeroCopy = false for a gload dataset")
			}
			if got := d.Columns(); fmt.Sprint(got) != fmt.Sprint(tc.cols) && len(tc.cols) > 0 {
				t.Errorf("Columns = %v, want %v", got, tc.cols)
			}
			wantShards := max(len(infos), 1)
			stats := d.Shards()
			if len(stats) != wantShards {
				t.Fatalf("%d shards, want %d", len(stats), wantShards)
			}
			batch := tc.batch
			if batch == 0 {
				batch = DefaultRowsPerBatch
			}
			for k, s := range stats {
				if s.Name != DataFileName(k, wantShards) || s.IDsType != "list<int32>" {
					t.Errorf("shard %d: %+v", k, s)
				}
				if want := int((s.Rows + int64(batch) - 1) / int64(batch)); s.Batches != want {
					t.Errorf("shard %d: %d batches, want %d", k, s.Batches, want)
				}
			}
			// A rebuilt index gives the same view and fingerprint.
			d2 := checkRows(t, dir, rows, tc.cols, OpenOptions{RebuildIndex: true})
			if d2.IndexUsed() || d2.Fingerprint() != d.Fingerprint() {
				t.Errorf("rebuild: IndexUsed %v, fingerprint %s vs %s", d2.IndexUsed(), d2.Fingerprint(), d.Fingerprint())
			}
		})
	}
}

// TestHuggingFaceReadsOutput runs testdata/check_hf.py (datasets.load_from_disk
// and pyarrow.ipc.open_stream over a memory map) on datasets written here,
// with the newest and the oldest supported datasets/pyarrow (GLOAD_PYTHON and
// GLOAD_PYTHON_OLDEST): list columns must be in the Sequence form that
// datasets before 4 read, and the "gload" entry of dataset_info.json must not
// trouble any of them.
func TestHuggingFaceReadsOutput(t *testing.T) {
	for _, py := range pythonPaths(t) {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(py))), func(t *testing.T) {
			args := []string{"testdata/check_hf.py"}
			for i, tc := range roundTripCases {
				dir := filepath.Join(t.TempDir(), tc.name)
				os.Mkdir(dir, 0o755)
				rows := genRows(tc.rows, len(tc.cols), tc.maxLen, uint64(tc.rows))
				opts := WriterOptions{Columns: tc.cols, RowsPerBatch: tc.batch}
				if i%2 == 1 {
					opts.Special = SpecialTokens{PadID: int32(i), PadToken: "<|pad|>", PadFrom: PadFromPadToken}
				}
				writeDataset(t, dir, rows, opts, tc.perShard)
				args = append(args, dir, writeExpected(t, rows, tc.cols))
			}
			// One interpreter for all cases: importing datasets takes seconds.
			out, err := exec.Command(py, args...).CombinedOutput()
			if err != nil || strings.Count(string(out), "ok\n") != len(roundTripCases) {
				t.Fatalf("%s check_hf.py: %v\n%s", py, err, out)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	rows := genRows(700, 2, 50, 7)
	opts := WriterOptions{Columns: []string{"text", "id"}, RowsPerBatch: 64, TokenizerHash: "h"}
	dirs := []string{t.TempDir(), t.TempDir()}
	writeDataset(t, dirs[0], rows, opts, 300)
	// Written at different times into different directories: every file of
	// the dataset, gload.index included, is byte-identical.
	time.Sleep(10 * time.Millisecond)
	writeDataset(t, dirs[1], rows, opts, 300)
	names := []string{"data-00000-of-00003.arrow", "data-00001-of-00003.arrow", "data-00002-of-00003.arrow", InfoFile, StateFile, IndexFile}
	for _, n := range names {
		a, err := os.ReadFile(filepath.Join(dirs[0], n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs", n)
		}
	}
}

func TestHFJSONFiles(t *testing.T) {
	dir := t.TempDir()
	opts := WriterOptions{Columns: []string{"text", `q"uo\te`, "ünï"}}
	writeDataset(t, dir, genRows(3, 3, 2, 1), opts, 10)
	info, _ := os.ReadFile(filepath.Join(dir, InfoFile))
	want := `{
  "citation": "",
  "description": "",
  "features": {
    "input_ids": {
      "feature": {
        "dtype": "int32",
        "_type": "Value"
      },
      "length": -1,
      "_type": "Sequence"
    },
    "text": {
      "dtype": "string",
      "_type": "Value"
    },
    "q\"uo\\te": {
      "dtype": "string",
      "_type": "Value"
    },
    "\u00fcn\u00ef": {
      "dtype": "string",
      "_type": "Value"
    }
  },
  "homepage": "",
  "license": ""
}`
	if string(info) != want {
		t.Errorf("dataset_info.json:\n%s\nwant:\n%s", info, want)
	}
	state, _ := os.ReadFile(filepath.Join(dir, StateFile))
	if !strings.HasPrefix(string(state), "{\n  \"_data_files\": [\n    {\n      \"filename\": \"data-00000-of-00001.arrow\"\n    }\n  ],\n  \"_fingerprint\": \"") ||
		!strings.HasSuffix(string(state), "\",\n  \"_format_columns\": null,\n  \"_format_kwargs\": {},\n  \"_format_type\": null,\n  \"_output_all_columns\": false,\n  \"_split\": null\n}") {
		t.Errorf("state.json:\n%s", state)
	}
	if got := hfSchemaMetadata([]string{"text"}, false); got != `{"info": {"features": {"input_ids": {"feature": {"dtype": "int32", "_type": "Value"}, "length": -1, "_type": "Sequence"}, "text": {"dtype": "string", "_type": "Value"}}}}` {
		t.Errorf("schema metadata %s", got)
	}
}

func TestWriterInputErrors(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range []WriterOptions{
		{RowsPerBatch: -1},
		{Columns: []string{""}},
		{Columns: []string{"input_ids"}},
		{Columns: []string{"a", "a"}},
		{Columns: []string{"\xff"}},
		{TokenizerHash: strings.Repeat("x", 5000)},
	} {
		if _, err := CreateShard(dir, 0, opts); !errors.Is(err, ErrBadInput) {
			t.Errorf("CreateShard(%+v) = %v, want ErrBadInput", opts, err)
		}
	}
	if _, err := CreateShard(dir, -1, WriterOptions{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("negative shard number: %v", err)
	}
	if _, err := CreateShard(filepath.Join(dir, "missing"), 0, WriterOptions{}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: %v", err)
	}
	w, err := CreateShard(dir, 3, WriterOptions{Columns: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]int32{1}, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("missing column value: %v", err)
	}
	if err := w.Append([]int32{1}, []string{"\xff\xfe"}); !errors.Is(err, ErrBadInput) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if err := w.Append([]int32{1}, []string{"ok"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]int32{1}, []string{"ok"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Abort: %v", err)
	}
	if _, err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close after Abort: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Abort left %v", ents)
	}
	if err := Finalize(dir, []ShardInfo{{Name: "x.arrow", Rows: 1}}, WriterOptions{}); !errors.Is(err, ErrBadInput) {
		t.Errorf("Finalize with inconsistent ShardInfo: %v", err)
	}
	if err := Finalize(dir, []ShardInfo{{Name: "../x.arrow"}}, WriterOptions{}); err == nil {
		t.Error("Finalize accepted a path as shard name")
	}
}

// TestWriterWriteError makes the underlying file fail: the error names the
// file, sticks, and Close removes the temporary file.
func TestWriterWriteError(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateShard(dir, 1, WriterOptions{RowsPerBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // simulate a failing disk: every write now fails
	ids := make([]int32, 1<<18)
	for i := 0; i < 8 && err == nil; i++ {
		err = w.Append(ids, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "shard-00001.arrow.tmp") {
		t.Fatalf("Append on a failing file: %v", err)
	}
	if err2 := w.Append(ids, nil); err2 == nil {
		t.Error("write error did not stick")
	}
	if _, err := w.Close(); err == nil {
		t.Fatal("Close succeeded on a failing file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed Close left %v", ents)
	}
}

func TestWriterBytes(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateShard(dir, 0, WriterOptions{Columns: []string{"t"}, RowsPerBatch: 100})
	if err != nil {
		t.Fatal(err)
	}
	prev := w.Bytes()
	for _, r := range genRows(1050, 1, 100, 3) {
		if err := w.Append(r.ids, r.cols); err != nil {
			t.Fatal(err)
		}
		if b := w.Bytes(); b < prev {
			t.Fatalf("Bytes went down: %d < %d", b, prev)
		} else {
			prev = b
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, info.Name))
	if info.Name != "shard-00000.arrow" || st.Size() != info.Bytes || info.Rows != 1050 || len(info.Batches) != 11 {
		t.Errorf("info %s %d bytes (file %d), %d rows, %d batches", info.Name, info.Bytes, st.Size(), info.Rows, len(info.Batches))
	}
	if prev != info.Bytes {
		t.Errorf("Bytes before Close %d, file %d", prev, info.Bytes)
	}
}

// TestFinalizeRerun simulates a crash after each step of Finalize's renames and
// re-runs it, with the original infos and with RecoverShards.
func TestFinalizeRerun(t *testing.T) {
	rows := genRows(90, 1, 20, 11)
	opts := WriterOptions{Columns: []string{"s"}, RowsPerBatch: 8, TokenizerHash: "t"}
	ref := t.TempDir()
	writeDataset(t, ref, rows, opts, 25)
	refState, _ := os.ReadFile(filepath.Join(ref, StateFile))
	for _, recover := range []bool{false, true} {
		for done := 0; done <= 4; done++ {
			t.Run(fmt.Sprintf("recover=%v/renamed=%d", recover, done), func(t *testing.T) {
				dir := t.TempDir()
				infos := writeShards(t, dir, rows, opts, 25)
				// A stale index from an older dataset in the same directory.
				os.WriteFile(filepath.Join(dir, IndexFile), []byte("GLOADIX1 junk"), 0o644)
				for i := range done {
					if err := os.Rename(filepath.Join(dir, infos[i].Name), filepath.Join(dir, DataFileName(i, len(infos)))); err != nil {
						t.Fatal(err)
					}
				}
				if done == 4 { // crashed after the JSON files, before the index
					os.WriteFile(filepath.Join(dir, StateFile), []byte("{}"), 0o644)
				}
				if recover {
					var err error
					if infos, err = RecoverShards(dir); err != nil {
						t.Fatal(err)
					}
				}
				if err := Finalize(dir, infos, opts); err != nil {
					t.Fatal(err)
				}
				if err := Finalize(dir, infos, opts); err != nil { // and once more
					t.Fatal(err)
				}
				state, _ := os.ReadFile(filepath.Join(dir, StateFile))
				if !bytes.Equal(state, refState) {
					t.Errorf("state.json differs from an uninterrupted run:\n%s\n%s", state, refState)
				}
				d := checkRows(t, dir, rows, opts.Columns, OpenOptions{})
				if !d.IndexUsed() {
					t.Error("index not used")
				}
			})
		}
	}
}

func TestFinalizeMissingShard(t *testing.T) {
	dir := t.TempDir()
	infos := writeShards(t, dir, genRows(10, 0, 3, 1), WriterOptions{}, 5)
	os.Remove(filepath.Join(dir, infos[1].Name))
	err := Finalize(dir, infos, WriterOptions{})
	if err == nil || !strings.Contains(err.Error(), infos[1].Name) {
		t.Errorf("Finalize with a missing shard: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err == nil {
		t.Error("gload.index written for an incomplete dataset")
	}
}

func TestScanShardMatchesWriter(t *testing.T) {
	dir := t.TempDir()
	infos := writeShards(t, dir, genRows(333, 2, 30, 5), WriterOptions{Columns: []string{"a", "b"}, RowsPerBatch: 50}, 400)
	got, err := ScanShard(filepath.Join(dir, infos[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(infos[0]) {
		t.Errorf("ScanShard = %+v\nwriter gave %+v", got, infos[0])
	}
}
