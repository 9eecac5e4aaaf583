package template

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type filterFunc func(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error)
type testFunc func(e *evaluator, v Value, args []Value) (bool, error)

var (
	filters map[string]filterFunc
	tests   map[string]testFunc
)

func init() {
	filters = map[string]filterFunc{
		"tojson":     fTojson,
		"length":     fLength,
		"count":      fLength,
		"trim":       fTrim,
		"join":       fJoin,
		"default":    fDefault,
		"d":          fDefault,
		"upper":      strFilter(strings.ToUpper),
		"lower":      strFilter(strings.ToLower),
		"capitalize": strFilter(pyCapitalize),
		"title":      strFilter(jinjaTitle),
		"first":      fFirst,
		"last":       fLast,
		"list":       fList,
		"string":     fString,
		"safe":       fString,
		"int":        fInt,
		"float":      fFloat,
		"abs":        fAbs,
		"round":      fRound,
		"replace":    fReplace,
		"reverse":    fReverse,
		"sort":       fSort,
		"unique":     fUnique,
		"map":        fMap,
		"select":     selectFilter(false, false),
		"reject":     selectFilter(true, false),
		"selectattr": selectFilter(false, true),
		"rejectattr": selectFilter(true, true),
		"items":      fItems,
		"dictsort":   fDictsort,
		"indent":     fIndent,
		"wordcount":  fWordcount,
		"escape":     fEscape,
		"e":          fEscape,
		"sum":        fSum,
		"min":        minMax(-1),
		"max":        minMax(1),
		"attr":       fAttr,
		"format":     fFormat,
		"center":     fCenter,
	}
	tests = map[string]testFunc{
		"defined":     func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k != kUndef, nil },
		"undefined":   func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kUndef, nil },
		"none":        func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kNone, nil },
		"boolean":     func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kBool, nil },
		"true":        func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kBool && v.b, nil },
		"false":       func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kBool && !v.b, nil },
		"integer":     func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kInt, nil },
		"float":       func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kFloat, nil },
		"number":      func(e *evaluator, v Value, _ []Value) (bool, error) { return v.isNum(), nil },
		"string":      func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kStr, nil },
		"mapping":     func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kDict, nil },
		"callable":    func(e *evaluator, v Value, _ []Value) (bool, error) { return v.k == kFunc, nil },
		"iterable":    tIterable,
		"sequence":    tIterable,
		"sameas":      tSameas,
		"escaped":     func(e *evaluator, v Value, _ []Value) (bool, error) { return false, nil },
		"in":          tIn,
		"eq":          cmpTest("=="),
		"equalto":     cmpTest("=="),
		"==":          cmpTest("=="),
		"ne":          cmpTest("!="),
		"!=":          cmpTest("!="),
		"lt":          cmpTest("<"),
		"lessthan":    cmpTest("<"),
		"<":           cmpTest("<"),
		"le":          cmpTest("<="),
		"<=":          cmpTest("<="),
		"gt":          cmpTest(">"),
		"greaterthan": cmpTest(">"),
		">":           cmpTest(">"),
		"ge":          cmpTest(">="),
		">=":          cmpTest(">="),
		"odd":         intTest(func(i int64) bool { return i%2 != 0 }),
		"even":        intTest(func(i int64) bool { return i%2 == 0 }),
		"divisibleby": tDivisible,
		"lower":       strTest(func(s string) bool { return s == strings.ToLower(s) && s != strings.ToUpper(s) }),
		"upper":       strTest(func(s string) bool { return s == strings.ToUpper(s) && s != strings.ToLower(s) }),
		"filter": func(e *evaluator, v Value, _ []Value) (bool, error) {
			_, ok := filters[v.s]
			return v.k == kStr && ok, nil
		},
		"test": func(e *evaluator, v Value, _ []Value) (bool, error) {
			_, ok := tests[v.s]
			return v.k == kStr && ok, nil
		},
	}
}

func renderErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRender, fmt.Sprintf(format, args...))
}

// bindArgs matches positional and keyword arguments to names; the last
// len(defs) names are optional.
func bindArgs(fname string, args []Value, kw []kwArg, names []string, defs ...Value) ([]Value, error) {
	if len(args) > len(names) {
		return nil, renderErr("%s() takes at most %d arguments (%d given)", fname, len(names), len(args))
	}
	out := make([]Value, len(names))
	set := make([]bool, len(names))
	for i, a := range args {
		out[i], set[i] = a, true
	}
	for _, k := range kw {
		found := false
		for i, n := range names {
			if n == k.name {
				if set[i] {
					return nil, renderErr("%s() got multiple values for argument '%s'", fname, n)
				}
				out[i], set[i], found = k.v, true, true
			}
		}
		if !found {
			return nil, renderErr("%s() got an unexpected keyword argument '%s'", fname, k.name)
		}
	}
	first := len(names) - len(defs)
	for i := range names {
		if !set[i] {
			if i < first {
				return nil, renderErr("%s() missing required argument '%s'", fname, names[i])
			}
			out[i] = defs[i-first]
		}
	}
	return out, nil
}

func (e *evaluator) callFilter(f *filterExpr, v Value, s *scope) (Value, error) {
	args, kw, err := e.evalArgs(f.args, f.kwargs, s)
	if err != nil {
		return undefined, err
	}
	return filters[f.name](e, v, args, kw)
}

// softStr is jinja2's soft_str: str(v) (Undefined is "").
func softStr(v Value) (string, error) { return toStr(v) }

func strFilter(fn func(string) string) filterFunc {
	return func(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
		if _, err := bindArgs("filter", args, kw, nil); err != nil {
			return undefined, err
		}
		s, err := softStr(v)
		if err != nil {
			return undefined, err
		}
		return strV(fn(s)), nil
	}
}

// jinjaTitle is jinja2's title filter: each word split at [-\s({\[<]+
// gets an upper-case first letter and lower-case rest.
func jinjaTitle(s string) string {
	isSep := func(r rune) bool {
		return r == '-' || r == '(' || r == '{' || r == '[' || r == '<' || isPySpace(r)
	}
	var b strings.Builder
	start := true
	for _, r := range s {
		switch {
		case isSep(r):
			b.WriteRune(r)
			start = true
		case start:
			b.WriteString(strings.ToUpper(string(r)))
			start = false
		default:
			b.WriteString(strings.ToLower(string(r)))
		}
	}
	return b.String()
}

