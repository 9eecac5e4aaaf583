package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// JSON kinds a schema's values can have.
const (
	kNull uint8 = 1 << iota
	kBool
	kNum
	kStr
	kArr
	kObj
	kAll = kNull | kBool | kNum | kStr | kArr | kObj
)

// shape is what the compiler knows of a schema's language, to prove oneOf branches disjoint.
type shape struct {
	kinds uint8
	lits  map[string]bool            // non-nil: the language is this finite set of values (canon keys)
	disc  map[string]map[string]bool // objects only: required property → its finite value set
}

var anyShape = shape{kinds: kAll}

// disjoint reports whether no value can belong to both a and b (false when unsure).
func disjoint(a, b shape) bool {
	if a.kinds&b.kinds == 0 {
		return true
	}
	if a.lits != nil && b.lits != nil {
		for k := range a.lits {
			if b.lits[k] {
				return false
			}
		}
		return true
	}
	if a.kinds == kObj && b.kinds == kObj {
		for p, av := range a.disc {
			bv, ok := b.disc[p]
			if !ok {
				continue
			}
			overlap := false
			for k := range av {
				if bv[k] {
					overlap = true
					break
				}
			}
			if !overlap {
				return true
			}
		}
	}
	return false
}

// Keywords that only annotate: they never change which values are valid, so they are ignored.
// "format" is an annotation in JSON Schema 2020-12 (validators do not assert it by default); the
// grammar does not enforce formats.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "format": true, "$schema": true,
	"contentEncoding": true, "contentMediaType": true,
}

// Keywords the compiler enforces, by the kind they apply to.
var (
	stringKeys = []string{"minLength", "maxLength"}
	arrayKeys  = []string{"items", "prefixItems", "minItems", "maxItems", "uniqueItems"}
	objectKeys = []string{"properties", "required", "additionalProperties"}
	otherKeys  = []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions"}
)

var known = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range [][]string{stringKeys, arrayKeys, objectKeys, otherKeys} {
		for _, k := range l {
			m[k] = true
		}
	}
	return m
}()

// maxCount bounds minLength, maxLength, minItems and maxItems (each unit is automaton states).
const maxCount = 1024

// compiler compiles one schema document into rules of a builder.
type compiler struct {
	b    *builder
	root any
	doc  string // prefix of rule names ("" or the tool's name)
	refs map[string]*refRule
}

type refRule struct {
	id   int
	sh   shape
	done bool
}

// Compile compiles a JSON Schema into a grammar of the JSON values valid against it, with the
// default Options. See CompileOptions.
func Compile(schema []byte) (*Grammar, error) { return CompileOptions(schema, Options{}) }

// CompileOptions compiles a JSON Schema (draft 2020-12 vocabulary, the subset OpenAI's strict
// mode uses) into a grammar of JSON values valid against it:
//
//   - type (a name or an array of names), enum, const;
//   - object: properties (emitted in the schema's order), required (properties not required
//     may be left out), additionalProperties false or absent (only the declared properties are
//     emitted); with no properties, additionalProperties true, absent or a schema gives an
//     object of any keys with values of that schema;
//   - array: items (schema or boolean), prefixItems, minItems, maxItems, uniqueItems false;
//   - string: minLength, maxLength (in code points); number, integer, boolean, null;
//   - anyOf; oneOf when its branches are provably disjoint (different kinds, different enum or
//     const values, or objects with a required property whose const/enum values differ);
//     allOf with one schema;
//   - $ref to "#" or a JSON pointer into the document ($defs, definitions), recursion included;
//   - boolean schemas; an object schema without type takes its kinds from its keywords ({} is
//     any JSON value).
//
// Annotations (title, description, examples, default, format, $comment, ...) are ignored. Any
// other keyword (pattern, minimum, multipleOf, not, if, ...), and combinations it cannot
// enforce exactly ($ref or anyOf with sibling constraints, enum with sibling constraints),
// give an error wrapping ErrUnsupported that names the keyword and its location. A schema no
// finite value satisfies gives an error wrapping ErrSchema. Min and max counts are at most 1024.
func CompileOptions(schema []byte, opts Options) (*Grammar, error) {
	root, err := parseJSON(schema)
	if err != nil {
		return nil, err
	}
	b := newBuilder(opts)
	c := &compiler{b: b, root: root, refs: map[string]*refRule{}}
	id := b.newRule("#")
	c.refs[""] = &refRule{id: id}
	e, sh, err := c.schema(root, "#")
	if err != nil {
		return nil, err
	}
	b.rules[id].body = e
	c.refs[""].sh, c.refs[""].done = sh, true
	return b.finish(id)
}

