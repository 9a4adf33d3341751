package jinja

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Filters rewritten to behave as jinja2 3.1's under Hugging Face's
// settings (patches listed in README.md).

// filterNamed finds a built-in filter by name (for map('name')); set in
// init, as the filter table itself refers to map.
var filterNamed func(name string) (Value, bool)

func init() {
	filterNamed = func(name string) (Value, bool) { return lookupFilter(cachedBuiltins, name) }
}

// tojsonOptions are the keyword arguments of Hugging Face's tojson:
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys).
type tojsonOptions struct {
	indent   *string // nil: one line
	item     string
	key      string
	sortKeys bool
}

func filterTojson(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("TypeError: tojson needs a value")
	}
	o := tojsonOptions{item: ", ", key: ": "}
	indent, ok := kwargs["indent"]
	if !ok && len(args) > 2 {
		indent, ok = args[2], true
	}
	if ok && !indent.IsNone() && !indent.IsUndefined() {
		var pad string
		switch {
		case indent.IsString():
			pad = indent.AsString()
		case isInt(indent):
			if err := checkIndent(toInt64(indent)); err != nil {
				return Undefined(), err
			}
			pad = strings.Repeat(" ", int(max(toInt64(indent), 0)))
		default:
			return Undefined(), fmt.Errorf("TypeError: tojson indent must be an int or a string")
		}
		o.indent = &pad
		o.item = "," // Python's default item separator with an indent
	}
	if sep, ok := kwargs["separators"]; ok && !sep.IsNone() {
		if !sep.IsList() || sep.AsList().Len() != 2 || !sep.AsList().Items[0].IsString() || !sep.AsList().Items[1].IsString() {
			return Undefined(), fmt.Errorf("tojson: separators must contain two strings")
		}
		o.item, o.key = sep.AsList().Items[0].AsString(), sep.AsList().Items[1].AsString()
	}
	if sk, ok := kwargs["sort_keys"]; ok {
		o.sortKeys = sk.IsTruthy()
	}
	var sb strings.Builder
	if err := encodeJSON(&sb, args[0], o, 0); err != nil {
		return Undefined(), err
	}
	return NewString(sb.String()), nil
}

// encodeJSON writes v as Python's json.dumps does with ensure_ascii=False:
// keys in insertion order (unless sort_keys), nothing HTML-escaped, floats
// as repr writes them, and with an indent one item a line.
func encodeJSON(sb *strings.Builder, v Value, o tojsonOptions, depth int) error {
	newline := func(d int) {
		if o.indent != nil {
			sb.WriteByte('\n')
			sb.WriteString(strings.Repeat(*o.indent, d))
		}
	}
	switch v.kind {
	case KindUndefined:
		return fmt.Errorf("TypeError: Object of type Undefined is not JSON serializable")
	case KindCallable:
		return fmt.Errorf("TypeError: Object of type function is not JSON serializable")
	case KindNone:
		sb.WriteString("null")
	case KindBool:
		sb.WriteString(strconv.FormatBool(v.AsBool()))
	case KindInt:
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case KindFloat:
		f := v.AsFloat()
		switch {
		case math.IsNaN(f):
			sb.WriteString("NaN")
		case math.IsInf(f, 1):
			sb.WriteString("Infinity")
		case math.IsInf(f, -1):
			sb.WriteString("-Infinity")
		default:
			sb.WriteString(pyFloat(f))
		}
	case KindString:
		writeJSONString(sb, v.AsString())
	case KindList:
		if l := v.AsList(); l.lazy || l.view != "" {
			return fmt.Errorf("TypeError: Object of type %s is not JSON serializable", pyType(v))
		}
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				sb.WriteString(o.item)
			}
			newline(depth + 1)
			if err := encodeJSON(sb, item, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		sb.WriteByte(']')
	case KindDict:
		d := v.AsDict()
		if d.namespace {
			return fmt.Errorf("TypeError: Object of type Namespace is not JSON serializable")
		}
		if d.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		keys := d.Keys
		if o.sortKeys {
			var err error
			if keys, err = jsonSortedKeys(d); err != nil {
				return err
			}
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(o.item)
			}
			newline(depth + 1)
			writeJSONString(sb, jsonKey(d.KeyValue(k)))
			sb.WriteString(o.key)
			if err := encodeJSON(sb, d.Data[k], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		sb.WriteByte('}')
	}
	return nil
}

// writeJSONString quotes s as json.dumps(ensure_ascii=False) does: only
// the quote, the backslash and control characters are escaped.
func writeJSONString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(sb, `\u%04x`, r)
			} else {
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}

