package corpus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

var allComps = []Compression{CompressNone, CompressGzip, CompressZstd}

func TestLineFormats(t *testing.T) {
	cases := []struct {
		name  string
		ext   string
		opts  Options
		data  string
		docs  []string
		lines []int64
	}{
		{
			name: "jsonl basic", ext: ".jsonl",
			data: "{\"text\":\"a\"}\n{\"text\":\"b\"}\n",
			docs: []string{"a", "b"}, lines: []int64{1, 2},
		},
		{
			name: "jsonl blank lines and CRLF", ext: ".jsonl",
			data: "\r\n{\"text\":\"a\"}\r\n\n   \n\t\r\n{\"text\":\"b\"}\r\n\r\n",
			docs: []string{"a", "b"}, lines: []int64{2, 6},
		},
		{
			name: "jsonl last line without newline", ext: ".ndjson",
			data: "{\"text\":\"a\"}\n{\"text\":\"b\"}",
			docs: []string{"a", "b"}, lines: []int64{1, 2},
		},
		{
			name: "jsonl bom", ext: ".json",
			data: "\xef\xbb\xbf{\"text\":\"a\"}\n",
			docs: []string{"a"}, lines: []int64{1},
		},
		{
			name: "jsonl skips", ext: ".jsonl",
			data:  "{\"text\":\"a\"}\n{oops}\n{\"body\":\"x\"}\n{\"text\":3}\n{\"text\":\"\"}\n",
			docs:  []string{"a", "SKIP:malformed JSON", "SKIP:missing field", "SKIP:not a string", "SKIP:empty document"},
			lines: []int64{1, 2, 3, 4, 5},
		},
		{
			name: "jsonl dotted and invalid utf8", ext: ".jsonl", opts: Options{TextField: "m.t"},
			data: "{\"m\":{\"t\":\"x\xe2\x82\"}}\n",
			docs: []string{"x\uFFFD"}, lines: []int64{1},
		},
		{
			name: "text per line", ext: ".txt",
			data: "first\r\n\r\n  \nsecond\nthird\r",
			docs: []string{"first", "  ", "second", "third"}, lines: []int64{1, 3, 4, 5},
		},
		{
			name: "text per line invalid utf8", ext: ".txt",
			data: "ok\n\xff\xfe\n",
			docs: []string{"ok", "\uFFFD\uFFFD"}, lines: []int64{1, 2},
		},
		{
			name: "text per file", ext: ".txt", opts: Options{DocPer: DocPerFile},
			data: "\xef\xbb\xbfline one\r\nline two\n\n",
			docs: []string{"line one\r\nline two\n\n"}, lines: []int64{0},
		},
		{
			name: "text per file empty", ext: ".txt", opts: Options{DocPer: DocPerFile},
			data: "",
			docs: []string{"SKIP:empty document"}, lines: []int64{0},
		},
		{
			name: "empty jsonl", ext: ".jsonl", data: "",
		},
	}
	for _, tc := range cases {
		for _, comp := range allComps {
			t.Run(tc.name+"/"+string(comp), func(t *testing.T) {
				dir := t.TempDir()
				p := writeFile(t, dir, "in"+tc.ext, []byte(tc.data), comp)
				plan := mustPlan(t, []string{p}, tc.opts)
				recs, _, err := readAll(t, plan, Position{})
				if err != nil {
					t.Fatal(err)
				}
				if got := docs(recs, plan.Options()); !slices.Equal(got, tc.docs) {
					t.Fatalf("docs = %q, want %q", got, tc.docs)
				}
				var lines []int64
				for _, r := range recs {
					lines = append(lines, r.Line)
					if r.File != 0 || r.Path != p {
						t.Fatalf("record place = %d %s", r.File, r.Path)
					}
				}
				if !slices.Equal(lines, tc.lines) {
					t.Fatalf("lines = %v, want %v", lines, tc.lines)
				}
			})
		}
	}
}

func TestSkipCarriesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "a.jsonl", []byte("{\"text\":\"a\"}\n\n{\"text\": x}\n"), CompressNone)
	plan := mustPlan(t, []string{p}, Options{})
	recs, _, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	_, skip := NewExtractor(plan.Options()).Extract(recs[1])
	want := p + ":3: malformed JSON: column 10: invalid character 'x' looking for beginning of value"
	if skip == nil || skip.Error() != want {
		t.Fatalf("skip = %v\nwant   %s", skip, want)
	}
}

