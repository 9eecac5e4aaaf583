package template

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

type scope struct {
	vars   map[string]Value
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{vars: map[string]Value{}, parent: parent} }

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return undefined, false
}

// errBreak and errContinue carry loop control out of nested statements.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

type evaluator struct {
	ctx   context.Context
	lim   Limits
	steps int64
	out   *strings.Builder
	calls int
	now   time.Time
}

// charge counts n units of work against the step budget and polls the
// context every few thousand units.
func (e *evaluator) charge(n int64) error {
	before := e.steps
	e.steps += n
	if e.steps > e.lim.MaxSteps {
		return fmt.Errorf("%w: more than %d steps", ErrLimit, e.lim.MaxSteps)
	}
	if e.ctx != nil && before>>12 != e.steps>>12 {
		if err := e.ctx.Err(); err != nil {
			return fmt.Errorf("template: render: %w", err)
		}
	}
	return nil
}

// checkSize fails when a string or list about to be built would exceed
// the output limit, before it is allocated.
func (e *evaluator) checkSize(n int) error {
	if n > e.lim.MaxOutputBytes || n < 0 {
		return fmt.Errorf("%w: a value of %d bytes or items exceeds %d", ErrLimit, n, e.lim.MaxOutputBytes)
	}
	return e.charge(int64(n)/64 + 1)
}

func (e *evaluator) write(s string) error {
	if e.out.Len()+len(s) > e.lim.MaxOutputBytes {
		return fmt.Errorf("%w: output exceeds %d bytes", ErrLimit, e.lim.MaxOutputBytes)
	}
	if err := e.charge(int64(len(s))/64 + 1); err != nil {
		return err
	}
	e.out.WriteString(s)
	return nil
}

func (e *evaluator) capture(body []node, s *scope) (string, error) {
	saved := e.out
	e.out = &strings.Builder{}
	defer func() { e.out = saved }()
	if err := e.execAll(body, s); err != nil {
		return "", err
	}
	return e.out.String(), nil
}

