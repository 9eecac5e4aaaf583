package feedback

import (
	"math"
	"strconv"
	"strings"
)

// computed adds the candidates computed from the answer's values and
// returns the first tokens of the amounts it used (an amount is an
// operand, not the right value).
func computed(c docInfo, ai answerInfo, add func(value, csource, int, int, ...string) *cand) (operands []int) {
	toks := c.toks
	if len(ai.vals) == 0 {
		return nil
	}
	numeric := func(k vkind) bool {
		switch k {
		case vMoney, vPercent, vDuration, vDurRange, vQuantity, vNumber, vTime, vTimeRange, vDate:
			return true
		}
		return false
	}
	// factors: "double that", "half as long", "three times that"; not the
	// "half" of "half an hour", "half past nine"
	inVal := make([]bool, len(toks))
	for _, v := range c.vals {
		for k := v.lo; k < v.hi && k < len(toks); k++ {
			inVal[k] = true
		}
	}
	for i, t := range toks {
		if inVal[i] {
			continue
		}
		f, ok := factorWords[t.low]
		if t.low == "times" || timesWords[t.low] && t.low != "x" {
			if i > 0 {
				if x, _, fl, ok2 := readNum(toks, i-1, c.lang); ok2 && fl&fArticle == 0 && x >= 2 && x <= 10 {
					f, ok = x, true
				}
			}
		}
		if t.low == "x" && i+1 < len(toks) && toks[i+1].kind == tNum && !toks[i+1].gap {
			if x, _, _ := parseDigits(toks[i+1].raw, "en"); x >= 2 && x <= 10 {
				f, ok = x, true
			}
		}
		if !ok {
			continue
		}
		for si, a := range ai.vals {
			if !numeric(a.kind) || a.kind == vTime || a.kind == vTimeRange || a.kind == vDate {
				continue
			}
			v := a
			v.a *= f
			if a.kind == vDurRange || a.kind == vNumRange {
				v.b *= f
			}
			if a.kind == vDuration && v.a != math.Floor(v.a) {
				continue
			}
			add(v, srcComputed, i, i+1, "op:factor", "slot:"+a.kind.String(), "slotidx:"+itoa(min(si, 3)))
		}
	}
	// tax: "you forgot the 8% tax", "plus 20% VAT"
	for _, v := range c.vals {
		if v.kind != vPercent {
			continue
		}
		isTax := false
		for k := v.hi; k < len(toks) && k <= v.hi+2; k++ {
			if taxWords[toks[k].low] {
				isTax = true
			}
		}
		if !isTax {
			continue
		}
		for si, a := range ai.vals {
			if a.kind == vMoney {
				r := a
				r.a = math.Round(a.a*(1+v.a/100)*100) / 100
				add(r, srcComputed, v.lo, v.hi, "op:tax", "slot:money", "slotidx:"+itoa(min(si, 3)))
				operands = append(operands, v.lo)
			}
		}
	}
	plusDur := map[int]bool{} // durations added to a time or date of the comment
	// a time or a date of the comment plus a duration: "8:40 plus 2 h 35
	// min", "3. Mai plus 14 Tage", "9:15 + 45 minutes"
	for vi := 0; vi+1 < len(c.vals); vi++ {
		t, d := c.vals[vi], c.vals[vi+1]
		if t.kind != vTime && t.kind != vDate || d.kind != vDuration || d.lo-t.hi != 1 {
			continue
		}
		switch toks[t.hi].low {
		case "plus", "+", "mas", "piu", "mais":
		default:
			continue
		}
		for si, a := range ai.vals {
			if a.kind != t.kind {
				continue
			}
			r := t
			switch t.kind {
			case vTime:
				m := durMinutes(d.a, d.unit) + durMinutes(d.a2, d.unit2)
				if m <= 0 {
					continue
				}
				r.a = math.Mod(t.a+m, 1440)
			case vDate:
				n := durMinutes(d.a, d.unit) / 1440
				if n <= 0 || n != math.Floor(n) || t.m == 0 {
					continue
				}
				if r.y == 0 || r.flags&fNoYear != 0 {
					r.y = a.y
				}
				r.y, r.m, r.d = addDays(r.y, r.m, r.d, int(n))
			}
			add(r, srcComputed, t.lo, d.hi, "op:plusdur", "slot:"+a.kind.String(), "slotidx:"+itoa(min(si, 3)))
			operands = append(operands, t.lo, d.lo)
			plusDur[d.lo] = true
			break
		}
	}
	// additive: an amount next to a direction word
	for _, v := range c.vals {
		if plusDur[v.lo] {
			continue
		}
		var amt float64
		var aunit string
		switch v.kind {
		case vMoney:
			amt, aunit = v.a, "money"
		case vDuration:
			amt, aunit = v.a, v.unit
		case vPercent:
			amt, aunit = v.a, "percent"
		case vNumber:
			if v.a > 1000 {
				continue
			}
			amt, aunit = v.a, ""
		case vQuantity:
			amt, aunit = v.a, "q:"+v.unit
		default:
			continue
		}
		isBase := false
		for _, a := range ai.vals {
			if a.kind == v.kind && a.a == v.a || v.kind == vNumber && a.a == v.a {
				isBase = true
			}
		}
		if isBase {
			continue
		}
		dir, both, cue := 0, false, ""
		// after the amount: "a dollar more", "an hour earlier", "zwei euro weniger", "R$ 5 mais caro"
		for k := v.hi; k < len(toks) && k <= v.hi+2 && toks[k].sent == toks[v.lo].sent; k++ {
			w := toks[k].low
			if w == "de" || w == "in" || w == "per" || w == "por" || w == "a" || w == "an" || w == "the" || w == "euro" || w == "euros" || w == "dollars" || w == "day" || w == "days" {
				continue
			}
			if w == "plus" && c.lang == "fr" {
				dir = 1
				if k+1 < len(toks) && toks[k+1].low == "tard" {
					cue = "later"
				}
				if k+1 < len(toks) && (toks[k+1].low == "tot" || toks[k+1].low == "court" || toks[k+1].low == "courte" || toks[k+1].low == "bas") {
					dir, cue = -1, "earlier" // "plus tôt", "plus court"
				}
				break
			}
			if comparativeWords[w] && k+1 < len(toks) && toks[k+1].sent == toks[v.lo].sent {
				// "plus tôt", "más barato", "più presto", "mais cedo", "meer dan"
				if nx := toks[k+1].low; dirDown[nx] && !comparativeWords[nx] || nx == "tot" || nx == "court" || nx == "courte" || nx == "corto" || nx == "curto" || nx == "bas" || nx == "bajo" || nx == "basso" || nx == "baixo" {
					dir, cue = -1, nx
					break
				}
			}
			if w == "mais" && c.lang != "pt" || w == "mas" && c.lang != "es" || w == "prima" && c.lang != "it" {
				continue
			}
			if forgotWords[w] {
				dir, cue = 1, "forgot"
				break
			}
			if dirUp[w] {
				dir = 1
				cue = w
				break
			}
			if dirDown[w] {
				dir = -1
				cue = w
				break
			}
			if w == "more" || w == "mehr" {
				dir = 1
				break
			}
		}
		// before the amount: "add two days", "up by $5", "went up by", "plus", "knocked a dollar off";
		// not "gone up to $5.99", "auf 5 € gestiegen": that amount is the new value
		if dir == 0 && v.lo > 0 && targetWords[toks[v.lo-1].low] {
			continue
		}
		if dir == 0 {
			for k := v.lo - 1; k >= 0 && k >= v.lo-3 && toks[k].sent == toks[v.lo].sent; k-- {
				w := toks[k].low
				if w == "add" || w == "added" {
					// "add two days to both ends", "add ten to the percentage"
					if k2 := v.hi; k2 < len(toks) && (toks[k2].low == "to" || k2+1 < len(toks) && toks[k2+1].low == "to") {
						dir = 1
						cue = w
					}
					break
				}
				if w == "plus" && k == v.lo-1 || w == "+" || w == "up" || w == "increased" || w == "raised" || riseVerbs[w] {
					dir = 1
					cue = w
					break
				}
				if forgotWords[w] {
					dir, cue = 1, "forgot"
					break
				}
				if w == "minus" || w == "down" || w == "knocked" || w == "reduced" || w == "dropped" || w == "cut" || fallVerbs[w] {
					dir = -1
					cue = w
					break
				}
			}
			if dir == 0 && v.hi < len(toks) && toks[v.hi].low == "off" {
				dir = -1
				cue = "off"
			}
		}
		if dir == 0 {
			continue
		}
		operands = append(operands, v.lo)
		for k := v.lo; k < len(toks) && k <= v.hi+8 && toks[k].sent == toks[v.lo].sent; k++ {
			if bothWords[toks[k].low] {
				both = true
			}
		}
		endcue := endCue(toks, v.lo)
		if endcue == "" {
			for k := v.lo - 1; k >= 0 && k > v.lo-30 && toks[k].sent == toks[v.lo].sent; k-- {
				if endWords[toks[k].low] {
					endcue = "end"
					break
				}
				if startWords[toks[k].low] {
					endcue = "start"
					break
				}
			}
		}
		for si, a := range ai.vals {
			base := []string{"op:add", "slot:" + a.kind.String(), "slotidx:" + itoa(min(si, 3)), "cue:" + cue}
			d := float64(dir)
			switch {
			case a.kind == vMoney && (aunit == "money" || aunit == ""):
				r := a
				r.a = math.Round((a.a+d*amt)*100) / 100
				if r.a > 0 {
					add(r, srcComputed, v.lo, v.hi, append(base, "amt:"+aunit)...)
				}
			case aunit == "percent" && (a.kind == vMoney || a.kind == vNumber || a.kind == vQuantity || a.kind == vDuration):
				// "20% more", "10% off", "15 % günstiger"
				r := a
				r.a = a.a * (1 + d*amt/100)
				if a.kind == vMoney {
					r.a = math.Round(r.a*100) / 100
				} else {
					r.a = math.Round(r.a*1000) / 1000
				}
				if r.a > 0 && (a.kind != vDuration || r.a == math.Floor(r.a)) {
					add(r, srcComputed, v.lo, v.hi, append(base, "amt:pctof")...)
				}
			case a.kind == vQuantity && strings.HasPrefix(aunit, "q:"):
				if aunit[2:] != a.unit {
					continue
				}
				r := a
				r.a = a.a + d*amt
				if r.a > 0 {
					add(r, srcComputed, v.lo, v.hi, append(base, "amt:q")...)
				}
			case a.kind == vPercent && (aunit == "percent" || aunit == ""):
				r := a
				r.a = a.a + d*amt
				if r.a > 0 {
					add(r, srcComputed, v.lo, v.hi, append(base, "amt:"+aunit)...)
				}
			case (a.kind == vTime || a.kind == vTimeRange) && (aunit == "hour" || aunit == "minute"):
				m := amt
				if aunit == "hour" {
					m *= 60
				}
				if a.kind == vTime {
					r := a
					r.a = a.a + d*m
					add(r, srcComputed, v.lo, v.hi, base...)
					continue
				}
				whichs := []string{"start", "end", "both"}
				switch {
				case both:
					whichs = []string{"both"}
				case endcue != "":
					whichs = []string{endcue}
				}
				for _, which := range whichs {
					r := a
					if which != "end" {
						r.a = a.a + d*m
					}
					if which != "start" {
						r.b = a.b + d*m
					}
					ex := append(base, "which:"+which)
					if which == endcue || both && which == "both" {
						ex = append(ex, "whichcue")
					}
					add(r, srcComputed, v.lo, v.hi, ex...)
				}
			case a.kind == vDate && (aunit == "day" || aunit == "week"):
				n := amt
				if aunit == "week" {
					n *= 7
				}
				r := a
				r.y, r.m, r.d = addDays(a.y, a.m, a.d, int(d*n))
				add(r, srcComputed, v.lo, v.hi, base...)
			case a.kind == vDuration && aunit != "" && durFactor(aunit, a.unit) > 0 && !sameDurUnit(aunit, a.unit):
				// "two weeks longer" than 10 days: 24 days
				r := a
				r.a = a.a + d*amt*durFactor(aunit, a.unit)
				if r.a > 0 && r.a == math.Floor(r.a) {
					add(r, srcComputed, v.lo, v.hi, append(base, "amt:conv")...)
				}
			case (a.kind == vDuration || a.kind == vDurRange) && (aunit == "" || sameDurUnit(aunit, a.unit)):
				if a.kind == vDuration {
					r := a
					r.a = a.a + d*amt
					if r.a > 0 {
						add(r, srcComputed, v.lo, v.hi, append(base, "amt:"+aunit)...)
					}
					continue
				}
				whichs := []string{"end", "both"}
				if both {
					whichs = []string{"both"}
				}
				for _, which := range whichs {
					r := a
					r.b = a.b + d*amt
					if which == "both" {
						r.a = a.a + d*amt
					}
					ex := append(base, "which:"+which)
					if both == (which == "both") {
						ex = append(ex, "whichcue")
					}
					add(r, srcComputed, v.lo, v.hi, ex...)
				}
			case (a.kind == vNumber || a.kind == vQuantity) && aunit == "":
				r := a
				r.a = a.a + d*amt
				add(r, srcComputed, v.lo, v.hi, append(base, "amt:")...)
			}
		}
	}
	// a miscount: "you counted five lessons, not six", "Son doce meses, no
	// diez", "Hai contato solo due persone" (three in the question): the
	// answer's total scales by one count over the other. Both ways are
	// candidates; the ranker reads which count is negated or counted.
	type count struct {
		x            float64
		at           int // token in the comment, or -1
		neg, counted bool
	}
	var cc, oc []count
	for _, v := range c.vals {
		if v.kind != vNumber || v.a != math.Floor(v.a) || v.a < 2 || v.a > 31 {
			continue
		}
		ct := count{x: v.a, at: v.lo, neg: negatedAt(toks, v.lo)}
		for k := v.lo - 1; k >= 0 && k >= v.lo-3 && toks[k].sent == toks[v.lo].sent; k-- {
			if countedWords[toks[k].low] {
				ct.counted = true
			}
		}
		cc = append(cc, ct)
	}
	for _, a := range ai.vals {
		if a.kind == vNumber && a.a == math.Floor(a.a) && a.a >= 2 && a.a <= 31 {
			oc = append(oc, count{x: a.a, at: -1})
		}
	}
	for q := range ai.qnums {
		if x, err := strconv.ParseFloat(q, 64); err == nil && x == math.Floor(x) && x >= 2 && x <= 31 {
			oc = append(oc, count{x: x, at: -1})
		}
	}
	if len(cc) > 0 && len(c.vals) <= 3 {
		for _, x := range cc {
			for _, y := range append(append([]count{}, cc...), oc...) {
				if y.x == x.x {
					continue
				}
				for si, a := range ai.vals {
					if a.kind != vMoney && a.kind != vDuration && a.kind != vQuantity || a.a <= 0 {
						continue
					}
					r := a
					r.a = a.a * y.x / x.x
					if a.kind == vMoney {
						r.a = math.Round(r.a*100) / 100
					} else if r.a != math.Floor(r.a) {
						continue
					}
					ex := []string{"op:recount", "slot:" + a.kind.String(), "slotidx:" + itoa(min(si, 3))}
					if x.neg {
						ex = append(ex, "recount:negx")
					}
					if y.neg {
						ex = append(ex, "recount:negy")
					}
					if x.counted {
						ex = append(ex, "recount:countedx")
					}
					if y.at < 0 {
						ex = append(ex, "recount:yout")
					}
					if y.x > x.x {
						ex = append(ex, "recount:up")
					}
					add(r, srcComputed, x.at, x.at+1, ex...)
				}
			}
		}
	}
	// "off by N" has no direction and is left to the stated candidates
	return operands
}

