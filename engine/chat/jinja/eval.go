package jinja

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// =============================================================================
// Scope
// =============================================================================

type scope struct {
	vars   map[string]Value
	parent *scope
}

func newScope(parent *scope) *scope {
	return &scope{vars: make(map[string]Value, 4), parent: parent}
}

func (s *scope) get(name string) (Value, bool) {
	if v, ok := s.vars[name]; ok {
		return v, true
	}
	if s.parent != nil {
		return s.parent.get(name)
	}
	return Undefined(), false
}

func (s *scope) set(name string, val Value) {
	s.vars[name] = val
}

// =============================================================================
// Evaluator
// =============================================================================

type evaluator struct {
	scope    *scope
	builtins *scope
	output   strings.Builder
	// cur is the construct being evaluated, shared by the evaluators of
	// macro and block bodies, so a recovered panic names the innermost.
	cur *pos
	// lim is the render's budget, shared likewise.
	lim *limits
}

func (e *evaluator) execNodes(nodes []node) error {
	for _, n := range nodes {
		if err := e.execNode(n); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execNode(n node) error {
	if err := e.lim.step(e.output.Len()); err != nil {
		return err
	}
	switch nd := n.(type) {
	case *textNode:
		e.output.WriteString(nd.text)
		return nil

	case *outputNode:
		*e.cur = nd.at
		val, err := e.evalExpr(nd.expression)
		if err != nil {
			return err
		}
		e.output.WriteString(printValue(val))
		return nil

	case *ifNode:
		return e.execIf(nd)

	case *forNode:
		return e.execFor(nd)

	case *setNode:
		return e.execSet(nd)

	case *setBlockNode:
		return e.execSetBlock(nd)

	case *macroNode:
		return e.execMacro(nd)

	case *callNode:
		return e.execCall(nd)

	case *filterBlockNode:
		return e.execFilterBlock(nd)

	case *breakNode:
		return errBreak

	case *continueNode:
		return errContinue

	default:
		return fmt.Errorf("unknown node type %T", n)
	}
}

func (e *evaluator) execIf(n *ifNode) error {
	for _, branch := range n.branches {
		*e.cur = branch.at
		if branch.condition == nil {
			// else branch
			return e.execNodes(branch.body)
		}
		cond, err := e.evalExpr(branch.condition)
		if err != nil {
			return err
		}
		if cond.IsTruthy() {
			return e.execNodes(branch.body)
		}
	}
	return nil
}

func (e *evaluator) execFor(n *forNode) error {
	*e.cur = n.at
	iterVal, err := e.evalExpr(n.iter)
	if err != nil {
		return err
	}

	// A loop over none or a number raises, as in Python; over an
	// undefined value it runs zero times, as jinja2's Undefined does.
	items, err := iterate(iterVal)
	if err != nil {
		return err
	}

	// Apply filter if present.
	if n.filterExpr != nil {
		var filtered []Value
		for _, item := range items {
			child := newScope(e.scope)
			child.set(n.valVar, item)
			old := e.scope
			e.scope = child
			fv, err := e.evalExpr(n.filterExpr)
			e.scope = old
			if err != nil {
				return err
			}
			if fv.IsTruthy() {
				filtered = append(filtered, item)
			}
		}
		items = filtered
	}

	if len(items) == 0 {
		if n.elseBody != nil {
			return e.execNodes(n.elseBody)
		}
		return nil
	}

	total := int64(len(items))

	// Pre-allocate the loop dict and child scope once, then reuse them
	// across iterations to avoid per-iteration allocations.
	loop := NewDict()
	ld := loop.AsDict()
	ld.Set("length", NewInt(total))
	ld.Set("depth", NewInt(1)) // loops are not recursive here
	ld.Set("depth0", NewInt(0))

	iterated := false
	for i, item := range items {
		// A fresh scope per iteration: in jinja2 a {% set %} in a loop
		// body does not carry over to the next iteration.
		child := newScope(e.scope)
		child.set("loop", loop)

		// Set loop variable(s).
		if n.keyVar != "" {
			// Destructuring: for key, val in items
			parts, err := iterate(item)
			if err != nil {
				return fmt.Errorf("TypeError: cannot unpack non-iterable %s object", pyType(item))
			}
			if len(parts) != 2 {
				return fmt.Errorf("ValueError: cannot unpack %d values into 2 loop variables", len(parts))
			}
			child.set(n.keyVar, parts[0])
			child.set(n.valVar, parts[1])
		} else {
			child.set(n.valVar, item)
		}

		// Update loop object for this iteration.
		idx := int64(i)
		ld.Data["index"] = NewInt(idx + 1)
		ld.Data["index0"] = NewInt(idx)
		ld.Data["revindex"] = NewInt(total - idx)
		ld.Data["revindex0"] = NewInt(total - idx - 1)
		ld.Data["first"] = NewBool(i == 0)
		ld.Data["last"] = NewBool(i == len(items)-1)

		if i > 0 {
			ld.Data["previtem"] = items[i-1]
		} else {
			ld.Data["previtem"] = Undefined()
		}
		if i < len(items)-1 {
			ld.Data["nextitem"] = items[i+1]
		} else {
			ld.Data["nextitem"] = Undefined()
		}

		// cycle function — capture idx by value for closure correctness.
		cycleIdx := idx
		ld.Data["cycle"] = NewCallable("loop.cycle", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), nil
			}
			return args[int(cycleIdx)%len(args)], nil
		})

		old := e.scope
		e.scope = child

		err := e.execNodes(n.body)
		e.scope = old

		if err != nil {
			if errors.Is(err, errBreak) {
				break
			}
			if errors.Is(err, errContinue) {
				continue
			}
			return err
		}
		// As jinja2 compiles it, the loop counts as iterated only when a
		// body runs to its end: a break or continue in every iteration
		// leaves it un-iterated, and the else block runs.
		iterated = true
	}

	if !iterated && n.elseBody != nil {
		return e.execNodes(n.elseBody)
	}
	return nil
}

