package feedback

import (
	"math"
	"sort"
	"strings"
)

// Correction candidates: every value a comment could be giving as the
// right answer, read against the answer it was written under. Values the
// comment states are typed by the answer's values ("45" under "20 minutes"
// is "45 minutes"; "closes at 8pm" under "10:00-18:00" is "10:00-20:00"),
// computed from them ("double that", "an hour earlier", "you forgot the
// 8% tax"), or implied (a denied yes/no answer implies the other one; a
// unit named without a number replaces the answer's unit). A trained
// ranker (model.go) scores the candidates; features describe each
// candidate's form and context, never a particular value.

// csource says how a candidate was found.
type csource uint8

const (
	srcStated   csource = iota // a value written in the comment, as is
	srcCoerced                 // a bare number typed by an answer value
	srcRangeEnd                // one end of an answer range replaced
	srcUnitSwap                // the answer's number with the comment's unit
	srcComputed                // computed from an answer value
	srcYesNo                   // the opposite of a yes/no answer
	srcName                    // a name
	srcLegacy                  // found by the English sentence patterns
)

var csourceNames = [...]string{"stated", "coerced", "rangeend", "unitswap", "computed", "yesno", "name", "legacy"}

// cand is one correction candidate.
type cand struct {
	canon string
	kind  vkind
	src   csource
	feats map[string]float64
	spans []int // first tokens of the comment spans it was read from
}

func (c *cand) set(f string)             { c.feats[f] = 1 }
func (c *cand) setv(f string, v float64) { c.feats[f] = v }
func (c *cand) has(f string) bool        { return c.feats[f] != 0 }

func newCand(canon string, k vkind, s csource) *cand {
	return &cand{canon: canon, kind: k, src: s, feats: map[string]float64{}}
}

// docInfo is a parsed text: its tokens, language and values.
type docInfo struct {
	text string
	toks []tok
	lang string
	vals []value
	// exprs: the arithmetic written in the text (findExprs).
	exprs []expr
	// words: the number of word tokens; wrongSent: the sentences with a
	// "wrong" word (filled by stats).
	words     int
	wrongSent map[int]bool
}

// maxValues bounds the values read from one text (the first and the last
// half are kept), so that work stays linear on pathological input.
const maxValues = 120

// stats fills the per-text counts used by the candidate features.
func (d *docInfo) stats() {
	d.words = 0
	d.wrongSent = map[int]bool{}
	for _, t := range d.toks {
		if t.kind == tWord {
			d.words++
			if lexWords[t.low]&lWrong != 0 {
				d.wrongSent[t.sent] = true
			}
		}
	}
	if len(d.vals) > maxValues {
		vs := append([]value{}, d.vals[:maxValues/2]...)
		d.vals = append(vs, d.vals[len(d.vals)-maxValues/2:]...)
	}
}

// compatible reports whether a comment value and an answer value can be
// two versions of the same slot.
func compatible(c, a value) bool {
	switch c.kind {
	case vMoney:
		return a.kind == vMoney
	case vPercent:
		return a.kind == vPercent
	case vTime, vTimeRange:
		return a.kind == vTime || a.kind == vTimeRange
	case vWeekday, vDayRange:
		return a.kind == vWeekday || a.kind == vDayRange
	case vDate:
		return a.kind == vDate
	case vDuration, vDurRange:
		return a.kind == vDuration || a.kind == vDurRange
	case vQuantity:
		return a.kind == vQuantity && a.dim == c.dim
	case vStatus:
		return a.kind == vStatus && familyMatch(c.text, a.text)
	case vNumber:
		return a.kind != vStatus && a.kind != vWeekday && a.kind != vDayRange
	case vNumRange:
		return a.kind == vTimeRange || a.kind == vDurRange || a.kind == vNumRange || a.kind == vDuration || a.kind == vTime
	}
	return false
}

func familyMatch(a, b string) bool {
	fa, fb := statusFamily[a], statusFamily[b]
	return fa == fb || fa == "any" || fb == "any"
}

