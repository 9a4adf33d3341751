package jinja

import (
	"fmt"
	"strconv"
	"strings"
)

// printf is Python's printf-style formatting, format % arg, for what
// templates write: %s, %r, %d, %i, %f (with a precision), %x and %%, an
// argument that is a tuple of values or one value, and Python's errors
// for too few or too many arguments. The %(name)s mapping form and flags
// and widths are refused.
func printf(format string, arg Value) (Value, error) {
	var args []Value
	single := true
	if arg.IsList() && arg.AsList().tuple {
		args, single = arg.AsList().Items, false
	} else {
		args = []Value{arg}
	}
	used := 0
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return Undefined(), fmt.Errorf("ValueError: incomplete format")
		}
		prec := -1
		if format[i] == '.' {
			j := i + 1
			for j < len(format) && format[j] >= '0' && format[j] <= '9' {
				j++
			}
			prec, _ = strconv.Atoi(format[i+1 : j])
			i = j
			if i >= len(format) {
				return Undefined(), fmt.Errorf("ValueError: incomplete format")
			}
		}
		conv := format[i]
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if !strings.ContainsRune("srdifx", rune(conv)) {
			return Undefined(), fmt.Errorf("ValueError: unsupported format character '%c' (lloyal's template engine supports %%s, %%r, %%d, %%i, %%f and %%x)", conv)
		}
		if used >= len(args) {
			return Undefined(), fmt.Errorf("TypeError: not enough arguments for format string")
		}
		v := args[used]
		used++
		switch conv {
		case 's':
			b.WriteString(printValue(v))
		case 'r':
			b.WriteString(v.String())
		case 'd', 'i', 'x':
			if !isNum(v) {
				return Undefined(), fmt.Errorf("TypeError: %%%c format: a real number is required, not %s", conv, pyType(v))
			}
			n := toInt64(v)
			if v.IsFloat() {
				n = int64(v.AsFloat())
			}
			if conv == 'x' {
				b.WriteString(strconv.FormatInt(n, 16))
			} else {
				b.WriteString(strconv.FormatInt(n, 10))
			}
		case 'f':
			if !isNum(v) {
				return Undefined(), fmt.Errorf("TypeError: must be real number, not %s", pyType(v))
			}
			if prec < 0 {
				prec = 6
			}
			b.WriteString(strconv.FormatFloat(toFloat64(v), 'f', prec, 64))
		}
	}
	if used < len(args) {
		// Python lets a lone argument that can be subscripted go unused
		// (it could have been read by %(name)s): a dict, a list, an
		// undefined value; a lone string or number may not.
		if !single || !(isMapping(arg) || arg.IsUndefined() || arg.IsList() && !arg.AsList().lazy && arg.AsList().view == "") {
			return Undefined(), fmt.Errorf("TypeError: not all arguments converted during string formatting")
		}
	}
	return NewString(b.String()), nil
}
