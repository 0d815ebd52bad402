package jinja

// Prefix renders in one pass. The chat segment rule needs the rendering of every prefix messages[:k] of a
// conversation (with and without the generation prompt); rendering each is quadratic in the number of turns. For a
// template whose top level is "preamble, one for-loop over messages, tail", the rendering of messages[:k] is the
// full rendering's output up to the end of the loop's iteration k-1, followed by the tail run from the state at
// that point with messages[:k] — provided nothing the template did up to that point could tell messages[:k] from
// messages. RenderTracked renders once, records that output position and state after each iteration, and tracks
// what the template observed of the list: element indices (messages[j] is the same for every k > j), loop.last,
// loop.nextitem (tell k = j+1 apart), loop.length and loop.revindex (tell every k apart). Prefixes.Render then runs
// only the tail. Everything else a template might do with the list (slicing, filters, printing, iterating it
// elsewhere) makes the template ineligible when it is compiled; add_generation_prompt may be read only in the tail.
// Namespaces are the only mutable values (the sandbox refuses changes to lists and dicts), so the state after an
// iteration is a copy of each namespace's entries.

// linearPlan is what Compile found of a template's shape; nil when the template is not eligible.
type linearPlan struct {
	loopAt  int             // index of the main loop in Template.nodes
	loop    *forNode        // the main loop
	aliases map[string]bool // "messages" and the top-level names set to it before the loop
}

// planLinear checks the shape: a top-level for-loop over messages (or an alias of it set at top level), without
// filter, else or recursion; before and in it, messages used only as messages[i] and add_generation_prompt not at
// all; in the loop body, loop used only as loop.attr.
func planLinear(nodes []node, listVar, genVar string) *linearPlan {
	p := &linearPlan{loopAt: -1, aliases: map[string]bool{listVar: true}}
	for i, n := range nodes {
		switch nd := n.(type) {
		case *setNode:
			if ne, ok := nd.value.(*nameExpr); ok && p.aliases[ne.name] && nd.namespace == "" {
				p.aliases[nd.target] = true
				continue
			}
		case *forNode:
			if ne, ok := nd.iter.(*nameExpr); ok && p.aliases[ne.name] {
				if nd.filterExpr != nil || nd.elseBody != nil || nd.recursive || nd.keyVar != "" {
					return nil
				}
				p.loopAt, p.loop = i, nd
			}
		}
		if p.loop != nil {
			break
		}
	}
	if p.loop == nil {
		return nil
	}
	ok := true
	// A name set after the loop might shadow an alias in the tail: harmless (the tail gets the prefix list).
	check := func(parent, e expr) {
		ne, isName := e.(*nameExpr)
		if !isName {
			return
		}
		switch {
		case ne.name == genVar:
			ok = false
		case p.aliases[ne.name]:
			if ie, isItem := parent.(*itemExpr); !isItem || ie.obj != e {
				ok = false
			}
		}
	}
	for i, n := range nodes[:p.loopAt] {
		if sn, isSet := n.(*setNode); isSet {
			if ne, isName := sn.value.(*nameExpr); isName && p.aliases[ne.name] {
				continue // the alias itself
			}
		}
		walkNode(nodes[i], check)
	}
	walkExpr(nil, p.loop.iter, func(parent, e expr) {})
	walkNodes(p.loop.body, check)
	// loop.<attr> only, anywhere in the body (a nested loop's own loop variable included: harmless).
	walkNodes(p.loop.body, func(parent, e expr) {
		if ne, isName := e.(*nameExpr); isName && ne.name == "loop" {
			if ae, isAttr := parent.(*attrExpr); !isAttr || ae.obj != e {
				ok = false
			}
		}
	})
	// Macros anywhere may be called from the loop: their bodies follow the same rules.
	for _, n := range nodes[p.loopAt+1:] {
		walkNodeMacros(n, func(body []node) { walkNodes(body, check) })
	}
	// A macro made before the loop sees the top-level scope as the full render leaves it; a tail that sets names
	// there would then differ from the tail of a prefix's render.
	macros := false
	for _, n := range nodes[:p.loopAt] {
		walkNodeMacros(n, func([]node) { macros = true })
	}
	if macros {
		for _, n := range nodes[p.loopAt+1:] {
			switch n.(type) {
			case *setNode, *setBlockNode, *macroNode:
				ok = false
			}
		}
	}
	if !ok {
		return nil
	}
	return p
}

func walkNodes(nodes []node, f func(parent, e expr)) {
	for _, n := range nodes {
		walkNode(n, f)
	}
}