func (e *evaluator) execAll(nodes []node, s *scope) error {
	for _, n := range nodes {
		if err := e.exec(n, s); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) exec(n node, s *scope) error {
	if err := e.charge(1); err != nil {
		return err
	}
	switch n := n.(type) {
	case *textNode:
		return e.write(n.s)
	case *outputNode:
		v, err := e.eval(n.x, s)
		if err != nil {
			return err
		}
		str, err := toStr(v)
		if err != nil {
			return err
		}
		return e.write(str)
	case *ifNode:
		for i, c := range n.conds {
			v, err := e.eval(c, s)
			if err != nil {
				return err
			}
			if truthy(v) {
				return e.execAll(n.bodies[i], s)
			}
		}
		return e.execAll(n.else_, s)
	case *forNode:
		return e.execFor(n, s)
	case *setNode:
		v, err := e.eval(n.x, s)
		if err != nil {
			return err
		}
		return e.assign(n.target, v, s)
	case *setBlockNode:
		str, err := e.capture(n.body, newScope(s))
		if err != nil {
			return err
		}
		v := strV(str)
		if n.filter != nil {
			if v, err = e.applyFilterChain(n.filter, v, s); err != nil {
				return err
			}
		}
		return e.assign(n.target, v, s)
	case *macroNode:
		s.vars[n.name] = e.makeMacro(n, s)
		return nil
	case *filterBlockNode:
		str, err := e.capture(n.body, newScope(s))
		if err != nil {
			return err
		}
		v, err := e.applyFilterChain(n.filter, strV(str), s)
		if err != nil {
			return err
		}
		out, err := toStr(v)
		if err != nil {
			return err
		}
		return e.write(out)
	case *withNode:
		inner := newScope(s)
		for i, t := range n.targets {
			v, err := e.eval(n.values[i], s)
			if err != nil {
				return err
			}
			if err := e.assign(t, v, inner); err != nil {
				return err
			}
		}
		return e.execAll(n.body, inner)
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return fmt.Errorf("template: internal: unknown node %T", n)
}

// applyFilterChain applies a filter chain parsed over a nil operand to v.
func (e *evaluator) applyFilterChain(f expr, v Value, s *scope) (Value, error) {
	fe := f.(*filterExpr)
	if fe.x != nil {
		inner, err := e.applyFilterChain(fe.x, v, s)
		if err != nil {
			return undefined, err
		}
		v = inner
	}
	return e.callFilter(fe, v, s)
}

// iterate returns the items a for loop (or list()) walks over.
func (e *evaluator) iterate(v Value) ([]Value, error) {
	switch v.k {
	case kUndef:
		if v.b {
			return nil, securityErr(v)
		}
		return nil, nil
	case kList, kTuple:
		return v.items(), nil
	case kDict:
		return append([]Value(nil), v.dict().keys...), nil
	case kStr:
		if err := e.charge(int64(len(v.s))); err != nil {
			return nil, err
		}
		out := make([]Value, 0, utf8.RuneCountInString(v.s))
		for _, r := range v.s {
			out = append(out, strV(string(r)))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: '%s' object is not iterable", ErrRender, typeName(v))
}

func (e *evaluator) execFor(n *forNode, s *scope) error {
	iv, err := e.eval(n.iter, s)
	if err != nil {
		return err
	}
	items, err := e.iterate(iv)
	if err != nil {
		return err
	}
	if n.filter != nil {
		var kept []Value
		for _, it := range items {
			if err := e.charge(1); err != nil {
				return err
			}
			fs := newScope(s)
			if err := e.assign(n.target, it, fs); err != nil {
				return err
			}
			c, err := e.eval(n.filter, fs)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return e.execAll(n.else_, newScope(s))
	}
	lv := &loopVal{items: items}
	loopValue := Value{k: kObj, r: lv}
	ls := newScope(s)
	for i, it := range items {
		if err := e.charge(1); err != nil {
			return err
		}
		// Each iteration starts with a fresh scope, as in jinja2: what the
		// body sets is gone at the next iteration.
		clear(ls.vars)
		lv.i = i
		if err := e.assign(n.target, it, ls); err != nil {
			return err
		}
		ls.vars["loop"] = loopValue
		err := e.execAll(n.body, ls)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// loopVal is the loop variable of a for loop; its attributes are computed
// when read.
type loopVal struct {
	items       []Value
	i           int
	lastChanged []Value
	hasChanged  bool
}

func (l *loopVal) attr(name string) (Value, bool) {
	n := len(l.items)
	switch name {
	case "index0":
		return intV(int64(l.i)), true
	case "index":
		return intV(int64(l.i + 1)), true
	case "revindex0":
		return intV(int64(n - l.i - 1)), true
	case "revindex":
		return intV(int64(n - l.i)), true
	case "first":
		return boolV(l.i == 0), true
	case "last":
		return boolV(l.i == n-1), true
	case "length":
		return intV(int64(n)), true
	case "depth":
		return intV(1), true
	case "depth0":
		return intV(0), true
	case "previtem":
		if l.i > 0 {
			return l.items[l.i-1], true
		}
		return undefNamed("there is no previous item"), true
	case "nextitem":
		if l.i < n-1 {
			return l.items[l.i+1], true
		}
		return undefNamed("there is no next item"), true
	case "cycle":
		idx := l.i
		return funcV("loop.cycle", func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
			if len(args) == 0 {
				return undefined, fmt.Errorf("%w: no items for cycling given", ErrRender)
			}
			return args[idx%len(args)], nil
		}), true
	case "changed":
		return funcV("loop.changed", func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
			if l.hasChanged && len(args) == len(l.lastChanged) {
				same := true
				for j := range args {
					if !equal(args[j], l.lastChanged[j], 0) {
						same = false
					}
				}
				if same {
					return vFalse, nil
				}
			}
			l.hasChanged = true
			l.lastChanged = args
			return vTrue, nil
		}), true
	}
	return undefined, false
}

func (e *evaluator) assign(target expr, v Value, s *scope) error {
	switch t := target.(type) {
	case *nameExpr:
		s.vars[t.name] = v
		return nil
	case *nsRefExpr:
		ns, _ := s.lookup(t.name)
		if ns.k != kNamespace {
			return fmt.Errorf("%w: cannot assign attribute on non-namespace object", ErrRender)
		}
		if strings.HasPrefix(t.attr, "_") {
			return fmt.Errorf("%w: namespace attributes cannot start with '_'", ErrRender)
		}
		ns.dict().setStr(t.attr, v)
		return nil
	case *tupleExpr:
		items, err := e.iterate(v)
		if err != nil {
			return err
		}
		if v.k == kUndef {
			return fmt.Errorf("%w: cannot unpack an undefined value", ErrRender)
		}
		if len(items) != len(t.items) {
			return fmt.Errorf("%w: expected %d values to unpack, got %d", ErrRender, len(t.items), len(items))
		}
		for i, sub := range t.items {
			if err := e.assign(sub, items[i], s); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("template: internal: cannot assign to %T", target)
}

func (e *evaluator) makeMacro(n *macroNode, def *scope) Value {
	return funcV(n.name, func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
		if len(args) > len(n.params) {
			return undefined, fmt.Errorf("%w: macro '%s' takes not more than %d argument(s)", ErrRender, n.name, len(n.params))
		}
		e.calls++
		defer func() { e.calls-- }()
		if e.calls > e.lim.MaxCallDepth {
			return undefined, fmt.Errorf("%w: macro calls nest deeper than %d", ErrLimit, e.lim.MaxCallDepth)
		}
		ms := newScope(def)
		set := make([]bool, len(n.params))
		for i, a := range args {
			ms.vars[n.params[i]] = a
			set[i] = true
		}
		for _, k := range kw {
			found := false
			for i, p := range n.params {
				if p == k.name {
					if set[i] {
						return undefined, fmt.Errorf("%w: macro '%s' got multiple values for argument '%s'", ErrRender, n.name, p)
					}
					ms.vars[p] = k.v
					set[i] = true
					found = true
				}
			}
			if !found {
				return undefined, fmt.Errorf("%w: macro '%s' takes no keyword argument '%s'", ErrRender, n.name, k.name)
			}
		}
		firstDefault := len(n.params) - len(n.defaults)
		for i, p := range n.params {
			if set[i] {
				continue
			}
			if i >= firstDefault {
				d, err := e.eval(n.defaults[i-firstDefault], ms)
				if err != nil {
					return undefined, err
				}
				ms.vars[p] = d
			} else {
				ms.vars[p] = undefNamed(p)
			}
		}
		out, err := e.capture(n.body, ms)
		if err != nil {
			return undefined, err
		}
		return strV(out), nil
	})
}

func undefinedErr(v Value) error {
	if v.b {
		return securityErr(v)
	}
	if v.s == "" {
		return fmt.Errorf("%w: value is undefined", ErrUndefined)
	}
	return fmt.Errorf("%w: %s", ErrUndefined, v.s)
}

func securityErr(v Value) error { return fmt.Errorf("%w: %s", ErrSecurity, v.s) }

func (e *evaluator) eval(x expr, s *scope) (Value, error) {
	if err := e.charge(1); err != nil {
		return undefined, err
	}
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		if v, ok := s.lookup(x.name); ok {
			return v, nil
		}
		return undefNamed(fmt.Sprintf("'%s' is undefined", x.name)), nil
	case *attrExpr:
		obj, err := e.eval(x.x, s)
		if err != nil {
			return undefined, err
		}
		return e.getattr(obj, x.name)
	case *itemExpr:
		obj, err := e.eval(x.x, s)
		if err != nil {
			return undefined, err
		}
		key, err := e.eval(x.key, s)
		if err != nil {
			return undefined, err
		}
		return e.getitem(obj, key)
	case *sliceExpr:
		return e.evalSlice(x, s)
	case *callExpr:
		fn, err := e.eval(x.fn, s)
		if err != nil {
			return undefined, err
		}
		args, kw, err := e.evalArgs(x.args, x.kwargs, s)
		if err != nil {
			return undefined, err
		}
		return e.call(fn, args, kw)
	case *filterExpr:
		v, err := e.eval(x.x, s)
		if err != nil {
			return undefined, err
		}
		return e.callFilter(x, v, s)
	case *testExpr:
		v, err := e.eval(x.x, s)
		if err != nil {
			return undefined, err
		}
		args, kw, err := e.evalArgs(x.args, x.kwargs, s)
		if err != nil {
			return undefined, err
		}
		if len(kw) > 0 {
			return undefined, fmt.Errorf("%w: test '%s' takes no keyword arguments", ErrRender, x.name)
		}
		ok, err := tests[x.name](e, v, args)
		return boolV(ok), err
	case *unaryExpr:
		v, err := e.eval(x.x, s)
		if err != nil {
			return undefined, err
		}
		return unary(x.op, v)
	case *binExpr:
		l, err := e.eval(x.l, s)
		if err != nil {
			return undefined, err
		}
		switch x.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return e.eval(x.r, s)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return e.eval(x.r, s)
		}
		r, err := e.eval(x.r, s)
		if err != nil {
			return undefined, err
		}
		return e.binary(x.op, l, r)
	case *compareExpr:
		l, err := e.eval(x.first, s)
		if err != nil {
			return undefined, err
		}
		for i, op := range x.ops {
			r, err := e.eval(x.rest[i], s)
			if err != nil {
				return undefined, err
			}
			ok, err := e.compareOp(op, l, r)
			if err != nil {
				return undefined, err
			}
			if !ok {
				return vFalse, nil
			}
			l = r
		}
		return vTrue, nil
	case *condExpr:
		t, err := e.eval(x.test, s)
		if err != nil {
			return undefined, err
		}
		if truthy(t) {
			return e.eval(x.then, s)
		}
		if x.else_ == nil {
			return undefNamed("the inline if-expression evaluated to false and no else section was defined"), nil
		}
		return e.eval(x.else_, s)
	case *listExpr, *tupleExpr:
		var items []expr
		if l, ok := x.(*listExpr); ok {
			items = l.items
		} else {
			items = x.(*tupleExpr).items
		}
		out := make([]Value, len(items))
		for i, it := range items {
			v, err := e.eval(it, s)
			if err != nil {
				return undefined, err
			}
			out[i] = v
		}
		if _, ok := x.(*listExpr); ok {
			return listV(out), nil
		}
		return tupleV(out), nil
	case *dictExpr:
		d := newDict()
		for i := range x.keys {
			k, err := e.eval(x.keys[i], s)
			if err != nil {
				return undefined, err
			}
			v, err := e.eval(x.vals[i], s)
			if err != nil {
				return undefined, err
			}
			if err := d.set(k, v); err != nil {
				return undefined, fmt.Errorf("%w: %v", ErrRender, err)
			}
		}
		return dictV(d), nil
	}
	return undefined, fmt.Errorf("template: internal: unknown expression %T", x)
}

func (e *evaluator) evalArgs(args []expr, kws []kwExpr, s *scope) ([]Value, []kwArg, error) {
	var out []Value
	for _, a := range args {
		v, err := e.eval(a, s)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, v)
	}
	var kw []kwArg
	for _, k := range kws {
		v, err := e.eval(k.x, s)
		if err != nil {
			return nil, nil, err
		}
		kw = append(kw, kwArg{name: k.name, v: v})
	}
	return out, kw, nil
}

func (e *evaluator) call(fn Value, args []Value, kw []kwArg) (Value, error) {
	switch fn.k {
	case kFunc:
		return fn.r.(*funcVal).fn(e, args, kw)
	case kUndef:
		return undefined, undefinedErr(fn)
	}
	return undefined, fmt.Errorf("%w: '%s' object is not callable", ErrRender, typeName(fn))
}

// getattr is jinja2's sandboxed obj.name: the attribute (a method here),
// else the item, else Undefined.
func (e *evaluator) getattr(obj Value, name string) (Value, error) {
	switch obj.k {
	case kUndef:
		return undefined, undefinedErr(obj)
	case kDict:
		if m, ok := method(obj, name); ok {
			return m, nil
		}
		if v, ok := obj.dict().getStr(name); ok {
			return v, nil
		}
	case kNamespace:
		if v, ok := obj.dict().getStr(name); ok {
			return v, nil
		}
	case kObj:
		switch o := obj.r.(type) {
		case *objVal:
			if v, ok := o.attrs[name]; ok {
				return v, nil
			}
		case *loopVal:
			if v, ok := o.attr(name); ok {
				return v, nil
			}
		}
	default:
		if m, ok := method(obj, name); ok {
			return m, nil
		}
	}
	return undefNamed(fmt.Sprintf("'%s object' has no attribute '%s'", typeName(obj), name)), nil
}

// getitem is jinja2's sandboxed obj[key]: the item, else (for a string
// key) the attribute, else Undefined.
func (e *evaluator) getitem(obj Value, key Value) (Value, error) {
	switch obj.k {
	case kUndef:
		return undefined, undefinedErr(obj)
	case kDict:
		if v, ok := obj.dict().get(key); ok {
			return v, nil
		}
	case kList, kTuple, kStr:
		if key.k == kInt || key.k == kBool {
			i := toInt(key)
			if obj.k == kStr {
				rs := []rune(obj.s)
				if i < 0 {
					i += int64(len(rs))
				}
				if i >= 0 && i < int64(len(rs)) {
					return strV(string(rs[i])), nil
				}
			} else {
				items := obj.items()
				if i < 0 {
					i += int64(len(items))
				}
				if i >= 0 && i < int64(len(items)) {
					return items[i], nil
				}
			}
		}
	}
	if key.k == kStr {
		if obj.k == kDict {
			if m, ok := method(obj, key.s); ok {
				return m, nil
			}
		} else {
			return e.getattr(obj, key.s)
		}
	}
	ks, _ := repr(key)
	return undefNamed(fmt.Sprintf("'%s object' has no element %s", typeName(obj), ks)), nil
}

func (e *evaluator) evalSlice(x *sliceExpr, s *scope) (Value, error) {
	obj, err := e.eval(x.x, s)
	if err != nil {
		return undefined, err
	}
	var bounds [3]*int64
	for i, b := range []expr{x.start, x.stop, x.step} {
		if b == nil {
			continue
		}
		v, err := e.eval(b, s)
		if err != nil {
			return undefined, err
		}
		switch v.k {
		case kNone:
		case kInt, kBool:
			n := toInt(v)
			bounds[i] = &n
		default:
			if obj.k == kUndef {
				return undefined, undefinedErr(obj)
			}
			return undefNamed("slice indices must be integers or None"), nil
		}
	}
	var n int
	switch obj.k {
	case kUndef:
		return undefined, undefinedErr(obj)
	case kStr:
		n = utf8.RuneCountInString(obj.s)
	case kList, kTuple:
		n = len(obj.items())
	default:
		return undefNamed(fmt.Sprintf("'%s' object is not subscriptable", typeName(obj))), nil
	}
	idx, err := sliceIndices(n, bounds)
	if err != nil {
		return undefined, err
	}
	if err := e.charge(int64(len(idx))); err != nil {
		return undefined, err
	}
	if obj.k == kStr {
		rs := []rune(obj.s)
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = rs[j]
		}
		return strV(string(out)), nil
	}
	items := obj.items()
	out := make([]Value, len(idx))
	for i, j := range idx {
		out[i] = items[j]
	}
	if obj.k == kTuple {
		return tupleV(out), nil
	}
	return listV(out), nil
}

// sliceIndices is Python's slice.indices followed by range().
func sliceIndices(n int, b [3]*int64) ([]int, error) {
	step := int64(1)
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("%w: slice step cannot be zero", ErrRender)
	}
	ln := int64(n)
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += ln
			if v < 0 {
				if step < 0 {
					return -1
				}
				return 0
			}
		} else if v >= ln {
			if step < 0 {
				return ln - 1
			}
			return ln
		}
		return v
	}
	var start, stop int64
	if step > 0 {
		start, stop = clamp(b[0], 0), clamp(b[1], ln)
	} else {
		start, stop = clamp(b[0], ln-1), clamp(b[1], -1)
	}
	var out []int
	if step > 0 {
		for i := start; i < stop; i += step {
			out = append(out, int(i))
			if step >= stop-i {
				break
			}
		}
	} else {
		for i := start; i > stop; i += step {
			out = append(out, int(i))
			if step <= stop-i {
				break
			}
		}
	}
	return out, nil
}

