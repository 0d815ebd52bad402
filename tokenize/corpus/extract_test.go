package corpus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

func TestExtractJSON(t *testing.T) {
	keep := Options{KeepColumns: []string{"id", "meta.lang", "score", "tags", "obj", "nothing"}}
	cases := []struct {
		name    string
		opts    Options
		line    string
		want    string
		reason  SkipReason
		detail  string // substring of the skip detail
		cols    []string
		null    []bool
		invalid bool
	}{
		{name: "plain", line: `{"text":"hello world"}`, want: "hello world"},
		{name: "spaces around", line: " \t{ \"text\" : \"a\" , \"x\" : 1 } \r", want: "a"},
		{name: "escapes", line: `{"text":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20AC"}`, want: "a\"b\\c/d\b\f\n\r\té€"},
		{name: "surrogate pair", line: `{"text":"\ud83d\ude00!"}`, want: "\U0001F600!"},
		{name: "lone high surrogate", line: `{"text":"a\ud83dz"}`, want: "a\uFFFDz", invalid: true},
		{name: "lone low surrogate", line: `{"text":"\ude00"}`, want: "\uFFFD", invalid: true},
		{name: "high then high", line: `{"text":"\ud83d\ud83d\ude00"}`, want: "\uFFFD\U0001F600", invalid: true},
		{name: "raw utf8", line: `{"text":"Grüße, 世界 🙂"}`, want: "Grüße, 世界 🙂"},
		{name: "invalid utf8 truncated", line: "{\"text\":\"a\xe2\x82b\"}", want: "a\uFFFDb", invalid: true},
		{name: "invalid utf8 two", line: "{\"text\":\"\xff\xfe\"}", want: "\uFFFD\uFFFD", invalid: true},
		{name: "invalid utf8 with escape", line: "{\"text\":\"\xe2\\u0041\xc0\xaf\"}", want: "\uFFFDA\uFFFD\uFFFD", invalid: true},
		{name: "invalid utf8 outside strings", line: "{\"text\":\"a\"}\xff", reason: MalformedJSON, detail: "column 13: invalid character byte 0xff after top-level value"},
		{name: "nested other fields", line: `{"a":{"b":[1,2,{"text":"no"}]},"text":"yes","c":[[],{}]}`, want: "yes"},
		{name: "key with escape", line: `{"t\u0065xt":"escaped key"}`, want: "escaped key"},
		{name: "duplicate key last wins", line: `{"text":"first","text":"second"}`, want: "second"},
		{name: "whitespace text kept", line: `{"text":"  "}`, want: "  "},
		{name: "empty", line: `{"text":""}`, reason: Empty},
		{name: "missing", line: `{"body":"x"}`, reason: MissingField, detail: `no field "text"`},
		{name: "number", line: `{"text":12}`, reason: NotString, detail: "a number"},
		{name: "null", line: `{"text":null}`, reason: NotString, detail: "null"},
		{name: "object", line: `{"text":{"a":1}}`, reason: NotString, detail: "an object"},
		{name: "array", line: `{"text":["a"]}`, reason: NotString, detail: "an array"},
		{name: "bool", line: `{"text":true}`, reason: NotString, detail: "a boolean"},
		{name: "top-level array", line: `["text"]`, reason: MalformedJSON, detail: "an array, not an object"},
		{name: "top-level string", line: `"text"`, reason: MalformedJSON, detail: "a string, not an object"},
		{name: "truncated", line: `{"text":"abc`, reason: MalformedJSON, detail: "column 13: unexpected end of JSON input"},
		{name: "trailing comma", line: `{"text":"a",}`, reason: MalformedJSON, detail: "column 13: invalid character '}' looking for beginning of object key string"},
		{name: "single quotes", line: `{'text':'a'}`, reason: MalformedJSON, detail: "column 2:"},
		{name: "bad escape", line: `{"text":"a\x"}`, reason: MalformedJSON, detail: `invalid character 'x' in string escape code`},
		{name: "bad unicode escape", line: `{"text":"\u12G4"}`, reason: MalformedJSON, detail: `\u hexadecimal`},
		{name: "control char", line: "{\"text\":\"a\tb\"}", reason: MalformedJSON, detail: "in string literal"},
		{name: "leading zero", line: `{"text":"a","n":01}`, reason: MalformedJSON},
		{name: "bad literal", line: `{"text":"a","n":nul}`, reason: MalformedJSON, detail: "in literal null"},
		{name: "two objects", line: `{"text":"a"}{"text":"b"}`, reason: MalformedJSON, detail: "after top-level value"},
		{name: "missing colon", line: `{"text" "a"}`, reason: MalformedJSON, detail: "after object key"},
		{name: "dotted", opts: Options{TextField: "meta.body"}, line: `{"meta":{"x":1,"body":"nested"}}`, want: "nested"},
		{name: "dotted literal key", opts: Options{TextField: "meta.body"}, line: `{"meta.body":"literal"}`, want: "literal"},
		{name: "dotted nested preferred", opts: Options{TextField: "meta.body"}, line: `{"meta.body":"literal","meta":{"body":"nested"}}`, want: "nested"},
		{name: "dotted not object", opts: Options{TextField: "meta.body"}, line: `{"meta":"x"}`, reason: MissingField},
		{name: "dotted duplicate parent", opts: Options{TextField: "meta.body"}, line: `{"meta":{"body":"old"},"meta":{"x":1}}`, reason: MissingField},
		{name: "dotted deep", opts: Options{TextField: "a.b.c"}, line: `{"a":{"b":{"c":"deep"}}}`, want: "deep"},
		{
			name: "keep columns", opts: keep,
			line: `{"id":"doc-1","text":"t","meta":{"lang":"en"},"score":1.50,"tags":[ "a", "b c" ],"obj":{ "k" : null }}`,
			want: "t", cols: []string{"doc-1", "en", "1.50", `["a","b c"]`, `{"k":null}`, ""},
			null: []bool{false, false, false, false, false, true},
		},
		{
			name: "keep columns null and missing", opts: keep,
			line: `{"text":"t","id":null,"score":-2e3}`,
			want: "t", cols: []string{"", "", "-2e3", "", "", ""},
			null: []bool{true, true, false, true, true, true},
		},
		{
			name: "keep column escaped and invalid", opts: Options{KeepColumns: []string{"id"}},
			line: "{\"text\":\"t\",\"id\":\"a\\n\xff\"}",
			want: "t", cols: []string{"a\n\uFFFD"}, invalid: true,
		},
		{
			name: "keep column same as text", opts: Options{KeepColumns: []string{"text"}},
			line: `{"text":"same"}`, want: "same", cols: []string{"same"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := NewExtractor(tc.opts)
			rec := Record{Path: "data/a.jsonl", Line: 17, Raw: []byte(tc.line), Kind: JSONLine}
			doc, skip := e.Extract(rec)
			checkScratch(t, e, rec, doc, skip)
			if tc.reason != 0 {
				if skip == nil {
					t.Fatalf("got doc %+v, want skip %v", doc, tc.reason)
				}
				if skip.Reason != tc.reason || !strings.Contains(skip.Detail, tc.detail) {
					t.Fatalf("skip = %v (reason %v), want reason %v detail containing %q", skip, skip.Reason, tc.reason, tc.detail)
				}
				if skip.File != "data/a.jsonl" || skip.Line != 17 {
					t.Fatalf("skip place = %s:%d", skip.File, skip.Line)
				}
				return
			}
			if skip != nil {
				t.Fatalf("unexpected skip: %v", skip)
			}
			if doc.Text != tc.want {
				t.Errorf("text = %+q, want %+q", doc.Text, tc.want)
			}
			if !slices.Equal(doc.Cols, tc.cols) {
				t.Errorf("cols = %q, want %q", doc.Cols, tc.cols)
			}
			if !slices.Equal(doc.Null, tc.null) {
				t.Errorf("null = %v, want %v", doc.Null, tc.null)
			}
			if doc.InvalidUTF8 != tc.invalid {
				t.Errorf("InvalidUTF8 = %v, want %v", doc.InvalidUTF8, tc.invalid)
			}
		})
	}
}

