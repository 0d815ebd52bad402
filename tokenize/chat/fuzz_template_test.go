package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gload/gload/tokenize/chat/jinja"
)

// fuzzLimits keep one fuzz render within a few ms and a few MB.
var fuzzLimits = jinja.Limits{MaxSteps: 200_000, MaxOutputBytes: 1 << 20, MaxDepth: 100, MaxItems: 100_000, MaxAllocBytes: 16 << 20}

// fragments are the pieces FuzzTemplate's generator strings together: statements, expressions, operators,
// filters, literals and the constructs that once crashed or hung the engine.
var fragments = []string{
	"{% for m in messages %}", "{% endfor %}", "{% if ", " %}", "{% elif ", "{% else %}", "{% endif %}",
	"{% set x = ", "{% set ns = namespace(a=1, l=[]) %}", "{% set ns.a = ", "{% set ns.l = ns.l + [", "] %}",
	"{% macro f(n) %}", "{% endmacro %}", "{{ f(", ") }}", "{% call f(1) %}", "{% endcall %}", "{{ caller() }}",
	"{% filter upper %}", "{% endfilter %}", "{% break %}", "{% continue %}", "{% set b %}", "{% endset %}",
	"{{ ", " }}", "{{- ", " -}}", "{#", "#}", "{% raw %}", "{% endraw %}", "{% generation %}", "{% endgeneration %}",
	"messages", "m", "x", "ns", "ns.a", "ns.l", "loop", "loop.index", "loop.cycle(1, 2)", "range(", "range(10**9)",
	"m['content']", "m.role", "messages[0]", "messages[-1:]", "messages[::2]", "[1, 2]", "{'a': 1}", "(", ")",
	"'x'", "'x' * ", "-1", "100000000000", "1/0", "1//0", "1%0", "2**64", "2**-1", "3.5", "none", "true",
	" + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " == ", " != ", " < ", " in ", " not in ",
	" and ", " or ", "not ", " if ", " else ", " is defined", " is string", " is none", ".append(1)", ".pop()",
	".update({})", ".__class__", ".items()", ".keys()", ".get('a')", ".strip()", ".split(',')", ".replace('x', 'yy')",
	".startswith('a')", ".format(1)", "|length", "|tojson", "|tojson(indent=2)", "|join(',')", "|trim", "|list",
	"|first", "|last", "|reverse", "|sort", "|unique", "|map(attribute='role')", "|selectattr('role', 'equalto', 'user')",
	"|default('d')", "|string", "|int", "|float", "|indent(4)", "|batch(2)", "|dictsort", "|replace('a', 'bb')",
	"|sum", "|max", "|min", "|items", "|escape", "raise_exception('no')", "strftime_now('%Y-%m-%d')", "bos_token",
	"add_generation_prompt", "tools", ",", ":", ".", "[", "]", "\n", " ",
}

// genTemplate turns fuzz bytes into a template: each byte picks a fragment.
func genTemplate(prog []byte) string {
	var b strings.Builder
	for _, c := range prog {
		b.WriteString(fragments[int(c)%len(fragments)])
	}
	return b.String()
}

// FuzzTemplate: any template (src, followed by the fragments prog picks) compiles or not, and renders to an output
// within the limits or ends in an error — never a panic of the engine (a *jinja.PanicError), a stack overflow, an
// out-of-memory or a hang. Run it under a memory limit (docs/sft.md gives the command).
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		`{{ 'x' * -1 }}`, `{{ 'x' * 100000000000 }}`, `{% for i in range(10**9) %}{% endfor %}`,
		`{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, `{% set l=[1] %}{% set _=l.append(l) %}{{ l }}`,
		`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`,
		`{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns }}|{{ ns|tojson }}|{{ ns == ns }}`,
		`{{ 1/0 }}`, `{{ [1,2]*3 }}`, `{{ x.y.z }}`, `{% for x in 5 %}{% endfor %}`,
		"{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] | trim }}{% endfor %}",
	} {
		f.Add(s, []byte{})
	}
	f.Add("", []byte{0, 33, 24, 1, 5, 40, 25})
	f.Add("{{ ", []byte{60, 75, 42, 25})
	msgs := []jinja.Value{
		mustValueF(`{"role": "system", "content": "s"}`), mustValueF(`{"role": "user", "content": "hi"}`),
		mustValueF(`{"role": "assistant", "content": "yo", "tool_calls": [{"name": "f", "arguments": {"a": [1, 2.5]}}]}`),
	}
	tools := mustValueF(`[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]`)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, src string, prog []byte) {
		if len(src) > 4096 || len(prog) > 512 {
			return
		}
		src += genTemplate(prog)
		tm, err := NewTemplate("fuzz", src, "<s>", "</s>")
		if err != nil {
			return
		}
		tm.Limits = fuzzLimits
		for _, gen := range []bool{false, true} {
			out, err := tm.Render(msgs, tools, gen, now)
			var pe *jinja.PanicError
			if errors.As(err, &pe) {
				t.Fatalf("engine panic on %q: %v\n%s", src, pe.Value, pe.Stack)
			}
			if len(out) > fuzzLimits.MaxOutputBytes {
				t.Fatalf("output %d bytes over the %d limit", len(out), fuzzLimits.MaxOutputBytes)
			}
		}
	})
}

func mustValueF(js string) jinja.Value {
	v, err := ValueFromJSON([]byte(js))
	if err != nil {
		panic(err)
	}
	return v
}
