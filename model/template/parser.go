package template

import (
	"fmt"
	"slices"
)

// Template nodes.
type (
	node interface{}

	textNode   struct{ s string }
	outputNode struct{ x expr }
	ifNode     struct {
		conds  []expr
		bodies [][]node
		else_  []node
	}
	forNode struct {
		target expr // nameExpr or tupleExpr of names
		iter   expr
		filter expr // nil: none
		body   []node
		else_  []node
	}
	setNode struct {
		target expr // nameExpr, tupleExpr of names, or nsRefExpr
		x      expr
	}
	setBlockNode struct {
		target expr
		filter expr // a filterExpr chain over a nil operand, or nil
		body   []node
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned to the last len(defaults) params
		body     []node
	}
	filterBlockNode struct {
		filter expr
		body   []node
	}
	withNode struct {
		targets []expr
		values  []expr
		body    []node
	}
	breakNode    struct{}
	continueNode struct{}
)

// Expression nodes.
type (
	expr interface{}

	constExpr struct{ v Value }
	nameExpr  struct{ name string }
	nsRefExpr struct{ name, attr string }
	attrExpr  struct {
		x    expr
		name string
	}
	itemExpr  struct{ x, key expr }
	sliceExpr struct {
		x                 expr
		start, stop, step expr // nil: omitted
	}
	callExpr struct {
		fn     expr
		args   []expr
		kwargs []kwExpr
	}
	filterExpr struct {
		x      expr // nil: the body of a filter block
		name   string
		args   []expr
		kwargs []kwExpr
	}
	testExpr struct {
		x      expr
		name   string
		args   []expr
		kwargs []kwExpr
	}
	unaryExpr struct {
		op string // "not", "-", "+"
		x  expr
	}
	binExpr struct {
		op   string // "and" "or" "+" "-" "*" "/" "//" "%" "**" "~"
		l, r expr
	}
	compareExpr struct {
		first expr
		ops   []string // "==" "!=" "<" "<=" ">" ">=" "in" "notin"
		rest  []expr
	}
	condExpr  struct{ test, then, else_ expr } // else_ nil: Undefined
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
	kwExpr    struct {
		name string
		x    expr
	}
)

// maxParseDepth bounds the nesting of expressions and blocks so that a
// hostile template cannot exhaust the goroutine stack.
const maxParseDepth = 200

type parser struct {
	toks      []token
	pos       int
	depth     int
	loopDepth int
	names     map[string]bool // every variable name the template reads
	attrs     map[string]bool // every attribute or constant string key it reads
}

func (p *parser) cur() token  { return p.toks[p.pos] }
func (p *parser) look() token { return p.toks[min(p.pos+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrSyntax, p.cur().line, fmt.Sprintf(format, args...))
}

func (p *parser) isOp(op string) bool   { t := p.cur(); return t.typ == tOp && t.val == op }
func (p *parser) isName(n string) bool  { t := p.cur(); return t.typ == tName && t.val == n }
func (p *parser) skipOp(op string) bool { return p.isOp(op) && p.next().typ == tOp }
func (p *parser) skipName(n string) bool {
	if p.isName(n) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.errorf("expected '%s', got %s", op, describe(p.cur()))
	}
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.cur()
	if t.typ != tName {
		return "", p.errorf("expected a name, got %s", describe(t))
	}
	p.next()
	return t.val, nil
}

func (p *parser) expectBlockEnd() error {
	if p.cur().typ != tBlockEnd {
		return p.errorf("expected end of statement block, got %s", describe(p.cur()))
	}
	p.next()
	return nil
}