func fTojson(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("tojson", args, kw, []string{"ensure_ascii", "indent", "separators", "sort_keys"}, vFalse, none, none, vFalse)
	if err != nil {
		return undefined, err
	}
	o := jsonOpts{ensureASCII: truthy(a[0]), sortKeys: truthy(a[3]), itemSep: ", ", keySep: ": "}
	switch a[1].k {
	case kNone:
	case kInt, kBool:
		ind := strings.Repeat(" ", int(max(0, min(toInt(a[1]), 1<<10))))
		o.indent = &ind
	case kStr:
		ind := a[1].s
		o.indent = &ind
	default:
		return undefined, renderErr("tojson: indent must be an int or a string")
	}
	if o.indent != nil {
		o.itemSep = ","
	}
	if a[2].k != kNone {
		if !a[2].isSeq() || len(a[2].items()) != 2 || a[2].items()[0].k != kStr || a[2].items()[1].k != kStr {
			return undefined, renderErr("tojson: separators must be two strings")
		}
		o.itemSep, o.keySep = a[2].items()[0].s, a[2].items()[1].s
	}
	budget := e.lim.MaxOutputBytes
	o.budget = &budget
	s, err := jsonDumps(v, o)
	if err != nil {
		if err == ErrLimit {
			return undefined, e.checkSize(-1)
		}
		return undefined, renderErr("%v", err)
	}
	if err := e.checkSize(len(s)); err != nil {
		return undefined, err
	}
	return strV(s), nil
}

func length(v Value) (int, error) {
	switch v.k {
	case kUndef:
		return 0, nil
	case kStr:
		return utf8.RuneCountInString(v.s), nil
	case kList, kTuple:
		return len(v.items()), nil
	case kDict:
		return len(v.dict().keys), nil
	}
	return 0, renderErr("object of type '%s' has no len()", typeName(v))
}

func fLength(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	if _, err := bindArgs("length", args, kw, nil); err != nil {
		return undefined, err
	}
	n, err := length(v)
	return intV(int64(n)), err
}

func fTrim(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("trim", args, kw, []string{"chars"}, none)
	if err != nil {
		return undefined, err
	}
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	var chars *string
	if a[0].k == kStr {
		chars = &a[0].s
	} else if a[0].k != kNone {
		return undefined, renderErr("strip arg must be None or str")
	}
	return strV(pyStrip(s, chars, true, true)), nil
}

func (e *evaluator) attrGetter(attr Value) func(Value) (Value, error) {
	if attr.k == kNone || attr.k == kUndef {
		return func(v Value) (Value, error) { return v, nil }
	}
	var parts []Value
	if attr.k == kStr {
		for _, p := range strings.Split(attr.s, ".") {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil && p != "" && p[0] >= '0' && p[0] <= '9' {
				parts = append(parts, intV(n))
			} else {
				parts = append(parts, strV(p))
			}
		}
	} else {
		parts = []Value{attr}
	}
	return func(v Value) (Value, error) {
		for _, p := range parts {
			var err error
			if v, err = e.getitem(v, p); err != nil {
				return undefined, err
			}
		}
		return v, nil
	}
}

func (e *evaluator) mapAttr(xs []Value, attr Value) ([]Value, error) {
	get := e.attrGetter(attr)
	out := make([]Value, len(xs))
	for i, x := range xs {
		v, err := get(x)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func fJoin(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("join", args, kw, []string{"d", "attribute"}, strV(""), none)
	if err != nil {
		return undefined, err
	}
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if items, err = e.mapAttr(items, a[1]); err != nil {
		return undefined, err
	}
	sep, err := toStr(a[0])
	if err != nil {
		return undefined, err
	}
	parts := make([]string, len(items))
	n := 0
	for i, it := range items {
		if parts[i], err = toStr(it); err != nil {
			return undefined, err
		}
		n += len(parts[i]) + len(sep)
	}
	if err := e.checkSize(n); err != nil {
		return undefined, err
	}
	return strV(strings.Join(parts, sep)), nil
}

func fDefault(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("default", args, kw, []string{"default_value", "boolean"}, strV(""), vFalse)
	if err != nil {
		return undefined, err
	}
	if v.k == kUndef || (truthy(a[1]) && !truthy(v)) {
		return a[0], nil
	}
	return v, nil
}

func fFirst(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if len(items) == 0 {
		return undefNamed("no first item, sequence was empty"), nil
	}
	return items[0], nil
}

func fLast(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if len(items) == 0 {
		return undefNamed("no last item, sequence was empty"), nil
	}
	return items[len(items)-1], nil
}

func fList(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	return listV(append([]Value{}, items...)), nil
}

func fString(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	s, err := toStr(v)
	return strV(s), err
}

func fInt(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("int", args, kw, []string{"default", "base"}, intV(0), intV(10))
	if err != nil {
		return undefined, err
	}
	switch v.k {
	case kUndef:
		return undefined, undefinedErr(v)
	case kInt, kBool:
		return intV(toInt(v)), nil
	case kFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) || math.Abs(v.f) >= 9.2e18 {
			return a[0], nil
		}
		return intV(int64(v.f)), nil
	case kStr:
		s := strings.ReplaceAll(pyStrip(v.s, nil, true, true), "_", "")
		if n, ok := pyParseInt(s, toInt(a[1])); ok {
			return intV(n), nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 9.2e18 {
			return intV(int64(f)), nil
		}
	}
	return a[0], nil
}

// pyParseInt is Python's int(s, base) for s without underscores.
func pyParseInt(s string, base int64) (int64, bool) {
	neg := ""
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		if s[0] == '-' {
			neg = "-"
		}
		s = s[1:]
	}
	prefixed := len(s) > 1 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1]))
	switch {
	case base == 0:
		if !prefixed && len(s) > 1 && s[0] == '0' && strings.Trim(s, "0") != "" {
			return 0, false
		}
		if !prefixed {
			base = 10
		}
	case prefixed && ((base == 16 && (s[1] == 'x' || s[1] == 'X')) || (base == 8 && (s[1] == 'o' || s[1] == 'O')) || (base == 2 && (s[1] == 'b' || s[1] == 'B'))):
		s = s[2:]
	}
	if base != 0 && (base < 2 || base > 36) {
		return 0, false
	}
	n, err := strconv.ParseInt(neg+s, int(base), 64)
	return n, err == nil && s != ""
}