func unary(op string, v Value) (Value, error) {
	switch op {
	case "not":
		return boolV(!truthy(v)), nil
	case "-":
		switch v.k {
		case kInt, kBool:
			i := toInt(v)
			if i == math.MinInt64 {
				return undefined, errOverflow
			}
			return intV(-i), nil
		case kFloat:
			return floatV(-v.f), nil
		case kUndef:
			return undefined, undefinedErr(v)
		}
	case "+":
		switch v.k {
		case kInt, kBool:
			return intV(toInt(v)), nil
		case kFloat:
			return v, nil
		case kUndef:
			return undefined, undefinedErr(v)
		}
	}
	return undefined, fmt.Errorf("%w: bad operand type for unary %s: '%s'", ErrRender, op, typeName(v))
}

var errOverflow = fmt.Errorf("%w: integer overflow (Python integers are unbounded; these are 64-bit)", ErrUnsupported)

func (e *evaluator) binary(op string, l, r Value) (Value, error) {
	if op == "~" {
		ls, err := toStr(l)
		if err != nil {
			return undefined, err
		}
		rs, err := toStr(r)
		if err != nil {
			return undefined, err
		}
		if err := e.checkSize(len(ls) + len(rs)); err != nil {
			return undefined, err
		}
		return strV(ls + rs), nil
	}
	if l.k == kUndef {
		return undefined, undefinedErr(l)
	}
	if r.k == kUndef {
		return undefined, undefinedErr(r)
	}
	if l.isNum() && r.isNum() {
		return arith(op, l, r)
	}
	switch op {
	case "+":
		switch {
		case l.k == kStr && r.k == kStr:
			if err := e.checkSize(len(l.s) + len(r.s)); err != nil {
				return undefined, err
			}
			return strV(l.s + r.s), nil
		case l.isSeq() && l.k == r.k:
			if err := e.checkSize(len(l.items()) + len(r.items())); err != nil {
				return undefined, err
			}
			out := append(append([]Value{}, l.items()...), r.items()...)
			return Value{k: l.k, r: &listVal{items: out}}, nil
		}
		if l.k == kStr {
			return undefined, fmt.Errorf("%w: can only concatenate str (not \"%s\") to str", ErrRender, typeName(r))
		}
	case "*":
		seq, n := l, r
		if l.k == kInt || l.k == kBool {
			seq, n = r, l
		}
		if n.k == kInt || n.k == kBool {
			times := max(toInt(n), 0)
			switch seq.k {
			case kStr:
				if times > 0 && int64(len(seq.s)) > int64(e.lim.MaxOutputBytes)/times {
					return undefined, e.checkSize(-1)
				}
				if err := e.checkSize(len(seq.s) * int(times)); err != nil {
					return undefined, err
				}
				return strV(strings.Repeat(seq.s, int(times))), nil
			case kList, kTuple:
				items := seq.items()
				if times > 0 && int64(len(items)) > int64(e.lim.MaxOutputBytes)/times {
					return undefined, e.checkSize(-1)
				}
				if err := e.checkSize(len(items) * int(times)); err != nil {
					return undefined, err
				}
				out := make([]Value, 0, len(items)*int(times))
				for range times {
					out = append(out, items...)
				}
				return Value{k: seq.k, r: &listVal{items: out}}, nil
			}
		}
	case "%":
		if l.k == kStr {
			s, err := e.printf(l.s, r)
			if err != nil {
				return undefined, err
			}
			return strV(s), nil
		}
	}
	return undefined, fmt.Errorf("%w: unsupported operand type(s) for %s: '%s' and '%s'", ErrRender, op, typeName(l), typeName(r))
}

