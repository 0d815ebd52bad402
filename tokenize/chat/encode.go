package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gload/gload/tokenize/chat/jinja"

	"github.com/gload/gload/tokenize"
)

// IgnoreIndex is the label of a token the loss skips (PyTorch's CrossEntropyLoss ignore_index).
const IgnoreIndex = -100

// Skip kinds: why a record gives no sample. They are the prefixes of the reference error records.
const (
	KindRaised       = "template raised"
	KindLimit        = "template exceeded a sandbox limit"
	KindUnstable     = "template is not prefix-stable"
	KindBadRecord    = "bad record"
	KindAllTruncated = "all trained tokens cut by --max-length"
	KindTokenizer    = "tokenizer"
	KindInternal     = "internal error (please report)"
)

// SkipError says why a record was skipped; Kind is one of the Kind constants.
type SkipError struct {
	Kind string
	Msg  string
}

func (e *SkipError) Error() string {
	if e.Msg == "" {
		return e.Kind
	}
	return e.Kind + ": " + e.Msg
}

// Fields names the record fields that hold the conversation.
type Fields struct {
	Messages   string // default "messages"
	Tools      string // default "tools"
	Prompt     string // default "prompt"
	Completion string // default "completion"
}

func (f Fields) withDefaults() Fields {
	if f.Messages == "" {
		f.Messages = "messages"
	}
	if f.Tools == "" {
		f.Tools = "tools"
	}
	if f.Prompt == "" {
		f.Prompt = "prompt"
	}
	if f.Completion == "" {
		f.Completion = "completion"
	}
	return f
}

// Options change what Encoder makes of a conversation. The zero value follows the fixtures' rule exactly.
type Options struct {
	Fields Fields
	// LastTurnOnly is the alternative for templates that are not prefix-stable (Qwen3 moving earlier reasoning, the
	// early Llama-3 template's dangling header): when the full rule fails on prefix-stability, train only the last
	// assistant message, with the segment [len(render(messages[:last], add_generation_prompt)), len(rendered)).
	// Off by default: such records are skipped.
	LastTurnOnly bool
	// MaxLength > 0 truncates input_ids and labels to that many tokens (labels stay aligned).
	MaxLength int
	// DropAllTruncated skips a sample that had trained tokens of which truncation cut every one.
	DropAllTruncated bool
	// TemplateDate is the instant strftime_now() returns in every render (one per run, so that runs are
	// reproducible); the zero time means the wall clock at each render, as transformers does.
	TemplateDate time.Time
	// TemplateDateGiven says TemplateDate was asked for (--template-date): a resumed run then keeps it rather than
	// taking the interrupted run's.
	TemplateDateGiven bool
}

// Encoder renders and tokenizes records. Safe for concurrent use.
type Encoder struct {
	tok                   *tokenize.Tokenizer
	tmpl                  *Template
	opts                  Options
	postBefore, postAfter []int32
}

// NewEncoder pairs a tokenizer with a chat template.
func NewEncoder(tok *tokenize.Tokenizer, tmpl *Template, opts Options) *Encoder {
	opts.Fields = opts.Fields.withDefaults()
	e := &Encoder{tok: tok, tmpl: tmpl, opts: opts}
	e.postBefore, e.postAfter = tok.PostProcessorIDs()
	return e
}

// Sample is one tokenized record.
type Sample struct {
	InputIDs []int32
	Labels   []int32 // same length; IgnoreIndex where the loss is off
	// Truncated counts the tokens --max-length cut.
	Truncated int
}

// Trained counts the labels that are not IgnoreIndex.
func (s *Sample) Trained() int {
	n := 0
	for _, l := range s.Labels {
		if l != IgnoreIndex {
			n++
		}
	}
	return n
}