func (e *evaluator) execSet(n *setNode) error {
	*e.cur = n.at
	val, err := e.evalExpr(n.value)
	if err != nil {
		return err
	}

	if n.namespace != "" {
		// jinja2 assigns attributes of namespace() objects only.
		nsVal, ok := e.scope.get(n.namespace)
		if !ok || !nsVal.IsDict() || !nsVal.AsDict().namespace {
			return fmt.Errorf("TemplateRuntimeError: cannot assign attribute on non-namespace object")
		}
		nsVal.AsDict().Set(n.target, val)
		return nil
	}

	e.scope.set(n.target, val)
	return nil
}

func (e *evaluator) execSetBlock(n *setBlockNode) error {
	bodyEval := evaluator{
		cur:      e.cur,
		lim:      e.lim,
		scope:    e.scope,
		builtins: e.builtins,
	}
	if err := bodyEval.execNodes(n.body); err != nil {
		return err
	}
	e.scope.set(n.target, NewString(bodyEval.output.String()))
	return nil
}

func (e *evaluator) execMacro(n *macroNode) error {
	// Capture the macro body and params.
	params := n.params
	body := n.body
	parentScope := e.scope

	fn := NewCallable(n.name, func(args []Value, kwargs map[string]Value) (Value, error) {
		child := newScope(parentScope)

		// Bind positional args.
		for i, param := range params {
			if i < len(args) {
				child.set(param.name, args[i])
			} else if v, ok := kwargs[param.name]; ok {
				child.set(param.name, v)
			} else if param.defaultVal != nil {
				defEval := evaluator{scope: child, builtins: e.builtins, cur: e.cur, lim: e.lim}
				defVal, err := defEval.evalExpr(param.defaultVal)
				if err != nil {
					return Undefined(), err
				}
				child.set(param.name, defVal)
			} else {
				child.set(param.name, Undefined())
			}
		}

		// Set caller if available.
		if caller, ok := kwargs["caller"]; ok {
			child.set("caller", caller)
		}

		macroEval := evaluator{
			cur:      e.cur,
			lim:      e.lim,
			scope:    child,
			builtins: e.builtins,
		}

		// A macro may call itself: its depth is bounded before Go's
		// stack (whose overflow no recover catches) is.
		if err := e.lim.enter(); err != nil {
			return Undefined(), err
		}
		defer e.lim.leave()
		if err := macroEval.execNodes(body); err != nil {
			return Undefined(), err
		}

		return NewString(macroEval.output.String()), nil
	})

	e.scope.set(n.name, fn)
	return nil
}

func (e *evaluator) execCall(n *callNode) error {
	*e.cur = n.at
	// Create a caller callable that renders the body.
	callerArgs := n.callerArgs
	body := n.body
	parentScope := e.scope

	caller := NewCallable("caller", func(args []Value, kwargs map[string]Value) (Value, error) {
		child := newScope(parentScope)
		for i, argName := range callerArgs {
			if i < len(args) {
				child.set(argName, args[i])
			}
		}

		callerEval := evaluator{
			cur:      e.cur,
			lim:      e.lim,
			scope:    child,
			builtins: e.builtins,
		}
		if err := callerEval.execNodes(body); err != nil {
			return Undefined(), err
		}
		return NewString(callerEval.output.String()), nil
	})

	// Evaluate the call expression with caller in kwargs.
	callEx, ok := n.expr.(*callExpr)
	if ok {
		fn, err := e.evalExpr(callEx.fn)
		if err != nil {
			return err
		}
		if !fn.IsCallable() {
			return fmt.Errorf("call: expression is not callable")
		}

		var args []Value
		for _, a := range callEx.args {
			av, err := e.evalExpr(a)
			if err != nil {
				return err
			}
			args = append(args, av)
		}

		kwargs := map[string]Value{"caller": caller}
		for _, kw := range callEx.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return err
			}
			kwargs[kw.name] = v
		}

		result, err := fn.AsCallable().Fn(args, kwargs)
		if err != nil {
			return err
		}
		e.output.WriteString(printValue(result))
		return nil
	}

	// Fallback: evaluate expression and call with caller.
	fn, err := e.evalExpr(n.expr)
	if err != nil {
		return err
	}
	if !fn.IsCallable() {
		return fmt.Errorf("call: expression is not callable")
	}

	result, err := fn.AsCallable().Fn(nil, map[string]Value{"caller": caller})
	if err != nil {
		return err
	}
	e.output.WriteString(printValue(result))
	return nil
}