// checkScratch checks that ExtractScratch, with a scratch buffer holding an earlier document, gives what
// Extract gave, and leaves rec.Raw as it was.
func checkScratch(t *testing.T, e *Extractor, rec Record, doc Doc, skip *Skip) {
	t.Helper()
	raw := slices.Clone(rec.Raw)
	for _, scratch := range [][]byte{nil, []byte(strings.Repeat("stale ", 40)), make([]byte, 0, 1)} {
		got, _, gskip := e.ExtractScratch(rec, scratch)
		if (skip == nil) != (gskip == nil) || skip != nil && skip.Error() != gskip.Error() {
			t.Errorf("ExtractScratch skip = %v, Extract %v", gskip, skip)
		}
		if got.Text != doc.Text || !slices.Equal(got.Cols, doc.Cols) || !slices.Equal(got.Null, doc.Null) ||
			got.InvalidUTF8 != doc.InvalidUTF8 {
			t.Errorf("ExtractScratch = %+v, Extract %+v", got, doc)
		}
	}
	if !bytes.Equal(rec.Raw, raw) {
		t.Errorf("ExtractScratch wrote to Raw: %q, was %q", rec.Raw, raw)
	}
}

// TestExtractScratchReuse extracts documents one after the other through one scratch buffer: each text is right
// while it is the latest, and plain text and unescaped JSON strings alias the record instead of the scratch.
func TestExtractScratchReuse(t *testing.T) {
	e := NewExtractor(Options{})
	cases := []struct {
		name  string
		rec   Record
		want  string
		alias bool // Text aliases rec.Raw
	}{
		{"json plain", Record{Raw: []byte(`{"text":"no escapes"}`), Kind: JSONLine}, "no escapes", true},
		{"json escapes", Record{Raw: []byte(`{"text":"line\none\t\u00e9"}`), Kind: JSONLine}, "line\none\t\u00e9", false},
		{"json long escapes", Record{Raw: []byte(`{"text":"` + strings.Repeat(`a\n`, 300) + `"}`), Kind: JSONLine}, strings.Repeat("a\n", 300), false},
		{"json short after long", Record{Raw: []byte(`{"text":"x\ty"}`), Kind: JSONLine}, "x\ty", false},
		{"json invalid utf8", Record{Raw: []byte("{\"text\":\"a\xffb\"}"), Kind: JSONLine}, "a\uFFFDb", false},
		{"json invalid utf8 and escape", Record{Raw: []byte("{\"text\":\"\xe2\\u0041\"}"), Kind: JSONLine}, "\uFFFDA", false},
		{"plain valid", Record{Raw: []byte("plain text é"), Kind: PlainText}, "plain text é", true},
		{"plain invalid", Record{Raw: []byte("bad \xc0 text"), Kind: PlainText}, "bad \uFFFD text", false},
	}
	var scratch []byte
	for _, tc := range cases {
		var doc Doc
		var skip *Skip
		doc, scratch, skip = e.ExtractScratch(tc.rec, scratch)
		if skip != nil {
			t.Fatalf("%s: skip %v", tc.name, skip)
		}
		if doc.Text != tc.want {
			t.Errorf("%s: text %+q, want %+q", tc.name, doc.Text, tc.want)
		}
		raw := tc.rec.Raw
		at, lo := uintptr(unsafe.Pointer(unsafe.StringData(doc.Text))), uintptr(unsafe.Pointer(&raw[0]))
		inRaw := at >= lo && at < lo+uintptr(len(raw))
		if inRaw != tc.alias {
			t.Errorf("%s: text aliases the record: %v, want %v", tc.name, inRaw, tc.alias)
		}
	}
}

