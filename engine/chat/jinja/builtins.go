package jinja

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// cachedBuiltins is a read-only scope populated once with all built-in
// globals and filters. It is shared across every render — no code path
// writes to the builtins scope (only chained reads through parent
// links and lookupFilter), so a single shared instance is safe and
// avoids ~20 allocations per render.
var cachedBuiltins = func() *scope {
	s := newScope(nil)
	registerGlobals(s)
	registerFilters(s)
	return s
}()

// =============================================================================
// Global functions
// =============================================================================

func registerGlobals(s *scope) {
	s.set("namespace", NewCallable("namespace", builtinNamespace))
	s.set("raise_exception", NewCallable("raise_exception", builtinRaiseException))
	s.set("range", NewCallable("range", builtinRange))
	s.set("joiner", NewCallable("joiner", builtinJoiner))
	s.set("dict", NewCallable("dict", builtinDict))
	s.set("cycler", NewCallable("cycler", builtinCycler))
	s.set("strftime_now", NewCallable("strftime_now", builtinStrftimeNow))
}

func builtinNamespace(args []Value, kwargs map[string]Value) (Value, error) {
	d := NewDict()
	dict := d.AsDict()
	dict.namespace = true
	for _, a := range args {
		if a.IsDict() {
			for _, k := range a.AsDict().Keys {
				dict.Set(k, a.AsDict().Data[k])
			}
		}
	}
	for _, k := range sortedKeys(kwargs) {
		dict.Set(k, kwargs[k])
	}
	return d, nil
}

// sortedKeys are a kwargs map's keys in a fixed order (the call's own
// order is lost by then; sorted at least renders the same every time).
func sortedKeys(m map[string]Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func builtinRaiseException(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("raise_exception: missing message")
	}
	return Undefined(), fmt.Errorf("%s", printValue(args[0]))
}

func builtinRange(args []Value, kwargs map[string]Value) (Value, error) {
	var start, stop, step int64
	switch len(args) {
	case 1:
		start = 0
		stop = toInt64(args[0])
		step = 1
	case 2:
		start = toInt64(args[0])
		stop = toInt64(args[1])
		step = 1
	case 3:
		start = toInt64(args[0])
		stop = toInt64(args[1])
		step = toInt64(args[2])
	default:
		return Undefined(), fmt.Errorf("range: expected 1-3 arguments, got %d", len(args))
	}

	if step == 0 {
		return Undefined(), fmt.Errorf("range: step must not be zero")
	}
	// jinja2's sandbox (safe_range) refuses a range of more than
	// MAX_RANGE items.
	if n := rangeLen(start, stop, step); n > maxRange {
		return Undefined(), fmt.Errorf("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}

	var items []Value
	if step > 0 {
		for i := start; i < stop; i += step {
			items = append(items, NewInt(i))
		}
	} else {
		for i := start; i > stop; i += step {
			items = append(items, NewInt(i))
		}
	}

	return NewList(items), nil
}

func builtinJoiner(args []Value, kwargs map[string]Value) (Value, error) {
	sep := ""
	if len(args) > 0 {
		sep = printValue(args[0])
	}

	first := true
	return NewCallable("joiner", func(args []Value, kwargs map[string]Value) (Value, error) {
		if first {
			first = false
			return NewString(""), nil
		}
		return NewString(sep), nil
	}), nil
}

func builtinDict(args []Value, kwargs map[string]Value) (Value, error) {
	d := NewDict()
	dict := d.AsDict()
	for _, k := range sortedKeys(kwargs) {
		dict.Set(k, kwargs[k])
	}
	return d, nil
}

func builtinStrftimeNow(args []Value, kwargs map[string]Value) (Value, error) {
	format := "%Y-%m-%d"
	if len(args) > 0 {
		format = printValue(args[0])
	}

	// Convert Python strftime format to Go time format.
	now := time.Now()
	goFmt := strftimeToGo(format)
	return NewString(now.Format(goFmt)), nil
}

// strftimeToGo converts a Python strftime format string to a Go time format.
func strftimeToGo(format string) string {
	r := strings.NewReplacer(
		"%Y", "2006",
		"%m", "01",
		"%d", "02",
		"%H", "15",
		"%M", "04",
		"%S", "05",
		"%B", "January",
		"%b", "Jan",
		"%A", "Monday",
		"%a", "Mon",
		"%p", "PM",
		"%I", "03",
		"%Z", "MST",
		"%%", "%",
	)
	return r.Replace(format)
}

func builtinCycler(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), fmt.Errorf("cycler: expected at least one argument")
	}

	idx := 0
	items := make([]Value, len(args))
	copy(items, args)

	d := NewDict()
	dict := d.AsDict()
	dict.Set("current", items[0])
	dict.Set("next", NewCallable("cycler.next", func(a []Value, kw map[string]Value) (Value, error) {
		v := items[idx]
		idx = (idx + 1) % len(items)
		dict.Set("current", items[idx])
		return v, nil
	}))
	dict.Set("reset", NewCallable("cycler.reset", func(a []Value, kw map[string]Value) (Value, error) {
		idx = 0
		dict.Set("current", items[0])
		return None(), nil
	}))

	return d, nil
}