// Record encodes one JSON record: {messages[, tools]}, TRL's {prompt: [...], completion: [...]} or
// {prompt: str, completion: str}. A record that gives no sample returns a *SkipError.
func (e *Encoder) Record(raw []byte) (s *Sample, err error) {
	defer func() {
		// Last line of defence: the sandbox stops every template error it knows of; a panic here is a bug, and it
		// costs the record, not the run.
		if r := recover(); r != nil {
			s, err = nil, &SkipError{Kind: KindInternal, Msg: fmt.Sprint(r)}
		}
	}()
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, &SkipError{Kind: KindBadRecord, Msg: "not a JSON object: " + err.Error()}
	}
	f := e.opts.Fields
	tools := jinja.Undefined()
	if t, ok := rec[f.Tools]; ok && string(t) != "null" {
		v, err := ValueFromJSON(t)
		if err != nil {
			return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("field %q: %v", f.Tools, err)}
		}
		tools = v
	}
	if m, ok := rec[f.Messages]; ok {
		msgs, err := messageList(m, f.Messages)
		if err != nil {
			return nil, err
		}
		return e.finish(e.Messages(msgs, tools))
	}
	p, okP := rec[f.Prompt]
	c, okC := rec[f.Completion]
	if !okP || !okC {
		return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("no %q field and no %q/%q pair", f.Messages, f.Prompt, f.Completion)}
	}
	var ps, cs string
	if json.Unmarshal(p, &ps) == nil && json.Unmarshal(c, &cs) == nil {
		return e.finish(e.StringPair(ps, cs))
	}
	pm, err := messageList(p, f.Prompt)
	if err != nil {
		return nil, err
	}
	cm, err := messageList(c, f.Completion)
	if err != nil {
		return nil, err
	}
	return e.finish(e.PromptCompletion(pm, cm, tools))
}

func messageList(raw json.RawMessage, field string) ([]jinja.Value, error) {
	v, err := ValueFromJSON(raw)
	if err != nil {
		return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("field %q: %v", field, err)}
	}
	if !v.IsList() {
		return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("field %q is not a list of messages", field)}
	}
	items := v.AsList().Items
	if len(items) == 0 {
		return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("field %q is an empty list of messages", field)}
	}
	for i, m := range items {
		if !m.IsDict() {
			return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("%s[%d] is not an object", field, i)}
		}
		if r, ok := m.AsDict().Get("role"); !ok || !r.IsString() {
			return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("%s[%d] has no string \"role\"", field, i)}
		}
		// Jinja2 prints a null content as "None", raises on a missing one in `+`, concatenates no int: the Go
		// engine does none of that the same way, so only string contents are rendered.
		if c, ok := m.AsDict().Get("content"); !ok || !c.IsString() {
			return nil, &SkipError{Kind: KindBadRecord, Msg: fmt.Sprintf("%s[%d].content is missing or not a string (only string contents render as Jinja2 renders them)", field, i)}
		}
	}
	return items, nil
}

// finish applies truncation.
func (e *Encoder) finish(s *Sample, err error) (*Sample, error) {
	if err != nil {
		return nil, err
	}
	if m := e.opts.MaxLength; m > 0 && len(s.InputIDs) > m {
		before := s.Trained()
		s.Truncated = len(s.InputIDs) - m
		s.InputIDs, s.Labels = s.InputIDs[:m], s.Labels[:m]
		if e.opts.DropAllTruncated && before > 0 && s.Trained() == 0 {
			return nil, &SkipError{Kind: KindAllTruncated, Msg: fmt.Sprintf("%d trained tokens all past token %d", before, m)}
		}
	}
	return s, nil
}

func role(m jinja.Value) string {
	r, _ := m.AsDict().Get("role")
	return r.AsString()
}

func (e *Encoder) render(msgs []jinja.Value, tools jinja.Value, gen bool) (string, error) {
	out, err := e.tmpl.Render(msgs, tools, gen, e.opts.TemplateDate)
	if err != nil {
		return "", skipFor(err)
	}
	return out, nil
}