func TestSkipError(t *testing.T) {
	e := NewExtractor(Options{})
	_, skip := e.Extract(Record{Path: "data/a.jsonl", Line: 17, Raw: []byte(`{"text":x}`), Kind: JSONLine})
	want := "data/a.jsonl:17: malformed JSON: column 9: invalid character 'x' looking for beginning of value"
	if skip == nil || skip.Error() != want {
		t.Fatalf("skip = %v, want %q", skip, want)
	}
	var err error = skip
	if err.Error() != want {
		t.Fatal("Skip does not implement error consistently")
	}
	_, skip = e.Extract(Record{Path: "a.txt", Kind: PlainText})
	if skip == nil || skip.Error() != "a.txt: empty document" {
		t.Fatalf("whole-file skip = %v", skip)
	}
}

func TestExtractOtherKinds(t *testing.T) {
	e := NewExtractor(Options{MaxDocBytes: 10})
	cases := []struct {
		name   string
		rec    Record
		want   string
		reason SkipReason
		bad    bool
	}{
		{name: "plain", rec: Record{Kind: PlainText, Raw: []byte("héllo")}, want: "héllo"},
		{name: "plain invalid", rec: Record{Kind: PlainText, Raw: []byte("a\xe2\x82")}, want: "a\uFFFD", bad: true},
		{name: "plain empty", rec: Record{Kind: PlainText, Raw: []byte{}}, reason: Empty},
		{name: "oversized", rec: Record{Kind: Oversized, Size: 11}, reason: TooLarge},
		{name: "null", rec: Record{Kind: NullText}, reason: NotString},
		{name: "zero kind", rec: Record{}, reason: MalformedJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, skip := e.Extract(tc.rec)
			if tc.reason != 0 {
				if skip == nil || skip.Reason != tc.reason {
					t.Fatalf("skip = %v, want %v", skip, tc.reason)
				}
				return
			}
			if skip != nil || doc.Text != tc.want || doc.InvalidUTF8 != tc.bad {
				t.Fatalf("got %+v, %v; want %+q bad=%v", doc, skip, tc.want, tc.bad)
			}
		})
	}
}

