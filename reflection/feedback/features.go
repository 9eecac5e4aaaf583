package feedback

import (
	"math"
	"strings"
)

// Features of the polarity classifier: word and character n-grams of the
// comment, the multilingual lexicon classes (with negation), the English
// rule analyzer's score, the form of the comment (question, capitals,
// emoji, length) and what its values say about the answer's (the same
// value: a confirmation; a different value of the same kind: a
// correction).

// features is a sparse feature vector.
type features map[string]float64

var lclassNames = map[lclass]string{lPos: "pos", lPosS: "poss", lNeg: "neg", lWrong: "wrong", lRight: "right", lNegator: "negator",
	lIntens: "intens", lThanks: "thanks", lGreet: "greet", lAck: "ack", lHedge: "hedge", lDoubt: "doubt", lQWord: "qword",
	lContrast: "contrast", lRetract: "retract", lSarc: "sarc", lPolicy: "policy", lFormat: "format", lLength: "length", lTone: "tone",
	lYes: "yes", lNo: "no", lRequest: "request", lFix: "fix", lCorrCue: "corrcue", lStory: "story", lNotFault: "notfault",
	lSelf: "self", lIdeal: "ideal", lComplaintN: "complaint", lRef: "ref", lIntent: "intent", lAlso: "also", lOther: "other", lInfoAck: "infoack", lContra: "contra"}

// negatable classes change meaning under negation.
const negatable = lPos | lPosS | lNeg | lWrong | lRight | lIdeal

var posEmoji = map[string]bool{"👍": true, "🙂": true, "😊": true, "❤": true, "❤️": true, "🎉": true, "🙌": true, "✅": true, "👌": true, "😍": true,
	"🥰": true, "😀": true, "😃": true, "😄": true, "😁": true, "🙏": true, "💯": true, "🔥": true, "⭐": true, "🌟": true, "👏": true, "💪": true,
	"😎": true, "🤩": true, "💚": true, "💙": true, "💜": true, "🧡": true, "💛": true, "☺": true, "😌": true, "🤗": true, "🥳": true, "✨": true, "🤑": true, "🏆": true, "🎯": true}
var negEmoji = map[string]bool{"👎": true, "🙁": true, "😡": true, "😠": true, "❌": true, "🤦": true, "🙄": true, "😒": true, "😤": true, "😞": true,
	"😕": true, "🤬": true, "💩": true, "😩": true, "😫": true, "🤨": true, "😑": true, "😐": true, "🙈": true, "🤷": true, "😬": true, "😢": true,
	"😭": true, "🥴": true, "☹": true, "🤡": true, "🚫": true, "⛔": true, "😖": true, "😣": true, "🤔": true, "😂": true, "🤣": true, "💀": true}

func addNgrams(f features, w string) {
	r := []rune("<" + w + ">")
	for n := 3; n <= 4; n++ {
		for i := 0; i+n <= len(r); i++ {
			f["c:"+string(r[i:i+n])] += 1
		}
	}
}