func fFloat(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("float", args, kw, []string{"default"}, floatV(0))
	if err != nil {
		return undefined, err
	}
	switch v.k {
	case kUndef:
		return undefined, undefinedErr(v)
	case kInt, kBool, kFloat:
		return floatV(toFloat(v)), nil
	case kStr:
		s := strings.ToLower(pyStrip(v.s, nil, true, true))
		switch s {
		case "inf", "+inf", "infinity", "+infinity":
			return floatV(math.Inf(1)), nil
		case "-inf", "-infinity":
			return floatV(math.Inf(-1)), nil
		case "nan", "+nan", "-nan":
			return floatV(math.NaN()), nil
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
			return floatV(f), nil
		}
	}
	return a[0], nil
}

func fAbs(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	switch v.k {
	case kInt, kBool:
		i := toInt(v)
		if i == math.MinInt64 {
			return undefined, errOverflow
		}
		if i < 0 {
			i = -i
		}
		return intV(i), nil
	case kFloat:
		return floatV(math.Abs(v.f)), nil
	}
	return undefined, renderErr("bad operand type for abs(): '%s'", typeName(v))
}

func fRound(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("round", args, kw, []string{"precision", "method"}, intV(0), strV("common"))
	if err != nil {
		return undefined, err
	}
	prec := int(max(-300, min(300, toInt(a[0]))))
	if !v.isNum() {
		return undefined, renderErr("type %s doesn't define __round__ method", typeName(v))
	}
	method := a[1].s
	if method != "common" && method != "ceil" && method != "floor" {
		return undefined, renderErr("method must be common, ceil or floor")
	}
	if v.k != kFloat && method == "common" {
		return intV(toInt(v)), nil
	}
	f := toFloat(v)
	if method == "common" {
		if prec >= 0 {
			r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', prec, 64), 64)
			return floatV(r), nil
		}
		m := math.Pow(10, float64(-prec))
		return floatV(math.RoundToEven(f/m) * m), nil
	}
	m := math.Pow(10, float64(prec))
	if method == "ceil" {
		return floatV(math.Ceil(f*m) / m), nil
	}
	return floatV(math.Floor(f*m) / m), nil
}

func fReplace(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("replace", args, kw, []string{"old", "new", "count"}, none)
	if err != nil {
		return undefined, err
	}
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	old, err := toStr(a[0])
	if err != nil {
		return undefined, err
	}
	nw, err := toStr(a[1])
	if err != nil {
		return undefined, err
	}
	n := -1
	if a[2].k != kNone {
		n = int(toInt(a[2]))
	}
	return e.replace(s, old, nw, n)
}

func (e *evaluator) replace(s, old, nw string, n int) (Value, error) {
	count := strings.Count(s, old)
	if old == "" {
		count = utf8.RuneCountInString(s) + 1
	}
	if n >= 0 && n < count {
		count = n
	}
	if err := e.checkSize(len(s) + count*(len(nw)-len(old))); err != nil {
		return undefined, err
	}
	return strV(strings.Replace(s, old, nw, n)), nil
}

func fReverse(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	if v.k == kStr {
		rs := []rune(v.s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return strV(string(rs)), nil
	}
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	out := make([]Value, len(items))
	for i, x := range items {
		out[len(items)-1-i] = x
	}
	return listV(out), nil
}

func ignoreCase(v Value) Value {
	if v.k == kStr {
		return strV(strings.ToLower(v.s))
	}
	return v
}

func (e *evaluator) sortKey(caseSensitive bool, attr Value) func(Value) (Value, error) {
	get := e.attrGetter(attr)
	return func(v Value) (Value, error) {
		k, err := get(v)
		if err != nil {
			return undefined, err
		}
		if !caseSensitive {
			k = ignoreCase(k)
		}
		return k, nil
	}
}

func (e *evaluator) keyed(items []Value, key func(Value) (Value, error)) ([]Value, error) {
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

func sortByKeys(items, keys []Value, reverse bool) ([]Value, error) {
	idx := make([]Value, len(items))
	for i := range items {
		idx[i] = intV(int64(i))
	}
	if err := sortValues(idx, func(v Value) Value { return keys[v.i] }, reverse); err != nil {
		return nil, renderErr("%v", err)
	}
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j.i]
	}
	return out, nil
}

func fSort(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("sort", args, kw, []string{"reverse", "case_sensitive", "attribute"}, vFalse, vFalse, none)
	if err != nil {
		return undefined, err
	}
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if err := e.charge(int64(len(items)) * 8); err != nil {
		return undefined, err
	}
	key := e.sortKey(truthy(a[1]), a[2])
	if a[2].k == kStr && strings.Contains(a[2].s, ",") {
		// jinja2's make_multi_attrgetter: "a,b" sorts by the tuple (a, b).
		var parts []func(Value) (Value, error)
		for _, name := range strings.Split(a[2].s, ",") {
			parts = append(parts, e.sortKey(truthy(a[1]), strV(name)))
		}
		key = func(v Value) (Value, error) {
			t := make([]Value, len(parts))
			for i, p := range parts {
				k, err := p(v)
				if err != nil {
					return undefined, err
				}
				t[i] = k
			}
			return tupleV(t), nil
		}
	}
	keys, err := e.keyed(items, key)
	if err != nil {
		return undefined, err
	}
	out, err := sortByKeys(items, keys, truthy(a[0]))
	return listV(out), err
}

func fUnique(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("unique", args, kw, []string{"case_sensitive", "attribute"}, vFalse, none)
	if err != nil {
		return undefined, err
	}
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	key := e.sortKey(truthy(a[0]), a[1])
	seen := map[string]bool{}
	var out []Value
	for _, it := range items {
		k, err := key(it)
		if err != nil {
			return undefined, err
		}
		h, err := hashKey(k)
		if err != nil {
			return undefined, renderErr("%v", err)
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, it)
		}
	}
	return listV(out), nil
}

