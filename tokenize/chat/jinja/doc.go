// Package jinja is the Jinja engine behind gload's chat templates, inside a sandbox of its own: a template is code
// from a model repository, so every render runs under hard budgets (Limits: steps, output bytes, nesting depth,
// container size, memory) and with the semantics of Jinja2's ImmutableSandboxedEnvironment that transformers
// renders chat templates in (no changing lists or dicts, range() capped at MaxRange, no attributes starting with
// "_"), and raises where Jinja2 raises. A render never panics, never runs out of memory or stack and never hangs:
// it returns the output, an error worded as Jinja2's, or a *LimitError naming the limit and the template line.
//
// It is derived from github.com/ardanlabs/jinja v1.8.0 (Apache License 2.0, LICENSE in this directory); gload's
// changes: the sandbox and budgets (sandbox.go), Python arithmetic, comparison and membership (arith.go),
// Jinja2's errors for undefined values and non-iterables, Python's printing of None, floats and containers, a
// tojson that follows json.dumps (indent included), immutable containers, a parse-depth limit, template line
// numbers in errors, and strftime_now reading the render's instant (RenderOptions.Now).
package jinja