func (e *evaluator) execFilterBlock(n *filterBlockNode) error {
	// Render body to string.
	bodyEval := evaluator{
		cur:      e.cur,
		lim:      e.lim,
		scope:    e.scope,
		builtins: e.builtins,
	}
	if err := bodyEval.execNodes(n.body); err != nil {
		return err
	}
	bodyStr := bodyEval.output.String()

	// Apply the filter. The filter expression should be a name or filter chain.
	if fe, ok := n.filter.(*nameExpr); ok {
		filterVal, ok := lookupFilter(e.builtins, fe.name)
		if !ok {
			return fmt.Errorf("unknown filter %q", fe.name)
		}
		result, err := filterVal.AsCallable().Fn([]Value{NewString(bodyStr)}, nil)
		if err != nil {
			return err
		}
		e.output.WriteString(printValue(result))
		return nil
	}

	// For more complex filter expressions, just output the body.
	e.output.WriteString(bodyStr)
	return nil
}

// =============================================================================
// Expression evaluation
// =============================================================================

func (e *evaluator) evalExpr(ex expr) (Value, error) {
	switch n := ex.(type) {
	case *litExpr:
		return n.val, nil

	case *nameExpr:
		v, ok := e.scope.get(n.name)
		if !ok {
			return undefinedBecause("'%s' is undefined", n.name), nil
		}
		return v, nil

	case *attrExpr:
		return e.evalAttr(n)

	case *itemExpr:
		return e.evalItem(n)

	case *sliceExpr:
		return e.evalSlice(n)

	case *unaryExpr:
		return e.evalUnary(n)

	case *binExpr:
		return e.evalBinary(n)

	case *condExpr:
		return e.evalCond(n)

	case *callExpr:
		return e.evalCallExpr(n)

	case *filterExpr:
		return e.evalFilter(n)

	case *testExpr:
		return e.evalTestExpr(n)

	case *listExpr:
		items := make([]Value, len(n.items))
		for i, item := range n.items {
			v, err := e.evalExpr(item)
			if err != nil {
				return Undefined(), err
			}
			items[i] = v
		}
		if n.tuple {
			return newTuple(items...), nil
		}
		return NewList(items), nil

	case *chainExpr:
		left, err := e.evalExpr(n.operands[0])
		if err != nil {
			return Undefined(), err
		}
		for i, op := range n.ops {
			right, err := e.evalExpr(n.operands[i+1])
			if err != nil {
				return Undefined(), err
			}
			ok, err := compare(op, left, right)
			if err != nil || !ok {
				return NewBool(false), err
			}
			left = right
		}
		return NewBool(true), nil

	case *dictExpr:
		d := NewDict()
		dict := d.AsDict()
		for _, pair := range n.pairs {
			key, err := e.evalExpr(pair.key)
			if err != nil {
				return Undefined(), err
			}
			val, err := e.evalExpr(pair.value)
			if err != nil {
				return Undefined(), err
			}
			dict.SetKey(key, val)
		}
		return d, nil

	default:
		return Undefined(), fmt.Errorf("unknown expression type %T", ex)
	}
}

func (e *evaluator) evalAttr(n *attrExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}

	return e.getattr(obj, n.attr)
}

// getattr is obj.attr as jinja2's sandbox evaluates it: a dict's key or
// method, a string's or list's method; using an undefined value raises,
// and a missing attribute is undefined (raising when used further).
func (e *evaluator) getattr(obj Value, attr string) (Value, error) {
	if obj.IsUndefined() {
		return Undefined(), undefinedError(obj)
	}
	var v Value
	var err error
	switch {
	case obj.IsDict() && obj.AsDict().namespace:
		if v, ok := obj.AsDict().Get(attr); ok {
			return v, nil
		}
		return undefinedBecause("'Namespace' object has no attribute '%s'", attr), nil
	case obj.IsDict():
		if v, ok := obj.AsDict().Get(attr); ok {
			return v, nil
		}
		v, err = e.dictMethod(obj, attr)
	case obj.IsString():
		v, err = e.stringMethod(obj, attr)
	case obj.IsList():
		v, err = e.listMethod(obj, attr)
	}
	if err != nil || !v.IsUndefined() {
		return v, err
	}
	if obj.IsNone() {
		return undefinedBecause("'None' has no attribute '%s'", attr), nil
	}
	return undefinedBecause("'%s object' has no attribute '%s'", pyType(obj), attr), nil
}