// TestExtractMatchesEncodingJSON cross-checks validity and the extracted
// value against encoding/json on a corpus of tricky lines.
func TestExtractMatchesEncodingJSON(t *testing.T) {
	lines := []string{
		`{}`, `{"text":"x"}`, `{"text":"x",}`, `{"text":1e}`, `{"text":-}`, `{"text":-0.0e+1}`, `{"a":[1,[2,[3]]],"text":"q"}`,
		`{"text":"\u0000"}`, `{"text":"a\u00"}`, `{"text":"ok"} `, ` {"text":"ok"}`, `{"text":"ok"`, `{"text"}`, `{"text":tru}`,
		`{"text":"x","y":[,]}`, `{"text":"x","y":[1,]}`, `{"text":"x","y":{"a":}}`, `{"text":"\ud800\udc00"}`,
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `,"text":"deep ok"}`,
		`{"text":"x"}` + "\n", "{\"text\":\"x\"}\x00", `{"text":0.5,"text":"later"}`, `{"text":"a","text":5}`,
	}
	e := NewExtractor(Options{})
	for i, line := range lines {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkAgainstStdlib(t, e, []byte(line)) })
	}
}

// checkAgainstStdlib asserts that Extract agrees with encoding/json on line
// (valid UTF-8 lines; encoding/json replaces bad bytes differently).
func checkAgainstStdlib(t *testing.T, e *Extractor, line []byte) {
	doc, skip := e.Extract(Record{Path: "f", Line: 1, Raw: line, Kind: JSONLine})
	if skip == nil && doc.Text == "" {
		t.Fatalf("empty doc without a skip for %q", line)
	}
	if skip == nil && !utf8.ValidString(doc.Text) {
		t.Fatalf("text not valid UTF-8 for %q", line)
	}
	valid := json.Valid(line)
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	isObject := valid && len(trimmed) > 0 && trimmed[0] == '{'
	if isObject != (skip == nil || skip.Reason != MalformedJSON) {
		t.Fatalf("line %q: json.Valid object=%v, skip=%v", line, isObject, skip)
	}
	if !isObject || !utf8.Valid(line) {
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("unmarshal %q: %v", line, err)
	}
	raw, ok := m["text"]
	var s string
	isStr := ok && json.Unmarshal(raw, &s) == nil && len(raw) > 0 && raw[0] == '"'
	switch {
	case !ok:
		if skip == nil || skip.Reason != MissingField {
			t.Fatalf("line %q: want MissingField, got %+v %v", line, doc, skip)
		}
	case !isStr:
		if skip == nil || skip.Reason != NotString {
			t.Fatalf("line %q: want NotString, got %+v %v", line, doc, skip)
		}
	case s == "":
		if skip == nil || skip.Reason != Empty {
			t.Fatalf("line %q: want Empty, got %+v %v", line, doc, skip)
		}
	default:
		if skip != nil || doc.Text != s {
			t.Fatalf("line %q: text %+q skip %v, encoding/json says %+q", line, doc.Text, skip, s)
		}
	}
}

