package corpus

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/gload/gload/tokenize/utf8fix"
)

// SkipReason says why a record gave no document.
type SkipReason uint8

// Skip reasons.
const (
	// MalformedJSON: the line is not one valid JSON object.
	MalformedJSON SkipReason = iota + 1
	// MissingField: the text field is absent (or a path step is not an
	// object).
	MissingField
	// NotString: the text field is not a string (null included).
	NotString
	// Empty: the text is "" (whitespace-only text is a document).
	Empty
	// TooLarge: the record exceeds Options.MaxDocBytes.
	TooLarge
)

func (r SkipReason) String() string {
	switch r {
	case MalformedJSON:
		return "malformed JSON"
	case MissingField:
		return "missing field"
	case NotString:
		return "not a string"
	case Empty:
		return "empty document"
	case TooLarge:
		return "too large"
	}
	return fmt.Sprintf("skip(%d)", uint8(r))
}

// Skip says why a record was skipped, and where. It implements error.
type Skip struct {
	Reason SkipReason
	File   string // the input file's path
	Line   int64  // 1-based line or row; 0 for a whole-file document
	Detail string
}

// Error formats the skip as "path:line: reason: detail".
func (s *Skip) Error() string {
	var b strings.Builder
	b.WriteString(s.File)
	if s.Line > 0 {
		fmt.Fprintf(&b, ":%d", s.Line)
	}
	b.WriteString(": ")
	b.WriteString(s.Reason.String())
	if s.Detail != "" {
		b.WriteString(": ")
		b.WriteString(s.Detail)
	}
	return b.String()
}

// Doc is the document extracted from one record. It owns its memory.
type Doc struct {
	Text string
	// Cols are the kept columns in Options.KeepColumns order; always
	// len(KeepColumns) long (all null for plain-text inputs).
	Cols []string
	// Null flags the Cols that were missing or null; nil when none was.
	Null []bool
	// InvalidUTF8 reports that ill-formed UTF-8 (or an unpaired \u
	// surrogate escape) was replaced by U+FFFD in Text or a kept column.
	InvalidUTF8 bool
}

// Extractor pulls documents out of records. It is immutable once built and
// safe for concurrent use.
type Extractor struct {
	root     *node
	nTargets int
	text     pathIDs
	keep     []pathIDs
	field    string
	max      int64
}

// pathIDs are the span targets of one wanted path: the nested lookup and,
// for dotted paths, a top-level key spelled with the dots.
type pathIDs struct{ nested, literal int }

// NewExtractor returns an extractor for opts (defaults filled in as in
// [NewPlan]; invalid values fall back to the defaults, since NewPlan has
// already reported them).
func NewExtractor(opts Options) *Extractor {
	if o, err := opts.withDefaults(); err == nil {
		opts = o
	} else {
		if opts.TextField == "" || checkPath("", opts.TextField) != nil {
			opts.TextField = DefaultTextField
		}
		if opts.MaxDocBytes <= 0 {
			opts.MaxDocBytes = DefaultMaxDocBytes
		}
	}
	e := &Extractor{root: &node{}, field: opts.TextField, max: opts.MaxDocBytes}
	e.text = e.addPath(opts.TextField)
	for _, c := range opts.KeepColumns {
		e.keep = append(e.keep, e.addPath(c))
	}
	return e
}

func (e *Extractor) addPath(p string) pathIDs {
	ids := pathIDs{nested: e.addTarget(strings.Split(p, ".")), literal: -1}
	if strings.Contains(p, ".") {
		ids.literal = e.addTarget([]string{p})
	}
	return ids
}

func (e *Extractor) addTarget(parts []string) int {
	id := e.nTargets
	e.nTargets++
	n := e.root
	for _, part := range parts {
		n = n.child(part)
		n.desc = append(n.desc, id)
	}
	n.targets = append(n.targets, id)
	return id
}

// pick returns the span of a wanted path: the nested value if present, else
// the literal dotted key.
func pick(spans []span, ids pathIDs) span {
	sp := spans[ids.nested]
	if sp.kind == kAbsent && ids.literal >= 0 {
		sp = spans[ids.literal]
	}
	return sp
}

// Extract returns the document of rec, or why there is none. A skipped
// record gives a zero Doc and a non-nil *Skip.
func (e *Extractor) Extract(rec Record) (Doc, *Skip) {
	doc, _, skip := e.extract(rec, nil)
	return doc, skip
}