// polarityFeatures returns the features of a comment.
func polarityFeatures(d docInfo, ai answerInfo, cands []*cand, ta textAnalysis) features {
	f := features{"bias": 1}
	toks := d.toks
	words := 0
	var ws []string
	for _, t := range toks {
		if t.kind == tWord {
			words++
		}
	}
	prevW := "<s>"
	prevSent := -1
	for _, t := range toks {
		if t.sent != prevSent {
			prevW = "<s>"
			prevSent = t.sent
		}
		switch t.kind {
		case tWord, tNum, tEmoji:
			w := t.low
			if t.kind == tNum {
				w = "<num>"
			} else if t.kind == tWord {
				w = normWord(w)
				addNgrams(f, w)
			}
			ws = append(ws, w)
			f["w:"+w] = 1
			f["b:"+prevW+"|"+w] = 1
			prevW = w
			if t.kind == tEmoji {
				if posEmoji[t.low] {
					f["emo:pos"]++
				}
				if negEmoji[t.low] {
					f["emo:neg"]++
				}
			}
		case tSym:
			if t.low == "?" || strings.HasPrefix(t.low, "?") || t.low == "!" || strings.HasPrefix(t.low, "!") || t.low == "→" || t.low == "*" || t.low == "=" {
				f["s:"+t.low[:1]] = 1
				f["b:"+prevW+"|"+t.low[:1]] = 1
			}
		}
	}
	if len(ws) > 0 {
		f["first:"+ws[0]] = 1
		f["last:"+ws[len(ws)-1]] = 1
	}
	// lexicon classes with negation, for the whole text, the last
	// sentence and the part after the last contrast marker
	type hit struct {
		cl  lclass
		neg bool
		at  int
	}
	var hits []hit
	lastNeg := -10
	lastSent := 0
	for _, t := range toks {
		if t.kind == tWord || t.kind == tEmoji || t.kind == tNum {
			lastSent = t.sent
		}
	}
	for i := 0; i < len(toks); {
		cl, n := lexMatch(toks, i)
		if n == 0 {
			i++
			continue
		}
		negated := lastNeg >= 0 && i-lastNeg <= 5 && toks[lastNeg].sent == toks[i].sent && !clauseBreak(toks, lastNeg, i)
		if cl&(negatable|lComplaintN) != 0 && i+n < len(toks) && toks[i+n].sent == toks[i].sent {
			if nx := toks[i+n].low; nx == "nicht" || nx == "niet" || nx == "not" || nx == "pas" || nx == "no" && d.lang != "en" {
				negated = true
			}
		}
		if cl&lNegator != 0 {
			negated = false
		}
		hits = append(hits, hit{cl: cl, neg: negated, at: i})
		if cl&lNegator != 0 || n > 1 && spanHasNegator(toks[i:i+n]) {
			lastNeg = i + n - 1 // "ce n'est pas correct", "no es correcto"
		}
		i += n
	}
	contrastAt := -1
	for _, h := range hits {
		if h.cl&lContrast != 0 && h.at > 0 {
			contrastAt = h.at
		}
	}
	count := func(prefix string, sel func(hit) bool) {
		for _, h := range hits {
			if !sel(h) {
				continue
			}
			for c, name := range lclassNames {
				if h.cl&c == 0 {
					continue
				}
				if h.neg && c&(negatable|lComplaintN) != 0 {
					f[prefix+"not_"+name] += 1
				} else {
					f[prefix+name] += 1
				}
			}
		}
	}
	count("lx:", func(hit) bool { return true })
	count("L:", func(h hit) bool { return toks[h.at].sent == lastSent && lastSent > 0 })
	count("A:", func(h hit) bool { return contrastAt >= 0 && h.at > contrastAt })
	for k, v := range f {
		if strings.HasPrefix(k, "lx:") || strings.HasPrefix(k, "L:") || strings.HasPrefix(k, "A:") {
			f[k] = math.Min(v, 3) / 2
		}
	}
	// what the comment's values say about the answer's
	eq, diff, negOld, diffQ := false, false, false, false
	for _, v := range d.vals {
		status := answerRelation(v, ai.vals)
		negBefore := false
		for k := v.lo - 1; k >= 0 && k >= v.lo-2; k-- {
			if isNegWord(toks[k]) && toks[k].sent == toks[v.lo].sent {
				negBefore = true
			}
		}
		q := false
		for k := v.hi; k < len(toks) && k < v.hi+40 && toks[k].sent == toks[v.lo].sent; k++ {
			if strings.HasPrefix(toks[k].low, "?") {
				q = true
			}
		}
		switch status {
		case "eq":
			if negBefore {
				negOld = true
			} else {
				eq = true
			}
		case "diff":
			if !negBefore {
				diff = true
				if q {
					diffQ = true
				}
			}
		default:
			f["v:noslot"] = 1
		}
		f["v:"+v.kind.String()] = 1
	}
	// words conditioned on what the values say: evidence words ("steht
	// auch auf", "that's what ... said") confirm beside the answer's own
	// value and correct beside a different one
	if state := valueState(eq, diff); state != "" {
		for _, w := range ws {
			f["w:"+state+"|"+w] = 1
		}
	}
	has := func(c lclass) bool {
		for _, h := range hits {
			if h.cl&c != 0 && !h.neg {
				return true
			}
		}
		return false
	}
	hasNeg := func(c lclass) bool {
		for _, h := range hits {
			if h.cl&c != 0 && h.neg {
				return true
			}
		}
		return false
	}
	cj := func(name string, on bool) {
		if on {
			f["cj:"+name] = 1
		}
	}
	posAny := has(lPos) || has(lPosS) || has(lIdeal) || hasNeg(lNeg) || hasNeg(lWrong) || hasNeg(lComplaintN)
	negAny := has(lNeg) || has(lWrong) || hasNeg(lPos) || hasNeg(lRight) || hasNeg(lPosS)
	question := strings.Contains(d.text, "?")
	cj("eq", eq)
	cj("diff", diff)
	cj("diffq", diffQ)
	cj("negold", negOld)
	cj("eq_right", eq && (has(lRight) || posAny) && !negAny && !diff)
	cj("eq_neg", eq && (negAny || has(lPolicy)) && !diff)
	cj("eq_only", eq && !diff && !negAny && !posAny)
	cj("eq_notfault", eq && has(lNotFault))
	cj("policy_notfault", has(lPolicy) && has(lNotFault))
	// a complaint that takes the information in ("... is a shame, but
	// good to know") is about the policy, not the answer
	cj("policy_ack", (has(lPolicy) || negAny) && has(lInfoAck) && !(has(lWrong) || hasNeg(lRight)) && !diff)
	cj("negcomplaint", hasNeg(lComplaintN))
	cj("qdoubt", question && (has(lDoubt) || has(lHedge)))
	cj("qright", question && has(lRight) && !diff)
	cj("q_nodiff", question && !diff && !negAny)
	cj("q_neg", question && negAny)
	// a retraction after an objection
	objAt := -1
	for _, h := range hits {
		if h.cl&(lWrong|lNeg|lDoubt) != 0 && !h.neg || h.neg && h.cl&(lRight|lPos) != 0 {
			if objAt < 0 {
				objAt = h.at
			}
		}
	}
	if objAt < 0 && (diff || diffQ) {
		objAt = 0
	}
	for _, h := range hits {
		if h.cl&lRetract != 0 && h.at > objAt && objAt >= 0 {
			f["cj:retract"] = 1
		}
	}
	newName := false
	for _, c := range cands {
		if c.src == srcName && !c.has("eqname") && !c.has("inq") && !c.has("partname") {
			newName = true
		}
	}
	cj("newname", newName)
	// the comment's own arithmetic: its result is the answer's value (a
	// worked confirmation, often after an objection) or another one
	exprEq, exprDiff := false, false
	for _, e := range d.exprs {
		v := e.exprValue()
		if e.result >= 0 {
			v = d.vals[e.result]
		}
		st := answerRelation(v, ai.vals)
		exprEq = exprEq || st == "eq"
		exprDiff = exprDiff || st == "diff"
	}
	cj("expr_eq", exprEq)
	cj("expr_diff", exprDiff)
	cj("expr_eq_last", exprEq && !exprDiff && lastSent > 0)
	// a negative question ("isn't it 45 minutes?", "¿no es Brasilia?",
	// "niet 200?") with a new value implies the right one
	negQ, newInQ := false, false
	for i, t := range toks {
		if !strings.HasPrefix(t.low, "?") {
			continue
		}
		s0 := t.sent
		for k := i - 1; k >= 0 && toks[k].sent == s0 && k > i-25; k-- {
			if isNegWord(toks[k]) || strings.HasSuffix(toks[k].low, "n't") || toks[k].low == "nt" {
				negQ = true
			}
		}
		for _, c := range cands {
			if c.src == srcName && !c.has("eqname") && !c.has("inq") {
				for _, sp := range c.spans {
					if sp < i && toks[sp].sent == s0 {
						newInQ = true
					}
				}
			}
		}
		for _, v := range d.vals {
			if v.lo < i && toks[v.lo].sent == s0 {
				for _, a := range ai.vals {
					if compatible(v, a) {
						same := false
						for _, cv := range coerce(v, a) {
							if sameValue(cv, a) {
								same = true
							}
						}
						if !same {
							newInQ = true
						}
					}
				}
			}
		}
	}
	// a tag question ("..., no?", "..., right?", "oder?", "¿no?") doubts
	tagQ := false
	for i, t := range toks {
		if strings.HasPrefix(t.low, "?") && i > 0 {
			switch toks[i-1].low {
			case "no", "right", "non", "oder", "vero", "ne", "toch", "nee", "nao", "correct", "eh":
				tagQ = true
			}
		}
	}
	cj("tagq", tagQ)
	// a new value or name after "but": the mixed praise and correction
	newAfter := false
	if contrastAt >= 0 {
		for _, c := range cands {
			if c.has("eqans") || c.has("eqslot") || c.has("eqname") || c.has("inq") || c.src == srcYesNo {
				continue
			}
			for _, sp := range c.spans {
				if sp > contrastAt {
					newAfter = true
				}
			}
		}
	}
	cj("new_after_contrast", newAfter)
	cj("negq", negQ)
	cj("negq_new", negQ && newInQ)
	cj("q_new", newInQ)
	cj("eq_also", eq && has(lAlso) && !negAny)
	cj("intent", has(lIntent) && !negAny && !diff && !posAny)
	cj("newname_q", newName && question)
	// the last sentence restates the answer's value or approves
	lastRight, lastEq := false, false
	for _, h := range hits {
		if toks[h.at].sent == lastSent && h.cl&(lRight|lPos|lPosS) != 0 && !h.neg {
			lastRight = true
		}
	}
	for _, v := range d.vals {
		if toks[v.lo].sent != lastSent {
			continue
		}
		for _, a := range ai.vals {
			if compatible(v, a) {
				for _, cv := range coerce(v, a) {
					if sameValue(cv, a) {
						lastEq = true
					}
				}
			}
		}
	}
	cj("last_right", lastRight && lastSent > 0)
	// an objection in an earlier sentence and approval, with no objection,
	// in the last: the comment took its objection back
	objSent, lastObj := -1, false
	for _, h := range hits {
		obj := h.cl&(lWrong|lNeg|lDoubt) != 0 && !h.neg || h.neg && h.cl&(lRight|lPos) != 0
		if obj && toks[h.at].sent < lastSent && objSent < 0 {
			objSent = toks[h.at].sent
		}
		if obj && toks[h.at].sent == lastSent {
			lastObj = true
		}
	}
	cj("late_approve", lastSent > 0 && objSent >= 0 && lastRight && !lastObj)
	// the last objection is followed, in a later sentence, by approval or a
	// retraction ("... nope, did it again on paper, 391. My bad.")
	lastObjAt, apprAt := -1, -1
	for _, h := range hits {
		if h.cl&(lWrong|lNeg|lDoubt) != 0 && !h.neg || h.neg && h.cl&(lRight|lPos) != 0 {
			lastObjAt = h.at
		}
		if !h.neg && h.cl&(lRight|lRetract|lPosS) != 0 && lastObjAt >= 0 && h.at > lastObjAt {
			apprAt = h.at
		}
	}
	cj("obj_then_appr", lastObjAt >= 0 && apprAt > lastObjAt && toks[apprAt].sent > toks[lastObjAt].sent)
	cj("late_approve_eq", lastSent > 0 && objSent >= 0 && lastEq && !lastObj)
	// a correction taken back: the last sentence restates and approves the
	// answer's value after an earlier different one ("... 20% is correct")
	cj("retracted", lastSent > 0 && lastEq && (lastRight || has(lRetract)) && (diff || negOld))
	// an echo of the answer with an interjection, then more: "Zola, bien
	// sûr. Et ...", "28 kg, wow, ...", "Oh sure, 20 minutes. Must be why ..."
	eqName := false
	for _, c := range cands {
		if c.src == srcName && c.has("eqname") && !c.has("negbefore") {
			eqName = true
		}
	}
	echo := false
	if eq || eqName {
		first := toks[0].sent
		for _, h := range hits {
			if toks[h.at].sent <= first+1 && h.cl&(lSarc|lPosS) != 0 && !h.neg {
				echo = true
			}
		}
	}
	cj("echo_interj", echo && len(toks) > 0 && lastSent > toks[0].sent)
	cj("echo_interj_new", echo && (diff || newName || negAny))
	cj("eqname", eqName)
	cj("last_eqright", lastRight && lastEq && lastSent > 0)
	cj("last_eq", lastEq && lastSent > 0)
	// how much of the answer's content the comment repeats: a policy
	// complaint or a confirmation echoes it, off-topic remarks do not
	ov, content := overlap(toks, ai.toks)
	switch {
	case !ai.hasText || content < 2:
		// too few content words to say whether they echo the answer
	case ov == 0:
		f["ov:0"] = 1
	case ov == 1:
		f["ov:1"] = 1
	default:
		f["ov:2"] = 1
	}
	wrongAny := has(lWrong) || hasNeg(lRight)
	cj("ov_neg_nowrong", ov > 0 && (negAny || has(lPolicy)) && !wrongAny && !diff)
	cj("ov_policy", ov > 0 && has(lPolicy))
	cj("noov_noref", ai.hasText && ov == 0 && !has(lRef) && len(d.vals) == 0)
	cj("eqv_policy", eq && has(lPolicy) && !wrongAny)
	negator := false
	for _, h := range hits {
		if h.cl&lNegator != 0 {
			negator = true
		}
	}
	cj("yn_agree", ai.yesno == "no" && negator && ov > 0 && !wrongAny && !diff || ai.yesno == "yes" && !negator && ov > 0 && !wrongAny && !diff)
	cj("other_noov", has(lOther) && ov == 0 && len(d.vals) == 0 && !has(lWrong) && !has(lRight))
	cj("other_noref", has(lOther) && !has(lRef))
	cj("mixed", contrastAt >= 0 && posAny && (negAny || diff))
	cj("sarc_pos", has(lSarc) && posAny && (negAny || diff || eq))
	cj("pos_neg", posAny && negAny)
	cj("reqformat", (has(lRequest) || has(lQWord)) && has(lFormat) && !negAny && !diff)
	cj("noref", !has(lRef) && len(d.vals) == 0 && !has(lRight) && !has(lWrong) && !has(lThanks))
	// pairwise conjunctions of the core signals, so that the linear
	// classifier can weigh combinations ("repeats the value" and "negative
	// word" is a policy complaint, "repeats the value" and "right" a
	// confirmation)
	lastNegS := false
	for _, h := range hits {
		if toks[h.at].sent == lastSent && (h.cl&(lNeg|lWrong) != 0 && !h.neg || h.neg && h.cl&(lRight|lPos) != 0) {
			lastNegS = true
		}
	}
	core := []struct {
		name string
		on   bool
	}{
		{"pos", has(lPos) || has(lIdeal)}, {"poss", has(lPosS)}, {"neg", has(lNeg)}, {"wrong", has(lWrong)}, {"right", has(lRight)},
		{"notpos", hasNeg(lPos) || hasNeg(lRight) || hasNeg(lPosS)}, {"notneg", hasNeg(lNeg) || hasNeg(lWrong) || hasNeg(lComplaintN)},
		{"thanks", has(lThanks)}, {"hedge", has(lHedge)}, {"doubt", has(lDoubt)}, {"contrast", contrastAt >= 0},
		{"retract", has(lRetract)}, {"sarc", has(lSarc)}, {"policy", has(lPolicy)}, {"format", has(lFormat)},
		{"request", has(lRequest)}, {"q", question}, {"eq", eq}, {"diff", diff}, {"newname", newName},
		{"ov", ov > 0}, {"ref", has(lRef)}, {"lastright", lastRight && lastSent > 0}, {"lastneg", lastNegS && lastSent > 0},
		{"yesno", ai.yesno != ""}, {"long", words > 25}, {"short", words <= 3}, {"caps", f["form:caps"] != 0},
		{"story", has(lStory)}, {"length", has(lLength)}, {"tone", has(lTone)}, {"notfault", has(lNotFault)},
		{"infoack", has(lInfoAck)},
	}
	for i := range core {
		if !core[i].on {
			continue
		}
		for j := i + 1; j < len(core); j++ {
			if core[j].on {
				f["x:"+core[i].name+"&"+core[j].name] = 1
			}
		}
	}
	// bare thanks, acknowledgements and greetings
	onlyPolite, onlyAck, anyWord := true, true, false
	for i, t := range toks {
		if t.kind != tWord {
			continue
		}
		anyWord = true
		cl, _ := lexMatch(toks, i)
		filler := politeFiller[t.low]
		if cl&lThanks == 0 && !filler {
			onlyPolite = false
		}
		if cl&(lAck|lGreet|lThanks) == 0 && !filler {
			onlyAck = false
		}
		if cl&(lIntens|lPosS) != 0 && cl&lThanks == 0 {
			onlyPolite, onlyAck = false, false
		}
		if cl&lPos != 0 && cl&(lThanks|lAck) == 0 {
			onlyPolite, onlyAck = false, false
		}
	}
	excl := strings.Count(d.text, "!")
	cj("barethanks", anyWord && onlyPolite && excl <= 1 && len(d.vals) == 0)
	cj("ackonly", anyWord && onlyAck && !onlyPolite && len(d.vals) == 0)
	// the English rule analyzer, on English text only (it reads "pas
	// correct" as "correct")
	if ta.note == "" && (d.lang == "en" || d.lang == "" && !ta.foreign) {
		f["ta:score"] = math.Tanh(ta.score)
		f["ta:pos"] = math.Tanh(ta.pos)
		f["ta:neg"] = math.Tanh(ta.neg)
		if ta.sarcasm {
			f["ta:sarc"] = 1
		}
		if ta.contrast {
			f["ta:contrast"] = 1
		}
	}
	// form
	text := strings.TrimSpace(d.text)
	if strings.HasSuffix(text, "?") {
		f["form:qend"] = 1
	}
	if strings.Contains(text, "?") {
		f["form:q"] = 1
	}
	if strings.Contains(text, "!!") {
		f["form:excl2"] = 1
	}
	if r, n := capsRatio(text); n >= 4 && r > 0.7 {
		f["form:caps"] = 1
	}
	switch {
	case words == 0:
		f["form:nowords"] = 1
	case words <= 2:
		f["form:len1"] = 1
	case words <= 6:
		f["form:len2"] = 1
	case words <= 15:
		f["form:len3"] = 1
	case words <= 40:
		f["form:len4"] = 1
	default:
		f["form:len5"] = 1
	}
	if d.lang != "" {
		f["lang:"+d.lang] = 1
	}
	if ai.yesno != "" {
		f["ans:"+ai.yesno] = 1
	}
	if !ai.hasText {
		f["ans:none"] = 1
	}
	return f
}