// walkNodeMacros calls f with the body of every macro defined in n.
func walkNodeMacros(n node, f func([]node)) {
	var visit func(n node)
	visit = func(n node) {
		switch nd := n.(type) {
		case *macroNode:
			f(nd.body)
			for _, c := range nd.body {
				visit(c)
			}
		case *ifNode:
			for _, br := range nd.branches {
				for _, c := range br.body {
					visit(c)
				}
			}
		case *forNode:
			for _, c := range nd.body {
				visit(c)
			}
			for _, c := range nd.elseBody {
				visit(c)
			}
		case *setBlockNode:
			for _, c := range nd.body {
				visit(c)
			}
		case *callNode:
			for _, c := range nd.body {
				visit(c)
			}
		case *filterBlockNode:
			for _, c := range nd.body {
				visit(c)
			}
		}
	}
	visit(n)
}

// walkNode calls f(parent, e) for every expression in n and the nodes within it.
func walkNode(n node, f func(parent, e expr)) {
	switch nd := n.(type) {
	case *outputNode:
		walkExpr(nil, nd.expression, f)
	case *ifNode:
		for _, br := range nd.branches {
			if br.condition != nil {
				walkExpr(nil, br.condition, f)
			}
			walkNodes(br.body, f)
		}
	case *forNode:
		walkExpr(nil, nd.iter, f)
		if nd.filterExpr != nil {
			walkExpr(nil, nd.filterExpr, f)
		}
		walkNodes(nd.body, f)
		walkNodes(nd.elseBody, f)
	case *setNode:
		walkExpr(nil, nd.value, f)
	case *setBlockNode:
		walkNodes(nd.body, f)
	case *macroNode:
		for _, p := range nd.params {
			if p.defaultVal != nil {
				walkExpr(nil, p.defaultVal, f)
			}
		}
		walkNodes(nd.body, f)
	case *callNode:
		walkExpr(nil, nd.expr, f)
		walkNodes(nd.body, f)
	case *filterBlockNode:
		walkExpr(nil, nd.filter, f)
		walkNodes(nd.body, f)
	}
}

func walkExpr(parent, e expr, f func(parent, e expr)) {
	if e == nil {
		return
	}
	f(parent, e)
	switch n := e.(type) {
	case *attrExpr:
		walkExpr(e, n.obj, f)
	case *itemExpr:
		walkExpr(e, n.obj, f)
		walkExpr(e, n.key, f)
	case *sliceExpr:
		walkExpr(e, n.obj, f)
		walkExpr(e, n.start, f)
		walkExpr(e, n.stop, f)
		walkExpr(e, n.step, f)
	case *unaryExpr:
		walkExpr(e, n.operand, f)
	case *binExpr:
		walkExpr(e, n.left, f)
		walkExpr(e, n.right, f)
	case *condExpr:
		walkExpr(e, n.trueExpr, f)
		walkExpr(e, n.condition, f)
		walkExpr(e, n.falseExpr, f)
	case *callExpr:
		walkExpr(e, n.fn, f)
		for _, a := range n.args {
			walkExpr(e, a, f)
		}
		for _, kw := range n.kwargs {
			walkExpr(e, kw.value, f)
		}
	case *filterExpr:
		walkExpr(e, n.expr, f)
		for _, a := range n.args {
			walkExpr(e, a, f)
		}
		for _, kw := range n.kwargs {
			walkExpr(e, kw.value, f)
		}
	case *testExpr:
		walkExpr(e, n.expr, f)
		for _, a := range n.args {
			walkExpr(e, a, f)
		}
	case *listExpr:
		for _, it := range n.items {
			walkExpr(e, it, f)
		}
	case *dictExpr:
		for _, p := range n.pairs {
			walkExpr(e, p.key, f)
			walkExpr(e, p.value, f)
		}
	}
}

// tracker is the per-render state of a tracked render (budget.track).
type tracker struct {
	list     *List // the full messages list
	loop     *forNode
	loopDict *Dict // the main loop's loop object, while it runs
	maxIndex int   // highest element index read so far (-1: none)
	lenSeen  bool  // loop.length, loop.revindex or a negative index read: only the full length is consistent
	badAt    map[int]bool
	spaces   []*Dict       // every namespace made, in order
	points   []prefixPoint // points[k]: after iteration k-1 (points[0] unused)
	broke    bool
	iter     int    // the main loop's current iteration
	topScope *scope // the top-level scope as the main loop started
}

type prefixPoint struct {
	out    int
	valid  bool
	spaces []nsCopy
}

type nsCopy struct {
	keys []string
	data map[string]Value
}

// index records a read of element i of the tracked list.
func (t *tracker) index(i int64) {
	if i < 0 {
		t.lenSeen = true
		return
	}
	if int(i) > t.maxIndex {
		t.maxIndex = int(i)
	}
}