var jsonGrammar = sync.OnceValue(newJSONGrammar)

func newJSONGrammar() *Grammar {
	b := newBuilder(Options{})
	id := b.newRule("object")
	b.rules[id].body = b.mapObject(exCall{b.anyRule()})
	g, err := b.finish(id)
	if err != nil {
		panic(err) // a fixed grammar: covered by tests
	}
	return g
}

// JSON returns the grammar of response_format json_object: one JSON object (any keys, any
// values, nested without limit) with the default Options. It is shared, so its mask caches
// serve every request.
func JSON() *Grammar { return jsonGrammar() }

// Tool is a function the model may call: its name and its parameters JSON Schema (empty or
// null: no parameters, the arguments are {}).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolOptions sets the form of tool calls.
type ToolOptions struct {
	Options
	// Prefix and Suffix wrap each call, as the chat template writes it: for Hermes-style
	// templates "<tool_call>\n" and "\n</tool_call>"; empty for a bare JSON object. They are
	// literal bytes (a special token the engine forces itself is not part of them).
	Prefix, Suffix string
	// Parallel allows more than one call, Separator between them.
	Parallel  bool
	Separator string
}

// ToolCalls compiles the grammar of a forced tool call: Prefix, then
// {"name": NAME, "arguments": ARGS}, then Suffix, where NAME is one of the tools' names and ARGS
// a value valid against that tool's parameters (compiled as CompileOptions does). For
// tool_choice naming one function, pass only that tool. Names must be unique and not empty.
func ToolCalls(tools []Tool, opts ToolOptions) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("%w: no tools", ErrSchema)
	}
	b := newBuilder(opts.Options)
	ws := b.wsExpr
	seen := map[string]bool{}
	var calls exAlt
	for _, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%w: a tool has no name", ErrSchema)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: tool %q declared twice", ErrSchema, t.Name)
		}
		seen[t.Name] = true
		var args expr
		if p := bytes.TrimSpace(t.Parameters); len(p) == 0 || string(p) == "null" {
			args = exSeq{lit("{"), ws, lit("}")}
		} else {
			root, err := parseJSON(p)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			c := &compiler{b: b, root: root, doc: t.Name, refs: map[string]*refRule{}}
			id := b.newRule(t.Name + "#")
			c.refs[""] = &refRule{id: id}
			e, sh, err := c.schema(root, t.Name+"#")
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			b.rules[id].body = e
			c.refs[""].sh, c.refs[""].done = sh, true
			args = exCall{id}
		}
		calls = append(calls, exSeq{
			lit("{"), ws, lit(`"name"`), ws, lit(":"), ws, lit(quote(t.Name)), ws, lit(","), ws,
			lit(`"arguments"`), ws, lit(":"), ws, args, ws, lit("}"),
		})
	}
	one := exSeq{lit(opts.Prefix), calls, lit(opts.Suffix)}
	var body expr = one
	if opts.Parallel {
		body = exSeq{one, exRep{exSeq{lit(opts.Separator), one}, 0, -1}}
	}
	id := b.newRule("tool call")
	b.rules[id].body = body
	return b.finish(id)
}

// anyRule returns the rule of any JSON value, made on first use.
func (b *builder) anyRule() int {
	if b.anyID >= 0 {
		return b.anyID
	}
	id := b.newRule("any JSON value")
	b.anyID = id
	v := exCall{id}
	b.rules[id].body = exAlt{
		b.mapObject(v),
		exArray{open: exSeq{lit("["), b.wsExpr}, sep: b.sep(), close: exSeq{b.wsExpr, lit("]")}, tail: v},
		stringExpr(0, -1), numberExpr(false), lit("true"), lit("false"), lit("null"),
	}
	return id
}

func (b *builder) sep() expr { return exSeq{b.wsExpr, lit(","), b.wsExpr} }

// mapObject is an object of any keys whose values are value.
func (b *builder) mapObject(value expr) expr {
	kv := exSeq{stringExpr(0, -1), b.wsExpr, lit(":"), b.wsExpr, value}
	return exArray{open: exSeq{lit("{"), b.wsExpr}, sep: b.sep(), close: exSeq{b.wsExpr, lit("}")}, tail: kv}
}