// =============================================================================
// Filter functions
// =============================================================================

func registerFilters(s *scope) {
	filters := map[string]func([]Value, map[string]Value) (Value, error){
		"tojson":     filterTojson,
		"from_json":  filterFromjson,
		"fromjson":   filterFromjson,
		"items":      filterItems,
		"join":       filterJoin,
		"default":    filterDefault,
		"d":          filterDefault,
		"trim":       filterTrim,
		"lower":      filterLower,
		"upper":      filterUpper,
		"title":      filterTitle,
		"capitalize": filterCapitalize,
		"first":      filterFirst,
		"last":       filterLast,
		"length":     filterLength,
		"count":      filterLength,
		"reverse":    filterReverse,
		"sort":       filterSort,
		"unique":     lazily("sync_do_unique", filterUnique),
		"list":       filterList,
		"int":        filterInt,
		"float":      filterFloatConv,
		"string":     filterString,
		"safe":       filterSafe,
		"replace":    filterReplace,
		"round":      filterRound,
		"abs":        filterAbs,
		"map":        lazily("sync_do_map", filterMap),
		"select":     filterSelect,
		"reject":     filterReject,
		"selectattr": filterSelectattr,
		"rejectattr": filterRejectattr,
		"indent":     filterIndent,
		"wordcount":  filterWordcount,
		"escape":     filterEscape,
		"e":          filterEscape,
		"dictsort":   filterDictsort,
		"max":        filterMax,
		"min":        filterMin,
		"sum":        filterSum,
		"batch":      lazily("do_batch", filterBatch),
	}

	for name, fn := range filters {
		s.set("__filter_"+name, NewCallable(name, fn))
	}
}

// lookupFilter retrieves a filter callable from the scope chain.
func lookupFilter(s *scope, name string) (Value, bool) {
	return s.get("__filter_" + name)
}

// =============================================================================
// Test evaluation
// =============================================================================

