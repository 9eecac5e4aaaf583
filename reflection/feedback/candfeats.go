package feedback

import (
	"strings"
)

// contextFeats describes the words around a candidate's span.
func contextFeats(cd *cand, c docInfo, lo, hi int) {
	toks := c.toks
	if lo < 0 || lo >= len(toks) {
		return
	}
	sent := toks[lo].sent
	// previous and next words (skipping nothing)
	prev := func(k int) string {
		if lo-k >= 0 && toks[lo-k].sent == sent {
			return toks[lo-k].low
		}
		return "<s>"
	}
	next := func(k int) string {
		if hi-1+k < len(toks) && toks[hi-1+k].sent == sent {
			return toks[hi-1+k].low
		}
		return "</s>"
	}
	cd.set("p1:" + prev(1))
	cd.set("p2:" + prev(2))
	cd.set("n1:" + next(1))
	cd.set("p12:" + prev(2) + "_" + prev(1))
	for k := 1; k <= 3; k++ {
		if lo-k >= 0 && toks[lo-k].sent == sent && isNegWord(toks[lo-k]) {
			cd.set("negbefore")
		}
		if hi-1+k < len(toks) && toks[hi-1+k].sent == sent && isNegWord(toks[hi-1+k]) {
			cd.set("negafter")
		}
	}
	if lo > 0 && (toks[lo-1].low == "→" || toks[lo-1].low == "=" || toks[lo-1].low == "*" || toks[lo-1].low == ":") {
		cd.set("markbefore")
	}
	if lo > 0 && toks[lo-1].low == "→" {
		cd.set("arrowbefore")
	}
	if hi < len(toks) && toks[hi].low == "→" {
		cd.set("arrowafter")
	}
	// the sentence is a question
	for k := hi; k < len(toks) && k < hi+40; k++ {
		if toks[k].sent != sent {
			break
		}
		if strings.HasPrefix(toks[k].low, "?") {
			cd.set("question")
		}
	}
	for k := lo - 1; k >= 0 && k > lo-40 && toks[k].sent == sent; k-- {
		if toks[k].low == "¿" {
			cd.set("question")
		}
	}
	// position
	n := len(toks)
	pos := float64(lo) / float64(max(n, 1))
	switch {
	case pos < 0.2:
		cd.set("pos:start")
	case pos > 0.7:
		cd.set("pos:end")
	default:
		cd.set("pos:mid")
	}
	words := c.words
	switch {
	case words <= 2:
		cd.set("len:terse")
	case words <= 8:
		cd.set("len:short")
	case words <= 35:
		cd.set("len:mid")
	default:
		cd.set("len:long")
	}
	// cue words in the same sentence before the value
	for k := lo - 1; k >= 0 && k >= lo-6 && toks[k].sent == sent; k-- {
		cl, _ := lexMatch(toks, k)
		if cl&lHedge != 0 {
			cd.set("hedge")
		}
		if cl&lCorrCue != 0 {
			cd.set("cuebefore")
		}
		if cl&lWrong != 0 {
			cd.set("wrongbefore")
		}
		if cl&lStory != 0 {
			cd.set("storybefore")
		}
		if cl&lRight != 0 {
			cd.set("rightbefore")
		}
	}
	for k := hi; k < len(toks) && k < hi+4 && toks[k].sent == sent; k++ {
		cl, _ := lexMatch(toks, k)
		if cl&lRight != 0 {
			cd.set("rightafter")
		}
		if cl&lWrong != 0 {
			cd.set("wrongafter")
		}
	}
	// the sentence has a wrong word
	if c.wrongSent[sent] {
		cd.set("sentwrong")
	}
	if toks[lo].caps && len(toks[lo].raw) > 1 {
		cd.set("capsval")
	}
}

// yesNoFeats describe what the comment says about a yes/no answer.
func yesNoFeats(cd *cand, c docInfo, ai answerInfo) {
	var yes, no, neg, q, doubt, hedge, wrong, right, story bool
	for i, t := range c.toks {
		cl, _ := lexMatch(c.toks, i)
		if cl&lYes != 0 && t.low != "klopt" {
			yes = true
		}
		if cl&lNo != 0 {
			no = true
		}
		if cl&lNegator != 0 {
			neg = true
		}
		if strings.HasPrefix(t.low, "?") || t.low == "¿" {
			q = true
		}
		if cl&lDoubt != 0 {
			doubt = true
		}
		if cl&lHedge != 0 {
			hedge = true
		}
		if cl&lWrong != 0 {
			wrong = true
		}
		if cl&lRight != 0 {
			right = true
		}
		if cl&lSelf != 0 {
			story = true
		}
	}
	b := func(name string, v bool) {
		if v {
			cd.set("yn:" + name)
		}
	}
	b("yes", yes)
	b("no", no)
	b("neg", neg)
	b("q", q)
	b("doubt", doubt)
	b("hedge", hedge)
	b("wrong", wrong)
	b("right", right)
	b("self", story)
	// the comment contradicts the answer's negation: "you DO ship", "they do"
	for i, t := range c.toks {
		if (t.low == "do" || t.low == "does" || t.low == "did" || t.low == "can") && t.caps {
			cd.set("yn:emph")
		}
		if i > 0 && (t.low == "do" || t.low == "does") && (c.toks[i-1].low == "you" || c.toks[i-1].low == "they" || c.toks[i-1].low == "it") {
			cd.set("yn:youdo")
		}
	}
	if ai.yesno == "no" && !neg {
		cd.set("yn:noneg")
	}
	if ai.yesno == "yes" && neg {
		cd.set("yn:yesneg")
	}
	if len(c.vals) > 0 {
		cd.set("yn:hasval")
	}
	for _, t := range c.toks {
		if t.kind == tEmoji && negEmoji[t.low] {
			cd.set("yn:negemoji")
		}
		if t.kind == tEmoji && posEmoji[t.low] {
			cd.set("yn:posemoji")
		}
	}
	if c.words <= 3 {
		cd.set("yn:terse")
	}
	// the comment restates the answer's predicate, negated or not: under
	// "No, we do not accept PayPal", "no PayPal in this day and age" and
	// "shame you don't price match" agree with the answer
	ansWords := map[string]bool{}
	for _, t := range ai.toks {
		if t.kind == tWord && len(t.low) >= 4 && lexWords[t.low]&(lNegator|lYes|lNo) == 0 {
			ansWords[normWord(t.low)] = true
		}
	}
	for i, t := range c.toks {
		if t.kind != tWord || !ansWords[normWord(t.low)] {
			continue
		}
		cd.set("yn:answord")
		for k := i - 1; k >= 0 && k >= i-3 && c.toks[k].sent == t.sent; k-- {
			if isNegWord(c.toks[k]) || strings.HasSuffix(c.toks[k].low, "n't") {
				cd.set("yn:negans:" + ai.yesno)
			}
		}
	}
	for i := range c.toks {
		cl, _ := lexMatch(c.toks, i)
		if cl&lPolicy != 0 {
			cd.set("yn:policy")
		}
		if cl&lRequest != 0 {
			cd.set("yn:request")
		}
		// a complaint about the answer's tone or length, or an aside,
		// does not deny its yes or no
		if cl&(lTone|lLength) != 0 {
			cd.set("yn:tonelen")
		}
		if cl&lOther != 0 {
			cd.set("yn:other")
		}
		if cl&lInfoAck != 0 {
			cd.set("yn:infoack")
		}
		if cl&lContra != 0 {
			cd.set("yn:contra") // "then what's the PayPal button for?"
		}
		if cl&(lWrong|lCorrCue) != 0 {
			cd.set("yn:wrongcue")
		}
	}
}
