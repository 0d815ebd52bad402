// Derived from github.com/ardanlabs/jinja v1.8.0 (Apache-2.0, see LICENSE); modified for gload: see doc.go.

package jinja

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Template is a compiled Jinja template ready for rendering.
type Template struct {
	nodes    []node
	src      string
	planOnce sync.Once
	plan     *linearPlan
}

// Compile parses a Jinja template source string and returns a compiled
// template that can be rendered multiple times with different data.
func Compile(source string) (*Template, error) {
	segs, err := scan(source)
	if err != nil {
		return nil, fmt.Errorf("jinja scan: %w", err)
	}

	nodes, err := parseTemplate(segs)
	if err != nil {
		return nil, fmt.Errorf("jinja parse: %w", err)
	}

	return &Template{nodes: nodes, src: source}, nil
}

// RenderOptions are the sandbox settings of one render.
type RenderOptions struct {
	Limits Limits    // zero value: DefaultLimits
	Now    time.Time // what strftime_now formats; zero: time.Now() at the call
	Usage  *Usage    // if not nil, filled with what the render used (also on error)

	track     *tracker         // RenderTracked
	top       *scope           // Prefixes.Tail: the scope the tail runs over
	overrides map[string]Value // Prefixes.Tail: names set over top
}

// Render executes the template with the provided data and returns the
// rendered string. Each call creates an isolated scope so templates are
// safe to render concurrently after compilation.
func (t *Template) Render(data map[string]any) (string, error) {
	vals := make(map[string]Value, len(data))
	for k, v := range data {
		vals[k] = FromGoValue(v)
	}
	return t.RenderWith(vals, RenderOptions{})
}

// RenderValues is like Render but accepts pre-converted Value data.
func (t *Template) RenderValues(data map[string]Value) (string, error) {
	return t.RenderWith(data, RenderOptions{})
}

// RenderWith renders within the sandbox's limits: an error is what the template raised, a *LimitError, or (should
// the engine have a bug) a recovered panic; it never panics itself.
func (t *Template) RenderWith(data map[string]Value, o RenderOptions) (out string, err error) {
	return sandboxed(o, func(b *budget) (string, error) { return render(t.nodes, data, b) })
}

// renderTail runs nodes in a scope over o.top with o.overrides, in the sandbox.
func renderTail(nodes []node, o RenderOptions) (string, error) {
	return sandboxed(o, func(b *budget) (string, error) {
		e := evaluator{b: b, builtins: cachedBuiltins, scope: newScope(o.top)}
		for k, v := range o.overrides {
			e.scope.set(k, v)
		}
		if err := e.execNodes(nodes); err != nil {
			return "", err
		}
		return e.output.String(), nil
	})
}

// sandboxed runs f with a fresh budget of o's limits, turning the sandbox's panics into errors.
func sandboxed(o RenderOptions, f func(b *budget) (string, error)) (out string, err error) {
	b := &budget{lim: o.Limits, now: o.Now, track: o.track}
	if b.lim == (Limits{}) {
		b.lim = DefaultLimits
	}
	if b.now.IsZero() {
		b.now = time.Now()
	}
	defer func() {
		if o.Usage != nil {
			*o.Usage = Usage{Steps: b.steps, Depth: b.maxDepth, MaxItems: b.maxItems, AllocBytes: b.alloc}
		}
		if r := recover(); r != nil {
			out = ""
			if le, ok := r.(*LimitError); ok {
				err = le
				return
			}
			err = &PanicError{Line: b.line, Value: r, Stack: string(debug.Stack())}
		}
	}()
	return f(b)
}

// render executes the AST with the given data and returns the result.
func render(nodes []node, data map[string]Value, b *budget) (string, error) {
	e := evaluator{
		output:   strings.Builder{},
		b:        b,
		builtins: cachedBuiltins,
	}

	// Create user data scope on top of builtins.
	e.scope = newScope(e.builtins)
	for k, v := range data {
		e.scope.set(k, v)
	}

	if err := e.execNodes(nodes); err != nil {
		return "", err
	}

	return e.output.String(), nil
}

// PanicError is a panic of the engine itself, recovered at the render's boundary: a bug of this package (the
// sandbox's own limits end in a *LimitError). The render fails; the process goes on.
type PanicError struct {
	Line  int
	Value any
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("template engine failure at template line %d: %v", e.Line, e.Value)
}