func (e *evaluator) evalItem(n *itemExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}

	key, err := e.evalExpr(n.key)
	if err != nil {
		return Undefined(), err
	}

	if obj.IsUndefined() {
		return Undefined(), undefinedError(obj)
	}
	if key.IsUndefined() && !obj.IsDict() {
		return Undefined(), undefinedError(key)
	}

	if obj.IsList() && obj.AsList().lazy {
		return undefinedBecause("'generator object' has no attribute %s", key.String()), nil
	}

	if obj.IsList() && isInt(key) {
		idx := int(toInt64(key))
		list := obj.AsList()
		if idx < 0 {
			idx += list.Len()
		}
		if idx < 0 || idx >= list.Len() {
			return undefinedBecause("list object has no element %d", toInt64(key)), nil
		}
		return list.Get(idx), nil
	}

	if obj.IsDict() {
		d := obj.AsDict()
		if key.IsList() || key.IsDict() {
			return Undefined(), fmt.Errorf("TypeError: unhashable type: '%s'", pyType(key))
		}
		if d.HasKey(key) {
			return d.Data[printValue(key)], nil
		}
		if key.IsString() {
			return undefinedBecause("'dict object' has no attribute '%s'", key.AsString()), nil
		}
		return undefinedBecause("'dict object' has no attribute %s", key.String()), nil
	}

	if obj.IsString() && isInt(key) {
		idx := int(toInt64(key))
		runes := []rune(obj.AsString())
		if idx < 0 {
			idx += len(runes)
		}
		if idx < 0 || idx >= len(runes) {
			return undefinedBecause("str object has no element %d", toInt64(key)), nil
		}
		return NewString(string(runes[idx])), nil
	}

	// jinja2 falls back to the attribute of that name (x["items"] is the
	// method).
	if key.IsString() {
		return e.getattr(obj, key.AsString())
	}
	return undefinedBecause("'%s object' has no attribute %s", pyType(obj), key.String()), nil
}

func (e *evaluator) evalSlice(n *sliceExpr) (Value, error) {
	obj, err := e.evalExpr(n.obj)
	if err != nil {
		return Undefined(), err
	}
	if obj.IsUndefined() {
		return Undefined(), undefinedError(obj)
	}
	switch {
	case obj.IsDict():
		return Undefined(), fmt.Errorf("TypeError: unhashable type: 'slice'")
	case !obj.IsString() && (!obj.IsList() || obj.AsList().lazy || obj.AsList().view != ""):
		return Undefined(), fmt.Errorf("TypeError: '%s' object is not subscriptable", pyType(obj))
	}

	if obj.IsList() {
		list := obj.AsList()
		length := list.Len()
		start, stop, step := resolveSlice(n, e, length)

		// Fast path for the overwhelmingly common step==1 case
		// (e.g. messages[1:] in chat templates). A single allocation
		// of the exact size avoids the geometric growth of append.
		// Aliasing the source slice would be unsafe because List.Append
		// could later mutate beyond Len() into the backing array.
		if step == 1 {
			if start < 0 {
				start = 0
			}
			if stop > length {
				stop = length
			}
			if start >= stop {
				return NewList(nil), nil
			}
			items := make([]Value, stop-start)
			copy(items, list.Items[start:stop])
			return NewList(items), nil
		}

		var items []Value
		if step > 0 {
			// Pre-size to the maximum possible iteration count to
			// avoid append's geometric growth allocations.
			count := (stop - start + step - 1) / step
			if count > 0 {
				items = make([]Value, 0, count)
			}
			for i := start; i < stop; i += step {
				if i >= 0 && i < length {
					items = append(items, list.Items[i])
				}
			}
		} else if step < 0 {
			count := (start - stop - step - 1) / -step
			if count > 0 {
				items = make([]Value, 0, count)
			}
			for i := start; i > stop; i += step {
				if i >= 0 && i < length {
					items = append(items, list.Items[i])
				}
			}
		}
		return NewList(items), nil
	}

	if obj.IsString() {
		s := obj.AsString()

		// ASCII fast path. Most chat-template string slicing operates
		// on tag/role names or message content that is ASCII; for those
		// we can index by byte and skip the []rune conversion entirely.
		// This is the dominant cost in the kronk dense profile because
		// the system prompt can be tens of thousands of bytes.
		if isASCII(s) {
			length := len(s)
			start, stop, step := resolveSlice(n, e, length)

			if step == 1 {
				if start < 0 {
					start = 0
				}
				if stop > length {
					stop = length
				}
				if start >= stop {
					return NewString(""), nil
				}
				return NewString(s[start:stop]), nil
			}

			if step == -1 {
				if start >= length {
					start = length - 1
				}
				if stop < -1 {
					stop = -1
				}
				if start <= stop {
					return NewString(""), nil
				}
				buf := make([]byte, 0, start-stop)
				for i := start; i > stop; i-- {
					buf = append(buf, s[i])
				}
				return NewString(string(buf)), nil
			}
			// Fall through to the general path for unusual steps.
		}

		runes := []rune(s)
		length := len(runes)
		start, stop, step := resolveSlice(n, e, length)
		var result []rune
		if step > 0 {
			for i := start; i < stop; i += step {
				if i >= 0 && i < length {
					result = append(result, runes[i])
				}
			}
		} else if step < 0 {
			for i := start; i > stop; i += step {
				if i >= 0 && i < length {
					result = append(result, runes[i])
				}
			}
		}
		return NewString(string(result)), nil
	}

	return Undefined(), nil
}