// iterArg is a filter's input as an iterable, or Python's TypeError.
func iterArg(filter string, args []Value) ([]Value, error) {
	if len(args) == 0 {
		return nil, nil
	}
	items, err := iterate(args[0])
	if err != nil {
		return nil, fmt.Errorf("%w (in the %s filter)", err, filter)
	}
	return items, nil
}

func filterJoin(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("join", args)
	if err != nil {
		return Undefined(), err
	}
	sep := ""
	if len(args) > 1 {
		sep = printValue(args[1])
	} else if d, ok := kwargs["d"]; ok {
		sep = printValue(d)
	}
	attr, hasAttr := kwargs["attribute"]
	if !hasAttr && len(args) > 2 {
		attr, hasAttr = args[2], true
	}
	parts := make([]string, len(items))
	for i, item := range items {
		if hasAttr {
			if item, err = attrPath(item, attr); err != nil {
				return Undefined(), err
			}
		}
		parts[i] = printValue(item)
	}
	return NewString(strings.Join(parts, sep)), nil
}

// attrPath is jinja2's environment.getitem along a dotted attribute
// ("function.name") or an integer index, missing parts being undefined.
func attrPath(v Value, attr Value) (Value, error) {
	if isInt(attr) {
		return getItem(v, attr), nil
	}
	for part := range strings.SplitSeq(printValue(attr), ".") {
		if v.IsUndefined() {
			return Undefined(), undefinedError(v)
		}
		key := NewString(part)
		if n, err := strconv.Atoi(part); err == nil {
			key = NewInt(int64(n))
		}
		v = getItem(v, key)
	}
	return v, nil
}

// getItem is a plain subscript: a dict's key, a list's or string's index;
// anything missing is undefined.
func getItem(v, key Value) Value {
	switch {
	case v.IsDict() && key.IsString():
		if x, ok := v.AsDict().Get(key.AsString()); ok {
			return x
		}
		return undefinedBecause("'dict object' has no attribute '%s'", key.AsString())
	case v.IsDict() && isInt(key):
		if x, ok := v.AsDict().Get(printValue(key)); ok {
			return x
		}
	case v.IsList() && isInt(key):
		i, items := int(toInt64(key)), v.AsList().Items
		if i < 0 {
			i += len(items)
		}
		if i >= 0 && i < len(items) {
			return items[i]
		}
	}
	return undefinedBecause("'%s object' has no attribute %s", pyType(v), key.String())
}

func filterFirst(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("first", args)
	if err != nil || len(items) == 0 {
		return undefinedBecause("No first item, sequence was empty."), err
	}
	return items[0], nil
}

func filterLast(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) > 0 && args[0].IsList() && args[0].AsList().lazy {
		return Undefined(), fmt.Errorf("TypeError: 'generator' object is not reversible")
	}
	items, err := iterArg("last", args)
	if err != nil || len(items) == 0 {
		return undefinedBecause("No last item, sequence was empty."), err
	}
	return items[len(items)-1], nil
}

func filterLength(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}
	switch v := args[0]; {
	case v.IsUndefined():
		return NewInt(0), nil
	case v.IsString():
		return NewInt(int64(len([]rune(v.AsString())))), nil
	case v.IsList() && v.AsList().lazy:
		return Undefined(), fmt.Errorf("TypeError: object of type 'generator' has no len()")
	case v.IsList():
		return NewInt(int64(v.AsList().Len())), nil
	case v.IsDict() && !v.AsDict().namespace:
		return NewInt(int64(v.AsDict().Len())), nil
	default:
		return Undefined(), fmt.Errorf("TypeError: object of type '%s' has no len()", pyType(v))
	}
}