// coerce types comment value c by answer value a. It returns the
// candidate values (several when one end of a range may be meant).
func coerce(c, a value) []value {
	out := func(vs ...value) []value { return vs }
	switch c.kind {
	case vNumber:
		x := c.a
		switch a.kind {
		case vMoney:
			return out(value{kind: vMoney, a: x, unit: a.unit})
		case vPercent:
			return out(value{kind: vPercent, a: x})
		case vDuration:
			return out(value{kind: vDuration, a: x, unit: a.unit})
		case vDurRange:
			return out(value{kind: vDuration, a: x, unit: a.unit})
		case vQuantity:
			return out(value{kind: vQuantity, a: x, unit: a.unit, dim: a.dim})
		case vTime:
			if t, ok := hourNear(x, a.a); ok {
				return out(value{kind: vTime, a: t})
			}
		case vTimeRange:
			if t, ok := hourNear(x, a.a); ok {
				t2, _ := hourNear(x, a.b)
				return out(value{kind: vTimeRange, a: t, b: a.b}, value{kind: vTimeRange, a: a.a, b: t2})
			}
		case vDate:
			if x >= 1 && x <= 31 && x == math.Floor(x) && a.m != 0 {
				return out(value{kind: vDate, y: a.y, m: a.m, d: int(x)})
			}
		case vNumber:
			return out(value{kind: vNumber, a: x})
		}
	case vNumRange:
		switch a.kind {
		case vTimeRange, vTime:
			ref1, ref2 := a.a, a.b
			if a.kind == vTime {
				ref2 = a.a
			}
			t1, ok1 := hourNear(c.a, ref1)
			t2, ok2 := hourNear(c.b, ref2)
			if ok1 && ok2 {
				if t2 <= t1 && t2+720 < 1440 {
					t2 += 720
				}
				return out(value{kind: vTimeRange, a: t1, b: t2})
			}
		case vDurRange, vDuration:
			if c.unit != "" {
				return nil
			}
			return out(value{kind: vDurRange, a: c.a, b: c.b, unit: a.unit})
		}
	case vTime:
		near := func(ref float64) float64 {
			if c.flags&fHalfDay != 0 && c.a < 780 && math.Abs(c.a+720-ref) < math.Abs(c.a-ref) {
				return c.a + 720
			}
			return c.a
		}
		if a.kind == vTimeRange {
			return out(value{kind: vTimeRange, a: near(a.a), b: a.b}, value{kind: vTimeRange, a: a.a, b: near(a.b)})
		}
		if a.kind == vTime {
			d := c
			d.a = near(a.a)
			return out(d)
		}
	case vWeekday:
		if a.kind == vDayRange {
			return out(value{kind: vDayRange, a: a.a, b: c.a}, value{kind: vDayRange, a: c.a, b: a.b})
		}
	case vDate:
		d := c
		if d.m == 0 {
			d.m = a.m
		}
		if d.y == 0 || d.flags&fNoYear != 0 && a.y != 0 {
			d.y = a.y
		}
		return out(d)
	case vQuantity:
		if c.flags&fDegree != 0 && a.dim == "temp" {
			d := c
			d.unit = a.unit
			return out(d)
		}
	case vMoney:
		if c.flags&fCurWord != 0 && c.unit == "USD" && (a.unit == "CAD" || a.unit == "AUD") {
			d := c
			d.unit = a.unit
			return out(d)
		}
	}
	return out(c)
}

// hasEvaluation reports an evaluation word ("Nicht gut erklärt."): a
// terse comment with one is not a bare name.
func hasEvaluation(toks []tok) bool {
	for i := range toks {
		if cl, _ := lexMatch(toks, i); cl&(lPos|lPosS|lNeg|lTone|lLength|lIdeal) != 0 {
			return true
		}
	}
	return false
}

// clockHourWords are the hour words that also name the clock's hour
// ("om 21 uur", "à 9 heures", "a las 9 horas", "alle ore 9").
var clockHourWords = map[string]bool{"uur": true, "heures": true, "heure": true, "horas": true, "hora": true, "ore": true}

// hourNear reads x as an hour, in the half of the day nearest to ref
// (minutes since midnight).
func hourNear(x, ref float64) (float64, bool) {
	if x < 0 || x > 24 || x != math.Floor(x) {
		return 0, false
	}
	t := x * 60
	if x < 12 && math.Abs(t+720-ref) < math.Abs(t-ref) {
		t += 720
	}
	return t, true
}