func evalTest(name string, val Value, args []Value) (bool, error) {
	switch name {
	case "defined", "undefined", "none", "boolean", "integer", "float", "number", "string", "mapping",
		"iterable", "sequence", "callable", "true", "false", "odd", "even", "upper", "lower":
		if len(args) > 0 {
			return false, fmt.Errorf("TypeError: test_%s() takes 1 positional argument but %d were given", name, len(args)+1)
		}
	}
	arg := func() (Value, error) {
		if len(args) < 1 {
			return Undefined(), fmt.Errorf("TypeError: test %q needs an argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		return !val.IsUndefined(), nil
	case "undefined":
		return val.IsUndefined(), nil
	case "none":
		return val.IsNone(), nil
	case "boolean":
		return val.IsBool(), nil
	case "integer":
		return val.IsInt(), nil
	case "float":
		return val.IsFloat(), nil
	case "number":
		return isNum(val), nil // a bool is a number in Python
	case "string":
		return val.IsString(), nil
	case "mapping":
		return isMapping(val), nil
	case "iterable":
		return val.IsList() || isMapping(val) || val.IsString() || val.IsUndefined(), nil
	case "sequence":
		return (val.IsList() && !val.AsList().lazy) || isMapping(val) || val.IsString() || val.IsUndefined(), nil
	case "callable":
		return val.IsCallable(), nil
	case "true":
		return val.IsBool() && val.AsBool(), nil
	case "false":
		return val.IsBool() && !val.AsBool(), nil
	case "eq", "equalto", "==", "ne", "!=":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return valuesEqual(val, a) == (name == "eq" || name == "equalto" || name == "=="), nil
	case "gt", "greaterthan", ">", "ge", ">=", "lt", "lessthan", "<", "le", "<=":
		a, err := arg()
		if err != nil {
			return false, err
		}
		op := map[string]string{"gt": ">", "greaterthan": ">", "ge": ">=", "lt": "<", "lessthan": "<", "le": "<="}[name]
		if op == "" {
			op = name
		}
		c, err := order(op, val, a)
		if err != nil {
			return false, err
		}
		return map[string]bool{">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op], nil
	case "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return contains(a, val)
	case "odd", "even", "divisibleby":
		n := Value(NewInt(2))
		if name == "divisibleby" {
			var err error
			if n, err = arg(); err != nil {
				return false, err
			}
		}
		if val.IsString() {
			return false, fmt.Errorf("TypeError: not all arguments converted during string formatting")
		}
		r, err := arith("%", val, n)
		if err != nil {
			return false, err
		}
		if name == "odd" {
			return valuesEqual(r, NewInt(1)), nil
		}
		return valuesEqual(r, NewInt(0)), nil
	case "upper", "lower":
		s := printValue(val) // jinja2 tests str(value)
		if name == "upper" {
			return s == strings.ToUpper(s) && s != strings.ToLower(s), nil
		}
		return s == strings.ToLower(s) && s != strings.ToUpper(s), nil
	case "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return sameAs(val, a), nil
	}

	return false, fmt.Errorf("TemplateRuntimeError: no test named '%s'", name)
}

// sameAs is Python's `is` as far as templates can tell: None, True and
// False are singletons, a list or dict is only itself, and small ints and
// strings compare by value (CPython interns them).
func sameAs(a, b Value) bool {
	switch {
	case a.kind != b.kind:
		return false
	case a.IsList():
		return a.AsList() == b.AsList()
	case a.IsDict():
		return a.AsDict() == b.AsDict()
	case a.IsInt():
		return a.AsInt() == b.AsInt() && a.AsInt() >= -5 && a.AsInt() <= 256
	case a.IsFloat(), a.IsCallable():
		return false
	}
	return a.Equals(b)
}

// =============================================================================
// Filter implementations
// =============================================================================

func filterFromjson(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 || !args[0].IsString() {
		return Undefined(), nil
	}

	var result any
	if err := json.Unmarshal([]byte(args[0].AsString()), &result); err != nil {
		return Undefined(), fmt.Errorf("fromjson: %w", err)
	}

	return FromGoValue(result), nil
}

func filterItems(args []Value, kwargs map[string]Value) (Value, error) {
	// A generator in jinja2: a non-mapping raises when it is iterated.
	return newGenerator("do_items", func() ([]Value, error) { return itemsOf(args) }), nil
}

func itemsOf(args []Value) ([]Value, error) {
	if len(args) == 0 || args[0].IsUndefined() {
		return nil, nil
	}

	// Python jinja2's |items filter raises TemplateError when applied to
	// anything that isn't a mapping, and several chat templates rely on
	// that error to bail out of an unsupported branch (e.g. when a
	// tool_call's `arguments` is a JSON string instead of an object).
	// Silently returning an empty list here let those templates render
	// invalid prompts. The wording deliberately matches Python jinja2 so
	// templates that surface this string get an identical message.
	if !isMapping(args[0]) {
		//lint:ignore ST1005 message text mirrors Python jinja2 verbatim
		return nil, fmt.Errorf("TypeError: Can only get item pairs from a mapping.")
	}

	d := args[0].AsDict()
	items := make([]Value, 0, d.Len())
	for _, key := range d.Keys {
		items = append(items, newTuple(d.KeyValue(key), d.Data[key]))
	}

	return items, nil
}

func filterDefault(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return Undefined(), nil
	}

	val := args[0]
	defVal := NewString("")
	if len(args) > 1 {
		defVal = args[1]
	}

	boolean := false
	if len(args) > 2 && args[2].IsBool() {
		boolean = args[2].AsBool()
	} else if b, ok := kwargs["boolean"]; ok && b.IsBool() {
		boolean = b.AsBool()
	}

	if val.IsUndefined() {
		return defVal, nil
	}

	if boolean && !val.IsTruthy() {
		return defVal, nil
	}

	return val, nil
}

func filterLower(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return NewString(strings.ToLower(printValue(args[0]))), nil
}

func filterUpper(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return NewString(strings.ToUpper(printValue(args[0]))), nil
}

// wordBeginnings are where jinja2's title filter starts a word.
var wordBeginnings = regexp.MustCompile(`[-\s({\[<]+`)

// filterTitle is jinja2's title: each piece between runs of "-",
// whitespace and opening brackets gets an upper-case first character and
// lower-case rest.
func filterTitle(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := printValue(args[0])
	var b strings.Builder
	last := 0
	word := func(w string) {
		if w == "" {
			return
		}
		r := []rune(w)
		b.WriteString(strings.ToUpper(string(r[0])) + strings.ToLower(string(r[1:])))
	}
	for _, loc := range wordBeginnings.FindAllStringIndex(s, -1) {
		word(s[last:loc[0]])
		word(s[loc[0]:loc[1]])
		last = loc[1]
	}
	word(s[last:])
	return NewString(b.String()), nil
}

func filterCapitalize(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := printValue(args[0])
	if len(s) == 0 {
		return NewString(""), nil
	}
	runes := []rune(s)
	runes[0] = unicode.ToUpper(runes[0])
	for i := 1; i < len(runes); i++ {
		runes[i] = unicode.ToLower(runes[i])
	}
	return NewString(string(runes)), nil
}

// filterInt is jinja2's int(value, default=0): Python's int(), then
// int(float()), then the default; an undefined value raises.
func filterInt(args []Value, kwargs map[string]Value) (Value, error) {
	def := Value(NewInt(0))
	if len(args) > 1 {
		def = args[1]
	} else if d, ok := kwargs["default"]; ok {
		def = d
	}
	if len(args) == 0 {
		return def, nil
	}
	switch v := args[0]; {
	case v.IsUndefined():
		return Undefined(), undefinedError(v)
	case isInt(v):
		return NewInt(toInt64(v)), nil
	case v.IsFloat():
		if f := v.AsFloat(); !math.IsInf(f, 0) && !math.IsNaN(f) {
			return NewInt(int64(f)), nil
		}
	case v.IsString():
		t := strings.TrimFunc(v.AsString(), isPySpace)
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return NewInt(n), nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return NewInt(int64(f)), nil
		}
	}
	return def, nil
}

// filterFloatConv is jinja2's float(value, default=0.0): Python's
// float(), or the default; an undefined value raises.
func filterFloatConv(args []Value, kwargs map[string]Value) (Value, error) {
	def := Value(NewFloat(0))
	if len(args) > 1 {
		def = args[1]
	} else if d, ok := kwargs["default"]; ok {
		def = d
	}
	if len(args) == 0 {
		return def, nil
	}
	switch v := args[0]; {
	case v.IsUndefined():
		return Undefined(), undefinedError(v)
	case isNum(v):
		return NewFloat(toFloat64(v)), nil
	case v.IsString():
		t := strings.ToLower(strings.TrimFunc(v.AsString(), isPySpace))
		switch t {
		case "inf", "+inf", "infinity", "+infinity":
			return NewFloat(math.Inf(1)), nil
		case "-inf", "-infinity":
			return NewFloat(math.Inf(-1)), nil
		case "nan", "+nan", "-nan":
			return NewFloat(math.NaN()), nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && !strings.ContainsAny(t, "xp_") {
			return NewFloat(f), nil
		}
	}
	return def, nil
}

func filterString(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return NewString(printValue(args[0])), nil
}

func filterSafe(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	return args[0], nil
}

func filterReplace(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) < 3 {
		return NewString(""), fmt.Errorf("replace: expected at least 3 arguments")
	}
	s := printValue(args[0])
	old := printValue(args[1])
	newStr := printValue(args[2])

	count := -1
	if len(args) > 3 {
		count = int(toInt64(args[3]))
	}
	if c, ok := kwargs["count"]; ok {
		count = int(toInt64(c))
	}

	return NewString(strings.Replace(s, old, newStr, count)), nil
}

func filterRound(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewFloat(0), nil
	}

	precision := int64(0)
	if len(args) > 1 {
		precision = toInt64(args[1])
	}
	if p, ok := kwargs["precision"]; ok {
		precision = toInt64(p)
	}

	f := toFloat64(args[0])
	pow := math.Pow(10, float64(precision))
	rounded := math.Round(f*pow) / pow

	if precision == 0 {
		return NewFloat(rounded), nil
	}
	return NewFloat(rounded), nil
}