// countedWords say that the answer counted a number ("you counted five",
// "vous avez compté deux jours").
var countedWords = map[string]bool{"counted": true, "count": true, "gezahlt": true, "gerechnet": true, "contado": true, "contaste": true,
	"compte": true, "contato": true, "calcolato": true, "contou": true, "geteld": true, "gerekend": true, "only": true, "solo": true,
	"nur": true, "seulement": true, "apenas": true, "maar": true, "alleen": true}

// riseVerbs and fallVerbs say that an amount went up or down, or a time
// moved later or earlier, by the amount after them ("subió 3 euros", "è
// salito di 2 €", "baixou 5 reais", "avancé d'une heure");
// "subió a 15 euros" names the new value (targetWords).
var riseVerbs = map[string]bool{"retarde": true, "retardee": true, "retrasado": true, "retrasada": true, "posticipato": true,
	"posticipata": true, "adiado": true, "adiada": true, "uitgesteld": true, "rose": true, "subio": true, "subiu": true, "aumento": true, "aumentou": true, "augmente": true,
	"aumentato": true, "salito": true, "salita": true, "verhoogd": true, "gestegen": true, "erhoht": true}
var fallVerbs = map[string]bool{"avance": true, "avancee": true, "adelantado": true, "adelantada": true, "anticipato": true, "anticipata": true,
	"antecipado": true, "antecipada": true, "vorverlegt": true, "vervroegd": true, "fell": true, "bajo": true, "bajaron": true, "baixou": true, "baisse": true, "sceso": true,
	"scesa": true, "calato": true, "gedaald": true, "verlaagd": true, "gesenkt": true, "gesunken": true}

