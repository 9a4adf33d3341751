package jinja

import (
	"fmt"
	"math"
	"strings"
)

// The operators as Python evaluates them for jinja2: the same result
// types (int stays int, / is always float, // and % floor), and the same
// errors where Python raises (a string plus a dict, arithmetic on an
// undefined value, ordering a string against a number, dividing by zero).

// pyType is the name Python gives v's type in its error messages.
func pyType(v Value) string {
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
		switch l := v.AsList(); {
		case l.lazy:
			typ, _, _ := strings.Cut(l.object, " ")
			return typ
		case l.tuple:
			return "tuple"
		case l.view != "":
			return l.view
		}
		return "list"
	case KindDict:
		if v.AsDict().namespace {
			return "Namespace"
		}
		return "dict"
	}
	return "function"
}

// isMapping reports whether v is a dict (a namespace() object is not).
func isMapping(v Value) bool { return v.IsDict() && !v.AsDict().namespace }

// isNum reports whether v is a Python number (bools are ints there).
func isNum(v Value) bool { return v.IsInt() || v.IsFloat() || v.IsBool() }

// isInt reports whether v is a Python int (a bool counts).
func isInt(v Value) bool { return v.IsInt() || v.IsBool() }

func unsupported(op string, a, b Value) error {
	return fmt.Errorf("TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op, pyType(a), pyType(b))
}

// arith evaluates a binary arithmetic operator.
func arith(op string, a, b Value) (Value, error) {
	if a.IsUndefined() {
		return Undefined(), undefinedError(a)
	}
	if b.IsUndefined() {
		return Undefined(), undefinedError(b)
	}
	switch op {
	case "+":
		switch {
		case a.IsString() && b.IsString():
			return concatenated(a.AsString(), b.AsString())
		case a.IsString():
			return Undefined(), fmt.Errorf("TypeError: can only concatenate str (not \"%s\") to str", pyType(b))
		case a.IsList() && b.IsList() && pyType(a) == pyType(b) && !a.AsList().lazy && a.AsList().view == "":
			items := make([]Value, 0, a.AsList().Len()+b.AsList().Len())
			items = append(items, a.AsList().Items...)
			items = append(items, b.AsList().Items...)
			return NewList(items), nil
		case pyType(a) == "list" || pyType(a) == "tuple":
			return Undefined(), fmt.Errorf("TypeError: can only concatenate %s (not \"%s\") to %s", pyType(a), pyType(b), pyType(a))
		}
	case "*":
		switch {
		case (a.IsString() || plainList(a)) && isInt(b):
			return repeat(a, toInt64(b))
		case isInt(a) && (b.IsString() || plainList(b)):
			return repeat(b, toInt64(a))
		}
	}
	if !isNum(a) || !isNum(b) {
		return Undefined(), unsupported(op, a, b)
	}
	if isInt(a) && isInt(b) {
		x, y := toInt64(a), toInt64(b)
		switch op {
		case "+":
			return NewInt(x + y), nil
		case "-":
			return NewInt(x - y), nil
		case "*":
			return NewInt(x * y), nil
		case "/":
			if y == 0 {
				return Undefined(), fmt.Errorf("ZeroDivisionError: division by zero")
			}
			return NewFloat(float64(x) / float64(y)), nil
		case "//", "%":
			if y == 0 {
				if op == "%" {
					return Undefined(), fmt.Errorf("ZeroDivisionError: integer modulo by zero")
				}
				return Undefined(), fmt.Errorf("ZeroDivisionError: integer division or modulo by zero")
			}
			q, r := x/y, x%y
			if r != 0 && (r < 0) != (y < 0) {
				q--
				r += y
			}
			if op == "//" {
				return NewInt(q), nil
			}
			return NewInt(r), nil
		case "**":
			if x == 0 && y < 0 {
				return Undefined(), fmt.Errorf("ZeroDivisionError: 0.0 cannot be raised to a negative power")
			}
			if y >= 0 {
				// By squaring: the same product (int64's, as the loop
				// it replaces wrapped it) in log2(y) steps, so 2 ** 10**18
				// ends.
				n, base := int64(1), x
				for ; y > 0; y >>= 1 {
					if y&1 == 1 {
						n *= base
					}
					base *= base
				}
				return NewInt(n), nil
			}
			return NewFloat(math.Pow(float64(x), float64(y))), nil
		}
	}
	x, y := toFloat64(a), toFloat64(b)
	switch op {
	case "+":
		return NewFloat(x + y), nil
	case "-":
		return NewFloat(x - y), nil
	case "*":
		return NewFloat(x * y), nil
	case "/":
		if y == 0 {
			return Undefined(), fmt.Errorf("ZeroDivisionError: float division by zero")
		}
		return NewFloat(x / y), nil
	case "//", "%":
		if y == 0 {
			return Undefined(), fmt.Errorf("ZeroDivisionError: float modulo")
		}
		m := math.Mod(x, y)
		if m != 0 && (m < 0) != (y < 0) {
			m += y
		}
		if op == "%" {
			return NewFloat(m), nil
		}
		return NewFloat(math.Floor((x - m) / y)), nil
	case "**":
		if x == 0 && y < 0 {
			return Undefined(), fmt.Errorf("ZeroDivisionError: 0.0 cannot be raised to a negative power")
		}
		return NewFloat(math.Pow(x, y)), nil
	}
	return Undefined(), fmt.Errorf("unknown operator %q", op)
}

// hashable is nil for a value Python can hash (a dict key, a set
// member), or the TypeError it raises: lists, dicts and views are not.
func hashable(v Value) error {
	switch {
	case v.IsDict() && !v.AsDict().namespace, v.IsList() && !v.AsList().lazy && !v.AsList().tuple:
		return fmt.Errorf("TypeError: unhashable type: '%s'", pyType(v))
	case v.IsList() && v.AsList().tuple:
		for _, x := range v.AsList().Items {
			if err := hashable(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainList reports whether v is a list or tuple (not an iterator or a
// dict view, which Python does not order, repeat or add).
func plainList(v Value) bool {
	return v.IsList() && !v.AsList().lazy && v.AsList().view == ""
}

func repeat(v Value, n int64) (Value, error) {
	if n < 0 {
		n = 0
	}
	if v.IsString() {
		if s := v.AsString(); len(s) > 0 && n > int64(maxValue/len(s)) {
			return Undefined(), fmt.Errorf("MemoryError: a string of %d bytes repeated %d times is over %d MiB", len(s), n, maxValue>>20)
		}
		return NewString(strings.Repeat(v.AsString(), int(n))), nil
	}
	k := len(v.AsList().Items)
	if k > 0 && n > int64(maxValue/k) {
		return Undefined(), fmt.Errorf("MemoryError: a list of %d items repeated %d times is over %d items", k, n, maxValue)
	}
	if k == 0 {
		n = 0 // nothing to repeat, however often
	}
	var items []Value
	for range n {
		items = append(items, v.AsList().Items...)
	}
	if v.AsList().tuple {
		return newTuple(items...), nil
	}
	return NewList(items), nil
}

// order compares a and b for <, >, <= and >=, as Python orders them:
// numbers with numbers, strings with strings, lists item by item; any other
// pair is a TypeError.
func order(op string, a, b Value) (int, error) {
	if a.IsUndefined() {
		return 0, undefinedError(a)
	}
	if b.IsUndefined() {
		return 0, undefinedError(b)
	}
	switch {
	case isNum(a) && isNum(b):
		x, y := toFloat64(a), toFloat64(b)
		if isInt(a) && isInt(b) {
			return cmpInt(toInt64(a), toInt64(b)), nil
		}
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	case a.IsString() && b.IsString():
		return strings.Compare(a.AsString(), b.AsString()), nil
	case plainList(a) && plainList(b) && pyType(a) == pyType(b):
		x, y := a.AsList().Items, b.AsList().Items
		for i := 0; i < len(x) && i < len(y); i++ {
			if valuesEqual(x[i], y[i]) {
				continue
			}
			return order(op, x[i], y[i])
		}
		return cmpInt(int64(len(x)), int64(len(y))), nil
	}
	return 0, fmt.Errorf("TypeError: '%s' not supported between instances of '%s' and '%s'", op, pyType(a), pyType(b))
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// contains evaluates `item in container` as Python does.
func contains(container, item Value) (bool, error) {
	switch {
	case container.IsUndefined():
		return false, nil // jinja2's Undefined iterates as empty
	case container.IsList():
		items, err := container.AsList().drain()
		if err != nil {
			return false, err
		}
		for _, v := range items {
			if valuesEqual(v, item) {
				return true, nil
			}
		}
		return false, nil
	case container.IsDict() && container.AsDict().namespace:
		return false, fmt.Errorf("TypeError: argument of type 'Namespace' is not iterable")
	case container.IsDict():
		if err := hashable(item); err != nil {
			return false, err
		}
		return container.AsDict().HasKey(item), nil
	case container.IsString():
		if !item.IsString() {
			return false, fmt.Errorf("TypeError: 'in <string>' requires string as left operand, not %s", pyType(item))
		}
		return strings.Contains(container.AsString(), item.AsString()), nil
	}
	return false, fmt.Errorf("TypeError: argument of type '%s' is not iterable", pyType(container))
}

// iterate is what a for loop (and filters that take any iterable) walks:
// a list's items, a dict's keys, a string's characters, nothing for an
// undefined value; anything else is not iterable, as in Python.
func iterate(v Value) ([]Value, error) {
	switch {
	case v.IsUndefined():
		return nil, nil
	case v.IsList():
		return v.AsList().drain()
	case v.IsDict() && v.AsDict().namespace:
		return nil, fmt.Errorf("TypeError: 'Namespace' object is not iterable")
	case v.IsDict():
		d := v.AsDict()
		items := make([]Value, 0, len(d.Keys))
		for _, key := range d.Keys {
			items = append(items, d.KeyValue(key))
		}
		return items, nil
	case v.IsString():
		var items []Value
		for _, r := range v.AsString() {
			items = append(items, NewString(string(r)))
		}
		return items, nil
	}
	return nil, fmt.Errorf("TypeError: '%s' object is not iterable", pyType(v))
}
