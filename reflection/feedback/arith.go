package feedback

import "math"

// Arithmetic written in a comment: "17 × 23 = 391", "25 por 4 son 100",
// "10% of $45 is $4.50", "3 times 4.99". A customer who works a value out
// in the comment either confirms the answer (the result is the answer's
// value) or corrects it (the result is the right value); the operands
// are inputs, not corrections.

// expr is one arithmetic expression of a comment.
type expr struct {
	lo, hi int     // token span of the operands and operators
	x      float64 // the value of the expression
	// typed is the operand that gives the result its kind and unit
	// (money, duration, quantity); kind vNumber when every operand is a
	// plain number.
	typed value
	// result: the index in docInfo.vals of the value the comment states
	// as the result ("= 391", "son 100"), or -1.
	result int
	// operands: the first tokens of the operands.
	operands []int
	// pctOf: the expression takes a percentage of an amount ("10% of
	// $45"); its result is an amount, never a percentage.
	pctOf bool
}

// arithOps are the operators between two numbers, in every language of
// the lexicons. Words that also mean something else ("per", "por",
// "mas") count only between two numbers.
var arithOps = map[string]byte{
	"×": '*', "*": '*', "x": '*', "·": '*', "times": '*', "multiplied": '*', "mal": '*', "multipliziert": '*', "por": '*',
	"fois": '*', "multiplie": '*', "per": '*', "vezes": '*', "keer": '*', "maal": '*',
	"+": '+', "plus": '+', "mas": '+', "piu": '+', "mais": '+',
	"-": '-', "−": '-', "minus": '-', "menos": '-', "moins": '-', "meno": '-', "min": '-',
	"/": '/', "÷": '/', "divided": '/', "geteilt": '/', "dividido": '/', "divise": '/', "diviso": '/', "gedeeld": '/',
}

// arithBy are the words after "divided", "multiplied" ("by", "durch").
var arithBy = map[string]bool{"by": true, "durch": true, "por": true, "par": true, "per": true, "door": true, "mit": true, "met": true}

// percentOf: "10% of", "10% von", "10% de", "10% di", "10% van".
var percentOf = map[string]bool{"of": true, "von": true, "vom": true, "de": true, "del": true, "des": true, "di": true, "do": true, "da": true, "van": true}

// resultWords introduce the result of an expression.
var resultWords = map[string]bool{"=": true, "is": true, "are": true, "makes": true, "make": true, "equals": true, "gives": true, "comes": true,
	"ist": true, "sind": true, "macht": true, "ergibt": true, "gibt": true, "es": true, "son": true, "da": true, "est": true, "font": true, "fait": true,
	"e": true, "fa": true, "fanno": true, "sao": true, "zijn": true, "maakt": true, "geeft": true, "→": true, "->": true, "that's": true, "thats": true, "c'est": true}

// exprNegators: "niet 200", "not 401" right after an expression.
var exprNegators = map[string]bool{"not": true, "niet": true, "nicht": true, "no": true, "pas": true, "non": true, "nao": true}

// resultFill may stand between the result word and the result.
var resultFill = map[string]bool{"...": true, "…": true, ".": true, ",": true, "doch": true, "ja": true, "inderdaad": true, "mesmo": true, "just": true,
	"only": true, "actually": true, "really": true, "exactly": true, "to": true, "out": true, "at": true, "en": true, "bien": true, "effectivement": true,
	"in": true, "realidad": true, "realta": true, "verdad": true, "precisamente": true, "genau": true, "eigentlich": true, "wel": true, "gewoon": true}

func arithNumeric(k vkind) bool {
	switch k {
	case vMoney, vPercent, vDuration, vQuantity, vNumber:
		return true
	}
	return false
}

// operandAt reads an operand at toks[i]: a parsed value that starts
// there, or a number (digits or words). It returns the value and the
// index after it.
func operandAt(toks []tok, vals []value, byLo map[int]int, i int, lang string) (value, int, bool) {
	if vi, ok := byLo[i]; ok {
		v := vals[vi]
		if !arithNumeric(v.kind) || v.flags&fArticle != 0 {
			return value{}, i, false
		}
		return v, v.hi, true
	}
	x, j, fl, ok := readNum(toks, i, lang)
	if !ok || fl&fArticle != 0 {
		return value{}, i, false
	}
	return value{kind: vNumber, a: x, lo: i, hi: j, flags: fBare}, j, true
}

// maxExprs bounds the expressions read from one comment.
const maxExprs = 8