func fMap(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if len(args) == 0 {
		a, err := bindArgs("map", nil, kw, []string{"attribute", "default"}, none, undefined)
		if err != nil {
			return undefined, err
		}
		if a[0].k == kNone {
			return undefined, renderErr("map requires a filter argument")
		}
		get := e.attrGetter(a[0])
		out := make([]Value, len(items))
		for i, it := range items {
			x, err := get(it)
			if err != nil {
				return undefined, err
			}
			if x.k == kUndef && a[1].k != kUndef {
				x = a[1]
			}
			out[i] = x
		}
		return listV(out), nil
	}
	if args[0].k != kStr {
		return undefined, renderErr("map: the filter name must be a string")
	}
	f, ok := filters[args[0].s]
	if !ok {
		return undefined, renderErr("no filter named '%s'", args[0].s)
	}
	out := make([]Value, len(items))
	for i, it := range items {
		x, err := f(e, it, args[1:], kw)
		if err != nil {
			return undefined, err
		}
		out[i] = x
	}
	return listV(out), nil
}

func selectFilter(reject, byAttr bool) filterFunc {
	return func(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
		items, err := e.iterate(v)
		if err != nil {
			return undefined, err
		}
		get := func(x Value) (Value, error) { return x, nil }
		if byAttr {
			if len(args) == 0 {
				return undefined, renderErr("missing parameter for attribute name")
			}
			get = e.attrGetter(args[0])
			args = args[1:]
		}
		test := func(x Value) (bool, error) { return truthy(x), nil }
		if len(args) > 0 {
			if args[0].k != kStr {
				return undefined, renderErr("the test name must be a string")
			}
			t, ok := tests[args[0].s]
			if !ok {
				return undefined, renderErr("no test named '%s'", args[0].s)
			}
			rest := args[1:]
			test = func(x Value) (bool, error) { return t(e, x, rest) }
		}
		var out []Value
		for _, it := range items {
			x, err := get(it)
			if err != nil {
				return undefined, err
			}
			ok, err := test(x)
			if err != nil {
				return undefined, err
			}
			if ok != reject {
				out = append(out, it)
			}
		}
		return listV(out), nil
	}
}

func fItems(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	switch v.k {
	case kUndef:
		return listV(nil), nil
	case kDict:
		d := v.dict()
		out := make([]Value, len(d.keys))
		for i, k := range d.keys {
			out[i] = tupleV([]Value{k, d.vals[i]})
		}
		return listV(out), nil
	}
	return undefined, renderErr("can only get item pairs from a mapping")
}

func fDictsort(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("dictsort", args, kw, []string{"case_sensitive", "by", "reverse"}, vFalse, strV("key"), vFalse)
	if err != nil {
		return undefined, err
	}
	pairs, err := fItems(e, v, nil, nil)
	if err != nil {
		return undefined, err
	}
	pos := int64(0)
	switch a[1].s {
	case "key":
	case "value":
		pos = 1
	default:
		return undefined, renderErr("you can only sort by either \"key\" or \"value\"")
	}
	items := pairs.items()
	keys := make([]Value, len(items))
	for i, p := range items {
		keys[i] = p.items()[pos]
		if !truthy(a[0]) {
			keys[i] = ignoreCase(keys[i])
		}
	}
	out, err := sortByKeys(items, keys, truthy(a[2]))
	return listV(out), err
}

// pySplitlines is Python's str.splitlines().
func pySplitlines(s string) []string {
	var out []string
	rs := []rune(s)
	start := 0
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, string(rs[start:i]))
			start = i + 1
		case '\r':
			out = append(out, string(rs[start:i]))
			if i+1 < len(rs) && rs[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(rs) {
		out = append(out, string(rs[start:]))
	}
	return out
}

func fIndent(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("indent", args, kw, []string{"width", "first", "blank"}, intV(4), vFalse, vFalse)
	if err != nil {
		return undefined, err
	}
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	var ind string
	if a[0].k == kStr {
		ind = a[0].s
	} else {
		ind = strings.Repeat(" ", int(max(0, min(toInt(a[0]), 1<<10))))
	}
	lines := pySplitlines(s + "\n")
	if err := e.checkSize(len(s) + len(lines)*(len(ind)+1)); err != nil {
		return undefined, err
	}
	var rv string
	if truthy(a[2]) {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		rv = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = ind + l
				}
				rest[i] = l
			}
			rv += "\n" + strings.Join(rest, "\n")
		}
	}
	if truthy(a[1]) {
		rv = ind + rv
	}
	return strV(rv), nil
}

func fWordcount(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	n, in := 0, false
	for _, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
		if w && !in {
			n++
		}
		in = w
	}
	return intV(int64(n)), nil
}

func fEscape(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	out := r.Replace(s)
	return strV(out), e.checkSize(len(out))
}

func fSum(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("sum", args, kw, []string{"attribute", "start"}, none, intV(0))
	if err != nil {
		return undefined, err
	}
	items, err := e.iterate(v)
	if err != nil {
		return undefined, err
	}
	if items, err = e.mapAttr(items, a[0]); err != nil {
		return undefined, err
	}
	acc := a[1]
	for _, it := range items {
		if acc, err = e.binary("+", acc, it); err != nil {
			return undefined, err
		}
	}
	return acc, nil
}

func minMax(sign int) filterFunc {
	return func(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
		a, err := bindArgs("min/max", args, kw, []string{"case_sensitive", "attribute"}, vFalse, none)
		if err != nil {
			return undefined, err
		}
		items, err := e.iterate(v)
		if err != nil {
			return undefined, err
		}
		if len(items) == 0 {
			return undefNamed("no aggregated item, sequence was empty"), nil
		}
		keys, err := e.keyed(items, e.sortKey(truthy(a[0]), a[1]))
		if err != nil {
			return undefined, err
		}
		best := 0
		for i := 1; i < len(items); i++ {
			c, err := compare(keys[i], keys[best], 0)
			if err != nil {
				return undefined, renderErr("%v", err)
			}
			if c*sign > 0 {
				best = i
			}
		}
		return items[best], nil
	}
}

func fAttr(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("attr", args, kw, []string{"name"})
	if err != nil {
		return undefined, err
	}
	if a[0].k != kStr {
		return undefNamed("attribute name must be a string"), nil
	}
	if v.k == kDict {
		if m, ok := method(v, a[0].s); ok {
			return m, nil
		}
		return undefNamed("no attribute"), nil
	}
	return e.getattr(v, a[0].s)
}