// TestRawIsFresh checks that records stay intact after later reads and
// Close, and that their Raw has no spare capacity into other records.
func TestRawIsFresh(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "{\"text\":\"document number %d %s\"}\n", i, strings.Repeat("x", i%300))
	}
	p := writeFile(t, dir, "a.jsonl", []byte(b.String()), CompressGzip)
	plan := mustPlan(t, []string{p}, Options{ChunkBytes: 4096})
	recs, _, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5000 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if cap(r.Raw) != len(r.Raw) {
			t.Fatalf("record %d: cap %d > len %d", i, cap(r.Raw), len(r.Raw))
		}
		want := fmt.Sprintf("{\"text\":\"document number %d %s\"}", i, strings.Repeat("x", i%300))
		if string(r.Raw) != want {
			t.Fatalf("record %d = %q", i, r.Raw)
		}
	}
}

// TestLineLengths frames lines around the chunk size and MaxDocBytes.
func TestLineLengths(t *testing.T) {
	const chunk = 64
	const maxDoc = 200
	lengths := []int{0, 1, 62, 63, 64, 65, 127, 128, 129, 199, 200, 201, 500, 5000, 3, 200}
	var data bytes.Buffer
	for i, n := range lengths {
		data.WriteString(strings.Repeat(string(rune('a'+i)), n))
		data.WriteByte('\n')
	}
	for _, comp := range allComps {
		t.Run(string(comp), func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "l.txt", data.Bytes(), comp)
			plan := mustPlan(t, []string{p}, Options{ChunkBytes: chunk, MaxDocBytes: maxDoc})
			recs, _, err := readAll(t, plan, Position{})
			if err != nil {
				t.Fatal(err)
			}
			var k int
			for i, n := range lengths {
				if n == 0 {
					continue
				}
				r := recs[k]
				k++
				if r.Line != int64(i+1) {
					t.Fatalf("line %d: record line %d", i+1, r.Line)
				}
				if n > maxDoc {
					if r.Kind != Oversized || r.Size != int64(n) || r.Raw != nil {
						t.Fatalf("line %d (%d bytes): kind %v size %d", i+1, n, r.Kind, r.Size)
					}
					continue
				}
				if r.Kind != PlainText || string(r.Raw) != strings.Repeat(string(rune('a'+i)), n) {
					t.Fatalf("line %d (%d bytes): kind %v, %d bytes", i+1, n, r.Kind, len(r.Raw))
				}
			}
			if k != len(recs) {
				t.Fatalf("%d records, want %d", len(recs), k)
			}
		})
	}
}

// patternReader yields n bytes of a repeated pattern, then tail.
type patternReader struct {
	n    int64
	pat  []byte
	off  int
	tail *bytes.Reader
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return p.tail.Read(b)
	}
	k := 0
	for k < len(b) && p.n > 0 {
		c := copy(b[k:min(len(b), k+int(min(p.n, int64(len(p.pat)-p.off))))], p.pat[p.off:])
		k += c
		p.n -= int64(c)
		p.off = (p.off + c) % len(p.pat)
	}
	return k, nil
}

// hugeLine returns a reader of one JSON line whose text is n bytes, then
// a short line.
func hugeLine(n int64) io.Reader {
	return io.MultiReader(
		strings.NewReader(`{"text":"`),
		&patternReader{n: n, pat: []byte("0123456789abcdef "), tail: bytes.NewReader(nil)},
		strings.NewReader("\"}\n{\"text\":\"after\"}\n"),
	)
}