// isASCII reports whether s contains only 7-bit ASCII bytes. Used to
// skip the []rune conversion in evalSlice's string branch when byte
// indexing produces the same result as code-point indexing.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func resolveSlice(n *sliceExpr, e *evaluator, length int) (int, int, int) {
	step := 1
	if n.step != nil {
		v, _ := e.evalExpr(n.step)
		step = int(toInt64(v))
		if step == 0 {
			step = 1
		}
	}

	var start, stop int

	if step > 0 {
		start = 0
		stop = length
	} else {
		start = length - 1
		stop = -length - 1
	}

	if n.start != nil {
		v, _ := e.evalExpr(n.start)
		start = int(toInt64(v))
		if start < 0 {
			start += length
		}
	}

	if n.stop != nil {
		v, _ := e.evalExpr(n.stop)
		stop = int(toInt64(v))
		if stop < 0 {
			stop += length
		}
	}

	return start, stop, step
}

func (e *evaluator) evalUnary(n *unaryExpr) (Value, error) {
	operand, err := e.evalExpr(n.operand)
	if err != nil {
		return Undefined(), err
	}

	switch n.op {
	case "not":
		return NewBool(!operand.IsTruthy()), nil
	case "-", "+":
		if operand.IsUndefined() {
			return Undefined(), undefinedError(operand)
		}
		switch {
		case isInt(operand) && n.op == "-":
			return NewInt(-toInt64(operand)), nil
		case isInt(operand):
			return NewInt(toInt64(operand)), nil
		case operand.IsFloat() && n.op == "-":
			return NewFloat(-operand.AsFloat()), nil
		case operand.IsFloat():
			return operand, nil
		}
		return Undefined(), fmt.Errorf("TypeError: bad operand type for unary %s: '%s'", n.op, pyType(operand))
	}

	return Undefined(), fmt.Errorf("unknown unary operator %q", n.op)
}

func (e *evaluator) evalBinary(n *binExpr) (Value, error) {
	// Short-circuit for and/or.
	if n.op == "and" {
		left, err := e.evalExpr(n.left)
		if err != nil {
			return Undefined(), err
		}
		if !left.IsTruthy() {
			return left, nil
		}
		return e.evalExpr(n.right)
	}

	if n.op == "or" {
		left, err := e.evalExpr(n.left)
		if err != nil {
			return Undefined(), err
		}
		if left.IsTruthy() {
			return left, nil
		}
		return e.evalExpr(n.right)
	}

	left, err := e.evalExpr(n.left)
	if err != nil {
		return Undefined(), err
	}

	right, err := e.evalExpr(n.right)
	if err != nil {
		return Undefined(), err
	}

	switch n.op {
	case "+", "-", "*", "/", "//", "**":
		return arith(n.op, left, right)
	case "%":
		if left.IsString() {
			return printf(left.AsString(), right)
		}
		return arith(n.op, left, right)
	case "~":
		return concatenated(printValue(left), printValue(right))
	case "==", "!=", "<", ">", "<=", ">=", "in", "not in":
		ok, err := compare(n.op, left, right)
		return NewBool(ok), err
	}

	return Undefined(), fmt.Errorf("unknown binary operator %q", n.op)
}

func (e *evaluator) evalCond(n *condExpr) (Value, error) {
	cond, err := e.evalExpr(n.condition)
	if err != nil {
		return Undefined(), err
	}

	if cond.IsTruthy() {
		return e.evalExpr(n.trueExpr)
	}

	if n.falseExpr != nil {
		return e.evalExpr(n.falseExpr)
	}

	return Undefined(), nil
}