// findExprs returns the arithmetic expressions of a comment: two or more
// operands joined by operators in one sentence, and "N% of X".
func findExprs(toks []tok, vals []value, lang string) []expr {
	byLo := map[int]int{}
	for i, v := range vals {
		if _, ok := byLo[v.lo]; !ok {
			byLo[v.lo] = i
		}
	}
	var out []expr
	for i := 0; i < len(toks) && len(out) < maxExprs; i++ {
		if _, ok := byLo[i]; !ok && toks[i].kind != tNum && toks[i].kind != tWord {
			continue
		}
		first, j, ok := operandAt(toks, vals, byLo, i, lang)
		if !ok {
			continue
		}
		ops := []byte{}
		operands := []value{first}
		starts := []int{i}
		sent := toks[i].sent
		for j < len(toks) && toks[j].sent == sent && len(operands) < 6 {
			w := toks[j].low
			op, isOp := arithOps[w]
			k := j + 1
			if isOp && op != 0 {
				if (w == "divided" || w == "multiplied" || w == "geteilt" || w == "dividido" || w == "divise" || w == "diviso" || w == "gedeeld" || w == "multipliziert" || w == "multiplie") &&
					k < len(toks) && arithBy[toks[k].low] {
					k++
				}
			} else if len(operands) == 1 && first.kind == vPercent && percentOf[w] {
				op = '%'
			} else {
				break
			}
			if op == '-' && (!toks[j].gap || k >= len(toks) || !toks[k].gap) {
				break // "5-7" is a range
			}
			if k >= len(toks) || toks[k].sent != sent {
				break
			}
			next, j2, ok := operandAt(toks, vals, byLo, k, lang)
			if !ok {
				break
			}
			ops = append(ops, op)
			operands = append(operands, next)
			starts = append(starts, k)
			j = j2
		}
		if len(ops) == 0 {
			continue
		}
		e := expr{lo: i, hi: j, result: -1, operands: starts, pctOf: bytesHas(ops, '%')}
		x, typed, ok := evalExpr(operands, ops)
		if !ok {
			i = j - 1
			continue
		}
		e.x, e.typed = x, typed
		// "= 391", "son 100", "is... 169", "ist doch 126"
		k := j
		hasResult := k < len(toks) && resultWords[toks[k].low]
		if !hasResult && bytesHas(ops, '-') {
			i = j - 1
			continue // "9 - 5" is a range unless a result follows
		}
		if !hasResult && k+1 < len(toks) && exprNegators[toks[k].low] {
			// "Is 14 keer 15 niet 200?", "17 × 23 not 401": the value the
			// customer puts against the result
			if vi, ok := byLo[k+1]; ok && arithNumeric(vals[vi].kind) {
				e.result = vi
			}
		}
		if hasResult {
			k++
			for n := 0; n < 3 && k < len(toks) && resultFill[toks[k].low]; n++ {
				k++
			}
			if vi, ok := byLo[k]; ok && arithNumeric(vals[vi].kind) {
				e.result = vi
			}
		}
		out = append(out, e)
		i = j - 1
	}
	return out
}

// evalExpr evaluates operands joined by ops ('*', '/', '+', '-', '%'
// for "N% of X"), products before sums. The result takes the kind of the
// first typed operand; a percentage of an amount is that amount's kind.
func evalExpr(vs []value, ops []byte) (float64, value, bool) {
	typed := value{kind: vNumber}
	for k, v := range vs {
		if v.kind != vNumber && v.kind != vPercent {
			typed = v
			break
		}
		if v.kind == vPercent && !(k == 0 && len(ops) > 0 && ops[0] == '%') && typed.kind == vNumber {
			typed = v
		}
	}
	// products first
	terms := []float64{vs[0].a}
	signs := []float64{1}
	for k, op := range ops {
		x := vs[k+1].a
		switch op {
		case '*':
			terms[len(terms)-1] *= x
		case '/':
			if x == 0 {
				return 0, value{}, false
			}
			terms[len(terms)-1] /= x
		case '%':
			terms[len(terms)-1] = terms[len(terms)-1] / 100 * x
		case '+':
			terms, signs = append(terms, x), append(signs, 1)
		case '-':
			terms, signs = append(terms, x), append(signs, -1)
		}
	}
	s := 0.0
	for k := range terms {
		s += signs[k] * terms[k]
	}
	if math.IsNaN(s) || math.IsInf(s, 0) || math.Abs(s) > 1e9 {
		return 0, value{}, false
	}
	s = math.Round(s*1e6) / 1e6
	return s, typed, true
}

// exprValue is the value of an expression, typed by its typed operand.
func (e expr) exprValue() value {
	v := e.typed
	v.a, v.b = e.x, 0
	v.a2, v.unit2 = 0, ""
	v.lo, v.hi = e.lo, e.hi
	v.flags = 0
	if v.kind == vNumber {
		v.flags = fBare
	}
	if v.kind == vMoney {
		v.a = math.Round(v.a*100) / 100
	}
	return v
}

func bytesHas(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