// politeFiller are words that may accompany bare thanks ("thanks for
// the answer", "ok thank you").
var politeFiller = map[string]bool{"you": true, "for": true, "the": true, "answer": true, "answering": true, "info": true,
	"information": true, "reply": true, "ok": true, "okay": true, "and": true, "oh": true, "ah": true, "alright": true,
	"kk": true, "k": true, "u": true, "very": false, "fur": true, "die": true, "antwort": true, "por": true, "la": true,
	"respuesta": true, "pour": true, "reponse": true, "per": true, "risposta": true, "pela": true, "resposta": true,
	"voor": true, "het": true, "antwoord": true, "de": true, "a": true, "informacion": true, "vale": true, "oke": true}

// normWord folds elongations ("sooo" -> "soo") and common chat spellings.
func normWord(w string) string {
	w = collapseRuns(w, 2)
	if t, ok := typos[w]; ok {
		return t
	}
	return w
}

// overlap counts the content-word stems the comment shares with the
// answer, and the comment's content-word stems (words of four letters or
// more that are not function or evaluation words; stems are the first
// five letters).
func overlap(c, a []tok) (shared, content int) {
	stems := func(toks []tok) map[string]bool {
		m := map[string]bool{}
		for i, t := range toks {
			if t.kind != tWord || len(t.low) < 4 {
				continue
			}
			if _, ok := langStop[t.low]; ok {
				continue
			}
			if cl, _ := lexMatch(toks, i); cl != 0 {
				continue
			}
			st := t.low
			if len(st) > 5 {
				st = st[:5]
			}
			m[st] = true
		}
		return m
	}
	am := stems(a)
	cm := stems(c)
	for st := range cm {
		if am[st] {
			shared++
		}
	}
	return shared, len(cm)
}