func describe(t token) string {
	switch t.typ {
	case tData:
		return "template data"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "end of statement block"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "end of print statement"
	case tName:
		return fmt.Sprintf("'%s'", t.val)
	case tString:
		return "string"
	case tInt, tFloat:
		return "number"
	case tOp:
		return fmt.Sprintf("'%s'", t.val)
	}
	return "end of template"
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxParseDepth {
		return p.errorf("template nests deeper than %d", maxParseDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseBody parses nodes until a block tag whose name is in ends (left
// unconsumed, pointing at that name) or the end of the template (only when
// ends is empty).
func (p *parser) parseBody(ends ...string) ([]node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var out []node
	for {
		t := p.cur()
		switch t.typ {
		case tEOF:
			if len(ends) > 0 {
				return nil, p.errorf("unexpected end of template, expected one of %v", ends)
			}
			return out, nil
		case tData:
			p.next()
			out = append(out, &textNode{s: t.val})
		case tVarBegin:
			p.next()
			x, err := p.parseTuple(false, false, nil, false)
			if err != nil {
				return nil, err
			}
			if p.cur().typ != tVarEnd {
				return nil, p.errorf("expected end of print statement, got %s", describe(p.cur()))
			}
			p.next()
			out = append(out, &outputNode{x: x})
		case tBlockBegin:
			p.next()
			if n := p.cur(); n.typ == tName && slices.Contains(ends, n.val) {
				return out, nil
			}
			st, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if st != nil {
				out = append(out, st)
			}
		default:
			return nil, p.errorf("unexpected %s", describe(t))
		}
	}
}

func (p *parser) parseStatement() (node, error) {
	t := p.cur()
	if t.typ != tName {
		return nil, p.errorf("tag name expected")
	}
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "print":
		p.next()
		x, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		return &outputNode{x: x}, p.expectBlockEnd()
	case "generation":
		// transformers' AssistantTracker extension: the body renders as is.
		p.next()
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, err := p.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		p.next()
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		return &withNode{body: body}, nil
	case "break", "continue":
		p.next()
		if p.loopDepth == 0 {
			return nil, p.errorf("'%s' outside of a loop", t.val)
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if t.val == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	case "block", "extends", "include", "import", "from", "call", "autoescape", "do":
		return nil, fmt.Errorf("%w: line %d: tag '%s'", ErrUnsupported, t.line, t.val)
	}
	return nil, p.errorf("encountered unknown tag '%s'", t.val)
}

func (p *parser) parseIf() (node, error) {
	p.next()
	n := &ifNode{}
	for {
		cond, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch p.next().val {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			if n.else_, err = p.parseBody("endif"); err != nil {
				return nil, err
			}
			p.next()
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) parseFor() (node, error) {
	p.next()
	target, err := p.parseAssignTarget([]string{"in"}, false)
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.errorf("expected 'in', got %s", describe(p.cur()))
	}
	iter, err := p.parseTuple(false, true, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	n := &forNode{target: target, iter: iter}
	if p.skipName("if") {
		if n.filter, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, fmt.Errorf("%w: line %d: recursive loops", ErrUnsupported, p.cur().line)
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	p.loopDepth++
	n.body, err = p.parseBody("endfor", "else")
	p.loopDepth--
	if err != nil {
		return nil, err
	}
	if p.next().val == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if n.else_, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
		p.next()
	}
	return n, p.expectBlockEnd()
}

// parseAssignTarget parses a name, a tuple of names, or (withNS) name.attr.
func (p *parser) parseAssignTarget(extraEnds []string, withNS bool) (expr, error) {
	if withNS && p.cur().typ == tName && p.look().typ == tOp && p.look().val == "." {
		name := p.next().val
		p.next()
		attr, err := p.expectName()
		if err != nil {
			return nil, err
		}
		return &nsRefExpr{name: name, attr: attr}, nil
	}
	x, err := p.parseTuple(true, false, extraEnds, false)
	if err != nil {
		return nil, err
	}
	if !assignable(x) {
		return nil, p.errorf("can't assign to %T", x)
	}
	return x, nil
}

func assignable(x expr) bool {
	switch x := x.(type) {
	case *nameExpr:
		switch x.name {
		case "true", "false", "none", "True", "False", "None":
			return false
		}
		return true
	case *tupleExpr:
		for _, it := range x.items {
			if !assignable(it) {
				return false
			}
		}
		return true
	}
	return false
}

func (p *parser) parseSet() (node, error) {
	p.next()
	target, err := p.parseAssignTarget(nil, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		return &setNode{target: target, x: x}, p.expectBlockEnd()
	}
	var filter expr
	if p.isOp("|") {
		if filter, err = p.parseFilter(nil, false); err != nil {
			return nil, err
		}
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, err := p.parseBody("endset")
	if err != nil {
		return nil, err
	}
	p.next()
	return &setBlockNode{target: target, filter: filter, body: body}, p.expectBlockEnd()
}

func (p *parser) parseMacro() (node, error) {
	p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		if len(n.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		param, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.params = append(n.params, param)
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			n.defaults = append(n.defaults, d)
		} else if len(n.defaults) > 0 {
			return nil, p.errorf("non-default argument follows default argument")
		}
	}
	p.next()
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	saved := p.loopDepth
	p.loopDepth = 0
	n.body, err = p.parseBody("endmacro")
	p.loopDepth = saved
	if err != nil {
		return nil, err
	}
	p.next()
	return n, p.expectBlockEnd()
}

func (p *parser) parseFilterBlock() (node, error) {
	p.next()
	f, err := p.parseFilter(nil, true)
	if err != nil {
		return nil, err
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, err := p.parseBody("endfilter")
	if err != nil {
		return nil, err
	}
	p.next()
	return &filterBlockNode{filter: f, body: body}, p.expectBlockEnd()
}

func (p *parser) parseWith() (node, error) {
	p.next()
	n := &withNode{}
	for p.cur().typ != tBlockEnd {
		if len(n.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		t, err := p.parseAssignTarget(nil, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, t)
		n.values = append(n.values, v)
	}
	p.next()
	body, err := p.parseBody("endwith")
	if err != nil {
		return nil, err
	}
	n.body = body
	p.next()
	return n, p.expectBlockEnd()
}

// parseTuple follows jinja2's Parser.parse_tuple.
func (p *parser) parseTuple(simplified, noCondExpr bool, extraEnds []string, explicitParens bool) (expr, error) {
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnds) {
			break
		}
		var x expr
		var err error
		switch {
		case simplified:
			x, err = p.parsePrimary()
		default:
			x, err = p.parseExpression(!noCondExpr)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.errorf("expected an expression, got %s", describe(p.cur()))
		}
	}
	return &tupleExpr{items: items}, nil
}

func (p *parser) isTupleEnd(extraEnds []string) bool {
	t := p.cur()
	switch t.typ {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tOp:
		return t.val == ")"
	case tName:
		return slices.Contains(extraEnds, t.val)
	}
	return false
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if !withCond {
		return p.parseOr()
	}
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var else_ expr
		if p.skipName("else") {
			if else_, err = p.parseExpression(true); err != nil {
				return nil, err
			}
		}
		x = &condExpr{test: test, then: x, else_: else_}
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	x, err := p.parseAnd()
	for err == nil && p.skipName("or") {
		var r expr
		if r, err = p.parseAnd(); err == nil {
			x = &binExpr{op: "or", l: x, r: r}
		}
	}
	return x, err
}

func (p *parser) parseAnd() (expr, error) {
	x, err := p.parseNot()
	for err == nil && p.skipName("and") {
		var r expr
		if r, err = p.parseNot(); err == nil {
			x = &binExpr{op: "and", l: x, r: r}
		}
	}
	return x, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var c *compareExpr
	for {
		t := p.cur()
		var op string
		switch {
		case t.typ == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.look().typ == tName && p.look().val == "in":
			op = "notin"
			p.next()
			p.next()
		default:
			if c == nil {
				return x, nil
			}
			return c, nil
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		if c == nil {
			c = &compareExpr{first: x}
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
}

func (p *parser) parseBinaryLevel(ops []string, next func() (expr, error)) (expr, error) {
	x, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := p.cur()
		if t.typ != tOp || !slices.Contains(ops, t.val) {
			return x, nil
		}
		p.next()
		r, err := next()
		if err != nil {
			return nil, err
		}
		x = &binExpr{op: t.val, l: x, r: r}
	}
}

func (p *parser) parseMath1() (expr, error) {
	return p.parseBinaryLevel([]string{"+", "-"}, p.parseConcat)
}

func (p *parser) parseConcat() (expr, error) {
	return p.parseBinaryLevel([]string{"~"}, p.parseMath2)
}

func (p *parser) parseMath2() (expr, error) {
	return p.parseBinaryLevel([]string{"*", "/", "//", "%"}, p.parsePow)
}

func (p *parser) parsePow() (expr, error) {
	return p.parseBinaryLevel([]string{"**"}, func() (expr, error) { return p.parseUnary(true) })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var x expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		op := p.next().val
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{op: op, x: inner}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	switch t.typ {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{v: vTrue}, nil
		case "false", "False":
			return &constExpr{v: vFalse}, nil
		case "none", "None":
			return &constExpr{v: none}, nil
		}
		p.names[t.val] = true
		return &nameExpr{name: t.val}, nil
	case tString:
		p.next()
		s := t.val
		for p.cur().typ == tString {
			s += p.next().val
		}
		return &constExpr{v: strV(s)}, nil
	case tInt:
		p.next()
		return &constExpr{v: intV(t.ival)}, nil
	case tFloat:
		p.next()
		return &constExpr{v: floatV(t.fval)}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			x, err := p.parseTuple(false, false, nil, true)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			p.next()
			l := &listExpr{}
			for !p.isOp("]") {
				if len(l.items) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				x, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
			}
			p.next()
			return l, nil
		case "{":
			p.next()
			d := &dictExpr{}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.errorf("unexpected %s", describe(t))
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			switch t.typ {
			case tName:
				p.attrs[t.val] = true
				x = &attrExpr{x: x, name: t.val}
			case tInt:
				x = &itemExpr{x: x, key: &constExpr{v: intV(t.ival)}}
			default:
				return nil, p.errorf("expected name or number")
			}
		case p.isOp("["):
			p.next()
			var args []expr
			for !p.isOp("]") {
				if len(args) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
				}
				a, err := p.parseSubscribed()
				if err != nil {
					return nil, err
				}
				args = append(args, a)
			}
			p.next()
			switch len(args) {
			case 0:
				return nil, p.errorf("expected an index")
			case 1:
				if s, ok := args[0].(*sliceExpr); ok {
					s.x = x
					x = s
				} else {
					if c, ok := args[0].(*constExpr); ok && c.v.k == kStr {
						p.attrs[c.v.s] = true
					}
					x = &itemExpr{x: x, key: args[0]}
				}
			default:
				for _, a := range args {
					if _, ok := a.(*sliceExpr); ok {
						return nil, fmt.Errorf("%w: line %d: extended slices", ErrUnsupported, p.cur().line)
					}
				}
				x = &itemExpr{x: x, key: &tupleExpr{items: args}}
			}
		case p.isOp("("):
			c, err := p.parseCallArgs()
			if err != nil {
				return nil, err
			}
			c.fn = x
			x = c
		default:
			return x, nil
		}
	}
}

func (p *parser) parseSubscribed() (expr, error) {
	s := &sliceExpr{}
	if p.isOp(":") {
		p.next()
	} else {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return x, nil
		}
		p.next()
		s.start = x
	}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		s.stop = x
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		s.step = x
	}
	return s, nil
}

func (p *parser) parseCallArgs() (*callExpr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	c := &callExpr{}
	first := true
	for !p.isOp(")") {
		if !first {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		first = false
		if p.isOp("*") || p.isOp("**") {
			return nil, fmt.Errorf("%w: line %d: *args and **kwargs in calls", ErrUnsupported, p.cur().line)
		}
		if p.cur().typ == tName && p.look().typ == tOp && p.look().val == "=" {
			name := p.next().val
			p.next()
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			c.kwargs = append(c.kwargs, kwExpr{name: name, x: x})
			continue
		}
		if len(c.kwargs) > 0 {
			return nil, p.errorf("invalid syntax for function call expression")
		}
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		c.args = append(c.args, x)
	}
	p.next()
	return c, nil
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			x, err = p.parseFilter(x, false)
		case p.isName("is"):
			x, err = p.parseTest(x)
		case p.isOp("("):
			var c *callExpr
			if c, err = p.parseCallArgs(); err == nil {
				c.fn = x
				x = c
			}
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseFilter parses "|name(args)|..." (inline: the first name has no pipe).
func (p *parser) parseFilter(x expr, inline bool) (expr, error) {
	for p.isOp("|") || inline {
		if !inline {
			p.next()
		}
		inline = false
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		if _, ok := filters[name]; !ok {
			return nil, p.errorf("no filter named '%s'", name)
		}
		f := &filterExpr{x: x, name: name}
		if p.isOp("(") {
			c, err := p.parseCallArgs()
			if err != nil {
				return nil, err
			}
			f.args, f.kwargs = c.args, c.kwargs
		}
		x = f
	}
	return x, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	p.next()
	negated := p.skipName("not")
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	if _, ok := tests[name]; !ok {
		return nil, p.errorf("no test named '%s'", name)
	}
	t := &testExpr{x: x, name: name}
	cur := p.cur()
	switch {
	case p.isOp("("):
		c, err := p.parseCallArgs()
		if err != nil {
			return nil, err
		}
		t.args, t.kwargs = c.args, c.kwargs
	case (cur.typ == tName || cur.typ == tString || cur.typ == tInt || cur.typ == tFloat ||
		(cur.typ == tOp && (cur.val == "(" || cur.val == "[" || cur.val == "{"))) &&
		!(cur.typ == tName && (cur.val == "else" || cur.val == "or" || cur.val == "and")):
		if p.isName("is") {
			return nil, p.errorf("you cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		t.args = []expr{a}
	}
	if negated {
		return &unaryExpr{op: "not", x: t}, nil
	}
	return t, nil
}