// negators that mark the old value: "not 20", "nicht 30", "pas 19h".
func isNegWord(t tok) bool {
	switch t.low {
	case "not", "nicht", "no", "pas", "niet", "non", "nao", "isn't", "wasn't", "nt", "never", "geen", "kein", "keine", "ni", "nem", "nemmeno", "neither", "instead", "nn":
		return true
	}
	return false
}

// direction words of computed corrections.
var (
	dirUp = map[string]bool{"more": true, "higher": true, "longer": true, "later": true, "up": true, "pricier": true,
		"bigger": true, "larger": true, "over": true, "plus": true, "add": true, "added": true, "short": true, "increased": true, "raised": true,
		"mehr": true, "hoher": true, "langer": true, "spater": true, "teurer": true, "grosser": true, "dazu": true, "zusatzlich": true,
		"mas": true, "mayor": true, "despues": true, "caro": true, "tarde": true, "tard": true, "cher": true,
		"piu": true, "dopo": true, "mais": true, "depois": true, "meer": true, "duurder": true, "hoger": true,
		"after": true, "afterwards": true, "danach": true, "nachher": true, "apres": true, "erna": true, "daarna": true}
	dirDown = map[string]bool{"less": true, "lower": true, "shorter": true, "earlier": true, "cheaper": true, "down": true, "off": true,
		"minus": true, "smaller": true, "fewer": true, "knocked": true, "reduced": true, "dropped": true, "sooner": true,
		"weniger": true, "niedriger": true, "kurzer": true, "fruher": true, "billiger": true, "gunstiger": true, "kleiner": true,
		"menos": true, "menor": true, "antes": true, "temprano": true, "barato": true, "moins": true, "meno": true,
		"prima": true, "presto": true, "cedo": true, "minder": true, "eerder": true, "vroeger": true, "goedkoper": true, "lager": true,
		"discount": true, "rabatt": true, "korting": true, "descuento": true, "remise": true, "reduction": true, "sconto": true, "desconto": true,
		"before": true, "beforehand": true, "vorher": true, "davor": true, "avant": true, "ervoor": true}
	factorWords = map[string]float64{"double": 2, "twice": 2, "doubled": 2, "triple": 3, "tripled": 3, "thrice": 3, "half": 0.5, "halved": 0.5,
		"doppelt": 2, "doppelte": 2, "doppelten": 2, "halb": 0.5, "halfte": 0.5, "dreifach": 3, "doble": 2, "mitad": 0.5,
		"moitie": 0.5, "doppio": 2, "meta": 0.5, "dobro": 2, "metade": 0.5, "dubbele": 2, "dubbel": 2, "helft": 0.5,
		"zweimal": 2, "dreimal": 3,
		"quarter": 0.25, "third": 1.0 / 3, "quadruple": 4, "quadrupled": 4, "halve": 0.5, "drittel": 1.0 / 3, "viertel": 0.25,
		"verdoppelt": 2, "verdreifacht": 3, "halbiert": 0.5, "vierfach": 4, "triplo": 3, "tripla": 3, "triplicado": 3,
		"tercio": 1.0 / 3, "cuarta": 0.25, "duplicado": 2, "doblado": 2, "tiers": 1.0 / 3, "quart": 0.25, "terzo": 1.0 / 3,
		"doppia": 2, "raddoppiato": 2, "triplicato": 3, "terco": 1.0 / 3, "dobrado": 2, "dupla": 2, "derde": 1.0 / 3, "kwart": 0.25,
		"verdubbeld": 2, "driedubbel": 3, "driedubbele": 3, "verdrievoudigd": 3, "gehalveerd": 0.5}
	timesWords = map[string]bool{"times": true, "mal": true, "veces": true, "fois": true, "volte": true, "vezes": true, "keer": true, "x": true}
	bothWords  = map[string]bool{"both": true, "beide": true, "beiden": true, "ambos": true, "ambas": true, "deux": true, "entrambi": true, "entrambe": true, "allebei": true}
	endWords   = map[string]bool{"close": true, "closes": true, "closing": true, "closed": true, "until": true, "till": true, "ends": true, "end": true, "finishes": true, "shuts": true, "stays": true, "stay": true,
		"schliesst": true, "schliessen": true, "bis": true, "cierra": true, "cierran": true, "hasta": true, "ferme": true, "ferment": true, "jusqu'a": true,
		"chiude": true, "chiudono": true, "fino": true, "fecha": true, "fecham": true, "ate": true, "sluit": true, "sluiten": true, "dichtgingen": true, "dicht": true, "tot": true}
	startWords = map[string]bool{"open": true, "opens": true, "opening": true, "start": true, "starts": true, "begin": true, "begins": true, "from": true,
		"offnet": true, "offnen": true, "ab": true, "abre": true, "abren": true, "ouvre": true, "ouvrent": true, "apre": true, "aprono": true,
		"abrem": true, "opent": true, "openen": true, "vanaf": true, "desde": true, "dalle": true, "das": true, "von": true}
	taxWords = map[string]bool{"tax": true, "taxes": true, "vat": true, "mwst": true, "steuer": true, "iva": true, "tva": true, "btw": true, "gst": true, "tip": true}
)