func filterList(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("list", args)
	if err != nil {
		return Undefined(), err
	}
	return NewList(slices.Clone(items)), nil
}

// sortKey is the value a sort compares: the attribute named, lower-cased
// unless the sort is case-sensitive (jinja2's ignore_case).
func sortKey(v Value, attr Value, hasAttr, caseSensitive bool) (Value, error) {
	var err error
	if hasAttr {
		if v, err = attrPath(v, attr); err != nil {
			return Undefined(), err
		}
	}
	if !caseSensitive && v.IsString() {
		return NewString(strings.ToLower(v.AsString())), nil
	}
	return v, nil
}

// sortValues sorts stably by key as Python's sorted does, or returns the
// TypeError it raises for keys that do not order.
func sortValues(items []Value, keys []Value, reverse bool) error {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var err error
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := keys[idx[a]], keys[idx[b]]
		if reverse {
			x, y = y, x
		}
		if (x.IsUndefined() && y.IsUndefined()) || sameAs(x, y) {
			return false // jinja2 sorts these without comparing them
		}
		c, e := order("<", x, y)
		if e != nil && err == nil {
			err = e
		}
		return c < 0
	})
	if err != nil {
		return err
	}
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	copy(items, out)
	return nil
}

func boolArg(args []Value, i int, kwargs map[string]Value, name string) bool {
	if v, ok := kwargs[name]; ok {
		return v.IsTruthy()
	}
	return len(args) > i && args[i].IsTruthy()
}

func filterSort(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("sort", args)
	if err != nil {
		return Undefined(), err
	}
	items = slices.Clone(items)
	reverse := boolArg(args, 1, kwargs, "reverse")
	caseSensitive := boolArg(args, 2, kwargs, "case_sensitive")
	attr, hasAttr := kwargs["attribute"]
	if !hasAttr && len(args) > 3 {
		attr, hasAttr = args[3], true
	}
	keys := make([]Value, len(items))
	for i, it := range items {
		if keys[i], err = sortKey(it, attr, hasAttr, caseSensitive); err != nil {
			return Undefined(), err
		}
	}
	if err := sortValues(items, keys, reverse); err != nil {
		return Undefined(), err
	}
	return NewList(items), nil
}

func filterDictsort(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !isMapping(args[0]) {
		return Undefined(), fmt.Errorf("AttributeError: dictsort needs a mapping (its items)")
	}
	caseSensitive := boolArg(args, 1, kwargs, "case_sensitive")
	by := "key"
	if v, ok := kwargs["by"]; ok {
		by = printValue(v)
	} else if len(args) > 2 {
		by = printValue(args[2])
	}
	if by != "key" && by != "value" {
		return Undefined(), fmt.Errorf(`FilterArgumentError: You can only sort by either "key" or "value"`)
	}
	reverse := boolArg(args, 3, kwargs, "reverse")
	d := args[0].AsDict()
	items := make([]Value, len(d.Keys))
	keys := make([]Value, len(d.Keys))
	for i, k := range d.Keys {
		items[i] = newTuple(d.KeyValue(k), d.Data[k])
		v := d.KeyValue(k)
		if by == "value" {
			v = d.Data[k]
		}
		keys[i], _ = sortKey(v, Value{}, false, caseSensitive)
	}
	if err := sortValues(items, keys, reverse); err != nil {
		return Undefined(), err
	}
	return NewList(items), nil
}

func filterUnique(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("unique", args)
	if err != nil {
		return Undefined(), err
	}
	caseSensitive := boolArg(args, 1, kwargs, "case_sensitive")
	attr, hasAttr := kwargs["attribute"]
	var seen []Value
	var out []Value
	for _, it := range items {
		k, err := sortKey(it, attr, hasAttr, caseSensitive)
		if err != nil {
			return Undefined(), err
		}
		if err := hashable(k); err != nil {
			return Undefined(), err
		}
		if slices.ContainsFunc(seen, func(s Value) bool { return valuesEqual(s, k) }) {
			continue
		}
		seen = append(seen, k)
		out = append(out, it)
	}
	return NewList(out), nil
}