// durMinutes is a duration of a clock or calendar unit in minutes (0 for
// months, years and business days, which have no fixed length).
func durMinutes(x float64, unit string) float64 {
	switch unit {
	case "minute":
		return x
	case "hour":
		return 60 * x
	case "day":
		return 1440 * x
	case "week":
		return 7 * 1440 * x
	}
	return 0
}

// durFactor is how many of unit to one from (0 when they do not convert
// exactly: months and years in days).
func durFactor(from, to string) float64 {
	m := map[string]float64{"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
	a, b := m[from], m[to]
	if a == 0 || b == 0 || a < b {
		return 0
	}
	return a / b
}

// targetWords introduce the value a change arrives at ("up to $5.99").
var targetWords = map[string]bool{"to": true, "auf": true, "naar": true, "a": true, "para": true, "jusqu'a": true}

// comparativeWords make a comparative of the next word ("plus tôt",
// "más barato", "più presto", "mais cedo").
var comparativeWords = map[string]bool{"plus": true, "mas": true, "piu": true, "mais": true, "more": true}

// forgotWords: an amount the answer left out ("you forgot the $5
// shipping", "die 5 € Versand vergessen").
var forgotWords = map[string]bool{"forgot": true, "forgotten": true, "forgetting": true, "vergessen": true, "olvidaste": true, "olvidado": true,
	"olvidas": true, "oublie": true, "oublies": true, "dimenticato": true, "dimenticati": true, "dimentichi": true, "esqueceu": true,
	"esqueceste": true, "esquecido": true, "vergeten": true}

func sameDurUnit(a, b string) bool {
	norm := func(u string) string {
		if u == "business day" {
			return "day"
		}
		return u
	}
	return norm(a) == norm(b)
}

// addDays moves a date by n days.
func addDays(y, m, d, n int) (int, int, int) {
	dim := func(y, m int) int {
		switch m {
		case 2:
			if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
				return 29
			}
			return 28
		case 4, 6, 9, 11:
			return 30
		}
		return 31
	}
	if m < 1 || m > 12 {
		return y, m, d
	}
	d += n
	for d > dim(y, m) {
		d -= dim(y, m)
		m++
		if m > 12 {
			m, y = 1, y+1
		}
	}
	for d < 1 {
		m--
		if m < 1 {
			m, y = 12, y-1
		}
		d += dim(y, m)
	}
	return y, m, d
}

