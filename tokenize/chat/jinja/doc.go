// Package jinja is the Jinja engine behind gload's chat templates, inside a sandbox of its own: a template is code
// from a model repository, so every render runs under hard budgets (Limits: steps, output bytes, nesting depth,
// container size, memory) and with the semantics of Jinja2's ImmutableSandboxedEnvironment that transformers
// renders chat templates in (no changing lists or dicts, range() capped at MaxRange, no attributes starting with
// "_"), and raises where Jinja2 raises. A render never panics, never runs out of memory or stack and never hangs:
// it returns the output, an error worded as Jinja2's, or a *LimitError naming the limit and the template line (a
// bug of the engine itself is recovered at the render's boundary as a *PanicError).
//
// It is derived from github.com/ardanlabs/jinja v1.8.0 (Apache License 2.0, LICENSE in this directory); gload's
// changes: the sandbox and budgets (sandbox.go), Python arithmetic, comparison and membership (arith.go),
// Jinja2's errors for undefined values and non-iterables, Python's printing of None, floats and containers, a
// tojson that follows json.dumps (indent included), immutable containers, a parse-depth limit, template line
// numbers in errors, strftime_now reading the render's instant (RenderOptions.Now), and prefix renders from one
// tracked render (linear.go).
//
// # Jinja2 features
//
// As transformers configures Jinja2: trim_blocks, lstrip_blocks, the loopcontrols extension, no autoescape, the
// default Undefined. "Refused" means the template fails to compile or the render raises (the record is skipped);
// nothing refused is rendered some other way.
//
//	feature                                   status
//	----------------------------------------  ------------------------------------------------------------------
//	{{ }}, {# #}, {% raw %}, -/+ trim marks    supported; trim_blocks and lstrip_blocks as transformers sets them
//	if / elif / else                           supported
//	for, else, loop.index/index0/revindex/     supported; for k, v in pairs; for x in dict (keys), in str (chars);
//	  revindex0/first/last/length/previtem/    over an int, None or float raises TypeError as Jinja2; over an
//	  nextitem/cycle, break, continue          undefined value: empty; loop.changed, loop.depth, recursive
//	                                           loops (loop(...)) refused
//	for ... if cond                            supported
//	set, set block, namespace(), set ns.attr   supported; set on a non-namespace object raises as Jinja2
//	set a, b = ... (tuple unpacking)           refused (compile error)
//	macro, call / caller()                     supported; Jinja2's implicit varargs/kwargs are not (extra
//	                                           arguments raise, as Jinja2 without them); a parameter spelled *a is taken as a plain
//	                                           one (Jinja2 refuses the syntax)
//	filter block                               supported for a single filter without arguments; others refused
//	include, import, extends, block, with, do  refused (compile error; none is available to chat templates)
//	generation / endgeneration                 supported (no-op, as transformers' AssistantTracker renders it)
//	literals: str, int, float, list, dict,     supported; a float literal with an exponent (1e3) is refused;
//	  true/false/none (any case), tuples       tuples are lists ((1, 2) prints [1, 2]); dict keys become strings
//	                                           ({1: 'a'} prints {'1': 'a'})
//	+ - * / // % ** ~, unary -                 Python's semantics: str/list + and * (repetition, n <= 0 gives
//	                                           empty), floor division and modulo toward -inf, ZeroDivisionError,
//	                                           TypeError for mixed types; ints are 64-bit: a result that needs
//	                                           more raises (Python would use a big int); str % args refused
//	== != < > <= >=, in, not in, and, or, not  Python's semantics (ordering of mixed types raises TypeError);
//	                                           chained comparisons (a < b < c) as Python
//	x if c else y, x.attr, x[key], x[a:b:c]    supported; negative indices and steps as Python
//	undefined values                           print "", test, iterate empty, take |default; attribute, item,
//	                                           call, arithmetic and ordering raise UndefinedError with Jinja2's
//	                                           message ('x' is undefined, 'dict object' has no attribute 'y')
//	attributes starting with "_"               unsafe: using one raises SecurityError as the sandbox does
//	list.append/pop/insert/extend/remove/...,  refused: SecurityError ("access to attribute 'append' of 'list'
//	  dict.update/pop/setdefault/...           object is unsafe."), as ImmutableSandboxedEnvironment
//	list.index/count, dict.items/keys/values/  supported (items() pairs print as lists, Python prints tuples)
//	  get
//	str methods                                strip/lstrip/rstrip (no-argument lstrip/rstrip strip ASCII
//	                                           blanks only), split, startswith, endswith, replace, upper, lower,
//	                                           title, capitalize, count, find, format (positional {} / {0});
//	                                           others are undefined (calling one raises)
//	tests                                      defined, undefined, none, boolean, integer, float, number,
//	                                           string, mapping, iterable, sequence, callable, true, false,
//	                                           eq/ne/gt/ge/lt/le and their aliases, in, odd, even, upper, lower,
//	                                           sameas; others raise
//	filters                                    tojson (json.dumps with ensure_ascii=False, indent, separators;
//	                                           sort_keys ignored), items, join, default/d, trim, lower, upper,
//	                                           title, capitalize, first, last, length/count, reverse, sort,
//	                                           unique, list, int, float, string, safe, replace, round, abs, map
//	                                           (attribute=), select, reject, selectattr, rejectattr, indent,
//	                                           wordcount, escape/e, dictsort, max, min, sum, batch; others
//	                                           (groupby, truncate, format, center, wordwrap, ...) raise
//	globals                                    range (more than 100 000 items raises OverflowError as the
//	                                           sandbox's), namespace, dict, joiner, cycler, raise_exception,
//	                                           strftime_now (the render's instant, RenderOptions.Now; Python's
//	                                           %Y %m %d %H %M %S %B %b %A %a %p %I %Z %% codes); lipsum refused
//	printing                                   str() as Python: None, True, 1.0, 1e+16, containers by repr
//	                                           ("[1, 'a']", "{'k': None}", a container inside itself as [...])
//	namespace(a=1, b=2), dict(a=1, b=2)        keys in sorted order (Python keeps the call's order)
//
// # Budgets
//
// Limits are per render; DefaultLimits are far above what the chat templates of the fixtures use (the chat
// package's TestSandboxHeadroom measures them and fails below 100× headroom, 20× for nesting depth, and 10× for a
// 100 000-turn conversation). Steps count statements, expressions, loop iterations and container elements walked
// by printing, tojson and comparison; the chat package adds 20 steps per byte of message content, so a long
// conversation is never cut short. A hostile template ends at the steps limit after 10^7 steps plus that allowance
// (a few seconds per record on one core).
package jinja