// skipFor turns a template error into the record's skip.
func skipFor(err error) error {
	if err == nil {
		return nil
	}
	var le *jinja.LimitError
	if errors.As(err, &le) {
		return &SkipError{Kind: KindLimit, Msg: err.Error()}
	}
	var pe *jinja.PanicError
	if errors.As(err, &pe) {
		return &SkipError{Kind: KindInternal, Msg: err.Error()}
	}
	return &SkipError{Kind: KindRaised, Msg: err.Error()}
}

type segment struct{ start, end int } // byte range of the rendering

// Messages applies the segment rule to a conversation. Where the template's shape allows it (jinja.Prefixes), one
// render of the conversation gives every prefix's rendering (linear in the number of turns); otherwise, and for
// every record the linear path cannot settle (a prefix it cannot derive, a prefix-stability failure, an error in
// a prefix's render), each prefix is rendered, as the rule states it.
func (e *Encoder) Messages(msgs []jinja.Value, tools jinja.Value) (*Sample, error) {
	full, pts, err := e.tmpl.renderTracked(msgs, tools, e.opts.TemplateDate)
	if err = skipFor(err); err != nil {
		return nil, err
	}
	if pts != nil {
		if segs, ok := linearSegments(msgs, full, pts); ok {
			return e.encodeSegments(full, segs)
		}
	}
	return e.messagesExact(msgs, tools, full)
}

// linearSegments computes the segments from the tracked render's prefix points; ok is false if any prefix could
// not be derived or any check of the rule fails (the exact path then decides, with its messages).
func linearSegments(msgs []jinja.Value, full string, pts *jinja.Prefixes) ([]segment, bool) {
	var segs []segment
	for i, m := range msgs {
		if role(m) != "assistant" {
			continue
		}
		// full_i = render(msgs[:i+1]) = full[:offF] + tailF must be a prefix of full.
		offF, ok := pts.Offset(i + 1)
		if !ok {
			return nil, false
		}
		tailF, ok, err := pts.Tail(i+1, false)
		if !ok || err != nil || !strings.HasPrefix(full[offF:], tailF) {
			return nil, false
		}
		endF := offF + len(tailF)
		start := 0
		if i > 0 {
			// prefix_i = render(msgs[:i], add_generation_prompt) = full[:offP] + tailP must be a prefix of full_i.
			offP, ok := pts.Offset(i)
			if !ok || offP > endF {
				return nil, false
			}
			tailP, ok, err := pts.Tail(i, true)
			if !ok || err != nil || !strings.HasPrefix(full[offP:endF], tailP) {
				return nil, false
			}
			start = offP + len(tailP)
		}
		segs = append(segs, segment{start, endF})
	}
	return segs, true
}

// messagesExact is the rule as stated: every prefix rendered (full is the rendering of msgs).
func (e *Encoder) messagesExact(msgs []jinja.Value, tools jinja.Value, full string) (*Sample, error) {
	var err error
	var segs []segment
	var unstable error
	for i, m := range msgs {
		if role(m) != "assistant" {
			continue
		}
		prefix := ""
		if i > 0 {
			if prefix, err = e.render(msgs[:i], tools, true); err != nil {
				return nil, err
			}
		}
		fullI, err := e.render(msgs[:i+1], tools, false)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(full, fullI) {
			k := diffAt(full, fullI)
			unstable = &SkipError{Kind: KindUnstable, Msg: fmt.Sprintf("rendering of messages[:%d] differs from the full rendering at char %d (%s vs %s)",
				i+1, charIndex(fullI, k), pyRepr(cut30(fullI, k)), pyRepr(cut30(full, k)))}
			break
		}
		if !strings.HasPrefix(fullI, prefix) {
			k := diffAt(prefix, fullI)
			unstable = &SkipError{Kind: KindUnstable, Msg: fmt.Sprintf("generation prompt for messages[:%d] is not a prefix of the rendering of messages[:%d] (char %d: %s vs %s)",
				i, i+1, charIndex(prefix, k), pyRepr(cut30(prefix, k)), pyRepr(cut30(fullI, k)))}
			break
		}
		segs = append(segs, segment{len(prefix), len(fullI)})
	}
	if unstable != nil {
		if !e.opts.LastTurnOnly {
			return nil, unstable
		}
		return e.lastTurn(msgs, tools, full, unstable)
	}
	return e.encodeSegments(full, segs)
}