func TestHugeLineKept(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 100 MB line")
	}
	const n = 100 << 20
	fr := newLineFramer(hugeLine(n), "huge.jsonl", Options{ChunkBytes: DefaultChunkBytes, MaxDocBytes: 128 << 20})
	line, size, over, err := fr.next()
	if err != nil || over || size != n+11 || len(line) != n+11 {
		t.Fatalf("huge line: len %d size %d over %v err %v", len(line), size, over, err)
	}
	doc, skip := NewExtractor(Options{}).Extract(Record{Raw: line, Kind: JSONLine})
	if skip != nil || len(doc.Text) != n {
		t.Fatalf("extract huge line: %d bytes, %v", len(doc.Text), skip)
	}
	line, _, over, err = fr.next()
	if err != nil || over || string(line) != `{"text":"after"}` || fr.line != 2 {
		t.Fatalf("line after huge: %q %v %v (line %d)", line, over, err, fr.line)
	}
	if _, _, _, err := fr.next(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestOversizedLineConstantMemory(t *testing.T) {
	const n = 256 << 20 // 256 MiB line, never held
	const maxDoc = 1 << 20
	fr := newLineFramer(hugeLine(n), "huge.jsonl", Options{ChunkBytes: 64 << 10, MaxDocBytes: maxDoc})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, size, over, err := fr.next()
	runtime.ReadMemStats(&after)
	if err != nil || !over || size != n+11 {
		t.Fatalf("oversized line: size %d over %v err %v", size, over, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*maxDoc {
		t.Fatalf("skipping a %d-byte line allocated %d bytes", n, alloc)
	}
	line, _, over, err := fr.next()
	if err != nil || over || string(line) != `{"text":"after"}` || fr.line != 2 {
		t.Fatalf("line after oversized: %q %v %v (line %d)", line, over, err, fr.line)
	}
}

func TestOversizedRecordThroughReader(t *testing.T) {
	dir := t.TempDir()
	data := "{\"text\":\"ok\"}\n{\"text\":\"" + strings.Repeat("y", 5000) + "\"}\n{\"text\":\"end\"}"
	for _, comp := range allComps {
		p := writeFile(t, dir, "o"+string(comp)+".jsonl", []byte(data), comp)
		plan := mustPlan(t, []string{p}, Options{MaxDocBytes: 1000, ChunkBytes: 256})
		recs, _, err := readAll(t, plan, Position{})
		if err != nil {
			t.Fatal(err)
		}
		got := docs(recs, plan.Options())
		if !slices.Equal(got, []string{"ok", "SKIP:too large", "end"}) {
			t.Fatalf("%s: docs %q", comp, got)
		}
		_, skip := NewExtractor(plan.Options()).Extract(recs[1])
		if !strings.HasPrefix(skip.Error(), p+":2: too large: 5011 bytes") {
			t.Fatalf("skip = %v", skip)
		}
		// The same file as one document.
		tp := writeFile(t, dir, "o"+string(comp)+".txt", []byte(data), comp)
		plan = mustPlan(t, []string{tp}, Options{MaxDocBytes: 1000, DocPer: DocPerFile})
		recs, _, err = readAll(t, plan, Position{})
		if err != nil || len(recs) != 1 || recs[0].Kind != Oversized || recs[0].Size != int64(len(data)) {
			t.Fatalf("%s: whole-file oversized: %+v %v", comp, recs, err)
		}
	}
}

const nLines = 20000

// corruptibleLine is line i of corruptible: varied enough that zstd emits
// several blocks.
func corruptibleLine(i int) string {
	return fmt.Sprintf("{\"text\":\"line %d with some words to compress %x\"}", i, i*2654435761)
}

func corruptible(n int) []byte {
	var b strings.Builder
	for i := range n {
		b.WriteString(corruptibleLine(i))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// TestCorruptCompressed reads compressed files damaged in different ways.
func TestCorruptCompressed(t *testing.T) {
	data := corruptible(nLines)
	gz := compressBytes(t, data, CompressGzip)
	zs := compressBytes(t, data, CompressZstd)

	badCRC := slices.Clone(gz)
	badCRC[len(badCRC)-8] ^= 0xff // CRC-32 in the gzip trailer
	badZstd := slices.Clone(zs)
	badZstd[len(badZstd)*3/4] ^= 0xff
	badZstdCRC := slices.Clone(zs)
	badZstdCRC[len(badZstdCRC)-1] ^= 0xff // content checksum

	cases := []struct {
		name  string
		file  string
		data  []byte
		want  string // substring of the error
		atEnd bool   // every line is read before the error
		mixed bool   // corrupt data may decode to wrong lines before the error
	}{
		{"gzip checksum", "a.jsonl.gz", badCRC, ": line 20001: gzip: invalid checksum", true, false},
		{"gzip truncated", "a.jsonl.gz", gz[:len(gz)*3/4], "gzip: unexpected EOF", false, false},
		{"gzip truncated trailer", "a.jsonl.gz", gz[:len(gz)-4], ": line 20001: gzip: unexpected EOF", true, false},
		{"zstd corrupt", "a.jsonl.zst", badZstd, "zstd: ", false, true},
		{"zstd checksum", "a.jsonl.zst", badZstdCRC, "zstd: ", false, false},
		{"zstd truncated", "a.jsonl.zst", zs[:len(zs)*3/4], "zstd: ", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			plan := mustPlan(t, []string{p}, Options{})
			recs, _, err := readAll(t, plan, Position{})
			if err == nil {
				t.Fatalf("read %d records without error", len(recs))
			}
			var re *ReadError
			if !errors.As(err, &re) || re.Path != p || re.Unit != "line" {
				t.Fatalf("error %v is not a ReadError for %s", err, p)
			}
			if re.Line != int64(len(recs))+1 {
				t.Errorf("error at line %d after %d records", re.Line, len(recs))
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "corpus: "+p+": line ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q, want it to name the file and contain %q", msg, tc.want)
			}
			if tc.atEnd && len(recs) != nLines {
				t.Errorf("%d records before the error, want %d", len(recs), nLines)
			}
			for i, r := range recs {
				if tc.mixed {
					break
				}
				if want := corruptibleLine(i); string(r.Raw) != want {
					t.Fatalf("record %d = %q", i, r.Raw)
				}
			}
		})
	}
	t.Run("gzip checksum message", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "data", "a.jsonl.gz")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, badCRC, 0o644)
		plan := mustPlan(t, []string{p}, Options{})
		_, _, err := readAll(t, plan, Position{})
		if want := "corpus: " + p + ": line 20001: gzip: invalid checksum"; err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
		if !errors.Is(err, gzip.ErrChecksum) {
			t.Fatal("error does not wrap gzip.ErrChecksum")
		}
	})
}

