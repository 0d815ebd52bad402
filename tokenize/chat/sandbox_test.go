package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/tokenize/chat/jinja"
)

// renderOne renders src over one user message, as the encoder does (fixed date, the template's limits).
func renderOne(t *testing.T, src string, lim jinja.Limits) (string, error) {
	t.Helper()
	tm, err := NewTemplate("test.jinja", src, "<s>", "</s>")
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	tm.Limits = lim
	msgs := []jinja.Value{mustValue(t, `{"role": "user", "content": "hi"}`)}
	return tm.Render(msgs, jinja.Undefined(), false, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

func mustValue(t *testing.T, js string) jinja.Value {
	t.Helper()
	v, err := ValueFromJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// small limits, so that budget cases end fast on a loaded machine.
var smallLimits = jinja.Limits{MaxSteps: 2_000_000, MaxOutputBytes: 1 << 20, MaxDepth: 100, MaxItems: 200_000, MaxAllocBytes: 64 << 20}

// TestSandboxCrashes: templates that crashed the whole run (panic, fatal out-of-memory, stack overflow) before the
// sandbox; now each renders as Jinja2 renders it or ends in an error that skips the record.
func TestSandboxCrashes(t *testing.T) {
	for _, c := range []struct {
		name, src string
		lim       jinja.Limits
		want      string // output, when wantErr is ""
		wantErr   string // substring of the error
		wantLimit string // the LimitError's Limit, if the error is one
	}{
		{name: "negative repeat (was a panic)", src: `{{ 'x' * -1 }}|{{ 'x' * 0 }}|{{ 3 * 'ab' }}`, want: "||ababab"},
		{name: "huge repeat (was a fatal OOM)", src: `{{ 'x' * 100000000000 }}`, wantLimit: "output bytes"},
		{name: "empty sequence repeated a huge number of times (was a hang)", src: `{{ ([] * 2444444444444444444444444444444440)|length }}|{{ [] * 9223372036854775807 }}|{{ '' * 9223372036854775807 }}|`, want: "0|[]||"},
		{name: "huge range (was a fatal OOM)", src: `{% for i in range(10**9) %}{% endfor %}`,
			wantErr: "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."},
		{name: "range just over the cap", src: `{% for i in range(100001) %}{% endfor %}`, wantErr: "Range too big"},
		{name: "range at the cap", src: `{{ range(100000)|length }}`, want: "100000"},
		{name: "recursive macro (was a stack overflow)", src: `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
			wantLimit: "nesting depth"},
		{name: "self-containing list (was a stack overflow)", src: `{% set l=[1] %}{% set _=l.append(l) %}{{ l }}`,
			wantErr: "access to attribute 'append' of 'list' object is unsafe."},
		{name: "self-containing namespace prints as Python does", src: `{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}`,
			want: "<Namespace {'a': 1, 'self': <Namespace {...}>}>"},
		{name: "deep brackets", src: "{{ " + strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000) + " }}", wantErr: "compile"},
		{name: "long operator chain", src: "{{ 1" + strings.Repeat(" + 1", 200_000) + " }}", wantLimit: "nesting depth"},
		{name: "deeply nested list literal built in a loop", lim: smallLimits,
			src:       `{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}`,
			wantLimit: "nesting depth"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.wantErr == "compile" {
				if _, err := NewTemplate("t", c.src, "", ""); err == nil || !strings.Contains(err.Error(), "nested deeper") {
					t.Fatalf("compile: got %v, want a nesting error", err)
				}
				return
			}
			out, err := renderOne(t, c.src, c.lim)
			checkOutcome(t, out, err, c.want, c.wantErr, c.wantLimit)
		})
	}
}

func checkOutcome(t *testing.T, out string, err error, want, wantErr, wantLimit string) {
	t.Helper()
	var le *jinja.LimitError
	switch {
	case wantLimit != "":
		if !errors.As(err, &le) || le.Limit != wantLimit {
			t.Fatalf("got %.200q, %v; want the %q limit", out, err, wantLimit)
		}
		if le.Line < 1 || !strings.Contains(err.Error(), "template line") {
			t.Fatalf("%v: no template line", err)
		}
	case wantErr != "":
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got %.200q, %v; want an error with %q", out, err, wantErr)
		}
	default:
		if err != nil || out != want {
			t.Fatalf("got %.200q, %v; want %q", out, err, want)
		}
	}
}

// TestSandboxBudgets: each budget stops the render that goes past it, naming the limit and the template line.
func TestSandboxBudgets(t *testing.T) {
	for _, c := range []struct {
		name, src string
		lim       jinja.Limits
		limit     string
		line      int
	}{
		{name: "nested loops of 10^10 (was a hang)", lim: smallLimits, limit: "steps", line: 2,
			src: "{% for i in range(100000) %}\n{% for j in range(100000) %}{% endfor %}{% endfor %}"},
		{name: "nested loops at the default budget", limit: "steps", line: 1,
			src: "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}"},
		{name: "output", lim: smallLimits, limit: "output bytes", line: 3,
			src: "{% for i in range(100000) %}\n\n{{ 'x' * 1000 }}{% endfor %}"},
		{name: "string doubling", lim: smallLimits, limit: "output bytes", line: 1,
			src: "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"},
		{name: "container size", lim: smallLimits, limit: "container size", line: 1, src: `{% set l = [0] * 100000000 %}`},
		{name: "memory", lim: smallLimits, limit: "memory", line: 1,
			src: `{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}`},
		{name: "macro recursion", lim: smallLimits, limit: "nesting depth", line: 1,
			src: `{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(0) }}`},
		{name: "caller recursion", lim: smallLimits, limit: "nesting depth", line: 1,
			src: `{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}`},
		{name: "exponential printing of a shared list", lim: smallLimits, limit: "output bytes", line: 1,
			src: `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`},
		{name: "exponential comparison of a shared list", lim: smallLimits, limit: "steps", line: 1,
			src: `{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}`},
		{name: "exponential tojson", lim: smallLimits, limit: "output bytes", line: 1,
			src: `{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|tojson }}`},
		{name: "replace blow-up", lim: smallLimits, limit: "output bytes", line: 1,
			src: `{{ ('a' * 1000)|replace('a', 'b' * 10000) }}`},
		{name: "join blow-up", lim: smallLimits, limit: "output bytes", line: 1,
			src: `{{ range(100000)|join('x' * 1000) }}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderOne(t, c.src, c.lim)
			var le *jinja.LimitError
			if !errors.As(err, &le) || le.Limit != c.limit || le.Line != c.line {
				t.Fatalf("got %v; want the %q limit at line %d", err, c.limit, c.line)
			}
			// A skipped record, through the encoder.
			var se *SkipError
			if _, err := (&Encoder{tmpl: mustTemplate(t, c.src, c.lim)}).render([]jinja.Value{}, jinja.Undefined(), false); !errors.As(err, &se) || se.Kind != KindLimit {
				t.Fatalf("encoder: %v, want a %q skip", err, KindLimit)
			}
		})
	}
}