func (e *evaluator) evalCallExpr(n *callExpr) (Value, error) {
	fn, err := e.evalExpr(n.fn)
	if err != nil {
		return Undefined(), err
	}

	if fn.IsUndefined() {
		return Undefined(), undefinedError(fn)
	}
	if !fn.IsCallable() {
		return Undefined(), fmt.Errorf("TypeError: '%s' object is not callable", pyType(fn))
	}

	args := make([]Value, len(n.args))
	for i, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		args[i] = v
	}

	var kwargs map[string]Value
	if len(n.kwargs) > 0 {
		kwargs = make(map[string]Value, len(n.kwargs))
		for _, kw := range n.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return Undefined(), err
			}
			kwargs[kw.name] = v
		}
	}

	return fn.AsCallable().Fn(args, kwargs)
}

func callableName(ex expr) string {
	switch n := ex.(type) {
	case *nameExpr:
		return n.name

	case *attrExpr:
		return callableName(n.obj) + "." + n.attr

	case *itemExpr:
		return callableName(n.obj) + "[item]"

	default:
		return ex.nodeType()
	}
}

func (e *evaluator) evalFilter(n *filterExpr) (Value, error) {
	input, err := e.evalExpr(n.expr)
	if err != nil {
		return Undefined(), err
	}

	// Look up filter in builtins.
	filterVal, ok := lookupFilter(e.builtins, n.name)
	if !ok {
		// Also check scope for user-defined filters.
		filterVal, ok = e.scope.get(n.name)
		if !ok {
			return Undefined(), fmt.Errorf("unknown filter %q", n.name)
		}
	}

	if !filterVal.IsCallable() {
		return Undefined(), fmt.Errorf("filter %q is not callable", n.name)
	}

	// Build args: input as first, then additional args.
	args := make([]Value, 1+len(n.args))
	args[0] = input
	for i, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		args[i+1] = v
	}

	var kwargs map[string]Value
	if len(n.kwargs) > 0 {
		kwargs = make(map[string]Value, len(n.kwargs))
		for _, kw := range n.kwargs {
			v, err := e.evalExpr(kw.value)
			if err != nil {
				return Undefined(), err
			}
			kwargs[kw.name] = v
		}
	}

	return filterVal.AsCallable().Fn(args, kwargs)
}

func (e *evaluator) evalTestExpr(n *testExpr) (Value, error) {
	val, err := e.evalExpr(n.expr)
	if err != nil {
		return Undefined(), err
	}

	var testArgs []Value
	for _, a := range n.args {
		v, err := e.evalExpr(a)
		if err != nil {
			return Undefined(), err
		}
		testArgs = append(testArgs, v)
	}

	result, err := evalTest(n.name, val, testArgs)
	if err != nil {
		return Undefined(), err
	}

	if n.negated {
		result = !result
	}

	return NewBool(result), nil
}

// =============================================================================
// String methods
// =============================================================================