// extremum is the min or max filter.
func extremum(name string, args []Value, kwargs map[string]Value, want int) (Value, error) {
	items, err := iterArg(name, args)
	if err != nil {
		return Undefined(), err
	}
	if len(items) == 0 {
		return undefinedBecause("No aggregated item, sequence was empty."), nil
	}
	caseSensitive := boolArg(args, 1, kwargs, "case_sensitive")
	attr, hasAttr := kwargs["attribute"]
	best := items[0]
	bk, err := sortKey(best, attr, hasAttr, caseSensitive)
	if err != nil {
		return Undefined(), err
	}
	for _, it := range items[1:] {
		k, err := sortKey(it, attr, hasAttr, caseSensitive)
		if err != nil {
			return Undefined(), err
		}
		c, err := order("<", k, bk)
		if err != nil {
			return Undefined(), err
		}
		if c == want {
			best, bk = it, k
		}
	}
	return best, nil
}

func filterMax(args []Value, kwargs map[string]Value) (Value, error) {
	return extremum("max", args, kwargs, 1)
}

func filterMin(args []Value, kwargs map[string]Value) (Value, error) {
	return extremum("min", args, kwargs, -1)
}

func filterTrim(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := printValue(args[0])
	if len(args) > 1 && !args[1].IsNone() {
		return NewString(strings.Trim(s, printValue(args[1]))), nil
	}
	if c, ok := kwargs["chars"]; ok && !c.IsNone() {
		return NewString(strings.Trim(s, printValue(c))), nil
	}
	return NewString(strings.TrimFunc(s, isPySpace)), nil
}

// filterMap is map(attribute=…[, default=…]) or map('filter', args…).
func filterMap(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) > 0 && !args[0].IsTruthy() {
		return NewList(nil), nil // jinja2 maps only a true sequence
	}
	items, err := iterArg("map", args)
	if err != nil {
		return Undefined(), err
	}
	out := make([]Value, len(items))
	if attr, ok := kwargs["attribute"]; ok {
		def, hasDef := kwargs["default"]
		for i, it := range items {
			if out[i], err = attrPath(it, attr); err != nil {
				return Undefined(), err
			}
			if hasDef && out[i].IsUndefined() {
				out[i] = def
			}
		}
		return NewList(out), nil
	}
	if len(args) < 2 {
		return Undefined(), fmt.Errorf("FilterArgumentError: map requires a filter argument")
	}
	name := printValue(args[1])
	f, ok := filterNamed(name)
	if !ok {
		return Undefined(), fmt.Errorf("TemplateRuntimeError: No filter named '%s'", name)
	}
	for i, it := range items {
		if out[i], err = f.AsCallable().Fn(append([]Value{it}, args[2:]...), kwargs); err != nil {
			return Undefined(), err
		}
	}
	return NewList(out), nil // a generator in jinja2
}

// selectOrReject is select, reject, selectattr and rejectattr: keep the
// items whose value (or attribute, with attr) passes the named test, or is
// truthy when no test is named, or (reject) does not.
func selectOrReject(name string, args []Value, attr, keep bool) (Value, error) {
	if len(args) > 0 && !args[0].IsTruthy() {
		return NewList(nil), nil // jinja2 iterates only a true sequence
	}
	items, err := iterArg(name, args)
	if err != nil {
		return Undefined(), err
	}
	rest := args[min(1, len(args)):]
	var attrName Value
	if attr {
		if len(rest) == 0 {
			return Undefined(), fmt.Errorf("TypeError: %s needs an attribute name", name)
		}
		attrName, rest = rest[0], rest[1:]
	}
	test := ""
	if len(rest) > 0 {
		test, rest = printValue(rest[0]), rest[1:]
	}
	var out []Value
	for _, it := range items {
		v := it
		if attr {
			if v, err = attrPath(it, attrName); err != nil {
				return Undefined(), err
			}
		}
		pass := v.IsTruthy()
		if test != "" {
			if pass, err = evalTest(test, v, rest); err != nil {
				return Undefined(), err
			}
		}
		if pass == keep {
			out = append(out, it)
		}
	}
	return NewList(out), nil // a generator in jinja2
}

func filterSelect(args []Value, kwargs map[string]Value) (Value, error) {
	return generator(selectOrReject, "select", args, false, true), nil
}