// spanHasNegator reports a negation word inside a matched phrase.
func spanHasNegator(ts []tok) bool {
	for _, t := range ts {
		if isNegWord(t) || t.low == "n'est" || t.low == "n'a" || strings.HasSuffix(t.low, "n't") {
			return true
		}
	}
	return false
}

// clauseBreak reports a comma, dash or contrast word between toks[a]
// and toks[b] (negation does not reach across it).
func clauseBreak(toks []tok, a, b int) bool {
	for k := a + 1; k < b; k++ {
		switch toks[k].low {
		case ",", "-", ":", "but", "aber", "pero", "mais", "ma", "mas", "maar", "though":
			return true
		}
	}
	return false
}

// valueState names what a comment's values say about the answer's: "E"
// (only the answer's own values), "D" (a different one) or "" (none).
func valueState(eq, diff bool) string {
	switch {
	case diff:
		return "D"
	case eq:
		return "E"
	}
	return ""
}

// answerRelation says how a value of the comment stands to the answer's
// values: "eq" when it states one of them (after coercion to its unit or
// form), "diff" when it is comparable with one but states none, "" when
// it is comparable with none.
func answerRelation(v value, ans []value) string {
	rel := ""
	for _, a := range ans {
		if !compatible(v, a) {
			continue
		}
		if rel == "" {
			rel = "diff"
		}
		for _, cv := range coerce(v, a) {
			if sameValue(cv, a) {
				rel = "eq"
			}
		}
	}
	return rel
}