func fFormat(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	var arg Value
	if len(kw) > 0 {
		if len(args) > 0 {
			return undefined, renderErr("can't handle positional and keyword arguments at the same time")
		}
		d := newDict()
		for _, k := range kw {
			d.setStr(k.name, k.v)
		}
		arg = dictV(d)
	} else {
		arg = tupleV(args)
	}
	out, err := e.printf(s, arg)
	return strV(out), err
}

func fCenter(e *evaluator, v Value, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("center", args, kw, []string{"width"}, intV(80))
	if err != nil {
		return undefined, err
	}
	s, err := softStr(v)
	if err != nil {
		return undefined, err
	}
	return e.pad(s, toInt(a[0]), " ", 'c')
}

// pad is str.center/ljust/rjust.
func (e *evaluator) pad(s string, width int64, fill string, how byte) (Value, error) {
	n := int64(utf8.RuneCountInString(s))
	if width <= n {
		return strV(s), nil
	}
	if err := e.checkSize(int(min(width, 1<<40)) * len(fill)); err != nil {
		return undefined, err
	}
	total := int(width - n)
	var left int
	switch how {
	case 'l':
		left = 0
	case 'r':
		left = total
	default:
		left = total / 2
		if total%2 == 1 && n%2 == 1 {
			left++
		}
	}
	return strV(strings.Repeat(fill, left) + s + strings.Repeat(fill, total-left)), nil
}

func tIterable(e *evaluator, v Value, _ []Value) (bool, error) {
	switch v.k {
	case kUndef, kStr, kList, kTuple, kDict:
		return true, nil
	}
	return false, nil
}

func tSameas(e *evaluator, v Value, args []Value) (bool, error) {
	if len(args) != 1 {
		return false, renderErr("sameas takes one argument")
	}
	o := args[0]
	if v.k != o.k {
		return false, nil
	}
	switch v.k {
	case kNone, kUndef:
		return true, nil
	case kBool:
		return v.b == o.b, nil
	case kInt:
		return v.i == o.i && v.i >= -5 && v.i <= 256, nil
	case kStr:
		return v.s == o.s, nil
	case kFloat:
		return false, nil
	}
	return v.r == o.r, nil
}

func tIn(e *evaluator, v Value, args []Value) (bool, error) {
	if len(args) != 1 {
		return false, renderErr("in takes one argument")
	}
	return e.contains(args[0], v)
}

func cmpTest(op string) testFunc {
	return func(e *evaluator, v Value, args []Value) (bool, error) {
		if len(args) != 1 {
			return false, renderErr("test takes one argument")
		}
		return e.compareOp(op, v, args[0])
	}
}

func intTest(f func(int64) bool) testFunc {
	return func(e *evaluator, v Value, args []Value) (bool, error) {
		switch v.k {
		case kInt, kBool:
			return f(toInt(v)), nil
		case kFloat:
			return v.f == math.Trunc(v.f) && f(int64(v.f)), nil
		case kUndef:
			return false, undefinedErr(v)
		}
		return false, renderErr("not all arguments converted during string formatting")
	}
}

func tDivisible(e *evaluator, v Value, args []Value) (bool, error) {
	if len(args) != 1 || !args[0].isNum() || !v.isNum() {
		return false, renderErr("divisibleby takes a number")
	}
	m, err := arith("%", v, args[0])
	if err != nil {
		return false, err
	}
	return toFloat(m) == 0, nil
}

func strTest(f func(string) bool) testFunc {
	return func(e *evaluator, v Value, args []Value) (bool, error) {
		s, err := toStr(v)
		return f(s), err
	}
}

// globals returns the functions every render sees.
func globals(e *evaluator) map[string]Value {
	return map[string]Value{
		"range":           funcV("range", gRange),
		"dict":            funcV("dict", gDict(false)),
		"namespace":       funcV("namespace", gDict(true)),
		"joiner":          funcV("joiner", gJoiner),
		"cycler":          funcV("cycler", gCycler),
		"raise_exception": funcV("raise_exception", gRaise),
		"strftime_now":    funcV("strftime_now", gStrftimeNow),
	}
}

// maxRange is jinja2's sandbox MAX_RANGE.
const maxRange = 100000

func gRange(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	if len(kw) > 0 {
		return undefined, renderErr("range() takes no keyword arguments")
	}
	for _, a := range args {
		if a.k != kInt && a.k != kBool {
			return undefined, renderErr("'%s' object cannot be interpreted as an integer", typeName(a))
		}
	}
	var start, stop, step int64 = 0, 0, 1
	switch len(args) {
	case 1:
		stop = toInt(args[0])
	case 2:
		start, stop = toInt(args[0]), toInt(args[1])
	case 3:
		start, stop, step = toInt(args[0]), toInt(args[1]), toInt(args[2])
	default:
		return undefined, renderErr("range expected 1 to 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return undefined, renderErr("range() arg 3 must not be zero")
	}
	var n uint64
	if step > 0 && stop > start {
		n = (uint64(stop-start)-1)/uint64(step) + 1
	} else if step < 0 && stop < start {
		n = (uint64(start-stop)-1)/uint64(-step) + 1
	}
	if n > maxRange {
		return undefined, renderErr("range too big: the sandbox blocks ranges larger than MAX_RANGE (%d)", maxRange)
	}
	if err := e.charge(int64(n)); err != nil {
		return undefined, err
	}
	out := make([]Value, n)
	for i := range out {
		out[i] = intV(start + int64(i)*step)
	}
	return listV(out), nil
}

func gDict(ns bool) func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	return func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
		d := newDict()
		if len(args) > 1 {
			return undefined, renderErr("dict expected at most 1 argument, got %d", len(args))
		}
		if len(args) == 1 {
			switch a := args[0]; a.k {
			case kDict, kNamespace:
				d = a.dict().copy()
			case kList, kTuple:
				for _, p := range a.items() {
					if !p.isSeq() || len(p.items()) != 2 {
						return undefined, renderErr("dictionary update sequence element has wrong length")
					}
					if err := d.set(p.items()[0], p.items()[1]); err != nil {
						return undefined, renderErr("%v", err)
					}
				}
			default:
				return undefined, renderErr("'%s' object is not iterable", typeName(a))
			}
		}
		for _, k := range kw {
			d.setStr(k.name, k.v)
		}
		if ns {
			for _, k := range d.keys {
				if k.k == kStr && strings.HasPrefix(k.s, "_") {
					return undefined, fmt.Errorf("%w: namespace attributes cannot start with '_'", ErrSecurity)
				}
			}
			return namespaceV(d), nil
		}
		return dictV(d), nil
	}
}