func mustTemplate(t *testing.T, src string, lim jinja.Limits) *Template {
	t.Helper()
	tm, err := NewTemplate("t", src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tm.Limits = lim
	return tm
}

// TestSandboxJinja2Semantics: where the engine rendered something Jinja2 does not, it now raises or renders as
// Jinja2 3.1.6's ImmutableSandboxedEnvironment does (expected values from Jinja2 itself).
func TestSandboxJinja2Semantics(t *testing.T) {
	for _, c := range []struct{ src, want, wantErr string }{
		{src: `{{ 1/0 }}`, wantErr: "division by zero"},
		{src: `{{ 1//0 }}`, wantErr: "integer division or modulo by zero"},
		{src: `{{ 1%0 }}`, wantErr: "integer modulo by zero"},
		{src: `{{ 1.5//0 }}`, wantErr: "float floor division by zero"},
		{src: `{{ [1,2]*3 }}`, want: "[1, 2, 1, 2, 1, 2]"},
		{src: `{{ x.y.z }}`, wantErr: "'x' is undefined"},
		{src: `{{ x.y }}|{{ x }}|`, wantErr: "'x' is undefined"},
		{src: `{% set d = {} %}{{ d.y }}|{{ d.y.z }}`, wantErr: "'dict object' has no attribute 'y'"},
		{src: `{{ messages[5].content }}`, wantErr: "list object has no element 5"},
		{src: `{{ messages[0].nope.x }}`, wantErr: "'dict object' has no attribute 'nope'"},
		{src: `{% for x in 5 %}{% endfor %}`, wantErr: "'int' object is not iterable"},
		{src: `{% for x in none %}{% endfor %}`, wantErr: "'NoneType' object is not iterable"},
		{src: `{% for x in undefined_thing %}a{% endfor %}ok`, want: "ok"},
		{src: `{% set l = [1] %}{{ l.append(2) }}`, wantErr: "access to attribute 'append' of 'list' object is unsafe."},
		{src: `{% set d = {'a':1} %}{{ d.update({'b':2}) }}`, wantErr: "access to attribute 'update' of 'dict' object is unsafe."},
		{src: `{% set d = {'a':1} %}{{ d.pop('a') }}`, wantErr: "access to attribute 'pop' of 'dict' object is unsafe."},
		{src: `{% set d = {'a':1} %}{% set d.a = 2 %}`, wantErr: "cannot assign attribute on non-namespace object"},
		{src: `{{ messages[0].role }}{% set m = messages[0] %}{% set m.role = 'x' %}`, wantErr: "non-namespace"},
		{src: `{{ ''.__class__ }}|`, want: "|"},
		{src: `{{ ''.__class__.__mro__ }}`, wantErr: "access to attribute '__class__' of 'str' object is unsafe."},
		{src: `{{ none }}|{{ [none, 1.0, 'a', true] }}|{{ {'a': none} }}`, want: "None|[None, 1.0, 'a', True]|{'a': None}"},
		{src: `{{ 'a' + 1 }}`, wantErr: `can only concatenate str (not "int") to str`},
		{src: `{{ 1 + 'a' }}`, wantErr: "unsupported operand type(s) for +: 'int' and 'str'"},
		{src: `{{ 'a' + x }}`, wantErr: "'x' is undefined"},
		{src: `{{ x + 1 }}`, wantErr: "'x' is undefined"},
		{src: `{{ -'a' }}`, wantErr: "bad operand type for unary -: 'str'"},
		{src: `{{ 1 < 'a' }}`, wantErr: "'<' not supported between instances of 'int' and 'str'"},
		{src: `{{ 1 in 'abc' }}`, wantErr: "'in <string>' requires string as left operand, not int"},
		{src: `{{ 'a' in 5 }}`, wantErr: "argument of type 'int' is not iterable"},
		{src: `{{ 7 // -2 }}|{{ -7 % 3 }}|{{ 7.5 // 2 }}|{{ 2**10 }}|{{ 2**-1 }}|{{ 3/2 }}|{{ 4/2 }}`, want: "-4|2|3.0|1024|0.5|1.5|2.0"},
		{src: `{{ 100000000000000000000.0 }}|{{ 1234567.0 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 10000000000000000.0 }}|{{ 1000000000000000.0 }}`, want: "1e+20|1234567.0|0.0001|1e-05|1e+16|1000000000000000.0"},
		{src: `{{ [1,[2,'x\'y']]|tojson }}|{{ {'a':[1,2]}|tojson(indent=2) }}|{{ []|tojson(indent=2) }}`, want: "[1, [2, \"x'y\"]]|{\n  \"a\": [\n    1,\n    2\n  ]\n}|[]"},
		{src: `{{ x() }}`, wantErr: "'x' is undefined"},
		{src: `{{ (5)() }}`, wantErr: "'int' object is not callable"},
		{src: `{{ [1,2] == [1,2] }}|{{ 1 == 1.0 }}|{{ true == 1 }}`, want: "True|True|True"},
		{src: `{{ 'abc'.nope }}|`, want: "|"},
		{src: `{{ 'abc'.nope() }}`, wantErr: "'str object' has no attribute 'nope'"},
		{src: `{{ [1].nope }}|`, want: "|"},
		{src: `{% set l = [1,2] %}{{ l.index(2) }}{{ l.count(1) }}`, want: "11"},
		{src: `{{ x|fromjson }}`, wantErr: "unknown filter"},
		{src: `{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}`, wantErr: "macro 'f' takes not more than 1 argument(s)"},
		{src: `{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=1) }}`, wantErr: "macro 'f' takes no keyword argument 'b'"},
		{src: `{{ 1 < 2 < 3 }}|{{ 3 < 2 < 5 }}|{{ 1 < 3 > 2 }}|{{ 1 == 1 in [1] }}`, want: "True|False|True|True"},
	} {
		t.Run(c.src, func(t *testing.T) {
			out, err := renderOne(t, c.src, jinja.Limits{})
			checkOutcome(t, out, err, c.want, c.wantErr, "")
		})
	}
}

// TestTemplateDate: strftime_now() formats Options.TemplateDate in every render (not the wall clock), and the
// encoder's hash covers the date only for templates that call strftime_now.
func TestTemplateDate(t *testing.T) {
	day := time.Date(2024, 7, 23, 10, 5, 0, 0, time.UTC)
	dated := mustTemplate(t, `{{ strftime_now('%d %b %Y %H:%M') }}|{{ strftime_now() }}`, jinja.Limits{})
	e := &Encoder{tmpl: dated, opts: Options{TemplateDate: day}}
	for range 2 {
		out, err := e.render(nil, jinja.Undefined(), false)
		if err != nil || out != "23 Jul 2024 10:05|2024-07-23" {
			t.Fatalf("got %q, %v", out, err)
		}
	}
	e2 := &Encoder{tmpl: dated, opts: Options{TemplateDate: day.Add(24 * time.Hour)}}
	if out, _ := e2.render(nil, jinja.Undefined(), false); out != "24 Jul 2024 10:05|2024-07-24" {
		t.Fatalf("next day: %q", out)
	}
	if !e.UsesDate() {
		t.Fatal("UsesDate false")
	}
	plain := mustTemplate(t, `{{ messages|length }}`, jinja.Limits{})
	if (&Encoder{tmpl: plain}).UsesDate() {
		t.Fatal("UsesDate true for a template without strftime_now")
	}
}