// jsonChar is one character of a JSON string: an unescaped UTF-8 character other than '"',
// '\' and controls, or an escape (\u escapes of surrogates excluded, so every character is one
// code point and lengths count exactly).
var jsonChar = func() expr {
	var ascii byteSet
	ascii.addRange(0x20, 0x7f)
	ascii[0x22>>6] &^= 1 << (0x22 & 63)
	ascii[0x5c>>6] &^= 1 << (0x5c & 63)
	cont := rng(0x80, 0xbf)
	var simple byteSet
	for _, c := range []byte(`"\/bfnrt`) {
		simple.add(c)
	}
	var hex, hexNoD, lowOct byteSet
	for _, r := range [][2]byte{{'0', '9'}, {'a', 'f'}, {'A', 'F'}} {
		hex.addRange(r[0], r[1])
	}
	hexNoD = hex
	for _, c := range []byte("dD") {
		hexNoD[c>>6] &^= 1 << (c & 63)
	}
	lowOct.addRange('0', '7')
	h := exBytes{hex}
	return exAlt{
		exBytes{ascii},
		exSeq{rng(0xc2, 0xdf), cont},
		exSeq{lit("\xe0"), rng(0xa0, 0xbf), cont},
		exSeq{rng(0xe1, 0xec), cont, cont},
		exSeq{lit("\xed"), rng(0x80, 0x9f), cont},
		exSeq{rng(0xee, 0xef), cont, cont},
		exSeq{lit("\xf0"), rng(0x90, 0xbf), cont, cont},
		exSeq{rng(0xf1, 0xf3), cont, cont, cont},
		exSeq{lit("\xf4"), rng(0x80, 0x8f), cont, cont},
		exSeq{lit(`\`), exAlt{
			exBytes{simple},
			exSeq{lit("u"), exAlt{
				exSeq{exBytes{hexNoD}, h, h, h},
				exSeq{rng('d', 'd'), exBytes{lowOct}, h, h},
				exSeq{rng('D', 'D'), exBytes{lowOct}, h, h},
			}},
		}},
	}
}()

// stringExpr is a JSON string of min to max characters (max < 0: unbounded).
func stringExpr(minLen, maxLen int) expr {
	return exSeq{lit(`"`), exRep{jsonChar, minLen, maxLen}, lit(`"`)}
}

// numberExpr is a JSON integer of at most 18 digits, or (integer false) a number with at most
// 18 integer digits, 18 fraction digits and a 2-digit exponent, so that it fits int64 or float64.
func numberExpr(integer bool) expr {
	digit := rng('0', '9')
	var sign byteSet
	sign.add('+')
	sign.add('-')
	var e byteSet
	e.add('e')
	e.add('E')
	in := exSeq{exRep{lit("-"), 0, 1}, exAlt{lit("0"), exSeq{rng('1', '9'), exRep{digit, 0, 17}}}}
	if integer {
		return in
	}
	return exSeq{in,
		exRep{exSeq{lit("."), exRep{digit, 1, 18}}, 0, 1},
		exRep{exSeq{exBytes{e}, exRep{exBytes{sign}, 0, 1}, exRep{digit, 1, 2}}, 0, 1},
	}
}

func unsupported(path, kw, why string) error {
	if why != "" {
		why = ": " + why
	}
	return fmt.Errorf("%w: keyword %q at %s%s", ErrUnsupported, kw, path, why)
}

func invalid(path, format string, args ...any) error {
	return fmt.Errorf("%w: at %s: %s", ErrSchema, path, fmt.Sprintf(format, args...))
}

// schema compiles the schema v found at path.
func (c *compiler) schema(v any, path string) (expr, shape, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return exCall{c.b.anyRule()}, anyShape, nil
		}
		return exAlt{}, shape{lits: map[string]bool{}}, nil
	case *object:
		return c.object(v, path)
	}
	return nil, shape{}, invalid(path, "a schema must be an object or a boolean")
}

func (c *compiler) object(o *object, path string) (expr, shape, error) {
	var constraints []string // non-annotation keywords present, in document order
	for _, k := range o.keys {
		switch {
		case annotations[k]:
		case k == "$id":
			if path != "#" && !strings.HasSuffix(path, "#") {
				return nil, shape{}, unsupported(path, k, "only at the root")
			}
		case k == "$defs" || k == "definitions":
			if _, ok := o.vals[k].(*object); !ok {
				return nil, shape{}, invalid(path, "%s must be an object", k)
			}
		case k == "uniqueItems":
			if o.vals[k] != false {
				return nil, shape{}, unsupported(path, k, "only false")
			}
		case known[k]:
			constraints = append(constraints, k)
		default:
			return nil, shape{}, unsupported(path, k, "")
		}
	}
	only := func(kw string, allowed ...string) error {
		for _, k := range constraints {
			if k != kw && !slices.Contains(allowed, k) {
				return unsupported(path, k, "together with "+kw)
			}
		}
		return nil
	}
	if r, ok := o.get("$ref"); ok {
		if err := only("$ref"); err != nil {
			return nil, shape{}, err
		}
		s, ok := r.(string)
		if !ok {
			return nil, shape{}, invalid(path, "$ref must be a string")
		}
		return c.ref(s, path)
	}
	if a, ok := o.get("allOf"); ok {
		if err := only("allOf"); err != nil {
			return nil, shape{}, err
		}
		list, ok := a.([]any)
		if !ok || len(list) != 1 {
			return nil, shape{}, unsupported(path, "allOf", "only with exactly one schema")
		}
		return c.schema(list[0], path+"/allOf/0")
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		a, ok := o.get(kw)
		if !ok {
			continue
		}
		if err := only(kw); err != nil {
			return nil, shape{}, err
		}
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return nil, shape{}, invalid(path, "%s must be a non-empty array", kw)
		}
		var alt exAlt
		var shapes []shape
		for i, x := range list {
			e, sh, err := c.schema(x, fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return nil, shape{}, err
			}
			if kw == "oneOf" {
				for j, prev := range shapes {
					if !disjoint(prev, sh) {
						return nil, shape{}, unsupported(path, kw, fmt.Sprintf("branches %d and %d may overlap (use anyOf, or tell them apart by type or a const property)", j, i))
					}
				}
			}
			alt = append(alt, e)
			shapes = append(shapes, sh)
		}
		return alt, unionShape(shapes), nil
	}
	kinds, intOnly, err := c.types(o, path, constraints)
	if err != nil {
		return nil, shape{}, err
	}
	for _, kw := range []string{"enum", "const"} {
		if _, ok := o.get(kw); ok {
			if err := only(kw, "type"); err != nil {
				return nil, shape{}, err
			}
			return c.enum(o, kw, path, kinds, intOnly)
		}
	}
	var alt exAlt
	sh := shape{kinds: kinds}
	if kinds&kNull != 0 {
		alt = append(alt, lit("null"))
	}
	if kinds&kBool != 0 {
		alt = append(alt, lit("true"), lit("false"))
	}
	if kinds&kNum != 0 {
		alt = append(alt, numberExpr(intOnly))
	}
	if kinds&kStr != 0 {
		lo, hi, err := c.bounds(o, path, "minLength", "maxLength")
		if err != nil {
			return nil, shape{}, err
		}
		alt = append(alt, stringExpr(lo, hi))
	}
	if kinds&kArr != 0 {
		e, err := c.array(o, path)
		if err != nil {
			return nil, shape{}, err
		}
		alt = append(alt, e)
	}
	if kinds&kObj != 0 {
		e, disc, err := c.props(o, path)
		if err != nil {
			return nil, shape{}, err
		}
		alt = append(alt, e)
		if kinds == kObj {
			sh.disc = disc
		}
	}
	if len(alt) == 1 {
		return alt[0], sh, nil
	}
	return alt, sh, nil
}

func unionShape(shapes []shape) shape {
	var u shape
	lits := map[string]bool{}
	finite := true
	for _, s := range shapes {
		u.kinds |= s.kinds
		if s.lits == nil {
			finite = false
		}
		for k := range s.lits {
			lits[k] = true
		}
	}
	if finite {
		u.lits = lits
	}
	return u
}

// types returns the kinds of o's "type" (or, without it, of its keywords; all kinds when none)
// and whether numbers must be integers.
func (c *compiler) types(o *object, path string, constraints []string) (uint8, bool, error) {
	t, ok := o.get("type")
	if !ok {
		var kinds uint8
		for _, k := range constraints {
			switch {
			case slices.Contains(stringKeys, k):
				kinds |= kStr
			case slices.Contains(arrayKeys, k):
				kinds |= kArr
			case slices.Contains(objectKeys, k):
				kinds |= kObj
			}
		}
		if kinds == 0 {
			kinds = kAll
		}
		return kinds, false, nil
	}
	var names []any
	switch t := t.(type) {
	case string:
		names = []any{t}
	case []any:
		names = t
	default:
		return 0, false, invalid(path, "type must be a string or an array of strings")
	}
	var kinds uint8
	integer, number := false, false
	for _, n := range names {
		switch n {
		case "null":
			kinds |= kNull
		case "boolean":
			kinds |= kBool
		case "integer":
			kinds |= kNum
			integer = true
		case "number":
			kinds |= kNum
			number = true
		case "string":
			kinds |= kStr
		case "array":
			kinds |= kArr
		case "object":
			kinds |= kObj
		default:
			return 0, false, invalid(path, "unknown type %v", n)
		}
	}
	if kinds == 0 {
		return 0, false, invalid(path, "type names no type")
	}
	return kinds, integer && !number, nil
}

func kindOf(v any) uint8 {
	switch v.(type) {
	case nil:
		return kNull
	case bool:
		return kBool
	case json.Number:
		return kNum
	case string:
		return kStr
	case []any:
		return kArr
	}
	return kObj
}

func isInteger(n json.Number) bool {
	r, ok := new(big.Rat).SetString(n.String())
	return ok && r.IsInt()
}

// enum compiles enum or const: the values of the allowed kinds, each in one spelling.
func (c *compiler) enum(o *object, kw, path string, kinds uint8, intOnly bool) (expr, shape, error) {
	var values []any
	if kw == "const" {
		values = []any{o.vals[kw]}
	} else {
		list, ok := o.vals[kw].([]any)
		if !ok {
			return nil, shape{}, invalid(path, "enum must be an array")
		}
		values = list
	}
	var alt exAlt
	sh := shape{lits: map[string]bool{}}
	for _, v := range values {
		k := kindOf(v)
		if k&kinds == 0 {
			continue
		}
		if n, ok := v.(json.Number); ok && intOnly && !isInteger(n) {
			continue
		}
		key := canon(v)
		if sh.lits[key] {
			continue
		}
		sh.lits[key] = true
		sh.kinds |= k
		var buf bytes.Buffer
		encode(&buf, v)
		alt = append(alt, lit(buf.String()))
	}
	if len(alt) == 0 {
		return nil, shape{}, invalid(path, "%s has no value of the allowed types", kw)
	}
	return alt, sh, nil
}

// count reads a non-negative integer keyword (-1 when absent).
func count(o *object, kw, path string) (int, error) {
	v, ok := o.get(kw)
	if !ok {
		return -1, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, invalid(path, "%s must be a non-negative integer", kw)
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f < 0 || f != float64(int64(f)) {
		return 0, invalid(path, "%s must be a non-negative integer", kw)
	}
	if f > maxCount {
		return 0, unsupported(path, kw, fmt.Sprintf("at most %d", maxCount))
	}
	return int(f), nil
}

// bounds reads a min and max keyword pair (min 0 and max -1 when absent).
func (c *compiler) bounds(o *object, path, minKw, maxKw string) (int, int, error) {
	lo, err := count(o, minKw, path)
	if err != nil {
		return 0, 0, err
	}
	hi, err := count(o, maxKw, path)
	if err != nil {
		return 0, 0, err
	}
	lo = max(lo, 0)
	if hi >= 0 && lo > hi {
		return 0, 0, invalid(path, "%s %d exceeds %s %d", minKw, lo, maxKw, hi)
	}
	return lo, hi, nil
}

func (c *compiler) array(o *object, path string) (expr, error) {
	var prefix []expr
	if p, ok := o.get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return nil, invalid(path, "prefixItems must be an array")
		}
		for i, x := range list {
			e, _, err := c.schema(x, fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return nil, err
			}
			prefix = append(prefix, e)
		}
	}
	var item expr // nil: no items beyond the prefix
	it, ok := o.get("items")
	switch {
	case !ok || it == true:
		item = exCall{c.b.anyRule()}
	case it == false:
	default:
		e, _, err := c.schema(it, path+"/items")
		if err != nil {
			return nil, err
		}
		if call, ok := e.(exCall); ok {
			item = call
		} else {
			id := c.b.newRule(path + "/items")
			c.b.rules[id].body = e
			item = exCall{id}
		}
	}
	lo, hi, err := c.bounds(o, path, "minItems", "maxItems")
	if err != nil {
		return nil, err
	}
	k := len(prefix)
	a := exArray{open: exSeq{lit("["), c.b.wsExpr}, sep: c.b.sep(), close: exSeq{c.b.wsExpr, lit("]")}, min: lo}
	L := max(k, lo)
	if item == nil {
		L = k
	}
	if hi >= 0 {
		L = min(L, hi)
		if item != nil {
			L = hi
		}
	} else if item != nil {
		a.tail = item
	}
	if lo > L {
		return nil, invalid(path, "minItems %d cannot be met", lo)
	}
	for j := 0; j < L; j++ {
		if j < k {
			a.items = append(a.items, prefix[j])
		} else {
			a.items = append(a.items, item)
		}
	}
	return a, nil
}

// props compiles an object schema; it also returns the finite value sets of required
// properties (for oneOf).
func (c *compiler) props(o *object, path string) (expr, map[string]map[string]bool, error) {
	ws := c.b.wsExpr
	var props *object
	if p, ok := o.get("properties"); ok {
		if props, ok = p.(*object); !ok {
			return nil, nil, invalid(path, "properties must be an object")
		}
	}
	required := map[string]bool{}
	if r, ok := o.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return nil, nil, invalid(path, "required must be an array of strings")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, nil, invalid(path, "required must be an array of strings")
			}
			if _, ok := props.get(s); !ok {
				return nil, nil, unsupported(path, "required", fmt.Sprintf("property %q is not in properties", s))
			}
			required[s] = true
		}
	}
	addl, hasAddl := o.get("additionalProperties")
	if props == nil || len(props.keys) == 0 {
		value := exCall{c.b.anyRule()}
		var ve expr = value
		if hasAddl && addl != true {
			if addl == false {
				return exSeq{lit("{"), ws, lit("}")}, nil, nil
			}
			e, _, err := c.schema(addl, path+"/additionalProperties")
			if err != nil {
				return nil, nil, err
			}
			ve = e
		}
		return c.b.mapObject(ve), nil, nil
	}
	if hasAddl && addl != true && addl != false {
		return nil, nil, unsupported(path, "additionalProperties", "a schema together with properties")
	}
	obj := exObject{open: exSeq{lit("{"), ws}, sep: c.b.sep(), close: exSeq{ws, lit("}")}}
	disc := map[string]map[string]bool{}
	for _, k := range props.keys {
		e, sh, err := c.schema(props.vals[k], path+"/properties/"+escapePointer(k))
		if err != nil {
			return nil, nil, err
		}
		obj.members = append(obj.members, member{
			e:        exSeq{lit(quote(k)), ws, lit(":"), ws, e},
			optional: !required[k],
		})
		if required[k] && sh.lits != nil {
			disc[k] = sh.lits
		}
	}
	return obj, disc, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// ref compiles a $ref: a call of the rule of the schema it points to, made once per target.
func (c *compiler) ref(ref, path string) (expr, shape, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, shape{}, unsupported(path, "$ref", fmt.Sprintf("only local references (%q)", ref))
	}
	ptr := ref[1:]
	if r, ok := c.refs[ptr]; ok {
		if !r.done {
			return exCall{r.id}, anyShape, nil
		}
		return exCall{r.id}, r.sh, nil
	}
	target, err := c.resolve(ptr, path)
	if err != nil {
		return nil, shape{}, err
	}
	name := c.doc + ref
	r := &refRule{id: c.b.newRule(name)}
	c.refs[ptr] = r
	e, sh, err := c.schema(target, name)
	if err != nil {
		return nil, shape{}, err
	}
	c.b.rules[r.id].body = e
	r.sh, r.done = sh, true
	return exCall{r.id}, sh, nil
}

// resolve follows a JSON pointer from the document root.
func (c *compiler) resolve(ptr, path string) (any, error) {
	if ptr == "" {
		return c.root, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, unsupported(path, "$ref", fmt.Sprintf("only JSON pointers (%q)", "#"+ptr))
	}
	cur := c.root
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case *object:
			next, ok := v.vals[tok]
			if !ok {
				return nil, invalid(path, "$ref %q not found", "#"+ptr)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, invalid(path, "$ref %q not found", "#"+ptr)
			}
			cur = v[i]
		default:
			return nil, invalid(path, "$ref %q not found", "#"+ptr)
		}
	}
	return cur, nil
}