// genCandidates returns the correction candidates of comment c under the
// answer ai.
func genCandidates(c docInfo, ai answerInfo) []*cand {
	byCanon := map[string]*cand{}
	var order []string
	add := func(v value, src csource, spanLo, spanHi int, extra ...string) *cand {
		cn := v.canon()
		if cn == "" {
			return nil
		}
		key := NormalizeCorrection(cn)
		cd := byCanon[key]
		if cd == nil {
			cd = newCand(cn, v.kind, src)
			byCanon[key] = cd
			order = append(order, key)
		} else if src < cd.src && src != srcLegacy {
			cd.src = src
		}
		cd.set("src:" + csourceNames[src])
		cd.set("kind:" + v.kind.String())
		cd.set("sk:" + csourceNames[src] + ":" + v.kind.String())
		for _, e := range extra {
			cd.set(e)
		}
		if spanLo >= 0 {
			contextFeats(cd, c, spanLo, spanHi)
			cd.spans = append(cd.spans, spanLo)
		}
		// the value equals a value of the answer: the old value, or a
		// confirmation
		for _, a := range ai.vals {
			if NormalizeCorrection(a.canon()) == key {
				cd.set("eqans")
			}
		}
		if ai.qnums[cn] {
			cd.set("inq")
		}
		if spanLo >= 0 {
			for _, v := range c.vals {
				if v.lo != spanLo && c.toks[v.lo].sent == c.toks[spanLo].sent && ai.qnums[v.canon()] {
					cd.set("sentinq") // "and 20% of 80?": a follow-up on the question
				}
			}
		}
		return cd
	}

	nvals := 0
	for _, v := range c.vals {
		if v.kind != vStatus {
			nvals++
		}
	}
	for vi, v := range c.vals {
		var extra []string
		if v.flags&fBare != 0 {
			extra = append(extra, "bare")
		}
		if v.flags&fWordNum != 0 {
			extra = append(extra, "wordnum")
		}
		if v.flags&fArticle != 0 {
			extra = append(extra, "article")
		}
		if v.flags&fNoMonth != 0 {
			extra = append(extra, "nomonth")
		}
		if vi == len(c.vals)-1 {
			extra = append(extra, "lastval")
		}
		if vi == 0 {
			extra = append(extra, "firstval")
		}
		if len(c.vals) == 1 {
			extra = append(extra, "onlyval")
		}
		if v.kind == vNumber && v.a >= 1000 && v.a == math.Floor(v.a) && v.a < 100000 && !(v.a >= 1900 && v.a <= 2100) {
			extra = append(extra, "bignum")
		}
		if v.kind == vNumber && v.a >= 1900 && v.a <= 2100 && v.a == math.Floor(v.a) {
			extra = append(extra, "yearlike")
		}
		if v.kind == vStatus && statusFamily[v.text] == "ticket" && (!ai.hasStatus() || !ai.ticket) {
			continue // "open", "closed" of shops and lines are not statuses
		}
		nearest, nd := -1, math.Inf(1)
		for si, a := range ai.vals {
			if compatible(v, a) && v.a > 0 && a.a > 0 && (a.kind == vMoney || a.kind == vPercent || a.kind == vDuration || a.kind == vQuantity || a.kind == vNumber) {
				if dd := math.Abs(math.Log(v.a / a.a)); dd < nd {
					nearest, nd = si, dd
				}
			}
		}
		matched := false
		for si, a := range ai.vals {
			if !compatible(v, a) {
				continue
			}
			matched = true
			if si == nearest {
				extra = append(extra, "nearest")
			} else if nearest >= 0 {
				extra = append(extra, "notnearest")
			}
			for k, cv := range coerce(v, a) {
				src := srcStated
				if cv.kind != v.kind || v.kind == vNumber && v.flags&fBare != 0 && a.kind != vNumber {
					src = srcCoerced
				}
				if (a.kind == vTimeRange || a.kind == vDayRange) && (v.kind == vTime || v.kind == vWeekday || v.kind == vNumber) {
					src = srcRangeEnd
				}
				ex := append([]string{}, extra...)
				ex = append(ex, "slot:"+a.kind.String(), "slotidx:"+itoa(min(si, 3)))
				if (cv.kind == vTimeRange || cv.kind == vDayRange) && cv.a >= cv.b {
					continue // an end before its start
				}
				if src == srcRangeEnd {
					end := "start"
					if k == 1 || a.kind == vDayRange && k == 0 {
						end = "end"
					}
					if cue := endCue(c.toks, v.lo); cue != "" && cue != end {
						continue // "closes at 8pm" replaces the end only
					}
					ex = append(ex, "rangeend:"+end)
					if cue := endCue(c.toks, v.lo); cue != "" {
						if cue == end {
							ex = append(ex, "endcue:match")
						} else {
							ex = append(ex, "endcue:mismatch")
						}
					}
					// the nearer end
					ref := a.a
					if end == "end" {
						ref = a.b
					}
					other := a.b
					if end == "end" {
						other = a.a
					}
					cvx := v.a
					if v.kind == vNumber && a.kind == vTimeRange {
						cvx, _ = hourNear(v.a, ref)
					}
					if math.Abs(cvx-ref) <= math.Abs(cvx-other) {
						ex = append(ex, "nearer")
					}
					if a.kind == vDayRange && end == "end" && cvx > a.b {
						ex = append(ex, "extends")
					}
				}
				if ratioFar(cv, a) {
					ex = append(ex, "far")
				}
				if sameValue(cv, a) {
					ex = append(ex, "eqslot")
				}
				add(cv, src, v.lo, v.hi, ex...)
			}
		}
		if !matched && v.kind == vDuration && v.unit == "hour" && v.unit2 == "" && v.flags&fArticle == 0 && v.hi > v.lo && clockHourWords[c.toks[v.hi-1].low] {
			// "om 21 uur", "à 9 heures", "10 uur." under a time: the hour
			// word is also the clock's
			for si, a := range ai.vals {
				if a.kind != vTime {
					continue
				}
				if t, ok := hourNear(v.a, a.a); ok && t != a.a {
					ex := append(append([]string{}, extra...), "hourclock", "slot:time", "slotidx:"+itoa(min(si, 3)))
					add(value{kind: vTime, a: t}, srcCoerced, v.lo, v.hi, ex...)
				}
				break
			}
		}
		if !matched {
			ex := append(extra, "noslot")
			if !ai.hasText {
				ex = append(ex, "noanswer")
			}
			switch v.kind {
			case vStatus:
				if !ai.hasStatus() {
					ex = append(ex, "nostatusslot")
				}
				for _, n := range ai.negStatus {
					if n == v.text {
						ex = append(ex, "deniedbyanswer")
					}
				}
			}
			add(v, srcStated, v.lo, v.hi, ex...)
		}
	}
	// a unit named without a number: "It's kg", "Should be litres"
	inVal := make([]bool, len(c.toks))
	for _, v := range c.vals {
		for k := v.lo; k < v.hi && k < len(inVal); k++ {
			inVal[k] = true
		}
	}
	for i := 0; i < len(c.toks); i++ {
		if inVal[i] {
			continue
		}
		u, n := unitAt(c.toks, i)
		if n == 0 || u.kind != uQuantity || !u.word && len(c.toks[i].low) < 2 {
			continue
		}
		for _, a := range ai.vals {
			if a.kind == vQuantity && a.dim == u.dim && a.unit != u.canon {
				ex := []string{"slot:quantity"}
				if i > 0 && isNegWord(c.toks[i-1]) {
					ex = append(ex, "negbefore")
				}
				add(value{kind: vQuantity, a: a.a, unit: u.canon, dim: u.dim}, srcUnitSwap, i, i+n, ex...)
			}
		}
	}
	operands := computed(c, ai, add)
	operands = append(operands, exprCandidates(c, ai, add)...)
	for _, lo := range operands {
		for _, k := range order {
			cd := byCanon[k]
			if cd.src > srcRangeEnd {
				continue
			}
			for _, sp := range cd.spans {
				if sp == lo {
					cd.set("operand")
				}
			}
		}
	}
	// yes/no
	if ai.yesno != "" {
		opp := "no"
		if ai.yesno == "no" {
			opp = "yes"
		}
		cd := add(value{kind: vYesNo, text: opp}, srcYesNo, -1, -1, "ans:"+ai.yesno)
		if cd != nil {
			yesNoFeats(cd, c, ai)
		}
	}
	// names
	caps := false
	if r, n := capsRatio(c.text); n >= 4 && r > 0.8 {
		caps = true
	}
	spans := nameSpans(c.toks, caps, c.lang)
	if len(spans) == 0 && len(c.toks) > 0 && len(c.toks) <= 4 && len(ai.names) > 0 && !hasEvaluation(c.toks) {
		// a terse lower-case name: "canberra..."
		var words []string
		lo, hi := -1, -1
		inPhrase := phraseWords(c.toks)
		for k, t := range c.toks {
			if t.kind == tWord && !nameStop(t.low, c.lang) && len(t.low) > 2 && !inPhrase[k] {
				if lo < 0 {
					lo = k
				}
				hi = k + 1
				words = append(words, t.raw)
			}
		}
		if len(words) == 1 {
			spans = append(spans, nameSpan{lo: lo, hi: hi, text: titleCase(words[0])})
		}
	}
	if len(ai.names) == 0 && ai.hasText {
		spans = nil // names only correct names
	}
	type ansName struct{ neg bool }
	var ansNameSpans []ansName
	for _, sp := range nameSpans(c.toks, caps, c.lang) {
		f := fold(sp.text)
		for _, n := range ai.names {
			if n == f || wordsContain(n, f) {
				ansNameSpans = append(ansNameSpans, ansName{neg: negatedAt(c.toks, sp.lo)})
			}
		}
	}
	// the answer's own names (not the question's): the slot a name
	// correction fills
	ansSlot := false
	for _, n := range ai.names {
		if !ai.qnames[n] {
			ansSlot = true
		}
	}
	isNewName := func(f string) bool {
		if ai.qnames[f] {
			return false
		}
		for _, n := range ai.names {
			if n == f || wordsContain(n, f) || wordsContain(f, n) {
				return false
			}
		}
		return true
	}
	newNames := map[string]bool{}
	for _, sp := range spans {
		if f := fold(sp.text); isNewName(f) {
			newNames[f] = true
		}
	}
	for _, sp := range spans {
		overlap := false
		for k := sp.lo; k < sp.hi; k++ {
			if inVal[k] {
				overlap = true
			}
		}
		if overlap {
			continue
		}
		ex := []string{}
		f := fold(sp.text)
		if isNewName(f) {
			if len(newNames) == 1 {
				ex = append(ex, "new&only")
			}
			if ansSlot {
				ex = append(ex, "new&ansslot")
			}
			// the name's sentence speaks of the question's subject ("the
			// capital is Brasilia")
			for k := 0; k < len(c.toks); k++ {
				if c.toks[k].sent == c.toks[sp.lo].sent && (k < sp.lo || k >= sp.hi) && ai.qwords[c.toks[k].low] {
					ex = append(ex, "new&qword")
					break
				}
			}
		}
		for _, n := range ai.names {
			if n == f {
				ex = append(ex, "eqname")
			} else if wordsContain(n, f) || wordsContain(f, n) {
				ex = append(ex, "partname")
			}
		}
		if ai.qnames[f] {
			ex = append(ex, "inq")
		}
		if len(ai.names) == 0 {
			ex = append(ex, "noansname")
		}
		isNew := !ai.qnames[f]
		for _, n := range ai.names {
			if n == f || wordsContain(n, f) || wordsContain(f, n) {
				isNew = false
			}
		}
		if isNew {
			ex = append(ex, "newname")
			// the name is also written in lower case elsewhere: a word
			for _, t := range c.toks {
				if t.kind == tWord && !t.upper && t.low == f {
					ex = append(ex, "lowerelsewhere")
				}
			}
		}
		if caps {
			ex = append(ex, "capstext")
		}
		if strings.Count(sp.text, " ") > 0 {
			ex = append(ex, "multiword")
		}
		if sp.lo == 0 || c.toks[sp.lo-1].sent != c.toks[sp.lo].sent {
			ex = append(ex, "sentinit")
		}
		for k := sp.lo - 1; k >= 0 && k >= sp.lo-2 && c.toks[k].sent == c.toks[sp.lo].sent; k-- {
			if copulas2[c.toks[k].low] {
				ex = append(ex, "copula")
			}
		}
		if isNew {
			// a new name where the answer's is denied ("Canberra, not
			// Sydney"), after a copula ("it's Canberra"), in a terse
			// comment or in a question
			for _, an := range ansNameSpans {
				ex = append(ex, "new&ansname")
				if an.neg {
					ex = append(ex, "new&ansdenied")
				}
			}
			for _, e := range ex {
				if e == "copula" {
					ex = append(ex, "new&copula")
					break
				}
			}
			if c.words <= 4 {
				ex = append(ex, "new&terse")
			}
		}
		add(value{kind: vName, text: sp.text}, srcName, sp.lo, sp.hi, ex...)
	}
	// the English sentence patterns
	if ai.hasText {
		// the answer types the values; the English patterns are for
		// comments read without one
	} else if ex := extractCorrection(c.text); ex.value != "" {
		key := NormalizeCorrection(ex.value)
		if cd, ok := byCanon[key]; ok {
			cd.set("legacy")
		} else {
			// the pattern's value typed by the parser
			lt := lex(ex.value)
			vs := parseValues(lt, ai.ctx)
			found := false
			if len(vs) == 1 && vs[0].lo == 0 && vs[0].hi == len(lt) {
				if cd, ok := byCanon[NormalizeCorrection(vs[0].canon())]; ok {
					cd.set("legacy")
					found = true
				}
				for _, a := range ai.vals {
					if compatible(vs[0], a) {
						for _, cv := range coerce(vs[0], a) {
							if cd, ok := byCanon[NormalizeCorrection(cv.canon())]; ok {
								cd.set("legacy")
								found = true
							}
						}
					}
				}
			}
			if !found {
				cd := add(value{kind: vText, text: ex.value}, srcLegacy, -1, -1, "legacyonly")
				if cd != nil {
					cd.set("legacy")
					if ex.weak {
						cd.set("legacyweak")
					}
				}
			}
		}
	}
	// what the comment says after a candidate: a retraction ("oh wait",
	// "my bad"; a ranker feature) or, in a later sentence, the answer's own
	// value restated with approval ("30 Tage stimmt"): then the candidate
	// was taken back and is dropped (GUIDE.md: the final position counts)
	var retractAt, ansAt []int
	approve := map[int]bool{}  // sentences with an approving or retracting word
	objected := map[int]bool{} // sentences with a negation or "wrong"
	for i := 0; i < len(c.toks); {
		cl, n := lexMatch(c.toks, i)
		if n == 0 {
			i++
			continue
		}
		if cl&lRetract != 0 {
			retractAt = append(retractAt, i)
		}
		if cl&(lRight|lPos|lRetract|lAck) != 0 {
			approve[c.toks[i].sent] = true
		}
		if cl&(lNegator|lWrong|lDoubt) != 0 {
			objected[c.toks[i].sent] = true
		}
		i += n
	}
	// the answer's value restated with approval: "30 Tage stimmt",
	// "391 it is, sorry", "Adults 206. Good."
	approved := func(at int) bool {
		s := c.toks[at].sent
		return !objected[s] && (approve[s] || approve[s+1] && !objected[s+1])
	}
	for _, v := range c.vals {
		for _, a := range ai.vals {
			if !compatible(v, a) {
				continue
			}
			for _, cv := range coerce(v, a) {
				if sameValue(cv, a) && approved(v.lo) {
					ansAt = append(ansAt, v.lo)
				}
			}
		}
	}
	for _, e := range c.exprs {
		v := e.exprValue()
		if e.result >= 0 {
			v = c.vals[e.result]
		}
		for _, a := range ai.vals {
			if compatible(v, a) {
				for _, cv := range coerce(v, a) {
					if sameValue(cv, a) && approved(e.lo) {
						ansAt = append(ansAt, e.lo)
					}
				}
			}
		}
	}
	after := func(cd *cand, at []int, laterSent bool) bool {
		if len(cd.spans) == 0 {
			return false
		}
		last := cd.spans[0]
		for _, sp := range cd.spans {
			last = max(last, sp)
		}
		for _, p := range at {
			if p > last && (!laterSent || c.toks[p].sent > c.toks[last].sent) {
				return true
			}
		}
		return false
	}
	out := make([]*cand, 0, len(order))
	for _, k := range order {
		cd := byCanon[k]
		if !cd.has("eqans") {
			if after(cd, retractAt, false) {
				cd.set("retract_after")
			}
			if after(cd, ansAt, true) {
				cd.set("ans_after")
				continue // the final position counts (GUIDE.md)
			}
		}
		cd.setv("nvals", math.Min(float64(nvals), 6)/6)
		out = append(out, cd)
	}
	return out
}

