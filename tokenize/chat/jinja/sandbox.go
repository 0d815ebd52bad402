package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits are the hard budgets of one render. A template that goes past one gets a *LimitError naming the limit and
// the template line; the render stops there, whatever the template does (loops, recursion, string or list growth).
type Limits struct {
	// MaxSteps bounds the work of a render: statements executed, expressions evaluated, and container elements
	// walked by printing, tojson and comparison. It is what stops nested loops of 10^10 iterations.
	MaxSteps int64
	// MaxOutputBytes bounds the rendering and any one string the template makes ('x' * n, joins, concatenation).
	MaxOutputBytes int
	// MaxDepth bounds nesting: macro calls inside macro calls, expressions inside expressions, containers inside
	// containers walked by printing/tojson/comparison (a list that holds itself ends here, not in a stack overflow).
	MaxDepth int
	// MaxItems bounds the length of any one list or dict the template makes (list repetition, concatenation,
	// filters).
	MaxItems int
	// MaxAllocBytes bounds what a render allocates in all: bytes of every string made and written, 16 bytes per list
	// item made. It bounds the memory of a render whatever it keeps.
	MaxAllocBytes int64
}

// DefaultLimits are far above what real chat templates use (see the chat package's doc for the measurements) and
// low enough that a worker's render cannot take more than a few seconds or a few hundred MB.
var DefaultLimits = Limits{
	MaxSteps:       10_000_000,
	MaxOutputBytes: 256 << 20,
	MaxDepth:       500,
	MaxItems:       10_000_000,
	MaxAllocBytes:  2 << 30,
}

// MaxRange is Jinja2's sandbox cap on range(): a longer range raises, as in jinja2.sandbox.MAX_RANGE.
const MaxRange = 100_000

// LimitError is a render that went past one of its Limits.
type LimitError struct {
	Limit string // "steps", "output bytes", "nesting depth", "container size", "memory"
	Max   int64
	Line  int // template line of the statement running when the limit was hit (0: unknown)
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s over the sandbox's limit (%d) at template line %d", e.Limit, e.Max, e.Line)
}

// Usage is what one render used of its Limits (RenderOptions.Usage fills it).
type Usage struct {
	Steps      int64
	Depth      int // deepest nesting
	MaxItems   int // longest list made
	AllocBytes int64
}

// budget is the per-render state of the sandbox, shared by the render's nested evaluators (macros, set blocks).
type budget struct {
	lim      Limits
	steps    int64
	depth    int
	maxDepth int
	maxItems int
	alloc    int64
	line     int
	now      time.Time
	reprs    []any    // containers being printed, for Python's [...] / {...} on a container that holds itself
	track    *tracker // RenderTracked's observations, or nil
}

func (b *budget) fail(limit string, max int64) {
	panic(&LimitError{Limit: limit, Max: max, Line: b.line})
}

func (b *budget) step() {
	b.steps++
	if b.steps > b.lim.MaxSteps {
		b.fail("steps", b.lim.MaxSteps)
	}
}

func (b *budget) enter() {
	b.depth++
	if b.depth > b.maxDepth {
		b.maxDepth = b.depth
		if b.depth > b.lim.MaxDepth {
			b.fail("nesting depth", int64(b.lim.MaxDepth))
		}
	}
}

func (b *budget) leave() { b.depth-- }

// str is called before a string of n bytes is made.
func (b *budget) str(n int64) {
	if n > int64(b.lim.MaxOutputBytes) || n < 0 {
		b.fail("output bytes", int64(b.lim.MaxOutputBytes))
	}
	b.alloc += n
	if b.alloc > b.lim.MaxAllocBytes {
		b.fail("memory", b.lim.MaxAllocBytes)
	}
}

// items is called before a list or dict of n items is made.
func (b *budget) items(n int64) {
	if n > int64(b.lim.MaxItems) || n < 0 {
		b.fail("container size", int64(b.lim.MaxItems))
	}
	if int(n) > b.maxItems {
		b.maxItems = int(n)
	}
	b.alloc += 16 * n
	if b.alloc > b.lim.MaxAllocBytes {
		b.fail("memory", b.lim.MaxAllocBytes)
	}
}

// write appends s to out within the output budget.
func (b *budget) write(out *strings.Builder, s string) {
	if out.Len()+len(s) > b.lim.MaxOutputBytes {
		b.fail("output bytes", int64(b.lim.MaxOutputBytes))
	}
	b.alloc += int64(len(s))
	if b.alloc > b.lim.MaxAllocBytes {
		b.fail("memory", b.lim.MaxAllocBytes)
	}
	out.WriteString(s)
}