func (e *evaluator) stringMethod(obj Value, method string) (Value, error) {
	s := obj.AsString()

	switch method {
	case "strip":
		return e.makeStringFunc("strip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.Trim(s, printValue(args[0]))), nil
			}
			return NewString(strings.TrimFunc(s, isPySpace)), nil
		}), nil

	case "lstrip":
		return e.makeStringFunc("lstrip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.TrimLeft(s, printValue(args[0]))), nil
			}
			return NewString(strings.TrimLeftFunc(s, isPySpace)), nil
		}), nil

	case "rstrip":
		return e.makeStringFunc("rstrip", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) > 0 {
				return NewString(strings.TrimRight(s, printValue(args[0]))), nil
			}
			return NewString(strings.TrimRightFunc(s, isPySpace)), nil
		}), nil

	case "split":
		return e.makeStringFunc("split", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				parts := strings.FieldsFunc(s, isPySpace)
				items := make([]Value, len(parts))
				for i, p := range parts {
					items[i] = NewString(p)
				}
				return NewList(items), nil
			}
			if args[0].IsNone() {
				parts := strings.FieldsFunc(s, isPySpace)
				items := make([]Value, len(parts))
				for i, p := range parts {
					items[i] = NewString(p)
				}
				return NewList(items), nil
			}
			sep := printValue(args[0])
			if sep == "" {
				return Undefined(), fmt.Errorf("ValueError: empty separator")
			}
			n := -1
			if len(args) > 1 {
				n = int(toInt64(args[1]))
				if n >= 0 {
					n++
				}
			}
			parts := strings.SplitN(s, sep, n)
			items := make([]Value, len(parts))
			for i, p := range parts {
				items[i] = NewString(p)
			}
			return NewList(items), nil
		}), nil

	case "startswith", "endswith":
		return e.makeStringFunc(method, func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), fmt.Errorf("TypeError: %s takes at least 1 argument", method)
			}
			// A tuple (a list here) tries each.
			cands := []Value{args[0]}
			if args[0].IsList() {
				cands = args[0].AsList().Items
			}
			for _, c := range cands {
				if !c.IsString() {
					return Undefined(), fmt.Errorf("TypeError: %s first arg must be str or a tuple of str, not %s", method, pyType(c))
				}
				if (method == "startswith" && strings.HasPrefix(s, c.AsString())) || (method == "endswith" && strings.HasSuffix(s, c.AsString())) {
					return NewBool(true), nil
				}
			}
			return NewBool(false), nil
		}), nil

	case "join":
		return e.makeStringFunc("join", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) != 1 {
				return Undefined(), fmt.Errorf("TypeError: str.join takes exactly one argument")
			}
			items, err := iterate(args[0])
			if err != nil {
				return Undefined(), err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				if !it.IsString() {
					return Undefined(), fmt.Errorf("TypeError: sequence item %d: expected str instance, %s found", i, pyType(it))
				}
				parts[i] = it.AsString()
			}
			return NewString(strings.Join(parts, s)), nil
		}), nil

	case "splitlines":
		return e.makeStringFunc("splitlines", func(args []Value, kwargs map[string]Value) (Value, error) {
			var items []Value
			for _, l := range pySplitlines(s) {
				items = append(items, NewString(l))
			}
			return NewList(items), nil
		}), nil

	case "isdigit", "isalpha", "isalnum", "isspace":
		return e.makeStringFunc(method, func(args []Value, kwargs map[string]Value) (Value, error) {
			if s == "" {
				return NewBool(false), nil
			}
			for _, r := range s {
				ok := map[string]bool{
					"isdigit": unicode.IsDigit(r),
					"isalpha": unicode.IsLetter(r),
					"isalnum": unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r),
					"isspace": isPySpace(r),
				}[method]
				if !ok {
					return NewBool(false), nil
				}
			}
			return NewBool(true), nil
		}), nil

	case "removeprefix", "removesuffix":
		return e.makeStringFunc(method, func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return Undefined(), fmt.Errorf("TypeError: %s takes one str argument", method)
			}
			if method == "removeprefix" {
				return NewString(strings.TrimPrefix(s, args[0].AsString())), nil
			}
			return NewString(strings.TrimSuffix(s, args[0].AsString())), nil
		}), nil

	case "rfind":
		return e.makeStringFunc("rfind", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), fmt.Errorf("TypeError: rfind takes at least 1 argument")
			}
			i := strings.LastIndex(s, printValue(args[0]))
			if i > 0 {
				i = len([]rune(s[:i]))
			}
			return NewInt(int64(i)), nil
		}), nil

	case "replace":
		return e.makeStringFunc("replace", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) < 2 {
				return NewString(s), nil
			}
			old := printValue(args[0])
			newStr := printValue(args[1])
			count := -1
			if len(args) > 2 {
				count = int(toInt64(args[2]))
			}
			return NewString(strings.Replace(s, old, newStr, count)), nil
		}), nil

	case "upper":
		return e.makeStringFunc("upper", func(args []Value, kwargs map[string]Value) (Value, error) {
			return NewString(strings.ToUpper(s)), nil
		}), nil

	case "lower":
		return e.makeStringFunc("lower", func(args []Value, kwargs map[string]Value) (Value, error) {
			return NewString(strings.ToLower(s)), nil
		}), nil

	case "title":
		return e.makeStringFunc("title", func(args []Value, kwargs map[string]Value) (Value, error) {
			// Python's str.title: a cased character after an uncased one
			// is upper-cased, after a cased one lower-cased.
			var b strings.Builder
			prevCased := false
			for _, r := range s {
				cased := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
				switch {
				case cased && !prevCased:
					b.WriteRune(unicode.ToTitle(r))
				case cased:
					b.WriteRune(unicode.ToLower(r))
				default:
					b.WriteRune(r)
				}
				prevCased = cased
			}
			return NewString(b.String()), nil
		}), nil

	case "capitalize":
		return e.makeStringFunc("capitalize", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(s) == 0 {
				return NewString(""), nil
			}
			runes := []rune(s)
			runes[0] = []rune(strings.ToUpper(string(runes[0])))[0]
			return NewString(string(runes)), nil
		}), nil

	case "count":
		return e.makeStringFunc("count", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewInt(0), nil
			}
			return NewInt(int64(strings.Count(s, printValue(args[0])))), nil
		}), nil

	case "find":
		return e.makeStringFunc("find", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return NewInt(-1), nil
			}
			return NewInt(int64(strings.Index(s, printValue(args[0])))), nil
		}), nil

	case "format":
		return e.makeStringFunc("format", func(args []Value, kwargs map[string]Value) (Value, error) {
			result := s
			for i, arg := range args {
				placeholder := fmt.Sprintf("{%d}", i)
				result = strings.ReplaceAll(result, placeholder, printValue(arg))
				result = strings.Replace(result, "{}", printValue(arg), 1)
			}
			return NewString(result), nil
		}), nil
	}

	return Undefined(), nil
}