// ExtractScratch is Extract for a caller that is done with the text before
// it extracts the next one: Doc.Text does not own its memory but aliases
// rec.Raw (a JSON string without escapes, valid plain text) or scratch,
// which is returned, grown as needed, for the next call. Text is valid while
// rec.Raw is and until scratch is used again; Cols and Null own their memory
// as with Extract. A tokenizing worker thus copies no text and allocates
// none per document.
func (e *Extractor) ExtractScratch(rec Record, scratch []byte) (Doc, []byte, *Skip) {
	if scratch == nil {
		scratch = []byte{} // nil means "own memory" to extract
	}
	return e.extract(rec, scratch)
}

// extract is Extract with the text in scratch (see ExtractScratch), or in memory of its own when scratch is nil.
func (e *Extractor) extract(rec Record, scratch []byte) (Doc, []byte, *Skip) {
	switch rec.Kind {
	case JSONLine:
		return e.extractJSON(rec, scratch)
	case PlainText:
		if len(rec.Raw) == 0 {
			return Doc{}, scratch, e.skip(rec, Empty, "")
		}
		var doc Doc
		switch {
		case scratch == nil:
			text, bad := utf8fix.AppendValid(make([]byte, 0, len(rec.Raw)), rec.Raw)
			// text is a fresh buffer nothing else references or writes: it can
			// become the string without a second copy.
			doc.Text, doc.InvalidUTF8 = unsafe.String(unsafe.SliceData(text), len(text)), bad
		case utf8.Valid(rec.Raw):
			doc.Text = unsafe.String(unsafe.SliceData(rec.Raw), len(rec.Raw)) // Raw is never written again
		default:
			scratch, doc.InvalidUTF8 = utf8fix.AppendValid(scratch[:0], rec.Raw)
			doc.Text = unsafe.String(unsafe.SliceData(scratch), len(scratch))
		}
		doc.Cols, doc.Null = rec.Cols, rec.Null
		if rec.Cols == nil && len(e.keep) > 0 {
			// Plain text has no columns: every kept column is null.
			doc.Cols, doc.Null = make([]string, len(e.keep)), make([]bool, len(e.keep))
			for k := range doc.Null {
				doc.Null[k] = true
			}
		}
		cloned := false
		for k, c := range rec.Cols {
			if fixed, changed := utf8fix.ToValidUTF8(c); changed {
				if !cloned {
					doc.Cols, cloned = slices.Clone(rec.Cols), true
				}
				doc.Cols[k], doc.InvalidUTF8 = fixed, true
			}
		}
		return doc, scratch, nil
	case Oversized:
		return Doc{}, scratch, e.skip(rec, TooLarge, fmt.Sprintf("%d bytes, more than the %d allowed (max doc bytes)", rec.Size, e.max))
	case NullText:
		return Doc{}, scratch, e.skip(rec, NotString, fmt.Sprintf("field %q is null", e.field))
	}
	return Doc{}, scratch, e.skip(rec, MalformedJSON, fmt.Sprintf("unknown record kind %v", rec.Kind))
}

func (e *Extractor) skip(rec Record, reason SkipReason, detail string) *Skip {
	return &Skip{Reason: reason, File: rec.Path, Line: rec.Line, Detail: detail}
}

func (e *Extractor) extractJSON(rec Record, scratch []byte) (Doc, []byte, *Skip) {
	spans := make([]span, e.nTargets)
	s := scanner{d: rec.Raw, spans: spans}
	if !s.document(e.root) {
		return Doc{}, scratch, e.skip(rec, MalformedJSON, fmt.Sprintf("column %d: %s", s.errAt+1, s.errMsg))
	}
	sp := pick(spans, e.text)
	switch sp.kind {
	case kString:
	case kAbsent:
		return Doc{}, scratch, e.skip(rec, MissingField, fmt.Sprintf("no field %q", e.field))
	default:
		return Doc{}, scratch, e.skip(rec, NotString, fmt.Sprintf("field %q is %s", e.field, kindNames[sp.kind]))
	}
	if sp.start == sp.end {
		return Doc{}, scratch, e.skip(rec, Empty, fmt.Sprintf("field %q is \"\"", e.field))
	}
	var doc Doc
	if scratch == nil {
		doc.Text, doc.InvalidUTF8 = decodeString(rec.Raw, sp)
	} else {
		doc.Text, scratch, doc.InvalidUTF8 = decodeStringScratch(rec.Raw, sp, scratch)
	}
	var bad bool
	doc.Cols, doc.Null, bad = e.keptColumns(rec.Raw, spans)
	doc.InvalidUTF8 = doc.InvalidUTF8 || bad
	return doc, scratch, nil
}