// lastTurn is Options.LastTurnOnly: one segment for the last message, if it is the assistant's.
func (e *Encoder) lastTurn(msgs []jinja.Value, tools jinja.Value, full string, why error) (*Sample, error) {
	last := len(msgs) - 1
	if last < 0 || role(msgs[last]) != "assistant" {
		return nil, why
	}
	prefix := ""
	if last > 0 {
		var err error
		if prefix, err = e.render(msgs[:last], tools, true); err != nil {
			return nil, err
		}
	}
	if !strings.HasPrefix(full, prefix) {
		return nil, why
	}
	return e.encodeSegments(full, []segment{{len(prefix), len(full)}})
}

// PromptCompletion applies the rule for TRL's conversational prompt/completion.
func (e *Encoder) PromptCompletion(prompt, completion []jinja.Value, tools jinja.Value) (*Sample, error) {
	pr, err := e.render(prompt, tools, true)
	if err != nil {
		return nil, err
	}
	full, err := e.render(slices.Concat(prompt, completion), tools, false)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(full, pr) {
		k := diffAt(full, pr)
		return nil, &SkipError{Kind: KindUnstable, Msg: fmt.Sprintf("the prompt with generation prompt is not a prefix of prompt+completion (char %d: %s vs %s)",
			charIndex(pr, k), pyRepr(cut30(pr, k)), pyRepr(cut30(full, k)))}
	}
	return e.encodeSegments(full, []segment{{len(pr), len(full)}})
}

// StringPair applies TRL's rule for plain prompt/completion strings.
func (e *Encoder) StringPair(prompt, completion string) (*Sample, error) {
	text := prompt + completion
	if eos := e.tmpl.EOS; eos != "" && !strings.HasSuffix(completion, eos) {
		text += eos
	}
	ids, regions, err := e.tok.EncodeRegions(nil, nil, text, []int{len(prompt)})
	if err != nil {
		return nil, &SkipError{Kind: KindTokenizer, Msg: err.Error()}
	}
	n := len(e.postBefore) + len(ids) + len(e.postAfter)
	s := &Sample{InputIDs: make([]int32, 0, n), Labels: make([]int32, 0, n)}
	s.InputIDs = append(append(append(s.InputIDs, e.postBefore...), ids...), e.postAfter...)
	for range e.postBefore {
		s.Labels = append(s.Labels, IgnoreIndex)
	}
	for t, id := range ids {
		if regions[t] >= 1 {
			s.Labels = append(s.Labels, id)
		} else {
			s.Labels = append(s.Labels, IgnoreIndex)
		}
	}
	for range e.postAfter {
		s.Labels = append(s.Labels, IgnoreIndex)
	}
	return s, nil
}

