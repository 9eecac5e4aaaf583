package template

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// kind is the Python type a Value stands for.
type kind uint8

const (
	kUndef     kind = iota // jinja2.Undefined
	kNone                  // None
	kBool                  // bool
	kInt                   // int (int64 here; overflow is an error)
	kFloat                 // float
	kStr                   // str
	kList                  // list
	kTuple                 // tuple
	kDict                  // dict (insertion ordered)
	kNamespace             // jinja2 namespace(): attributes assignable with set
	kFunc                  // a callable (global, macro, bound method)
	kObj                   // a read-only object with attributes (the loop variable)
)

// Value is one template value. The zero Value is Undefined.
type Value struct {
	k kind
	b bool
	i int64
	f float64
	s string // kStr; for kUndef the name that was missing (hint) or an error message
	r any    // *listVal, *dictVal, *funcVal, *objVal
}

type listVal struct{ items []Value }

type dictVal struct {
	keys []Value
	vals []Value
	idx  map[string]int
}

type funcVal struct {
	name string
	fn   func(e *evaluator, args []Value, kw []kwArg) (Value, error)
}

type objVal struct {
	name  string
	attrs map[string]Value
}

type kwArg struct {
	name string
	v    Value
}

var (
	undefined = Value{}
	none      = Value{k: kNone}
	vTrue     = Value{k: kBool, b: true}
	vFalse    = Value{k: kBool}
)

func undefNamed(name string) Value { return Value{k: kUndef, s: name} }

// unsafeUndef is an Undefined that fails with msg as soon as it is used
// (called, indexed), as jinja2's sandbox does for mutating methods.
func unsafeUndef(msg string) Value { return Value{k: kUndef, s: msg, b: true} }

func boolV(b bool) Value      { return Value{k: kBool, b: b} }
func intV(i int64) Value      { return Value{k: kInt, i: i} }
func floatV(f float64) Value  { return Value{k: kFloat, f: f} }
func strV(s string) Value     { return Value{k: kStr, s: s} }
func listV(xs []Value) Value  { return Value{k: kList, r: &listVal{items: xs}} }
func tupleV(xs []Value) Value { return Value{k: kTuple, r: &listVal{items: xs}} }
func funcV(name string, fn func(e *evaluator, args []Value, kw []kwArg) (Value, error)) Value {
	return Value{k: kFunc, r: &funcVal{name: name, fn: fn}}
}

func newDict() *dictVal { return &dictVal{idx: map[string]int{}} }

func dictV(d *dictVal) Value      { return Value{k: kDict, r: d} }
func namespaceV(d *dictVal) Value { return Value{k: kNamespace, r: d} }

func (v Value) items() []Value { return v.r.(*listVal).items }
func (v Value) dict() *dictVal { return v.r.(*dictVal) }
func (v Value) isSeq() bool    { return v.k == kList || v.k == kTuple }
func (v Value) isNum() bool    { return v.k == kInt || v.k == kFloat || v.k == kBool }

// hashKey returns the key under which v is stored in a dict, following
// Python's hash equality (1 == 1.0 == True). Lists and dicts are unhashable.
func hashKey(v Value) (string, error) { return hashKeyDepth(v, 0) }