func arith(op string, l, r Value) (Value, error) {
	bothInt := l.k != kFloat && r.k != kFloat
	if bothInt {
		a, b := toInt(l), toInt(r)
		switch op {
		case "+":
			c := a + b
			if (c > a) != (b > 0) {
				return undefined, errOverflow
			}
			return intV(c), nil
		case "-":
			c := a - b
			if (c < a) != (b > 0) {
				return undefined, errOverflow
			}
			return intV(c), nil
		case "*":
			if a != 0 && b != 0 {
				c := a * b
				if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
					return undefined, errOverflow
				}
				return intV(c), nil
			}
			return intV(0), nil
		case "/":
			if b == 0 {
				return undefined, fmt.Errorf("%w: division by zero", ErrRender)
			}
			return floatV(float64(a) / float64(b)), nil
		case "//":
			if b == 0 {
				return undefined, fmt.Errorf("%w: integer division or modulo by zero", ErrRender)
			}
			if a == math.MinInt64 && b == -1 {
				return undefined, errOverflow
			}
			q := a / b
			if (a%b != 0) && ((a < 0) != (b < 0)) {
				q--
			}
			return intV(q), nil
		case "%":
			if b == 0 {
				return undefined, fmt.Errorf("%w: integer division or modulo by zero", ErrRender)
			}
			if b == -1 {
				return intV(0), nil
			}
			m := a % b
			if m != 0 && ((m < 0) != (b < 0)) {
				m += b
			}
			return intV(m), nil
		case "**":
			if b < 0 {
				if a == 0 {
					return undefined, fmt.Errorf("%w: 0.0 cannot be raised to a negative power", ErrRender)
				}
				return floatV(math.Pow(float64(a), float64(b))), nil
			}
			res := int64(1)
			base := a
			for b > 0 {
				if b&1 == 1 {
					c := res * base
					if base != 0 && (c/base != res) {
						return undefined, errOverflow
					}
					res = c
				}
				b >>= 1
				if b > 0 {
					c := base * base
					if base != 0 && c/base != base {
						return undefined, errOverflow
					}
					base = c
				}
			}
			return intV(res), nil
		}
	}
	a, b := toFloat(l), toFloat(r)
	switch op {
	case "+":
		return floatV(a + b), nil
	case "-":
		return floatV(a - b), nil
	case "*":
		return floatV(a * b), nil
	case "/":
		if b == 0 {
			return undefined, fmt.Errorf("%w: float division by zero", ErrRender)
		}
		return floatV(a / b), nil
	case "//":
		if b == 0 {
			return undefined, fmt.Errorf("%w: float floor division by zero", ErrRender)
		}
		return floatV(math.Floor(a / b)), nil
	case "%":
		if b == 0 {
			return undefined, fmt.Errorf("%w: float modulo", ErrRender)
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return floatV(m), nil
	case "**":
		if a == 0 && b < 0 {
			return undefined, fmt.Errorf("%w: 0.0 cannot be raised to a negative power", ErrRender)
		}
		if a < 0 && b != math.Trunc(b) {
			return undefined, fmt.Errorf("%w: negative number to a fractional power", ErrUnsupported)
		}
		return floatV(math.Pow(a, b)), nil
	}
	return undefined, fmt.Errorf("template: internal: operator %s", op)
}