func (e *evaluator) makeStringFunc(name string, fn func([]Value, map[string]Value) (Value, error)) Value {
	return NewCallable("str."+name, fn)
}

// =============================================================================
// List methods
// =============================================================================

func (e *evaluator) listMethod(obj Value, method string) (Value, error) {
	switch method {
	case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear":
		// Hugging Face renders in jinja2's ImmutableSandboxedEnvironment,
		// where a method that changes a list is unsafe.
		return Undefined(), fmt.Errorf("SecurityError: access to attribute '%s' of 'list' object is unsafe.", method)
	case "index", "count":
		items := obj.AsList().Items
		return NewCallable("list."+method, func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) != 1 {
				return Undefined(), fmt.Errorf("TypeError: list.%s takes one argument", method)
			}
			n := 0
			for i, v := range items {
				if valuesEqual(v, args[0]) {
					if method == "index" {
						return NewInt(int64(i)), nil
					}
					n++
				}
			}
			if method == "index" {
				return Undefined(), fmt.Errorf("ValueError: %s is not in list", args[0].String())
			}
			return NewInt(int64(n)), nil
		}), nil
	}
	return Undefined(), nil
}

// =============================================================================
// Dict methods
// =============================================================================

func (e *evaluator) dictMethod(obj Value, method string) (Value, error) {
	d := obj.AsDict()

	switch method {
	case "items":
		return NewCallable("dict.items", func(args []Value, kwargs map[string]Value) (Value, error) {
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				items = append(items, newTuple(d.KeyValue(key), d.Data[key]))
			}
			return Value{kind: KindList, v: &List{Items: items, view: "dict_items"}}, nil
		}), nil

	case "keys":
		return NewCallable("dict.keys", func(args []Value, kwargs map[string]Value) (Value, error) {
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				items = append(items, d.KeyValue(key))
			}
			return Value{kind: KindList, v: &List{Items: items, view: "dict_keys"}}, nil
		}), nil

	case "values":
		return NewCallable("dict.values", func(args []Value, kwargs map[string]Value) (Value, error) {
			items := make([]Value, 0, d.Len())
			for _, key := range d.Keys {
				items = append(items, d.Data[key])
			}
			return Value{kind: KindList, v: &List{Items: items, view: "dict_values"}}, nil
		}), nil

	case "get":
		return NewCallable("dict.get", func(args []Value, kwargs map[string]Value) (Value, error) {
			if len(args) == 0 {
				return Undefined(), nil
			}
			key := printValue(args[0])
			if v, ok := d.Get(key); ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return None(), nil
		}), nil

	case "pop", "popitem", "update", "setdefault", "clear":
		// Unsafe in jinja2's immutable sandbox, as Hugging Face renders.
		return Undefined(), fmt.Errorf("SecurityError: access to attribute '%s' of 'dict' object is unsafe.", method)

	}

	return Undefined(), nil
}

// =============================================================================
// Arithmetic helpers
// =============================================================================

// valuesEqual is Python's ==: numbers by value (True == 1), lists and
// dicts item by item, anything else by kind and value.
func valuesEqual(a, b Value) bool {
	switch {
	case isNum(a) && isNum(b):
		if isInt(a) && isInt(b) {
			return toInt64(a) == toInt64(b)
		}
		return toFloat64(a) == toFloat64(b)
	case a.IsList() && b.IsList() && (a.AsList().lazy || b.AsList().lazy):
		return a.AsList() == b.AsList() // an iterator equals only itself
	case a.IsList() && b.IsList():
		if pyType(a) != pyType(b) {
			return false // a tuple is never equal to a list
		}
		x, y := a.AsList().Items, b.AsList().Items
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case a.IsDict() && b.IsDict():
		x, y := a.AsDict(), b.AsDict()
		if x.Len() != y.Len() {
			return false
		}
		for _, k := range x.Keys {
			v, ok := y.Get(k)
			if !ok || !valuesEqual(x.Data[k], v) {
				return false
			}
		}
		return true
	}
	return a.Equals(b)
}

// compare evaluates one comparison operator as Python does.
func compare(op string, left, right Value) (bool, error) {
	switch op {
	case "==":
		return valuesEqual(left, right), nil
	case "!=":
		return !valuesEqual(left, right), nil
	case "in", "not in":
		in, err := contains(right, left)
		return in == (op == "in"), err
	}
	c, err := order(op, left, right)
	if err != nil {
		return false, err
	}
	return map[string]bool{"<": c < 0, ">": c > 0, "<=": c <= 0, ">=": c >= 0}[op], nil
}