// reprTo writes Python's repr-like form of v (Jinja2 prints containers by repr) within the budget.
func (b *budget) reprTo(sb *strings.Builder, v Value, quote bool) {
	b.step()
	if sb.Len() > b.lim.MaxOutputBytes {
		b.fail("output bytes", int64(b.lim.MaxOutputBytes))
	}
	switch v.kind {
	case KindString:
		if quote {
			sb.WriteString(pyQuote(v.AsString()))
		} else {
			sb.WriteString(v.AsString())
		}
	case KindList:
		if b.inRepr(v.AsList()) {
			sb.WriteString("[...]")
			return
		}
		b.enter()
		b.reprs = append(b.reprs, v.AsList())
		sb.WriteByte('[')
		for i, item := range v.AsList().Items {
			if i > 0 {
				sb.WriteString(", ")
			}
			b.reprTo(sb, item, true)
		}
		sb.WriteByte(']')
		b.reprs = b.reprs[:len(b.reprs)-1]
		b.leave()
	case KindDict:
		d := v.AsDict()
		if d.namespace {
			sb.WriteString("<Namespace ")
		}
		if b.inRepr(d) {
			sb.WriteString("{...}")
			if d.namespace {
				sb.WriteByte('>')
			}
			return
		}
		b.enter()
		b.reprs = append(b.reprs, d)
		sb.WriteByte('{')
		for i, key := range d.Keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pyQuote(key))
			sb.WriteString(": ")
			b.reprTo(sb, d.Data[key], true)
		}
		sb.WriteByte('}')
		if d.namespace {
			sb.WriteByte('>')
		}
		b.reprs = b.reprs[:len(b.reprs)-1]
		b.leave()
	case KindNone:
		sb.WriteString("None")
	case KindUndefined:
		if quote {
			sb.WriteString("Undefined")
		}
	default:
		sb.WriteString(scalarString(v))
	}
}

func (b *budget) inRepr(c any) bool {
	for _, x := range b.reprs {
		if x == c {
			return true
		}
	}
	return false
}

// pyQuote is Python's repr of a str for the common cases (quotes and backslashes escaped, control characters as
// escapes).
func pyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.Grow(len(s) + 2)
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			sb.WriteString(`\\`)
		case r == rune(q):
			sb.WriteByte('\\')
			sb.WriteByte(q)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

// scalarString is str() of a scalar as Python prints it.
func scalarString(v Value) string {
	switch v.kind {
	case KindBool:
		if v.AsBool() {
			return "True"
		}
		return "False"
	case KindInt:
		return strconv.FormatInt(v.AsInt(), 10)
	case KindFloat:
		return pyFloat(v.AsFloat())
	case KindNone:
		return "None"
	case KindCallable:
		return "<function " + v.v.(Callable).Name + ">"
	}
	return ""
}

// pyFloat is Python's repr of a float: shortest round-trip digits, fixed notation for exponents -4..15, always
// with a '.' or an exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	_, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// equal is Python's == over values, within the step and depth budgets.
func (b *budget) equal(x, y Value) bool {
	b.step()
	if x.IsNumber() && y.IsNumber() || x.IsBool() && y.IsNumber() || x.IsNumber() && y.IsBool() {
		return toFloat64(x) == toFloat64(y)
	}
	if x.kind != y.kind {
		return false
	}
	switch x.kind {
	case KindUndefined, KindNone:
		return true
	case KindBool:
		return x.AsBool() == y.AsBool()
	case KindString:
		return x.AsString() == y.AsString()
	case KindList:
		a, c := x.AsList(), y.AsList()
		if a == c {
			return true
		}
		if a.Len() != c.Len() {
			return false
		}
		b.enter()
		defer b.leave()
		for i := range a.Items {
			if !b.equal(a.Items[i], c.Items[i]) {
				return false
			}
		}
		return true
	case KindDict:
		a, c := x.AsDict(), y.AsDict()
		if a == c {
			return true
		}
		if a.Len() != c.Len() {
			return false
		}
		b.enter()
		defer b.leave()
		for _, key := range a.Keys {
			cv, ok := c.Get(key)
			if !ok || !b.equal(a.Data[key], cv) {
				return false
			}
		}
		return true
	}
	return false
}

// typeName is Python's type name of v, for error messages worded as Jinja2's.
func typeName(v Value) string {
	switch v.kind {
	case KindUndefined:
		return "Undefined"
	case KindNone:
		return "NoneType"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		return "str"
	case KindList:
		return "list"
	case KindDict:
		if v.AsDict().namespace {
			return "Namespace"
		}
		return "dict"
	case KindCallable:
		return "function"
	}
	return "object"
}

// undefinedError is the UndefinedError Jinja2 raises when an undefined value is used beyond printing, testing and
// iterating.
func undefinedError(v Value) error {
	if h, ok := v.v.(string); ok && h != "" {
		return fmt.Errorf("%s", h)
	}
	return fmt.Errorf("'undefined' is undefined")
}

// undefinedHint is an undefined value that remembers why it is undefined, for the UndefinedError its use raises.
func undefinedHint(format string, a ...any) Value {
	return Value{kind: KindUndefined, v: fmt.Sprintf(format, a...)}
}

func securityError(obj Value, attr string) error {
	return fmt.Errorf("access to attribute '%s' of '%s' object is unsafe.", attr, typeName(obj))
}