func TestExtractConcurrent(t *testing.T) {
	e := NewExtractor(Options{KeepColumns: []string{"id", "m.k"}})
	lines := [][]byte{
		[]byte(`{"text":"a","id":1,"m":{"k":"v"}}`),
		[]byte("{\"text\":\"b\xff\",\"id\":\"x\"}"),
		[]byte(`{"t\u0065xt":"c\n"}`),
		[]byte(`{bad`),
	}
	want := make([]Doc, len(lines))
	for i, l := range lines {
		want[i], _ = e.Extract(Record{Raw: l, Kind: JSONLine})
	}
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; n < 500; n++ {
				i := (n + g) % len(lines)
				d, _ := e.Extract(Record{Raw: lines[i], Kind: JSONLine})
				if d.Text != want[i].Text || !slices.Equal(d.Cols, want[i].Cols) {
					t.Errorf("goroutine %d: line %d differs", g, i)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

func TestPlainTextKeepColumns(t *testing.T) {
	e := NewExtractor(Options{KeepColumns: []string{"a", "b"}})
	d, skip := e.Extract(Record{Kind: PlainText, Raw: []byte("x")})
	if skip != nil || !slices.Equal(d.Cols, []string{"", ""}) || !slices.Equal(d.Null, []bool{true, true}) {
		t.Fatalf("plain text with keep columns: %+v %v", d, skip)
	}
	d, _ = e.Extract(Record{Kind: PlainText, Raw: []byte("x"), Cols: []string{"ok", "bad\xff"}})
	if !slices.Equal(d.Cols, []string{"ok", "bad\uFFFD"}) || !d.InvalidUTF8 {
		t.Fatalf("arrow kept column repair: %+v", d)
	}
}

func TestCompact(t *testing.T) {
	cases := []struct{ in, want string }{
		{`[ 1 , 2 ]`, `[1,2]`},
		{`{ "a b" : "c \" d" }`, `{"a b":"c \" d"}`},
		{"{\n\t\"x\":\r\n[]}", `{"x":[]}`},
		{`"\\" `, `"\\"`},
	}
	for _, tc := range cases {
		if got := string(appendCompact(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("compact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSpecial(t *testing.T) {
	// The lowest flagged byte must be exactly the first special byte.
	for pos := 0; pos < 8; pos++ {
		for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff} {
			for _, fill := range []byte{'a', ' ', 0x7f, '!', '#', '[', ']'} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = c
				x := uint64(0)
				for i := 7; i >= 0; i-- {
					x = x<<8 | uint64(w[i])
				}
				m := special(x)
				if m == 0 {
					t.Fatalf("special byte %#x at %d not found (fill %q)", c, pos, fill)
				}
				if got := bitsTZ(m) / 8; got != pos {
					t.Fatalf("special byte %#x at %d found at %d (fill %q)", c, pos, got, fill)
				}
			}
		}
	}
	for _, fill := range []byte{' ', '!', '#', 'a', '[', ']', 0x7f} {
		x := uint64(fill) * lsb
		if special(x) != 0 {
			t.Fatalf("ordinary byte %q flagged", fill)
		}
	}
}

func bitsTZ(m uint64) int {
	n := 0
	for m&1 == 0 {
		m >>= 1
		n++
	}
	return n
}

// typicalLine is a web-crawl-like JSON line of about 2 KiB.
func typicalLine(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id":    "c4-en-0001234",
		"text":  text,
		"url":   "https://example.com/some/page?query=1",
		"meta":  map[string]any{"lang": "en", "score": 0.93, "tokens": []int{1, 2, 3}},
		"title": "An example page",
	})
	return b
}

func BenchmarkExtract(b *testing.B) {
	ascii := strings.Repeat("The quick brown fox jumps over the lazy dog; it was 42 degrees. ", 30)
	cases := []struct {
		name string
		line []byte
		opts Options
	}{
		{"ascii", typicalLine(ascii), Options{}},
		{"ascii_keep", typicalLine(ascii), Options{KeepColumns: []string{"id", "meta.lang", "meta"}}},
		{"escaped", typicalLine(strings.Repeat("line one\n\"quoted\"\tand a tab\\ ", 70)), Options{}},
		{"cjk", typicalLine(strings.Repeat("日本語のテキストと中文文本。", 50)), Options{}},
		{"mixed_latin", typicalLine(strings.Repeat("Grüße aus Köln, ça va très bien. ", 60)), Options{}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			e := NewExtractor(tc.opts)
			rec := Record{Raw: tc.line, Kind: JSONLine}
			if _, skip := e.Extract(rec); skip != nil {
				b.Fatal(skip)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.line)))
			for b.Loop() {
				e.Extract(rec)
			}
		})
	}
}