func gJoiner(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("joiner", args, kw, []string{"sep"}, strV(", "))
	if err != nil {
		return undefined, err
	}
	used := false
	return funcV("joiner", func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
		if !used {
			used = true
			return strV(""), nil
		}
		return a[0], nil
	}), nil
}

func gCycler(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	if len(args) == 0 {
		return undefined, renderErr("at least one item has to be provided")
	}
	items := append([]Value(nil), args...)
	o := &objVal{name: "Cycler", attrs: map[string]Value{}}
	pos := 0
	o.attrs["current"] = items[0]
	o.attrs["next"] = funcV("cycler.next", func(e *evaluator, _ []Value, _ []kwArg) (Value, error) {
		v := items[pos]
		pos = (pos + 1) % len(items)
		o.attrs["current"] = items[pos]
		return v, nil
	})
	o.attrs["reset"] = funcV("cycler.reset", func(e *evaluator, _ []Value, _ []kwArg) (Value, error) {
		pos = 0
		o.attrs["current"] = items[0]
		return none, nil
	})
	return Value{k: kObj, r: o}, nil
}

func gRaise(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("raise_exception", args, kw, []string{"message"})
	if err != nil {
		return undefined, err
	}
	msg, _ := toStr(a[0])
	return undefined, &RaisedError{Message: msg}
}

func gStrftimeNow(e *evaluator, args []Value, kw []kwArg) (Value, error) {
	a, err := bindArgs("strftime_now", args, kw, []string{"format"})
	if err != nil {
		return undefined, err
	}
	if a[0].k != kStr {
		return undefined, renderErr("strftime() argument 1 must be str")
	}
	return strV(strftime(e.now, a[0].s)), nil
}

// method returns the bound method name of v (str, list, dict) as the
// sandbox exposes it; mutating methods are unsafe Undefined values.
func method(v Value, name string) (Value, bool) {
	switch v.k {
	case kStr:
		fn, ok := strMethods[name]
		if !ok {
			return undefined, false
		}
		s := v.s
		return funcV("str."+name, func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
			return fn(e, s, args, kw)
		}), true
	case kDict:
		switch name {
		case "get", "items", "keys", "values", "copy":
			d := v.dict()
			return funcV("dict."+name, func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
				return dictMethod(e, d, name, args, kw)
			}), true
		case "pop", "popitem", "setdefault", "update", "clear", "fromkeys":
			return unsafeUndef(fmt.Sprintf("access to attribute '%s' of 'dict' object is unsafe", name)), true
		}
	case kList, kTuple:
		switch name {
		case "count", "index", "copy":
			if v.k == kTuple && name == "copy" {
				return undefined, false
			}
			items := v.items()
			k := v.k
			return funcV("list."+name, func(e *evaluator, args []Value, kw []kwArg) (Value, error) {
				return listMethod(e, k, items, name, args, kw)
			}), true
		case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear":
			if v.k == kList {
				return unsafeUndef(fmt.Sprintf("access to attribute '%s' of 'list' object is unsafe", name)), true
			}
		}
	}
	return undefined, false
}

func dictMethod(e *evaluator, d *dictVal, name string, args []Value, kw []kwArg) (Value, error) {
	if len(kw) > 0 {
		return undefined, renderErr("dict.%s() takes no keyword arguments", name)
	}
	switch name {
	case "get":
		if len(args) < 1 || len(args) > 2 {
			return undefined, renderErr("get expected 1 or 2 arguments")
		}
		if _, err := hashKey(args[0]); err != nil {
			return undefined, renderErr("%v", err)
		}
		if v, ok := d.get(args[0]); ok {
			return v, nil
		}
		if len(args) == 2 {
			return args[1], nil
		}
		return none, nil
	case "copy":
		return dictV(d.copy()), nil
	}
	if len(args) > 0 {
		return undefined, renderErr("dict.%s() takes no arguments", name)
	}
	out := make([]Value, len(d.keys))
	for i, k := range d.keys {
		switch name {
		case "keys":
			out[i] = k
		case "values":
			out[i] = d.vals[i]
		default:
			out[i] = tupleV([]Value{k, d.vals[i]})
		}
	}
	return listV(out), nil
}

func listMethod(e *evaluator, k kind, items []Value, name string, args []Value, kw []kwArg) (Value, error) {
	if len(kw) > 0 {
		return undefined, renderErr("%s() takes no keyword arguments", name)
	}
	switch name {
	case "copy":
		return listV(append([]Value{}, items...)), nil
	case "count":
		if len(args) != 1 {
			return undefined, renderErr("count() takes exactly one argument")
		}
		n := 0
		for _, x := range items {
			if equal(x, args[0], 0) {
				n++
			}
		}
		return intV(int64(n)), nil
	}
	if len(args) != 1 {
		return undefined, renderErr("index() takes exactly one argument")
	}
	for i, x := range items {
		if equal(x, args[0], 0) {
			return intV(int64(i)), nil
		}
	}
	return undefined, renderErr("value is not in list")
}

type strMethod func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error)

var strMethods map[string]strMethod

