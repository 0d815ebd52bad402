package jinja

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Arithmetic, comparison and membership with Python's semantics as Jinja2 applies them: errors where Python raises
// (ZeroDivisionError, TypeError, UndefinedError), sequence repetition, floor division and modulo rounding toward
// negative infinity. Results are checked against the render's budget before they are allocated.

// isIntLike reports whether v is an int or a bool (Python's bool is an int).
func isIntLike(v Value) bool { return v.kind == KindInt || v.kind == KindBool }

func isNum(v Value) bool { return isIntLike(v) || v.kind == KindFloat }

func unsupported(op string, a, c Value) error {
	return fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(c))
}

var errIntOverflow = fmt.Errorf("integer result does not fit in 64 bits (Python would use a big integer; not supported)")

func arith(b *budget, op string, l, r Value) (Value, error) {
	if l.IsUndefined() {
		return Undefined(), undefinedError(l)
	}
	if r.IsUndefined() {
		return Undefined(), undefinedError(r)
	}
	switch op {
	case "+":
		switch {
		case l.IsString() && r.IsString():
			b.str(int64(len(l.AsString())) + int64(len(r.AsString())))
			return NewString(l.AsString() + r.AsString()), nil
		case l.IsList() && r.IsList():
			n := int64(l.AsList().Len()) + int64(r.AsList().Len())
			b.items(n)
			items := make([]Value, 0, n)
			items = append(append(items, l.AsList().Items...), r.AsList().Items...)
			return NewList(items), nil
		case isIntLike(l) && isIntLike(r):
			x, y := toInt64(l), toInt64(r)
			s := x + y
			if (s > x) != (y > 0) {
				return Undefined(), errIntOverflow
			}
			return NewInt(s), nil
		case isNum(l) && isNum(r):
			return NewFloat(toFloat64(l) + toFloat64(r)), nil
		case l.IsString():
			return Undefined(), fmt.Errorf("can only concatenate str (not \"%s\") to str", typeName(r))
		case l.IsList():
			return Undefined(), fmt.Errorf("can only concatenate list (not \"%s\") to list", typeName(r))
		}
	case "-":
		switch {
		case isIntLike(l) && isIntLike(r):
			x, y := toInt64(l), toInt64(r)
			s := x - y
			if (s < x) != (y > 0) {
				return Undefined(), errIntOverflow
			}
			return NewInt(s), nil
		case isNum(l) && isNum(r):
			return NewFloat(toFloat64(l) - toFloat64(r)), nil
		}
	case "*":
		switch {
		case isIntLike(l) && isIntLike(r):
			x, y := toInt64(l), toInt64(r)
			hi, lo := bits.Mul64(uint64(absI(x)), uint64(absI(y)))
			if hi != 0 || lo > math.MaxInt64 || x == math.MinInt64 || y == math.MinInt64 {
				return Undefined(), errIntOverflow
			}
			return NewInt(x * y), nil
		case isNum(l) && isNum(r):
			return NewFloat(toFloat64(l) * toFloat64(r)), nil
		case (l.IsString() || l.IsList()) && isIntLike(r):
			return repeat(b, l, toInt64(r))
		case isIntLike(l) && (r.IsString() || r.IsList()):
			return repeat(b, r, toInt64(l))
		case l.IsString() || l.IsList() || r.IsString() || r.IsList():
			nonInt := r
			if r.IsString() || r.IsList() {
				nonInt = l
			}
			return Undefined(), fmt.Errorf("can't multiply sequence by non-int of type '%s'", typeName(nonInt))
		}
	case "/":
		if isNum(l) && isNum(r) {
			d := toFloat64(r)
			if d == 0 {
				return Undefined(), fmt.Errorf("division by zero")
			}
			return NewFloat(toFloat64(l) / d), nil
		}
	case "//", "%":
		switch {
		case isIntLike(l) && isIntLike(r):
			x, y := toInt64(l), toInt64(r)
			if y == 0 {
				if op == "//" {
					return Undefined(), fmt.Errorf("integer division or modulo by zero")
				}
				return Undefined(), fmt.Errorf("integer modulo by zero")
			}
			if x == math.MinInt64 && y == -1 {
				return Undefined(), errIntOverflow
			}
			q, m := x/y, x%y
			if m != 0 && (m < 0) != (y < 0) { // Python rounds toward negative infinity
				q--
				m += y
			}
			if op == "//" {
				return NewInt(q), nil
			}
			return NewInt(m), nil
		case isNum(l) && isNum(r):
			x, y := toFloat64(l), toFloat64(r)
			if y == 0 {
				if op == "//" {
					return Undefined(), fmt.Errorf("float floor division by zero")
				}
				return Undefined(), fmt.Errorf("float modulo")
			}
			if op == "//" {
				return NewFloat(math.Floor(x / y)), nil
			}
			m := math.Mod(x, y)
			if m != 0 && (m < 0) != (y < 0) {
				m += y
			}
			return NewFloat(m), nil
		case op == "%" && l.IsString():
			return Undefined(), fmt.Errorf("printf-style formatting with %% is not supported by this engine")
		}
	case "**":
		switch {
		case isIntLike(l) && isIntLike(r) && toInt64(r) >= 0:
			x, y := toInt64(l), toInt64(r)
			switch {
			case y == 0 || x == 1:
				return NewInt(1), nil
			case x == 0:
				return NewInt(0), nil
			case x == -1:
				return NewInt(1 - 2*(y%2)), nil
			}
			acc := int64(1)
			for ; y > 0; y-- { // |x| >= 2: at most 63 rounds before the overflow error
				v, err := arith(b, "*", NewInt(acc), NewInt(x))
				if err != nil {
					return Undefined(), err
				}
				acc = v.AsInt()
			}
			return NewInt(acc), nil
		case isNum(l) && isNum(r):
			x, y := toFloat64(l), toFloat64(r)
			if x == 0 && y < 0 {
				return Undefined(), fmt.Errorf("0.0 cannot be raised to a negative power")
			}
			return NewFloat(math.Pow(x, y)), nil
		}
	}
	return Undefined(), unsupported(op, l, r)
}