func TestStickyErrorAndClose(t *testing.T) {
	gz := compressBytes(t, corruptible(nLines), CompressGzip)
	p := filepath.Join(t.TempDir(), "a.jsonl.gz")
	os.WriteFile(p, gz[:len(gz)/2], 0o644)
	plan := mustPlan(t, []string{p}, Options{})
	r, err := plan.Open(Position{})
	if err != nil {
		t.Fatal(err)
	}
	var err1 error
	for err1 == nil {
		_, err1 = r.Next()
	}
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v, %v: want the same error twice", err1, err2)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

// TestResume opens the plan at every position a full read reports and
// checks that exactly the records after it follow.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	paths := []string{
		writeFile(t, dir, "a.jsonl", []byte("{\"text\":\"a1\"}\n\n{\"text\":\"a2\"}\n\n\n"), CompressGzip),
		writeFile(t, dir, "b.jsonl", []byte(""), CompressNone),
		writeFile(t, dir, "c.jsonl", []byte("{\"text\":\"c1\"}\n{\"text\":\""+strings.Repeat("z", 300)+"\"}\n{\"text\":\"c3\"}"), CompressZstd),
		writeFile(t, dir, "d.txt", []byte("d1\nd2\r\n\nd3"), CompressNone),
	}
	plan := mustPlan(t, paths, Options{MaxDocBytes: 100, ChunkBytes: 16})
	all, pos, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	if got := docs(all, plan.Options()); !slices.Equal(got, []string{"a1", "a2", "c1", "SKIP:too large", "c3", "d1", "d2", "d3"}) {
		t.Fatalf("docs = %q", got)
	}
	starts := append([]Position{{}}, pos...)
	starts = append(starts, Position{File: 1}, Position{File: 0, Record: 5}, Position{File: 3, Record: 3}, Position{File: len(paths)})
	for _, from := range starts {
		t.Run(fmt.Sprintf("%d-%d", from.File, from.Record), func(t *testing.T) {
			got, _, err := readAll(t, plan, from)
			if err != nil {
				t.Fatal(err)
			}
			var want []Record
			// Records strictly after from in (file, line) order.
			for _, r := range all {
				if r.File > from.File || (r.File == from.File && r.Line > from.Record) {
					want = append(want, r)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d records after %+v, want %d", len(got), from, len(want))
			}
			for i := range got {
				if got[i].File != want[i].File || got[i].Line != want[i].Line || !bytes.Equal(got[i].Raw, want[i].Raw) || got[i].Kind != want[i].Kind {
					t.Fatalf("record %d after %+v: %+v, want %+v", i, from, got[i], want[i])
				}
			}
		})
	}
	bad := []Position{{File: -1}, {File: len(paths) + 1}, {File: len(paths), Record: 1}, {File: 0, Record: 6}, {File: 3, Record: 5}, {File: 2, Record: -1}}
	for _, from := range bad {
		if r, err := plan.Open(from); !errors.Is(err, ErrPosition) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Open(%+v) = %v, want ErrPosition", from, err)
		}
	}
}