func filterReject(args []Value, kwargs map[string]Value) (Value, error) {
	return generator(selectOrReject, "reject", args, false, false), nil
}

func filterSelectattr(args []Value, kwargs map[string]Value) (Value, error) {
	return generator(selectOrReject, "selectattr", args, true, true), nil
}

func filterRejectattr(args []Value, kwargs map[string]Value) (Value, error) {
	return generator(selectOrReject, "rejectattr", args, true, false), nil
}

// generator defers a select-family filter to when its result is first
// iterated, as jinja2's generator filters run.
func generator(f func(string, []Value, bool, bool) (Value, error), name string, args []Value, attr, keep bool) Value {
	return newGenerator("select_or_reject", func() ([]Value, error) {
		v, err := f(name, args, attr, keep)
		if err != nil {
			return nil, err
		}
		return v.AsList().Items, nil
	})
}

// lazily defers a filter that is a generator in jinja2 (map, unique,
// batch) to when its result is first iterated.
func lazily(name string, f func([]Value, map[string]Value) (Value, error)) func([]Value, map[string]Value) (Value, error) {
	return func(args []Value, kwargs map[string]Value) (Value, error) {
		return newGenerator(name, func() ([]Value, error) {
			v, err := f(args, kwargs)
			if err != nil {
				return nil, err
			}
			return v.AsList().Items, nil
		}), nil
	}
}

// filterIndent is jinja2 3.1's indent(width=4, first=False, blank=False),
// splitting lines as Python's str.splitlines does.
func filterIndent(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	if !args[0].IsString() {
		if args[0].IsUndefined() {
			return Undefined(), undefinedError(args[0])
		}
		return Undefined(), fmt.Errorf("TypeError: indent needs a string, not %s", pyType(args[0]))
	}
	s := args[0].AsString()
	width := Value(NewInt(4))
	if len(args) > 1 {
		width = args[1]
	}
	if w, ok := kwargs["width"]; ok {
		width = w
	}
	var pad string
	if width.IsString() {
		pad = width.AsString()
	} else if err := checkIndent(toInt64(width)); err != nil {
		return Undefined(), err
	} else {
		pad = strings.Repeat(" ", int(max(toInt64(width), 0)))
	}
	first := boolArg(args, 2, kwargs, "first")
	blank := boolArg(args, 3, kwargs, "blank")
	lines := pySplitlines(s + "\n")
	if len(pad)*len(lines) > maxValue {
		return Undefined(), fmt.Errorf("MemoryError: an indent of %d bytes on %d lines is over %d MiB", len(pad), len(lines), maxValue>>20)
	}
	var rv string
	if blank {
		rv = strings.Join(lines, "\n"+pad)
	} else {
		rv = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = pad + l
				}
				rest[i] = l
			}
			rv += "\n" + strings.Join(rest, "\n")
		}
	}
	if first {
		rv = pad + rv
	}
	return NewString(rv), nil
}

// JSONString is s as Hugging Face's tojson writes a string: a JSON string
// literal, quotes included, escaped as json.dumps(ensure_ascii=False) does.
func JSONString(s string) string {
	var sb strings.Builder
	writeJSONString(&sb, s)
	return sb.String()
}

func filterReverse(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("TypeError: reverse needs a value")
	}
	v := args[0]
	switch {
	case v.IsString():
		runes := []rune(v.AsString())
		slices.Reverse(runes)
		return NewString(string(runes)), nil
	case v.IsUndefined():
		return newLazy("list_reverseiterator object", nil), nil
	}
	items, err := iterate(v)
	if err != nil {
		return Undefined(), fmt.Errorf("FilterArgumentError: argument must be iterable")
	}
	out := slices.Clone(items)
	slices.Reverse(out)
	if v.IsList() && v.AsList().lazy {
		// reversed() refuses a generator; jinja2 then reverses a list of
		// its items.
		return NewList(out), nil
	}
	if v.IsDict() {
		return newLazy("dict_reversekeyiterator object", out), nil
	}
	return newLazy("list_reverseiterator object", out), nil // reversed(): an iterator
}

