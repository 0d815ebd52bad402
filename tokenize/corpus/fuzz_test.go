package corpus

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// chunkedReader returns at most n bytes per Read, to exercise refills.
type chunkedReader struct {
	r io.Reader
	n int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// FuzzJSONL frames arbitrary bytes as JSON Lines and extracts every
// record: framing must match a plain split on '\n', and every record must
// give either a document of valid UTF-8 or a Skip, agreeing with
// encoding/json on what is valid.
func FuzzJSONL(f *testing.F) {
	seeds := []string{
		"{\"text\":\"a\"}\n{\"text\":\"b\"}",
		"\xef\xbb\xbf{\"text\":\"bom\"}\r\n\r\n  \n{\"text\":\"\\u00e9\\ud83d\\ude00\"}\n",
		"{\"text\":\"x\xe2\x82\",\"id\":[1, {\"a\" : null}],\"meta\":{\"lang\":\"en\"}}\n{bad\n",
		"{\"text\":1}\n{\"text\":null}\n{\"text\":\"\"}\n[1]\n\"s\"\n",
		"{\"a\":{\"b\":{\"c\":[[[]]]}},\"text\":\"deep\"}",
		"{\"text\":\"" + string(bytes.Repeat([]byte("long "), 100)) + "\"}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(7), uint16(300), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, maxDoc uint16, readSize uint8) {
		o := Options{ChunkBytes: int(chunk)%64 + 1, MaxDocBytes: int64(maxDoc)%512 + 1}
		rd := &chunkedReader{r: bytes.NewReader(data), n: int(readSize)%16 + 1}
		cnt := &countingReader{r: rd}
		src := &lineSource{f: io.NopCloser(nil), progress: cnt.n.Load, closeFn: func() error { return nil },
			fr: newLineFramer(rd, "fuzz.jsonl", o), kind: JSONLine}

		// The expected records, from a plain split.
		type want struct {
			line int64
			raw  []byte
			over bool
			size int64
		}
		var wants []want
		parts := bytes.Split(data, []byte("\n"))
		if len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1]
		}
		for i, p := range parts {
			no := int64(i + 1)
			if int64(len(p)) > o.MaxDocBytes {
				wants = append(wants, want{line: no, over: true, size: int64(len(p))})
				continue
			}
			if no == 1 {
				p = bytes.TrimPrefix(p, bom)
			}
			p = bytes.TrimSuffix(p, []byte("\r"))
			if isBlank(p) {
				continue
			}
			wants = append(wants, want{line: no, raw: p})
		}

		e := NewExtractor(Options{})
		ek := NewExtractor(Options{KeepColumns: []string{"id", "meta.lang", "meta"}})
		for k := 0; ; k++ {
			rec, err := src.next()
			if err == io.EOF {
				if k != len(wants) {
					t.Fatalf("%d records, want %d", k, len(wants))
				}
				return
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			if k >= len(wants) {
				t.Fatalf("extra record %+v", rec)
			}
			w := wants[k]
			if rec.Line != w.line || (rec.Kind == Oversized) != w.over {
				t.Fatalf("record %d: line %d kind %v, want line %d over %v", k, rec.Line, rec.Kind, w.line, w.over)
			}
			if w.over {
				if rec.Size != w.size {
					t.Fatalf("oversized record size %d, want %d", rec.Size, w.size)
				}
				continue
			}
			if !bytes.Equal(rec.Raw, w.raw) {
				t.Fatalf("record %d = %q, want %q", k, rec.Raw, w.raw)
			}
			rec.Path = "fuzz.jsonl"
			checkAgainstStdlib(t, e, rec.Raw)
			doc, skip := ek.Extract(rec)
			if skip == nil {
				if doc.Text == "" || !utf8.ValidString(doc.Text) {
					t.Fatalf("bad doc text %+q", doc.Text)
				}
				for _, c := range doc.Cols {
					if !utf8.ValidString(c) {
						t.Fatalf("kept column %+q not valid UTF-8", c)
					}
				}
			} else if skip.Line != rec.Line || skip.File != "fuzz.jsonl" {
				t.Fatalf("skip place %s:%d", skip.File, skip.Line)
			}
		}
	})
}

// fuzzBinaryInput writes data as an input file and reads it through a plan:
// corrupt files must give errors, never panics or hangs.
func fuzzBinaryInput(t *testing.T, name string, data []byte) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan([]string{p}, Options{KeepColumns: []string{"id", "meta", "tags"}})
	if err != nil {
		return
	}
	r, err := plan.Open(Position{})
	if err != nil {
		return
	}
	defer r.Close()
	e := NewExtractor(plan.Options())
	for n := 0; n < 1<<16; n++ {
		rec, err := r.Next()
		if err != nil {
			return
		}
		if _, skip := e.Extract(rec); skip != nil && skip.Line != rec.Line {
			t.Fatalf("skip line %d for record line %d", skip.Line, rec.Line)
		}
	}
}

func FuzzArrowStream(f *testing.F) {
	dir := f.TempDir()
	for i, fileFormat := range []bool{false, true} {
		p := filepath.Join(dir, fmt.Sprintf("s%d.arrow", i))
		writeArrowStream(f, p, 0, testRows, 3, fileFormat)
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBinaryInput(t, "f.arrow", data) })
}

func FuzzParquet(f *testing.F) {
	p := filepath.Join(f.TempDir(), "s.parquet")
	writeParquet(f, p, 3)
	data, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBinaryInput(t, "f.parquet", data) })
}