func absI(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// repeat is Python's sequence * n: empty for n <= 0, a budget error if the result would be too big.
func repeat(b *budget, seq Value, n int64) (Value, error) {
	if n <= 0 {
		if seq.IsString() {
			return NewString(""), nil
		}
		return NewList([]Value{}), nil
	}
	if seq.IsString() {
		s := seq.AsString()
		if len(s) > 0 && n > int64(b.lim.MaxOutputBytes)/int64(len(s)) {
			b.fail("output bytes", int64(b.lim.MaxOutputBytes))
		}
		b.str(int64(len(s)) * n)
		return NewString(strings.Repeat(s, int(n))), nil
	}
	src := seq.AsList().Items
	if len(src) == 0 { // [] * n is [] however large n is: no loop of n empty appends
		return NewList([]Value{}), nil
	}
	if n > int64(b.lim.MaxItems)/int64(len(src)) {
		b.fail("container size", int64(b.lim.MaxItems))
	}
	b.items(int64(len(src)) * n)
	items := make([]Value, 0, int64(len(src))*n)
	for range n {
		items = append(items, src...)
	}
	return NewList(items), nil
}

// compareOrdered is Python's <, >, <=, >= as a three-way result, or the TypeError Python raises.
func compareOrdered(op string, a, c Value) (int, error) {
	switch {
	case a.IsUndefined():
		return 0, undefinedError(a)
	case c.IsUndefined():
		return 0, undefinedError(c)
	case isNum(a) && isNum(c):
		x, y := toFloat64(a), toFloat64(c)
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	case a.IsString() && c.IsString():
		return strings.Compare(a.AsString(), c.AsString()), nil
	}
	return 0, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(c))
}

// containsValue is Python's `item in container`.
func containsValue(b *budget, container, item Value) (bool, error) {
	switch {
	case container.IsList():
		for _, v := range container.AsList().Items {
			if b.equal(v, item) {
				return true, nil
			}
		}
		return false, nil
	case container.IsDict():
		if !item.IsString() {
			return false, nil
		}
		return container.AsDict().Has(item.AsString()), nil
	case container.IsString():
		if !item.IsString() {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(container.AsString(), item.AsString()), nil
	case container.IsUndefined():
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}