func (e *evaluator) compareOp(op string, l, r Value) (bool, error) {
	switch op {
	case "==":
		return equal(l, r, 0), nil
	case "!=":
		return !equal(l, r, 0), nil
	case "in":
		return e.contains(r, l)
	case "notin":
		ok, err := e.contains(r, l)
		return !ok, err
	}
	if l.k == kUndef {
		return false, undefinedErr(l)
	}
	if r.k == kUndef {
		return false, undefinedErr(r)
	}
	c, err := compare(l, r, 0)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrRender, err)
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// contains is Python's item in container.
func (e *evaluator) contains(container, item Value) (bool, error) {
	switch container.k {
	case kStr:
		if item.k != kStr {
			return false, fmt.Errorf("%w: 'in <string>' requires string as left operand, not %s", ErrRender, typeName(item))
		}
		return strings.Contains(container.s, item.s), nil
	case kList, kTuple:
		if err := e.charge(int64(len(container.items()))); err != nil {
			return false, err
		}
		for _, x := range container.items() {
			if equal(x, item, 0) {
				return true, nil
			}
		}
		return false, nil
	case kDict:
		if _, err := hashKey(item); err != nil {
			return false, fmt.Errorf("%w: %v", ErrRender, err)
		}
		_, ok := container.dict().get(item)
		return ok, nil
	case kUndef:
		if container.b {
			return false, securityErr(container)
		}
		return false, nil
	}
	return false, fmt.Errorf("%w: argument of type '%s' is not iterable", ErrRender, typeName(container))
}