// encodeSegments tokenizes rendered and labels the tokens whose start lies in a segment.
func (e *Encoder) encodeSegments(rendered string, segs []segment) (*Sample, error) {
	cuts := make([]int, 0, 2*len(segs))
	for _, s := range segs {
		cuts = append(cuts, s.start, s.end)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	// inside[r]: whether region r (from cuts[r-1] to cuts[r]) lies in a segment, i.e. whether some segment has
	// start <= p < end for p = cuts[r-1]: the segments sorted by start, with the running maximum of their ends,
	// answer that by binary search (linear overall in the number of turns).
	sorted := slices.Clone(segs)
	slices.SortFunc(sorted, func(a, b segment) int { return a.start - b.start })
	maxEnd := make([]int, len(sorted))
	for i, s := range sorted {
		maxEnd[i] = s.end
		if i > 0 {
			maxEnd[i] = max(maxEnd[i], maxEnd[i-1])
		}
	}
	inside := make([]bool, len(cuts)+1)
	for r := 1; r <= len(cuts); r++ {
		p := cuts[r-1]
		// j: the number of segments with start <= p.
		j, _ := slices.BinarySearchFunc(sorted, p+1, func(s segment, t int) int { return s.start - t })
		inside[r] = j > 0 && p < maxEnd[j-1]
	}
	ids, regions, err := e.tok.EncodeRegions(nil, nil, rendered, cuts)
	if err != nil {
		return nil, &SkipError{Kind: KindTokenizer, Msg: err.Error()}
	}
	labels := make([]int32, len(ids))
	for t, id := range ids {
		if inside[regions[t]] {
			labels[t] = id
		} else {
			labels[t] = IgnoreIndex
		}
	}
	return &Sample{InputIDs: ids, Labels: labels}, nil
}

// diffAt is the byte index of the first difference of a and b (or the shorter length).
func diffAt(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	// back to a character boundary of both
	for i > 0 && ((i < len(a) && !utf8.RuneStart(a[i])) || (i < len(b) && !utf8.RuneStart(b[i]))) {
		i--
	}
	return i
}

func charIndex(s string, byteIdx int) int { return utf8.RuneCountInString(s[:byteIdx]) }

// cut30 is s from byte k on, 30 characters at most.
func cut30(s string, k int) string {
	s = s[k:]
	n := 0
	for i := range s {
		if n == 30 {
			return s[:i]
		}
		n++
	}
	return s
}

// pyRepr writes s as Python's repr(str) does, so skip reasons read as the reference error records.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// Hash identifies everything that changes this encoder's output: the tokenizer, the template and its variables,
// and the options (for resume checks and dataset identity).
func (e *Encoder) Hash() string {
	h := sha256.New()
	keys := make([]string, 0, len(e.tmpl.vars))
	for k := range e.tmpl.vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// v2: the sandboxed engine (Jinja2's errors and printing where v1 rendered otherwise).
	fmt.Fprintf(h, "gload-chat-v2\x00%s\x00%d:%s\x00", e.tok.Hash(), len(e.tmpl.Source), e.tmpl.Source)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\x00", k, e.tmpl.vars[k].String())
	}
	o := e.opts
	o.TemplateDate, o.TemplateDateGiven = time.Time{}, false
	fmt.Fprintf(h, "%+v", o)
	if e.UsesDate() {
		// Only a template that calls strftime_now depends on the date.
		fmt.Fprintf(h, "\x00date=%s", e.opts.TemplateDate.UTC().Format(time.RFC3339Nano))
	}
	if e.tmpl.Limits != (jinja.Limits{}) {
		fmt.Fprintf(h, "\x00limits=%+v", e.tmpl.Limits)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TemplateDate is Options.TemplateDate.
func (e *Encoder) TemplateDate() time.Time { return e.opts.TemplateDate }

// TemplateDateGiven is Options.TemplateDateGiven.
func (e *Encoder) TemplateDateGiven() bool { return e.opts.TemplateDateGiven }

// SetTemplateDate changes Options.TemplateDate (a resumed run takes the interrupted run's); call it before the
// encoder is used.
func (e *Encoder) SetTemplateDate(t time.Time) { e.opts.TemplateDate = t }

// UsesDate reports whether the template calls strftime_now (its output then depends on Options.TemplateDate).
func (e *Encoder) UsesDate() bool { return strings.Contains(e.tmpl.Source, "strftime_now") }

// MaxLength is the truncation length of the options (0: none).
func (e *Encoder) MaxLength() int { return e.opts.MaxLength }