func TestResumeWholeFile(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.txt", []byte("doc a"), CompressNone)
	b := writeFile(t, dir, "b.txt", []byte("doc b"), CompressZstd)
	plan := mustPlan(t, []string{a, b}, Options{DocPer: DocPerFile})
	_, pos, err := readAll(t, plan, Position{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []Position{{0, 1}, {1, 1}}) {
		t.Fatalf("positions %v", pos)
	}
	recs, _, err := readAll(t, plan, Position{0, 1})
	if err != nil || len(recs) != 1 || string(recs[0].Raw) != "doc b" {
		t.Fatalf("resume: %+v %v", recs, err)
	}
	if _, err := plan.Open(Position{0, 2}); !errors.Is(err, ErrPosition) {
		t.Fatalf("Open past a whole-file doc: %v", err)
	}
}

func TestBytesReadProgress(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "{\"text\":\"%d %s\"}\n", i, strings.Repeat("q", i%50))
	}
	p1 := writeFile(t, dir, "a.jsonl", []byte(b.String()), CompressGzip)
	p2 := writeFile(t, dir, "b.jsonl", []byte(b.String()), CompressNone)
	plan := mustPlan(t, []string{p1, p2}, Options{ChunkBytes: 4096})
	r, err := plan.Open(Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last int64
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := r.BytesRead()
		if n < last || n > plan.TotalBytes {
			t.Fatalf("BytesRead went from %d to %d (total %d)", last, n, plan.TotalBytes)
		}
		last = n
	}
	if r.BytesRead() != plan.TotalBytes {
		t.Fatalf("BytesRead at end %d, want %d", r.BytesRead(), plan.TotalBytes)
	}
}

func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		writeFile(t, dir, fmt.Sprintf("sub%d/f.jsonl", 4-i), []byte(fmt.Sprintf("{\"text\":\"%d\"}\n", 4-i)), allComps[i%3])
	}
	var first []string
	for range 3 {
		plan := mustPlan(t, []string{dir}, Options{})
		recs, _, err := readAll(t, plan, Position{})
		if err != nil {
			t.Fatal(err)
		}
		got := docs(recs, plan.Options())
		if first == nil {
			first = got
			if !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
				t.Fatalf("order %q", got)
			}
		} else if !slices.Equal(got, first) {
			t.Fatalf("run differs: %q vs %q", got, first)
		}
	}
}

// benchCorpus writes 32 MiB of typical 2 KiB JSON lines of pseudo-random
// words (so that compression ratios are realistic) for benchmarks.
func benchCorpus(b *testing.B, comp Compression) (string, int64) {
	b.Helper()
	words := strings.Fields("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will more can out up who them some into other time could its then only about")
	var buf bytes.Buffer
	var text strings.Builder
	x := uint32(12345)
	for buf.Len() < 32<<20 {
		text.Reset()
		for text.Len() < 2000 {
			x = x*1664525 + 1013904223
			text.WriteString(words[(x>>16)%uint32(len(words))])
			if x%7 == 0 {
				fmt.Fprintf(&text, " %d", x%10000)
			}
			text.WriteByte(' ')
		}
		buf.Write(typicalLine(text.String()))
		buf.WriteByte('\n')
	}
	p := writeFile(b, b.TempDir(), "bench.jsonl", buf.Bytes(), comp)
	return p, int64(buf.Len())
}

// BenchmarkReaderJSONL measures framing throughput (decompressed bytes per
// second) of the single reader goroutine.
func BenchmarkReaderJSONL(b *testing.B) {
	for _, comp := range allComps {
		b.Run(string(comp), func(b *testing.B) {
			p, n := benchCorpus(b, comp)
			plan := mustPlan(b, []string{p}, Options{})
			b.ReportAllocs()
			b.SetBytes(n)
			for b.Loop() {
				r, err := plan.Open(Position{})
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := r.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
				r.Close()
			}
		})
	}
}