func init() {
	strip := func(left, right bool) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("strip", args, kw, []string{"chars"}, none)
			if err != nil {
				return undefined, err
			}
			var chars *string
			if a[0].k == kStr {
				chars = &a[0].s
			} else if a[0].k != kNone {
				return undefined, renderErr("strip arg must be None or str")
			}
			return strV(pyStrip(s, chars, left, right)), nil
		}
	}
	split := func(right bool) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("split", args, kw, []string{"sep", "maxsplit"}, none, intV(-1))
			if err != nil {
				return undefined, err
			}
			var sep *string
			if a[0].k == kStr {
				sep = &a[0].s
			} else if a[0].k != kNone {
				return undefined, renderErr("must be str or None, not %s", typeName(a[0]))
			}
			if a[1].k != kInt {
				return undefined, renderErr("maxsplit must be an integer")
			}
			if err := e.charge(int64(len(s))); err != nil {
				return undefined, err
			}
			var parts []string
			if right {
				parts, err = pyRSplit(s, sep, int(max(-1, min(a[1].i, 1<<30))))
			} else {
				parts, err = pySplit(s, sep, int(max(-1, min(a[1].i, 1<<30))))
			}
			if err != nil {
				return undefined, renderErr("%v", err)
			}
			out := make([]Value, len(parts))
			for i, p := range parts {
				out[i] = strV(p)
			}
			return listV(out), nil
		}
	}
	affix := func(suffix bool) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("startswith", args, kw, []string{"prefix"})
			if err != nil {
				return undefined, err
			}
			var cands []Value
			switch a[0].k {
			case kStr:
				cands = []Value{a[0]}
			case kTuple:
				cands = a[0].items()
			default:
				return undefined, renderErr("startswith first arg must be str or a tuple of str, not %s", typeName(a[0]))
			}
			for _, c := range cands {
				if c.k != kStr {
					return undefined, renderErr("tuple for startswith must only contain str")
				}
				if (!suffix && strings.HasPrefix(s, c.s)) || (suffix && strings.HasSuffix(s, c.s)) {
					return vTrue, nil
				}
			}
			return vFalse, nil
		}
	}
	noArgs := func(f func(string) Value) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			if _, err := bindArgs("method", args, kw, nil); err != nil {
				return undefined, err
			}
			return f(s), nil
		}
	}
	all := func(pred func(rune) bool) strMethod {
		return noArgs(func(s string) Value {
			if s == "" {
				return vFalse
			}
			for _, r := range s {
				if !pred(r) {
					return vFalse
				}
			}
			return vTrue
		})
	}
	cased := func(upper bool) strMethod {
		return noArgs(func(s string) Value {
			hasCased := false
			for _, r := range s {
				if unicode.IsUpper(r) || unicode.IsTitle(r) {
					if !upper {
						return vFalse
					}
					hasCased = true
				} else if unicode.IsLower(r) {
					if upper {
						return vFalse
					}
					hasCased = true
				}
			}
			return boolV(hasCased)
		})
	}
	find := func(fromRight, mustFind bool) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("find", args, kw, []string{"sub"})
			if err != nil {
				return undefined, err
			}
			if a[0].k != kStr {
				return undefined, renderErr("must be str, not %s", typeName(a[0]))
			}
			var i int
			if fromRight {
				i = strings.LastIndex(s, a[0].s)
			} else {
				i = strings.Index(s, a[0].s)
			}
			if i < 0 {
				if mustFind {
					return undefined, renderErr("substring not found")
				}
				return intV(-1), nil
			}
			return intV(int64(utf8.RuneCountInString(s[:i]))), nil
		}
	}
	padding := func(how byte) strMethod {
		return func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("center", args, kw, []string{"width", "fillchar"}, strV(" "))
			if err != nil {
				return undefined, err
			}
			if a[0].k != kInt || a[1].k != kStr || utf8.RuneCountInString(a[1].s) != 1 {
				return undefined, renderErr("bad arguments to padding method")
			}
			return e.pad(s, a[0].i, a[1].s, how)
		}
	}
	strMethods = map[string]strMethod{
		"strip":      strip(true, true),
		"lstrip":     strip(true, false),
		"rstrip":     strip(false, true),
		"split":      split(false),
		"rsplit":     split(true),
		"startswith": affix(false),
		"endswith":   affix(true),
		"upper":      noArgs(func(s string) Value { return strV(strings.ToUpper(s)) }),
		"lower":      noArgs(func(s string) Value { return strV(strings.ToLower(s)) }),
		"casefold":   noArgs(func(s string) Value { return strV(strings.ToLower(s)) }),
		"title":      noArgs(func(s string) Value { return strV(pyTitle(s)) }),
		"capitalize": noArgs(func(s string) Value { return strV(pyCapitalize(s)) }),
		"swapcase": noArgs(func(s string) Value {
			return strV(strings.Map(func(r rune) rune {
				if unicode.IsUpper(r) {
					return unicode.ToLower(r)
				}
				return unicode.ToUpper(r)
			}, s))
		}),
		"splitlines": noArgs(func(s string) Value {
			parts := pySplitlines(s)
			out := make([]Value, len(parts))
			for i, p := range parts {
				out[i] = strV(p)
			}
			return listV(out)
		}),
		"isdigit":   all(unicode.IsDigit),
		"isdecimal": all(func(r rune) bool { return unicode.Is(unicode.Nd, r) }),
		"isnumeric": all(unicode.IsNumber),
		"isalpha":   all(unicode.IsLetter),
		"isalnum":   all(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }),
		"isspace":   all(isPySpace),
		"isupper":   cased(true),
		"islower":   cased(false),
		"find":      find(false, false),
		"rfind":     find(true, false),
		"index":     find(false, true),
		"rindex":    find(true, true),
		"center":    padding('c'),
		"ljust":     padding('l'),
		"rjust":     padding('r'),
		"replace": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("replace", args, kw, []string{"old", "new", "count"}, intV(-1))
			if err != nil {
				return undefined, err
			}
			if a[0].k != kStr || a[1].k != kStr || a[2].k != kInt {
				return undefined, renderErr("replace() arguments must be str, str, int")
			}
			return e.replace(s, a[0].s, a[1].s, int(max(-1, min(a[2].i, 1<<30))))
		},
		"count": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("count", args, kw, []string{"sub"})
			if err != nil {
				return undefined, err
			}
			if a[0].k != kStr {
				return undefined, renderErr("must be str, not %s", typeName(a[0]))
			}
			if a[0].s == "" {
				return intV(int64(utf8.RuneCountInString(s) + 1)), nil
			}
			return intV(int64(strings.Count(s, a[0].s))), nil
		},
		"join": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("join", args, kw, []string{"iterable"})
			if err != nil {
				return undefined, err
			}
			items, err := e.iterate(a[0])
			if err != nil {
				return undefined, err
			}
			parts := make([]string, len(items))
			n := 0
			for i, it := range items {
				if it.k != kStr {
					return undefined, renderErr("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = it.s
				n += len(it.s) + len(s)
			}
			if err := e.checkSize(n); err != nil {
				return undefined, err
			}
			return strV(strings.Join(parts, s)), nil
		},
		"removeprefix": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("removeprefix", args, kw, []string{"prefix"})
			if err != nil || a[0].k != kStr {
				return undefined, renderErr("removeprefix() takes one str")
			}
			return strV(strings.TrimPrefix(s, a[0].s)), nil
		},
		"removesuffix": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			a, err := bindArgs("removesuffix", args, kw, []string{"suffix"})
			if err != nil || a[0].k != kStr {
				return undefined, renderErr("removesuffix() takes one str")
			}
			return strV(strings.TrimSuffix(s, a[0].s)), nil
		},
		"format": func(e *evaluator, s string, args []Value, kw []kwArg) (Value, error) {
			return e.strFormat(s, args, kw)
		},
	}
}

