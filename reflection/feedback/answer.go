package feedback

import (
	"math"
	"strings"
	"unicode/utf8"
)

// answerInfo is what the candidate generator knows about the answer.
type answerInfo struct {
	docInfo
	ctx       pctx
	yesno     string   // "yes", "no" or "" when the answer is not a yes/no answer
	negStatus []string // statuses the answer denies ("has not been cancelled")
	ticket    bool     // the answer or question speaks of a ticket, case or request
	names     []string // names in the answer, folded
	qnums     map[string]bool
	qnames    map[string]bool
	qwords    map[string]bool // the question's content words (four letters or more), folded
	hasText   bool
}

// analyzeAnswer parses the answer and the question.
func analyzeAnswer(answer, question string) answerInfo {
	answer, question = truncateText(answer, maxContextBytes), truncateText(question, maxContextBytes)
	var ai answerInfo
	ai.text = answer
	ai.hasText = strings.TrimSpace(answer) != ""
	ai.toks = lex(answer)
	ai.lang = guessLang(ai.toks)
	qt := lex(question)
	base := pctx{lang: ai.lang}
	ai.vals = parseValues(ai.toks, base)
	qvals := parseValues(qt, pctx{lang: guessLang(qt)})
	ctx := pctx{}
	for _, v := range append(append([]value{}, ai.vals...), qvals...) {
		switch v.kind {
		case vMoney:
			if ctx.cur == "" {
				ctx.cur = v.unit
			}
		case vDate:
			if ctx.year == 0 && v.y != 0 && v.flags&fNoYear == 0 {
				ctx.year = v.y
			}
			if ctx.month == 0 && v.m != 0 {
				ctx.month = v.m
			}
		case vQuantity:
			if v.dim == "temp" && ctx.tempUnit == "" {
				ctx.tempUnit = v.unit
			}
			if v.dim == "mass" {
				ctx.massLb = true
			}
		case vNumber:
			if ctx.year == 0 && v.a >= 1900 && v.a <= 2200 && v.a == math.Floor(v.a) {
				ctx.year = int(v.a)
			}
		}
	}
	ctx.lang = ai.lang
	ai.ctx = ctx
	// dates without a year take the context's
	for k := range ai.vals {
		if ai.vals[k].kind == vDate && ai.vals[k].y == 0 {
			ai.vals[k].y = ctx.year
		}
	}
	ai.yesno = yesNoOf(ai.toks, qt)
	// a negated status in the answer is not the answer's status; "open"
	// and "closed" are ticket statuses only when a ticket is spoken of
	// (a shop that is open has no status)
	ai.ticket = mentionsTicket(ai.toks) || mentionsTicket(qt)
	kept := ai.vals[:0]
	for _, v := range ai.vals {
		if v.kind == vStatus && negatedAt(ai.toks, v.lo) {
			ai.negStatus = append(ai.negStatus, v.text)
			continue
		}
		if v.kind == vStatus && statusFamily[v.text] == "ticket" && !ai.ticket {
			continue
		}
		kept = append(kept, v)
	}
	ai.vals = kept
	ai.names = namesIn(ai.toks, false, ai.lang)
	ai.qnums = map[string]bool{}
	for _, v := range qvals {
		ai.qnums[v.canon()] = true
	}
	ai.qnames = map[string]bool{}
	for _, n := range namesIn(qt, false, guessLang(qt)) {
		ai.qnames[n] = true
	}
	ai.qwords = map[string]bool{}
	for _, t := range qt {
		if t.kind == tWord && len(t.low) >= 4 && !t.upper {
			ai.qwords[t.low] = true
		}
	}
	return ai
}

// maxContextBytes bounds how much of the answer and the question is read.
const maxContextBytes = 4 << 10

// truncateText cuts s to at most n bytes at a rune boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// yesNoOf returns the answer's yes/no verdict: its first word when that
// is yes or no in a language; under a yes/no question, "no" when the
// answer is negated.
func yesNoOf(toks, q []tok) string {
	for _, t := range toks {
		if t.kind == tEmoji || t.kind == tSym {
			continue
		}
		if t.kind == tWord {
			c := lexWords[t.low]
			if c&lYes != 0 && t.low != "klopt" {
				return "yes"
			}
			if c&lNo != 0 {
				return "no"
			}
		}
		break
	}
	return ""
}