// words are what jinja2's wordcount counts (Python's \w+).
var words = regexp.MustCompile(`[\p{L}\p{N}_]+`)

func filterWordcount(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewInt(0), nil
	}
	return NewInt(int64(len(words.FindAllStringIndex(printValue(args[0]), -1)))), nil
}

func filterEscape(args []Value, kwargs map[string]Value) (Value, error) {
	if len(args) == 0 {
		return NewString(""), nil
	}
	s := printValue(args[0])
	s = strings.ReplaceAll(s, "&", "&amp;")
	s = strings.ReplaceAll(s, "<", "&lt;")
	s = strings.ReplaceAll(s, ">", "&gt;")
	s = strings.ReplaceAll(s, `"`, "&quot;")
	s = strings.ReplaceAll(s, "'", "&#39;")
	return NewString(s), nil
}

// =============================================================================
// Helpers
// =============================================================================

func toInt64(v Value) int64 {
	switch {
	case v.IsInt():
		return v.AsInt()
	case v.IsFloat():
		return int64(v.AsFloat())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
		return 0
	case v.IsString():
		s := v.AsString()
		var n int64
		fmt.Sscanf(s, "%d", &n)
		return n
	}
	return 0
}

func toFloat64(v Value) float64 {
	switch {
	case v.IsFloat():
		return v.AsFloat()
	case v.IsInt():
		return float64(v.AsInt())
	case v.IsBool():
		if v.AsBool() {
			return 1
		}
		return 0
	case v.IsString():
		s := v.AsString()
		var f float64
		fmt.Sscanf(s, "%f", &f)
		return f
	}
	return 0
}