func filterAbs(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !isNum(args[0]) {
		t := "Undefined"
		if len(args) > 0 {
			t = pyType(args[0])
		}
		return Undefined(), fmt.Errorf("TypeError: bad operand type for abs(): '%s'", t)
	}
	if v := args[0]; v.IsFloat() {
		return NewFloat(math.Abs(v.AsFloat())), nil
	}
	n := toInt64(args[0])
	if n < 0 {
		n = -n
	}
	return NewInt(n), nil
}

// filterSum is sum(iterable, attribute=None, start=0): Python's + over
// the items, raising where + does.
func filterSum(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("sum", args)
	if err != nil {
		return Undefined(), err
	}
	attr, hasAttr := kwargs["attribute"]
	if !hasAttr && len(args) > 1 {
		attr, hasAttr = args[1], true
	}
	total := Value(NewInt(0))
	if st, ok := kwargs["start"]; ok {
		total = st
	} else if len(args) > 2 {
		total = args[2]
	}
	for _, it := range items {
		if hasAttr {
			if it, err = attrPath(it, attr); err != nil {
				return Undefined(), err
			}
		}
		if total, err = arith("+", total, it); err != nil {
			return Undefined(), err
		}
	}
	return total, nil
}

func filterBatch(args []Value, kwargs map[string]Value) (Value, error) {
	items, err := iterArg("batch", args)
	if err != nil {
		return Undefined(), err
	}
	if len(args) < 2 || !isInt(args[1]) || toInt64(args[1]) <= 0 {
		return Undefined(), fmt.Errorf("TypeError: batch needs a positive line count")
	}
	n := int(toInt64(args[1]))
	var batches []Value
	for i := 0; i < len(items); i += n {
		batch := slices.Clone(items[i:min(i+n, len(items))])
		if len(args) > 2 && len(batch) < n {
			for len(batch) < n {
				batch = append(batch, args[2])
			}
		}
		batches = append(batches, NewList(batch))
	}
	return NewList(batches), nil
}

// jsonSortedKeys is d's keys as json.dumps(sort_keys=True) orders them:
// strings as strings, numbers (ints, floats, bools) by value; keys of
// both kinds, or None, cannot be ordered, and Python raises.
func jsonSortedKeys(d *Dict) ([]string, error) {
	keys := slices.Clone(d.Keys)
	var str, num, other []Value
	for _, k := range keys {
		switch v := d.KeyValue(k); {
		case v.IsString():
			str = append(str, v)
		case isInt(v) || v.kind == KindFloat || v.kind == KindBool:
			num = append(num, v)
		default:
			other = append(other, v)
		}
	}
	switch {
	case len(other) > 0 && len(keys) > 1:
		return nil, fmt.Errorf("TypeError: '<' not supported between instances of '%s' and '%s'", pyType(other[0]), pyType(d.KeyValue(keys[0])))
	case len(str) > 0 && len(num) > 0:
		return nil, fmt.Errorf("TypeError: '<' not supported between instances of '%s' and '%s'", pyType(str[0]), pyType(num[0]))
	case len(num) > 0:
		number := func(k string) float64 {
			v := d.KeyValue(k)
			switch {
			case v.kind == KindBool:
				if v.AsBool() {
					return 1
				}
				return 0
			case v.kind == KindFloat:
				return v.AsFloat()
			}
			return float64(toInt64(v))
		}
		slices.SortStableFunc(keys, func(a, b string) int {
			na, nb := number(a), number(b)
			switch {
			case na < nb:
				return -1
			case na > nb:
				return 1
			}
			return 0
		})
	default:
		sort.Strings(keys)
	}
	return keys, nil
}

// jsonKey is a dict key as json.dumps writes it: a string as it is, an
// int in decimal, a float as repr, true, false and null for the others.
func jsonKey(k Value) string {
	switch {
	case k.kind == KindBool:
		return strconv.FormatBool(k.AsBool())
	case k.kind == KindNone:
		return "null"
	case k.kind == KindFloat:
		return pyFloat(k.AsFloat())
	case isInt(k):
		return strconv.FormatInt(toInt64(k), 10)
	}
	return k.AsString()
}