// loopAttr records a read of the main loop's attr during iteration j (0-based).
func (t *tracker) loopAttr(attr string, j int) {
	switch attr {
	case "length", "revindex", "revindex0":
		t.lenSeen = true
	case "last":
		t.badAt[j+1] = true
	case "nextitem":
		t.index(int64(j + 1))
	}
}

// iterationDone records prefix point k = j+1 after iteration j of the main loop.
func (t *tracker) iterationDone(j, out int) {
	k := j + 1
	pt := prefixPoint{out: out, valid: !t.lenSeen && t.maxIndex < k && !t.badAt[k]}
	if pt.valid {
		pt.spaces = make([]nsCopy, len(t.spaces))
		for i, d := range t.spaces {
			pt.spaces[i] = nsCopy{keys: append([]string(nil), d.Keys...), data: make(map[string]Value, len(d.Data))}
			for key, v := range d.Data {
				pt.spaces[i].data[key] = v
			}
		}
	}
	for len(t.points) <= k {
		t.points = append(t.points, prefixPoint{})
	}
	t.points[k] = pt
}

// Prefixes holds what a tracked render recorded, for rendering prefixes of the list by their tail alone. Not safe
// for concurrent use.
type Prefixes struct {
	t       *Template
	tr      *tracker
	data    map[string]Value
	listVar string
	genVar  string
	opts    RenderOptions
	full    int // length of the list
	out     string
}

// Linear reports whether the template has the shape RenderTracked needs (see planLinear).
func (t *Template) Linear(listVar, genVar string) bool {
	return planLinear(t.nodes, listVar, genVar) != nil
}

// RenderTracked renders data (whose listVar holds a list) once, as RenderWith does, and returns with the output a
// *Prefixes that renders data with listVar cut to its first k elements and genVar set, running only the
// template's tail. It returns a nil *Prefixes when the template is not eligible (Linear).
func (t *Template) RenderTracked(data map[string]Value, listVar, genVar string, o RenderOptions) (string, *Prefixes, error) {
	plan := t.linear(listVar, genVar)
	lv, ok := data[listVar]
	if plan == nil || !ok || !lv.IsList() {
		out, err := t.RenderWith(data, o)
		return out, nil, err
	}
	tr := &tracker{list: lv.AsList(), loop: plan.loop, maxIndex: -1, badAt: map[int]bool{}}
	o.track = tr
	out, err := t.RenderWith(data, o)
	if err != nil {
		return "", nil, err
	}
	return out, &Prefixes{t: t, tr: tr, data: data, listVar: listVar, genVar: genVar, opts: o, full: tr.list.Len(), out: out}, nil
}

// Offset is where the rendering of the first k elements' loop part ends in the full output, and whether prefix k
// can be rendered from the tracked render.
func (p *Prefixes) Offset(k int) (int, bool) {
	if p.tr.broke || k < 1 || k >= len(p.tr.points) || !p.tr.points[k].valid {
		return 0, false
	}
	return p.tr.points[k].out, true
}

// Tail renders the template's tail for the first k elements with genVar = gen: the rendering of that prefix is
// the full output up to Offset(k) followed by the tail. ok is false when prefix k cannot be had this way.
func (p *Prefixes) Tail(k int, gen bool) (tail string, ok bool, err error) {
	if _, ok := p.Offset(k); !ok {
		return "", false, nil
	}
	pt := p.tr.points[k]
	// Put every namespace back as it was after iteration k-1 (they are the only mutable values).
	for i, d := range p.tr.spaces {
		if i >= len(pt.spaces) {
			// Made after this point: not reachable from the state at the point, except through a later one.
			continue
		}
		d.Keys = append(d.Keys[:0], pt.spaces[i].keys...)
		clear(d.Data)
		for key, v := range pt.spaces[i].data {
			d.Data[key] = v
		}
	}
	plan := p.t.linear(p.listVar, p.genVar)
	o := p.opts
	o.track = nil
	o.top = p.tr.topScope
	o.overrides = map[string]Value{p.genVar: NewBool(gen)}
	prefix := NewList(p.tr.list.Items[:k:k])
	for a := range plan.aliases {
		o.overrides[a] = prefix
	}
	out, err := renderTail(p.t.nodes[plan.loopAt+1:], o)
	if err != nil {
		return "", false, err
	}
	return out, true, nil
}

// Full is the tracked render's output.
func (p *Prefixes) Full() string { return p.out }

func (t *Template) linear(listVar, genVar string) *linearPlan {
	t.planOnce.Do(func() { t.plan = planLinear(t.nodes, listVar, genVar) })
	return t.plan
}