// printf is Python's str % args for the conversions templates use
// (s r d i f F x X o e g c and %%, with flags, width and precision).
func (e *evaluator) printf(format string, arg Value) (string, error) {
	var args []Value
	var mapping *dictVal
	switch arg.k {
	case kTuple:
		args = arg.items()
	case kDict:
		mapping = arg.dict()
		args = []Value{arg}
	default:
		args = []Value{arg}
	}
	var b strings.Builder
	next := 0
	rs := []rune(format)
	for i := 0; i < len(rs); i++ {
		if rs[i] != '%' {
			b.WriteRune(rs[i])
			continue
		}
		i++
		if i >= len(rs) {
			return "", renderErr("incomplete format")
		}
		if rs[i] == '%' {
			b.WriteByte('%')
			continue
		}
		var v Value
		haveV := false
		if rs[i] == '(' {
			j := i + 1
			for j < len(rs) && rs[j] != ')' {
				j++
			}
			if j >= len(rs) || mapping == nil {
				return "", renderErr("format requires a mapping")
			}
			key := string(rs[i+1 : j])
			var ok bool
			if v, ok = mapping.getStr(key); !ok {
				return "", renderErr("KeyError: '%s'", key)
			}
			haveV = true
			i = j + 1
		}
		flags := ""
		for i < len(rs) && strings.ContainsRune("-+ #0", rs[i]) {
			flags += string(rs[i])
			i++
		}
		width := ""
		for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
			width += string(rs[i])
			i++
		}
		prec := ""
		if i < len(rs) && rs[i] == '.' {
			prec = "."
			i++
			for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
				prec += string(rs[i])
				i++
			}
		}
		if i >= len(rs) {
			return "", renderErr("incomplete format")
		}
		if len(width) > 4 || len(prec) > 4 {
			return "", fmt.Errorf("%w: format width too large", ErrLimit)
		}
		if !haveV {
			if next >= len(args) {
				return "", renderErr("not enough arguments for format string")
			}
			v = args[next]
			next++
		}
		conv := rs[i]
		spec := "%" + flags + width + prec
		switch conv {
		case 's', 'r':
			var s string
			var err error
			if conv == 's' {
				s, err = toStr(v)
			} else {
				s, err = repr(v)
			}
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%"+strings.ReplaceAll(flags, "0", "")+width+prec+"s", s)
		case 'd', 'i':
			if !v.isNum() {
				return "", renderErr("%%d format: a real number is required, not %s", typeName(v))
			}
			fmt.Fprintf(&b, spec+"d", toInt(v))
		case 'x', 'X', 'o':
			if v.k != kInt && v.k != kBool {
				return "", renderErr("%%%c format: an integer is required", conv)
			}
			fmt.Fprintf(&b, spec+string(conv), toInt(v))
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if !v.isNum() {
				return "", renderErr("must be real number, not %s", typeName(v))
			}
			if prec == "" {
				spec += ".6"
			}
			fmt.Fprintf(&b, spec+string(conv), toFloat(v))
		case 'c':
			switch v.k {
			case kInt:
				b.WriteRune(rune(v.i))
			case kStr:
				b.WriteString(v.s)
			default:
				return "", renderErr("%%c requires int or char")
			}
		default:
			return "", renderErr("unsupported format character '%c'", conv)
		}
		if b.Len() > e.lim.MaxOutputBytes {
			return "", e.checkSize(-1)
		}
	}
	if mapping == nil && next < len(args) {
		return "", renderErr("not all arguments converted during string formatting")
	}
	return b.String(), e.checkSize(b.Len())
}

// strFormat is str.format for plain fields ({}, {0}, {name}, with !s or
// !r); format specs are not supported.
func (e *evaluator) strFormat(s string, args []Value, kw []kwArg) (Value, error) {
	var b strings.Builder
	auto, manual := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return undefined, renderErr("single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return undefined, renderErr("single '{' encountered in format string")
		}
		field := s[i+1 : i+j]
		i += j
		conv := byte('s')
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				return undefined, renderErr("bad conversion in format string")
			}
			conv = field[k+1]
			field = field[:k]
		}
		if strings.ContainsAny(field, ":.[") {
			return undefined, fmt.Errorf("%w: str.format field %q", ErrUnsupported, field)
		}
		var v Value
		switch {
		case field == "":
			if manual {
				return undefined, renderErr("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				return undefined, renderErr("replacement index %d out of range", auto)
			}
			v = args[auto]
			auto++
		case field[0] >= '0' && field[0] <= '9':
			if auto > 0 {
				return undefined, renderErr("cannot switch from automatic field numbering to manual field specification")
			}
			manual = true
			n, err := strconv.Atoi(field)
			if err != nil || n >= len(args) {
				return undefined, renderErr("replacement index %s out of range", field)
			}
			v = args[n]
		default:
			found := false
			for _, k := range kw {
				if k.name == field {
					v, found = k.v, true
				}
			}
			if !found {
				return undefined, renderErr("KeyError: '%s'", field)
			}
		}
		var str string
		var err error
		switch conv {
		case 's':
			str, err = toStr(v)
		case 'r', 'a':
			str, err = repr(v)
		default:
			return undefined, renderErr("unknown conversion specifier %c", conv)
		}
		if err != nil {
			return undefined, err
		}
		b.WriteString(str)
		if b.Len() > e.lim.MaxOutputBytes {
			return undefined, e.checkSize(-1)
		}
	}
	return strV(b.String()), e.checkSize(b.Len())
}
