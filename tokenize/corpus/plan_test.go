package corpus

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func planPaths(p *Plan, root string) []string {
	var out []string
	for _, f := range p.Files {
		rel, _ := filepath.Rel(root, f.Path)
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestPlanExpansion(t *testing.T) {
	dir := t.TempDir()
	line := []byte("{\"text\":\"x\"}\n")
	for _, f := range []struct {
		name string
		comp Compression
	}{
		{"corpus/b.jsonl", CompressNone},
		{"corpus/a.jsonl", CompressGzip},
		{"corpus/a.b/x.json", CompressNone},
		{"corpus/a/z.ndjson", CompressZstd},
		{"corpus/notes.md", CompressNone},
		{"corpus/.hidden.jsonl", CompressNone},
		{"corpus/.cache/c.jsonl", CompressNone},
		{"corpus/t.txt", CompressNone},
		{"other/one.jsonl", CompressNone},
		{"other/two.jsonl", CompressNone},
		{"other/readme.md", CompressNone},
		{"src/main.py", CompressNone},
		{"src/lib/util.py", CompressNone},
		{"src/Makefile", CompressNone},
	} {
		writeFile(t, dir, f.name, line, f.comp)
	}
	writeFile(t, dir, "src/logo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), CompressNone)
	cases := []struct {
		name   string
		inputs []string
		opts   Options
		want   []string
	}{
		{
			name:   "directory walk sorted by path",
			inputs: []string{"corpus"},
			want:   []string{"corpus/a.b/x.json", "corpus/a.jsonl.gz", "corpus/a/z.ndjson.zst", "corpus/b.jsonl", "corpus/t.txt"},
		},
		{
			name:   "walk with --format text takes every text file, whatever its extension",
			inputs: []string{"src"}, opts: Options{Format: FormatText},
			want: []string{"src/Makefile", "src/lib/util.py", "src/main.py"},
		},
		{
			name:   "walk with --format jsonl takes its extensions only",
			inputs: []string{"corpus"}, opts: Options{Format: FormatJSONL},
			want: []string{"corpus/a.b/x.json", "corpus/a.jsonl.gz", "corpus/a/z.ndjson.zst", "corpus/b.jsonl"},
		},
		{
			name:   "glob with --format text takes every match",
			inputs: []string{"src/*.py"}, opts: Options{Format: FormatText},
			want: []string{"src/main.py"},
		},
		{
			name:   "glob sorted, unknown extensions skipped",
			inputs: []string{"other/*"},
			want:   []string{"other/one.jsonl", "other/two.jsonl"},
		},
		{
			name:   "inputs keep their order, duplicates read once",
			inputs: []string{"other/two.jsonl", "other/*.jsonl", "corpus/b.jsonl"},
			want:   []string{"other/two.jsonl", "other/one.jsonl", "corpus/b.jsonl"},
		},
		{
			name:   "explicit file with explicit format",
			inputs: []string{"corpus/notes.md"}, opts: Options{Format: FormatText},
			want: []string{"corpus/notes.md"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in []string
			for _, p := range tc.inputs {
				in = append(in, filepath.Join(dir, p))
			}
			p := mustPlan(t, in, tc.opts)
			if got := planPaths(p, dir); !slices.Equal(got, tc.want) {
				t.Fatalf("files = %q, want %q", got, tc.want)
			}
			var total int64
			for _, f := range p.Files {
				st, _ := os.Stat(f.Path)
				if f.Size != st.Size() {
					t.Fatalf("%s size %d, want %d", f.Path, f.Size, st.Size())
				}
				total += f.Size
			}
			if p.TotalBytes != total {
				t.Fatalf("TotalBytes %d, want %d", p.TotalBytes, total)
			}
		})
	}
}

func TestPlanFileKinds(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name   string
		format Format
		comp   Compression
	}{
		{"a.jsonl", FormatJSONL, CompressNone},
		{"a.JSONL.GZ", FormatJSONL, CompressGzip},
		{"a.json.zstd", FormatJSONL, CompressZstd},
		{"a.txt.zst", FormatText, CompressZstd},
	}
	for _, tc := range cases {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, compressBytes(t, []byte("{\"text\":\"a\"}\n"), tc.comp), 0o644)
		plan := mustPlan(t, []string{p}, Options{})
		if f := plan.Files[0]; f.Format != tc.format || f.Compression != tc.comp {
			t.Errorf("%s: %s/%s, want %s/%s", tc.name, f.Format, f.Compression, tc.format, tc.comp)
		}
	}
}

func TestPlanErrorsListEveryInput(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.jsonl", []byte("{\"text\":\"a\"}\n"), CompressNone)
	unknown := writeFile(t, dir, "data.csv", []byte("a,b\n"), CompressNone)
	notGzip := filepath.Join(dir, "fake.jsonl.gz")
	os.WriteFile(notGzip, []byte("{\"text\":\"plain\"}\n"), 0o644)
	notZstd := filepath.Join(dir, "fake.jsonl.zst")
	os.WriteFile(notZstd, []byte("not zstd at all"), 0o644)
	array := writeFile(t, dir, "array.json", []byte("\n  [{\"text\":\"a\"}]\n"), CompressGzip)
	emptyDir := filepath.Join(dir, "empty")
	os.MkdirAll(emptyDir, 0o755)
	writeFile(t, dir, "empty/readme.md", []byte("x"), CompressNone)
	dict := filepath.Join(dir, "dict")
	os.MkdirAll(filepath.Join(dict, "train"), 0o755)
	os.WriteFile(filepath.Join(dict, "dataset_dict.json"), []byte(`{"splits":["train"]}`), 0o644)
	badParquet := writeFile(t, dir, "bad.parquet", []byte("PAR1 not really"), CompressNone)

	missing1 := filepath.Join(dir, "missing.jsonl")
	missing2 := filepath.Join(dir, "nothing-*.jsonl")
	inputs := []string{missing1, good, unknown, missing2, notGzip, notZstd, array, emptyDir, dict, badParquet}
	_, err := NewPlan(inputs, Options{})
	var pe *PlanError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *PlanError", err)
	}
	want := []struct {
		path     string
		sentinel error
		detail   string
	}{
		{missing1, ErrNotFound, "not found"},
		{unknown, ErrUnknownFormat, "unknown extension"},
		{missing2, ErrNotFound, "glob matches nothing"},
		{notGzip, ErrUnknownFormat, "not gzip data"},
		{notZstd, ErrUnknownFormat, "not zstd data"},
		{array, ErrUnknownFormat, "JSON array"},
		{emptyDir, ErrNoInputs, "no input files"},
		{dict, ErrUnknownFormat, "DatasetDict"},
		{badParquet, ErrUnknownFormat, "parquet"},
	}
	if len(pe.Problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(pe.Problems), len(want), err)
	}
	for i, w := range want {
		p := pe.Problems[i]
		if p.Path != w.path || !errors.Is(p, w.sentinel) || !strings.Contains(p.Detail, w.detail) {
			t.Errorf("problem %d = %v (%v), want %s: %v containing %q", i, p, p.Err, w.path, w.sentinel, w.detail)
		}
		if !strings.Contains(err.Error(), p.Error()) {
			t.Errorf("error text lacks %q", p.Error())
		}
	}
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrUnknownFormat) {
		t.Error("PlanError does not unwrap to its sentinels")
	}
	if !strings.HasPrefix(err.Error(), "corpus: 9 bad inputs:\n\t") {
		t.Errorf("error text %q", err.Error())
	}
}

func TestPlanOptions(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", []byte("{}\n"), CompressNone)
	bad := []Options{
		{Format: "csv"},
		{DocPer: "page"},
		{TextField: "a..b"},
		{TextField: ".a"},
		{KeepColumns: []string{""}},
		{MaxDocBytes: -1},
		{ChunkBytes: 1 << 30},
	}
	for _, o := range bad {
		if _, err := NewPlan([]string{p}, o); !errors.Is(err, ErrOption) {
			t.Errorf("NewPlan(%+v) = %v, want ErrOption", o, err)
		}
	}
	if _, err := NewPlan(nil, Options{}); !errors.Is(err, ErrNoInputs) {
		t.Errorf("NewPlan(nil) = %v, want ErrNoInputs", err)
	}
	plan := mustPlan(t, []string{p}, Options{})
	o := plan.Options()
	if o.Format != FormatAuto || o.TextField != "text" || o.DocPer != DocPerLine || o.MaxDocBytes != 64<<20 || o.ChunkBytes != 1<<20 {
		t.Errorf("defaults = %+v", o)
	}
}