func hashKeyDepth(v Value, depth int) (string, error) {
	if depth > maxValueDepth {
		return "", fmt.Errorf("maximum recursion depth exceeded while hashing")
	}
	switch v.k {
	case kStr:
		return "s" + v.s, nil
	case kInt:
		return "n" + strconv.FormatInt(v.i, 10), nil
	case kBool:
		if v.b {
			return "n1", nil
		}
		return "n0", nil
	case kFloat:
		if v.f == float64(int64(v.f)) {
			return "n" + strconv.FormatInt(int64(v.f), 10), nil
		}
		return "f" + strconv.FormatFloat(v.f, 'g', -1, 64), nil
	case kNone:
		return "N", nil
	case kTuple:
		var b strings.Builder
		b.WriteString("t(")
		for _, x := range v.items() {
			k, err := hashKeyDepth(x, depth+1)
			if err != nil {
				return "", err
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("unhashable type: '%s'", typeName(v))
}

func (d *dictVal) get(k Value) (Value, bool) {
	h, err := hashKey(k)
	if err != nil {
		return undefined, false
	}
	i, ok := d.idx[h]
	if !ok {
		return undefined, false
	}
	return d.vals[i], true
}

func (d *dictVal) getStr(k string) (Value, bool) {
	i, ok := d.idx["s"+k]
	if !ok {
		return undefined, false
	}
	return d.vals[i], true
}

func (d *dictVal) set(k, v Value) error {
	h, err := hashKey(k)
	if err != nil {
		return err
	}
	if i, ok := d.idx[h]; ok {
		d.vals[i] = v
		return nil
	}
	d.idx[h] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return nil
}

func (d *dictVal) setStr(k string, v Value) { _ = d.set(strV(k), v) }

func (d *dictVal) copy() *dictVal {
	c := &dictVal{keys: append([]Value(nil), d.keys...), vals: append([]Value(nil), d.vals...), idx: make(map[string]int, len(d.idx))}
	for k, i := range d.idx {
		c.idx[k] = i
	}
	return c
}

func typeName(v Value) string {
	switch v.k {
	case kUndef:
		return "Undefined"
	case kNone:
		return "NoneType"
	case kBool:
		return "bool"
	case kInt:
		return "int"
	case kFloat:
		return "float"
	case kStr:
		return "str"
	case kList:
		return "list"
	case kTuple:
		return "tuple"
	case kDict:
		return "dict"
	case kNamespace:
		return "Namespace"
	case kFunc:
		return "function"
	}
	return "object"
}

// truthy is Python's bool(v).
func truthy(v Value) bool {
	switch v.k {
	case kUndef, kNone:
		return false
	case kBool:
		return v.b
	case kInt:
		return v.i != 0
	case kFloat:
		return v.f != 0
	case kStr:
		return v.s != ""
	case kList, kTuple:
		return len(v.items()) > 0
	case kDict:
		return len(v.dict().keys) > 0
	}
	return true
}

// errDepth is returned when a value nests deeper than Python's own
// recursion limit would allow to print it.
const maxValueDepth = 512

// toStr is Python's str(v) as Jinja prints it ({{ v }}, ~, |string).
func toStr(v Value) (string, error) {
	if v.k == kStr {
		return v.s, nil
	}
	if v.k == kUndef {
		return "", nil
	}
	var b strings.Builder
	if err := writeRepr(&b, v, 0, false); err != nil {
		return "", err
	}
	return b.String(), nil
}

// repr is Python's repr(v).
func repr(v Value) (string, error) {
	var b strings.Builder
	err := writeRepr(&b, v, 0, true)
	return b.String(), err
}

func writeRepr(b *strings.Builder, v Value, depth int, quote bool) error {
	if depth > maxValueDepth {
		return fmt.Errorf("maximum recursion depth exceeded while getting the repr of an object")
	}
	switch v.k {
	case kUndef:
		if quote {
			b.WriteString("Undefined")
		}
	case kNone:
		b.WriteString("None")
	case kBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case kInt:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case kFloat:
		b.WriteString(pyFloatRepr(v.f))
	case kStr:
		if quote {
			b.WriteString(pyStrRepr(v.s))
		} else {
			b.WriteString(v.s)
		}
	case kList, kTuple:
		open, close := "[", "]"
		if v.k == kTuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		items := v.items()
		for i, x := range items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, x, depth+1, true); err != nil {
				return err
			}
		}
		if v.k == kTuple && len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(close)
	case kDict, kNamespace:
		if v.k == kNamespace {
			b.WriteString("<Namespace ")
		}
		d := v.dict()
		b.WriteByte('{')
		for i, k := range d.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, k, depth+1, true); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writeRepr(b, d.vals[i], depth+1, true); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		if v.k == kNamespace {
			b.WriteByte('>')
		}
	case kFunc:
		fmt.Fprintf(b, "<function %s>", v.r.(*funcVal).name)
	case kObj:
		if o, ok := v.r.(*objVal); ok {
			fmt.Fprintf(b, "<%s object>", o.name)
		} else {
			b.WriteString("<LoopContext object>")
		}
	}
	return nil
}

// equal is Python's ==, with Jinja's Undefined equal only to Undefined.
func equal(a, b Value, depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	if a.isNum() && b.isNum() {
		if a.k == kFloat || b.k == kFloat {
			return toFloat(a) == toFloat(b)
		}
		return toInt(a) == toInt(b)
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kUndef, kNone:
		return true
	case kStr:
		return a.s == b.s
	case kList, kTuple:
		x, y := a.items(), b.items()
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i], depth+1) {
				return false
			}
		}
		return true
	case kDict:
		x, y := a.dict(), b.dict()
		if len(x.keys) != len(y.keys) {
			return false
		}
		for i, k := range x.keys {
			w, ok := y.get(k)
			if !ok || !equal(x.vals[i], w, depth+1) {
				return false
			}
		}
		return true
	}
	return a.r == b.r
}

func toFloat(v Value) float64 {
	switch v.k {
	case kFloat:
		return v.f
	case kInt:
		return float64(v.i)
	case kBool:
		if v.b {
			return 1
		}
	}
	return 0
}

func toInt(v Value) int64 {
	switch v.k {
	case kInt:
		return v.i
	case kBool:
		if v.b {
			return 1
		}
	case kFloat:
		return int64(v.f)
	}
	return 0
}

// compare is Python's ordering for <, <=, >, >=: numbers with numbers,
// strings with strings (by code point), sequences of the same type
// lexicographically; anything else is a TypeError.
func compare(a, b Value, depth int) (int, error) {
	if depth > maxValueDepth {
		return 0, fmt.Errorf("maximum recursion depth exceeded in comparison")
	}
	if a.isNum() && b.isNum() {
		if a.k == kFloat || b.k == kFloat {
			x, y := toFloat(a), toFloat(b)
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
		x, y := toInt(a), toInt(b)
		switch {
		case x < y:
			return -1, nil
		case x > y:
			return 1, nil
		}
		return 0, nil
	}
	if a.k == kStr && b.k == kStr {
		return strings.Compare(a.s, b.s), nil
	}
	if a.isSeq() && a.k == b.k {
		x, y := a.items(), b.items()
		for i := 0; i < len(x) && i < len(y); i++ {
			if equal(x[i], y[i], depth+1) {
				continue
			}
			return compare(x[i], y[i], depth+1)
		}
		switch {
		case len(x) < len(y):
			return -1, nil
		case len(x) > len(y):
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

// sortValues sorts in place with Python's stable sort; key maps each value
// to the value compared.
func sortValues(xs []Value, key func(Value) Value, reverse bool) error {
	var err error
	keys := make([]Value, len(xs))
	for i, x := range xs {
		keys[i] = key(x)
	}
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		c, e := compare(a, b, 0)
		if e != nil && err == nil {
			err = e
		}
		return c < 0
	})
	if err != nil {
		return err
	}
	out := make([]Value, len(xs))
	for i, k := range idx {
		out[i] = xs[k]
	}
	copy(xs, out)
	return nil
}