// valueToGo converts a Value back to a plain Go type suitable for
// json.Marshal.
func valueToGo(v Value) any {
	switch v.kind {
	case KindUndefined, KindNone:
		return nil
	case KindBool:
		return v.AsBool()
	case KindInt:
		return v.AsInt()
	case KindFloat:
		return v.AsFloat()
	case KindString:
		return v.AsString()
	case KindList:
		list := v.AsList()
		out := make([]any, list.Len())
		for i, item := range list.Items {
			out[i] = valueToGo(item)
		}
		return out
	case KindDict:
		d := v.AsDict()
		out := make(map[string]any, d.Len())
		for _, key := range d.Keys {
			out[key] = valueToGo(d.Data[key])
		}
		return out
	case KindCallable:
		return nil
	}
	return nil
}

// printValue converts a Value to its template output string. Unlike
// String() which returns a Python-style repr, printValue returns the
// raw text for template rendering (no quotes around strings, empty
// string for None/Undefined).
func printValue(v Value) string {
	switch v.kind {
	case KindUndefined:
		return ""
	case KindNone:
		return "None" // as str(None)
	case KindBool:
		if v.AsBool() {
			return "True"
		}
		return "False"
	case KindInt:
		return strconv.FormatInt(v.AsInt(), 10)
	case KindFloat:
		return pyFloat(v.AsFloat())
	case KindString:
		return v.AsString()
	case KindList:
		return v.String()
	case KindDict:
		return v.String()
	case KindCallable:
		return ""
	}
	return ""
}