// exprCandidates adds the results of the comment's own arithmetic: the
// value it states as the result ("17 × 23 = 391") is marked, and an
// expression without a stated result adds its value, typed by the
// answer's values like a stated number. It returns the operands' first
// tokens.
func exprCandidates(c docInfo, ai answerInfo, add func(value, csource, int, int, ...string) *cand) (operands []int) {
	for _, e := range c.exprs {
		operands = append(operands, e.operands...)
		if e.result >= 0 {
			r := c.vals[e.result]
			cd := add(r, srcStated, r.lo, r.hi, "exprres")
			if cd != nil && math.Abs(r.a-e.exprValue().a) < 0.005 {
				cd.set("exprres_ok")
			}
			continue
		}
		v := e.exprValue()
		matched := false
		for si, a := range ai.vals {
			if !compatible(v, a) || a.kind == vTime || a.kind == vTimeRange || a.kind == vDate || a.kind == vNumRange || e.pctOf && a.kind == vPercent {
				continue
			}
			for _, cv := range coerce(v, a) {
				if cv.kind == vTimeRange || cv.kind == vDayRange || cv.kind == vDurRange {
					continue
				}
				matched = true
				add(cv, srcComputed, e.lo, e.hi, "op:expr", "slot:"+a.kind.String(), "slotidx:"+itoa(min(si, 3)))
			}
		}
		if !matched {
			add(v, srcComputed, e.lo, e.hi, "op:expr", "noslot")
		}
	}
	return operands
}