func (ai answerInfo) hasStatus() bool {
	for _, v := range ai.vals {
		if v.kind == vStatus {
			return true
		}
	}
	return false
}

// ticketWords name the things that have ticket statuses.
var ticketWords = map[string]bool{"ticket": true, "case": true, "request": true, "issue": true, "claim": true, "complaint": true,
	"incident": true, "query": true, "anfrage": true, "fall": true, "reklamation": true, "caso": true, "solicitud": true,
	"incidencia": true, "reclamacion": true, "demande": true, "dossier": true, "reclamation": true, "richiesta": true,
	"pratica": true, "segnalazione": true, "chamado": true, "pedido": false, "solicitacao": true, "aanvraag": true,
	"melding": true, "klacht": true, "zaak": true}

func mentionsTicket(toks []tok) bool {
	for _, t := range toks {
		if ticketWords[t.low] {
			return true
		}
	}
	return false
}

// negatedAt reports a negation just before toks[i] ("has not been
// cancelled", "nicht versandt").
func negatedAt(toks []tok, i int) bool {
	for k := i - 1; k >= 0 && k >= i-3; k-- {
		if toks[k].sent != toks[i].sent {
			return false
		}
		if isNegWord(toks[k]) || strings.HasSuffix(toks[k].low, "n't") {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	if n >= 0 && n < 10 {
		return string(rune('0' + n))
	}
	return "n"
}

// ratioFar: a comment number far from the answer's (an order number, a
// count of something else).
func ratioFar(c, a value) bool {
	switch a.kind {
	case vMoney, vPercent, vDuration, vQuantity, vNumber:
		if a.a == 0 || c.a == 0 {
			return false
		}
		r := c.a / a.a
		return r > 8 || r < 0.125
	}
	return false
}

// endCue says whether the words before toks[at] point at the start
// ("opens at") or the end ("closes at", "until") of a range.
func endCue(toks []tok, at int) string {
	for k := at - 1; k >= 0 && k >= at-4; k-- {
		if toks[k].sent != toks[at].sent {
			break
		}
		if endWords[toks[k].low] {
			return "end"
		}
		if startWords[toks[k].low] {
			if k > 0 && (toks[k-1].low == "stays" || toks[k-1].low == "stay" || toks[k-1].low == "staying" || toks[k-1].low == "remains" || toks[k-1].low == "remain" || toks[k-1].low == "open") {
				return "end" // "stays open later"
			}
			return "start"
		}
	}
	return ""
}

// sortCands orders candidates by score, best first (stable).
func sortCands(cs []*cand, score []float64) {
	idx := make([]int, len(cs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	tmp := append([]*cand{}, cs...)
	tmps := append([]float64{}, score...)
	for k, i := range idx {
		cs[k], score[k] = tmp[i], tmps[i]
	}
}