// keptColumns takes the kept columns out of a scanned JSON record, as Doc.Cols and Doc.Null hold them.
func (e *Extractor) keptColumns(raw []byte, spans []span) (cols []string, null []bool, invalidUTF8 bool) {
	if len(e.keep) == 0 {
		return nil, nil, false
	}
	cols = make([]string, len(e.keep))
	for k, ids := range e.keep {
		sp := pick(spans, ids)
		var bad bool
		switch sp.kind {
		case kAbsent, kNull:
			if null == nil {
				null = make([]bool, len(e.keep))
			}
			null[k] = true
		case kString:
			cols[k], bad = decodeString(raw, sp)
		default:
			cols[k], bad = compactValue(raw[sp.start:sp.end])
		}
		invalidUTF8 = invalidUTF8 || bad
	}
	return cols, null, invalidUTF8
}

// Columns takes only the kept columns (Options.KeepColumns) of a JSON record, whatever its text field: for readers
// of whole records (chat conversations), which carry record fields as plain text carries them. Cols and Null are
// as in Doc; a record that is not a JSON object is a *Skip.
func (e *Extractor) Columns(rec Record) (Doc, *Skip) {
	if rec.Kind != JSONLine {
		return Doc{}, e.skip(rec, MalformedJSON, fmt.Sprintf("not a JSON record (kind %v)", rec.Kind))
	}
	spans := make([]span, e.nTargets)
	s := scanner{d: rec.Raw, spans: spans}
	if !s.document(e.root) {
		return Doc{}, e.skip(rec, MalformedJSON, fmt.Sprintf("column %d: %s", s.errAt+1, s.errMsg))
	}
	var doc Doc
	doc.Cols, doc.Null, doc.InvalidUTF8 = e.keptColumns(rec.Raw, spans)
	return doc, nil
}

// decodeString returns the string value of sp with escapes undone and
// ill-formed UTF-8 replaced.
func decodeString(line []byte, sp span) (string, bool) {
	raw := line[sp.start:sp.end]
	if !sp.esc && !sp.bad {
		return string(raw), false
	}
	buf := make([]byte, 0, len(raw)+8)
	var replaced bool
	if sp.esc {
		buf, replaced = appendUnescaped(buf, raw)
	} else {
		buf = append(buf, raw...)
	}
	if sp.bad {
		buf, _ = utf8fix.AppendValid(make([]byte, 0, len(buf)+len(buf)/2+3), buf)
		replaced = true
	}
	// buf is fresh and never written again: no second copy.
	return unsafe.String(unsafe.SliceData(buf), len(buf)), replaced
}

// decodeStringScratch is decodeString into scratch (returned for reuse): the string aliases line when sp needs no
// decoding, else scratch.
func decodeStringScratch(line []byte, sp span, scratch []byte) (string, []byte, bool) {
	raw := line[sp.start:sp.end]
	switch {
	case !sp.esc && !sp.bad:
		return unsafe.String(unsafe.SliceData(raw), len(raw)), scratch, false // line is never written again
	case !sp.esc:
		scratch, _ = utf8fix.AppendValid(slices.Grow(scratch[:0], len(raw)), raw)
		return unsafe.String(unsafe.SliceData(scratch), len(scratch)), scratch, true
	}
	// Unescaping never lengthens the text: one allocation at most.
	scratch, replaced := appendUnescaped(slices.Grow(scratch[:0], len(raw)), raw)
	if sp.bad {
		// Rare: the unescaped text is repaired into memory of its own (AppendValid must not overlap).
		fixed, _ := utf8fix.AppendValid(make([]byte, 0, len(scratch)+len(scratch)/2+3), scratch)
		return unsafe.String(unsafe.SliceData(fixed), len(fixed)), scratch, true
	}
	return unsafe.String(unsafe.SliceData(scratch), len(scratch)), scratch, replaced
}

// compactValue returns a non-string JSON value as compact JSON text.
func compactValue(v []byte) (string, bool) {
	var out []byte
	if hasSpace(v) {
		out = appendCompact(make([]byte, 0, len(v)), v)
	} else {
		out = v
	}
	if !utf8.Valid(out) {
		fixed, _ := utf8fix.AppendValid(nil, out)
		return string(fixed), true
	}
	return string(out), false
}

func hasSpace(v []byte) bool {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r':
			return true
		}
	}
	return false
}
