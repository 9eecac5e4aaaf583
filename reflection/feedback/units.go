package feedback

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
)

// Units, currencies, number words, months, weekdays and statuses in the
// seven languages, as the value parser reads them. Keys are folded.

// ukind is the class of a unit word.
type ukind uint8

const (
	uNone ukind = iota
	uCurrency
	uCents // a hundredth of the context's currency
	uPercent
	uDuration
	uQuantity
	uTimeSuffix // am, pm, Uhr, h, o'clock
	uDegree     // "degrees", "Grad": a temperature whose scale comes from context
)

// unit is one entry of the unit table.
type unit struct {
	kind ukind
	// canon: currency code (USD, EUR, GBP, BRL, CHF, CAD, ...), duration
	// unit (second, minute, hour, day, business day, week, month, year),
	// quantity symbol (cm, kg, mL, °C, km/h, ...), time suffix (am, pm,
	// 24, h).
	canon string
	// dim: the dimension of a quantity (length, mass, volume, temp, speed).
	dim string
	// mult: for durations, a count implied by the word ("fortnight": 2
	// weeks); 0 otherwise.
	mult float64
	// word: written as a word rather than a symbol.
	word bool
	// ambiguous words need the context to decide ("pounds": GBP or lb).
	alt *unit
}

var unitTable = map[string][]unitEntry{}

type unitEntry struct {
	words []string
	u     unit
}

func addUnits(u unit, list string) {
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		ws := splitUnitWords(item)
		e := unitEntry{words: ws, u: u}
		e.u.word = isLetters(ws[0])
		ps := append(unitTable[ws[0]], e)
		for j := len(ps) - 1; j > 0 && len(ps[j].words) > len(ps[j-1].words); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
		unitTable[ws[0]] = ps
	}
}

// splitUnitWords splits a unit spelling the way lex tokenizes it.
func splitUnitWords(s string) []string {
	var out []string
	for _, t := range lex(s) {
		out = append(out, t.low)
	}
	return out
}

func isLetters(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z') {
			return false
		}
	}
	return s != ""
}

func init() {
	cur := func(code, list string) { addUnits(unit{kind: uCurrency, canon: code}, list) }
	cur("USD", "$, usd, us$, dollar, dollars, buck, bucks, dolar, dolares, dollaro, dollari, dolares americanos, dólar, dólares")
	cur("EUR", "€, eur, euro, euros, euri")
	cur("GBP", "£, gbp, quid, sterling, pounds sterling")
	cur("CHF", "chf, franc, francs, franken, franchi, franco, francos, swiss francs")
	cur("CAD", "cad, ca$, c$, canadian dollars, canadian dollar")
	cur("AUD", "aud, a$, australian dollars")
	cur("BRL", "brl, r$, real, reais")
	cur("JPY", "jpy, yen, ¥")
	cur("SEK", "sek")
	cur("MXN", "mxn, pesos")
	addUnits(unit{kind: uCents}, "cent, cents, ct, cts, centimes, centimos, centesimi, centavos, pence, penny, p")
	addUnits(unit{kind: uPercent, canon: "%"}, "%, percent, per cent, pct, persent, precent, percnt, procento, porciento, prozent, procent, por ciento, pour cent, pourcent, per cento, percento, por cento, percentage points, percentage point, prozentpunkte, puntos porcentuales, points de pourcentage, punti percentuali, pontos percentuais, procentpunten")
	dur := func(canon, list string) { addUnits(unit{kind: uDuration, canon: canon}, list) }
	dur("second", "second, seconds, sec, secs, sekunde, sekunden, segundo, segundos, seconde, secondes, secondo, secondi, seconden")
	dur("minute", "minute, minutes, min, mins, minuten, minuto, minutos, minuti, minuut")
	dur("hour", "hour, hours, hr, hrs, stunde, stunden, std, hora, horas, heure, heures, ora, ore, uur, uren")
	dur("day", "day, days, tag, tage, tagen, dia, dias, jour, jours, giorno, giorni, dag, dagen, dys, dayz")
	dur("business day", "business day, business days, working day, working days, work day, work days, workday, workdays, werktag, werktage, werktagen, arbeitstag, arbeitstage, arbeitstagen, dia habil, dias habiles, dia laborable, dias laborables, jour ouvre, jours ouvres, jour ouvrable, jours ouvrables, giorno lavorativo, giorni lavorativi, dia util, dias uteis, werkdag, werkdagen")
	dur("week", "week, weeks, woche, wochen, semana, semanas, semaine, semaines, settimana, settimane, weken")
	dur("month", "month, months, monat, monate, monaten, mes, meses, mois, mese, mesi, maand, maanden")
	dur("year", "year, years, yr, yrs, jahr, jahre, jahren, ano, anos, an, ans, annee, annees, anno, anni, jaar, jaren")
	addUnits(unit{kind: uDuration, canon: "week", mult: 2}, "fortnight")
	qty := func(canon, dim, list string) { addUnits(unit{kind: uQuantity, canon: canon, dim: dim}, list) }
	qty("mm", "length", "mm, millimetre, millimetres, millimeter, millimeters, milimetro, milimetros, millimetre, millimetri, millimetro")
	qty("cm", "length", "cm, centimetre, centimetres, centimeter, centimeters, zentimeter, centimetro, centimetros, centimetri")
	qty("m", "length", "m, metre, metres, meter, meters, metro, metros, metri")
	qty("km", "length", "km, kms, kilometre, kilometres, kilometer, kilometers, kilometro, kilometros, chilometro, chilometri, quilometro, quilometros, kilometern")
	qty("in", "length", "inch, inches, zoll, pulgada, pulgadas, pouce, pouces, pollice, pollici, polegada, polegadas, duim, \"")
	qty("ft", "length", "ft, foot, feet, fuss, pie, pies, pied, pieds, piede, piedi, pe, pes, voet")
	qty("mi", "length", "mi, mile, miles, meile, meilen, milla, millas, mille, milles, miglio, miglia, milha, milhas, mijl")
	qty("g", "mass", "g, gr, gram, grams, gramme, grammes, gramm, gramos, gramo, grammo, grammi, grama, gramas")
	qty("kg", "mass", "kg, kgs, kilo, kilos, kilogram, kilograms, kilogramme, kilogrammes, kilogramm, kilogramo, kilogramos, chilo, chili, chilogrammo, chilogrammi, quilo, quilos, quilograma, quilogramas")
	qty("oz", "mass", "oz, ounce, ounces, unze, unzen, onza, onzas, once, onces, onca, oncas")
	qty("lb", "mass", "lb, lbs, pfund, libra, libras, livre, livres, libbra, libbre, pond")
	qty("mL", "volume", "ml, millilitre, millilitres, milliliter, milliliters, mililitro, mililitros, millilitro, millilitri, mililiters")
	qty("cL", "volume", "cl, centilitre, centilitres, centiliter, centiliters")
	qty("L", "volume", "l, litre, litres, liter, liters, litro, litros, litri")
	qty("gal", "volume", "gal, gallon, gallons, gallone, galloni, galon, galones, galao, galoes")
	qty("fl oz", "volume", "fl oz, fl. oz, fl.oz, fluid ounce, fluid ounces")
	qty("°C", "temp", "°c, ° c, celsius, centigrade, °celsius")
	qty("°F", "temp", "°f, ° f, fahrenheit, °fahrenheit")
	qty("K", "temp", "kelvin")
	qty("km/h", "speed", "km/h, kmh, kph, km/u, km per hour, kilometres per hour, kilometers per hour, kilometer per uur, km/hr")
	qty("mph", "speed", "mph, miles per hour, mile per hour, mijl per uur, millas por hora, miglia orarie, milhas por hora, meilen pro stunde")
	addUnits(unit{kind: uDegree}, "degree, degrees, deg, °, grad, grado, grados, degre, degres, grau, graus, graden")
	ts := func(canon, list string) { addUnits(unit{kind: uTimeSuffix, canon: canon}, list) }
	ts("am", "am, a.m., a. m., a.m, in the morning, morning, du matin, de la manana, di mattina, del mattino, da manha, morgens, 's ochtends")
	ts("pm", "pm, p.m., p. m., p.m, in the evening, in the afternoon, at night, tonight, du soir, de l'apres-midi, de la tarde, de la noche, di sera, del pomeriggio, da tarde, da noite, abends, nachmittags, 's avonds, 's middags")
	ts("24", "uhr, o'clock, oclock")
	ts("h", "h")
	// pounds: money under a money context, weight otherwise
	lb := unit{kind: uQuantity, canon: "lb", dim: "mass", word: true}
	addUnits(unit{kind: uCurrency, canon: "GBP", alt: &lb}, "pound, pounds")
}

// unitAt returns the longest unit spelling that starts at toks[i] and the
// number of tokens it spans. Spellings of more than one token must not be
// split by a sentence end.
func unitAt(toks []tok, i int) (unit, int) {
	if i >= len(toks) {
		return unit{}, 0
	}
	w := toks[i].low
	for _, e := range unitTable[w] {
		if i+len(e.words) > len(toks) {
			continue
		}
		ok := true
		for k := 1; k < len(e.words); k++ {
			if toks[i+k].low != e.words[k] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		u := e.u
		// single letters are units only right after a number or with an
		// upper-case spelling of temperature scales
		if len(e.words) == 1 && len(w) == 1 && w != "$" && w != "€" && w != "£" && w != "%" && w != "°" && w != "¥" && w != "\"" {
			if w == "c" || w == "f" {
				continue // only "°C", "38C" (handled by the caller)
			}
		}
		return u, len(e.words)
	}
	return unit{}, 0
}

// number words: value and role.
type nword struct {
	v    float64
	role uint8 // 1 unit (0-9), 2 teen/tens (10-99), 3 hundred, 4 thousand, 5 million, 6 article ("a", "ein": 1 only before a unit)
}

var numberWords = map[string]nword{}

func init() {
	set := func(role uint8, v float64, list string) {
		for _, w := range strings.Split(list, ",") {
			w = strings.TrimSpace(fold(w))
			if w != "" {
				numberWords[w] = nword{v: v, role: role}
			}
		}
	}
	units := []string{
		"zero, null, cero, zero, nul",
		"one, eins, uno, un, une, um, een, één, unu",
		"two, zwei, zwo, dos, deux, due, dois, duas, twee",
		"three, drei, tres, trois, tre, três, drie",
		"four, vier, cuatro, quatre, quattro, quatro",
		"five, funf, fünf, cinco, cinq, cinque, vijf",
		"six, sechs, seis, six, sei, zes",
		"seven, sieben, siete, sept, sette, sete, zeven",
		"eight, acht, ocho, huit, otto, oito",
		"nine, neun, nueve, neuf, nove, negen",
	}
	for v, l := range units {
		set(1, float64(v), l)
	}
	teens := map[float64]string{
		10: "ten, zehn, diez, dix, dieci, dez, tien",
		11: "eleven, elf, once, onze, undici",
		12: "twelve, zwolf, zwölf, doce, douze, dodici, doze, twaalf, dozen",
		13: "thirteen, dreizehn, trece, treize, tredici, treze, dertien",
		14: "fourteen, vierzehn, catorce, quatorze, quattordici, catorze, veertien",
		15: "fifteen, funfzehn, fünfzehn, quince, quinze, quindici, vijftien",
		16: "sixteen, sechzehn, dieciseis, dieciséis, seize, sedici, dezesseis, dezasseis, zestien",
		17: "seventeen, siebzehn, diecisiete, dix-sept, diciassette, dezessete, dezassete, zeventien",
		18: "eighteen, achtzehn, dieciocho, dix-huit, diciotto, dezoito, achttien",
		19: "nineteen, neunzehn, diecinueve, dix-neuf, diciannove, dezenove, dezanove, negentien",
		20: "twenty, zwanzig, veinte, vingt, vingts, venti, vinte, twintig",
		30: "thirty, dreissig, dreißig, treinta, trente, trenta, trinta, dertig",
		40: "forty, fourty, vierzig, cuarenta, quarante, quaranta, quarenta, veertig",
		50: "fifty, funfzig, fünfzig, cincuenta, cinquante, cinquanta, cinquenta, vijftig",
		60: "sixty, sechzig, sesenta, soixante, sessanta, sessenta, zestig",
		70: "seventy, siebzig, setenta, soixante-dix, settanta, zeventig",
		80: "eighty, achtzig, ochenta, quatre-vingt, quatre-vingts, ottanta, oitenta, tachtig",
		90: "ninety, neunzig, noventa, quatre-vingt-dix, novanta, negentig",
	}
	for v, l := range teens {
		set(2, v, l)
	}
	set(3, 100, "hundred, hundert, cien, ciento, cent, cento, cem, honderd")
	set(3, 200, "doscientos, doscientas, duzentos, duecento")
	set(3, 300, "trescientos, trescientas, trezentos, trecento")
	set(3, 400, "cuatrocientos, cuatrocientas, quatrocentos, quattrocento")
	set(3, 500, "quinientos, quinhentos, cinquecento")
	set(3, 600, "seiscientos, seiscentos, seicento")
	set(3, 700, "setecientos, setecentos, settecento")
	set(3, 800, "ochocientos, oitocentos, ottocento")
	set(3, 900, "novecientos, novecentos, novecento")
	set(4, 1000, "thousand, tausend, mil, mille, mila, duizend, k, grand")
	set(5, 1e6, "million, millions, millionen, millon, millones, milhao, milhoes, milione, milioni, miljoen")
	set(6, 1, "a, an, ein, eine, einen, einem, una, une, um, uma, een")
	// veinti-, venti-: handled by compound splitting
}

// compoundParts are the prefixes and joiners used to split glued number
// words ("einundzwanzig", "vijfendertig", "trentacinque", "veinticinco").
var tensStems = map[string]float64{
	"zwanzig": 20, "dreissig": 30, "vierzig": 40, "funfzig": 50, "sechzig": 60, "siebzig": 70, "achtzig": 80, "neunzig": 90,
	"twintig": 20, "dertig": 30, "veertig": 40, "vijftig": 50, "zestig": 60, "zeventig": 70, "tachtig": 80, "negentig": 90,
	"vent": 20, "venti": 20, "trent": 30, "trenta": 30, "quarant": 40, "quaranta": 40, "cinquant": 50, "cinquanta": 50,
	"sessant": 60, "sessanta": 60, "settant": 70, "settanta": 70, "ottant": 80, "ottanta": 80, "novant": 90, "novanta": 90,
	"veinti": 20,
}

// tensStemList is tensStems' keys, longest first, for a fixed order.
var tensStemList = func() []string {
	var ks []string
	for k := range tensStems {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if len(ks[i]) != len(ks[j]) {
			return len(ks[i]) > len(ks[j])
		}
		return ks[i] < ks[j]
	})
	return ks
}()

// glued returns the value of a glued compound number word, or false.
func glued(w string) (float64, bool) {
	if len(w) < 6 || !isLetters(w) {
		return 0, false
	}
	// unit + und/en + tens (de, nl)
	for _, j := range []string{"und", "en"} {
		if k := strings.Index(w, j); k > 0 {
			u, ok1 := numberWords[w[:k]]
			t, ok2 := tensStems[w[k+len(j):]]
			if ok1 && ok2 && u.role == 1 && u.v > 0 {
				return t + u.v, true
			}
			if w[:k] == "ein" || w[:k] == "een" {
				if ok2 {
					return t + 1, true
				}
			}
		}
	}
	// tens stem + unit (it, es)
	for _, stem := range tensStemList {
		t := tensStems[stem]
		if strings.HasPrefix(w, stem) && len(w) > len(stem) {
			if u, ok := numberWords[w[len(stem):]]; ok && u.role == 1 && u.v > 0 {
				return t + u.v, true
			}
		}
	}
	// x + hundert/hundred/cento, x + tausend/mila
	for _, h := range []struct {
		s string
		v float64
	}{{"hundert", 100}, {"honderd", 100}, {"cento", 100}, {"tausend", 1000}, {"duizend", 1000}, {"mila", 1000}} {
		if strings.HasSuffix(w, h.s) && len(w) > len(h.s) {
			head := w[:len(w)-len(h.s)]
			if u, ok := numberWords[head]; ok && (u.role == 1 || u.role == 2) {
				return u.v * h.v, true
			}
			if v, ok := glued(head); ok {
				return v * h.v, true
			}
			if head == "ein" || head == "een" {
				return h.v, true
			}
		}
		if k := strings.Index(w, h.s); k > 0 && k+len(h.s) < len(w) {
			head, tail := w[:k+len(h.s)], w[k+len(h.s):]
			hv, ok1 := glued(head)
			if !ok1 {
				if hw, ok := numberWords[head]; ok {
					hv, ok1 = hw.v, true
				}
			}
			tv, ok2 := numberWords[tail]
			if !ok2 {
				if g, ok := glued(tail); ok {
					tv, ok2 = nword{v: g, role: 2}, true
				}
			}
			if ok1 && ok2 {
				return hv + tv.v, true
			}
		}
	}
	return 0, false
}

var monthNames = map[string]int{}
var weekdayNames = map[string]int{}

// weekdayCanon are the canonical weekday names, Monday first.
var weekdayCanon = []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

func init() {
	months := []string{
		"january, jan, januar, janner, enero, janvier, gennaio, janeiro, januari",
		"february, feb, februar, febrero, fevrier, febbraio, fevereiro, februari",
		"march, mar, marz, maerz, marzo, mars, marco, maart",
		"april, apr, abril, avril, aprile",
		"may, mai, mayo, maggio, maio, mei",
		"june, jun, juni, junio, juin, giugno, junho",
		"july, jul, juli, julio, juillet, luglio, julho",
		"august, aug, agosto, aout, augustus",
		"september, sep, sept, septiembre, setiembre, septembre, settembre, setembro",
		"october, oct, oktober, octubre, octobre, ottobre, outubro",
		"november, nov, noviembre, novembre, novembro",
		"december, dec, dezember, diciembre, decembre, dicembre, dezembro",
	}
	for m, l := range months {
		for _, w := range strings.Split(l, ",") {
			monthNames[fold(strings.TrimSpace(w))] = m + 1
		}
	}
	days := []string{
		"monday, mon, mondays, montag, montags, lunes, lundi, lundis, lunedi, segunda, segunda-feira, maandag, maandags",
		"tuesday, tue, tues, tuesdays, dienstag, dienstags, martes, mardi, martedi, terca, terca-feira, dinsdag",
		"wednesday, wed, wednesdays, mittwoch, mittwochs, miercoles, mercredi, mercoledi, quarta, quarta-feira, woensdag",
		"thursday, thu, thur, thurs, thursdays, donnerstag, donnerstags, jueves, jeudi, giovedi, quinta, quinta-feira, donderdag",
		"friday, fri, fridays, freitag, freitags, viernes, vendredi, venerdi, sexta, sexta-feira, vrijdag, vrijdags",
		"saturday, sat, saturdays, samstag, samstags, sonnabend, sabado, sabados, samedi, samedis, sabato, zaterdag, zaterdags",
		"sunday, sun, sundays, sonntag, sonntags, domingo, domingos, dimanche, dimanches, domenica, zondag, zondags",
	}
	for d, l := range days {
		for _, w := range strings.Split(l, ",") {
			weekdayNames[fold(strings.TrimSpace(w))] = d
		}
	}
}

// Statuses: canonical status words, their families and their spellings,
// read from statuses.txt (the data names the kinds of things; the code
// knows none).
//
//go:embed statuses.txt
var statusesFile string

// statusCanon lists the canonical statuses in the file's order.
var statusCanon []string

// statusFamily maps a canonical status to its family ("any": every one).
var statusFamily = map[string]string{}

// statusFamilies is the set of family names but "any".
var statusFamilies = map[string]bool{}

type statusEntry struct {
	words []string
	canon string
}

var statusTable = map[string][]statusEntry{}

// statusFuzzy are single-word spellings long enough to match with one
// typo ("deliverd", "clozed"), in the order they were added.
var statusFuzzy []statusEntry

func init() {
	add := func(canon, list string) {
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			ws := splitUnitWords(item)
			ps := append(statusTable[ws[0]], statusEntry{words: ws, canon: canon})
			for j := len(ps) - 1; j > 0 && len(ps[j].words) > len(ps[j-1].words); j-- {
				ps[j], ps[j-1] = ps[j-1], ps[j]
			}
			statusTable[ws[0]] = ps
			if len(ws) == 1 && len(ws[0]) >= 6 {
				statusFuzzy = append(statusFuzzy, statusEntry{words: ws, canon: canon})
			}
		}
	}
	for n, line := range strings.Split(statusesFile, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 3 {
			panic(fmt.Sprintf("feedback: statuses.txt line %d: want status | family | spellings", n+1))
		}
		canon, family := strings.TrimSpace(f[0]), strings.TrimSpace(f[1])
		statusCanon = append(statusCanon, canon)
		statusFamily[canon] = family
		if family != "any" {
			statusFamilies[family] = true
		}
		add(canon, f[2])
	}
}

// statusAt returns the status whose spelling starts at toks[i] and the
// number of tokens it spans.
func statusAt(toks []tok, i int) (string, int) {
	w := toks[i].low
	for _, e := range statusTable[w] {
		if i+len(e.words) > len(toks) {
			continue
		}
		ok := true
		for k := 1; k < len(e.words); k++ {
			if toks[i+k].low != e.words[k] {
				ok = false
				break
			}
		}
		if ok {
			return e.canon, len(e.words)
		}
	}
	if toks[i].kind == tWord && len(w) >= 6 {
		for _, e := range statusFuzzy {
			if sp := e.words[0]; abs(len(sp)-len(w)) <= 1 && editDistance1(w, sp) && !inflection(w, sp) {
				return e.canon, 1
			}
		}
	}
	return "", 0
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// editDistance1 reports whether a and b differ by at most one
// substitution, insertion, deletion or adjacent transposition.
func editDistance1(a, b string) bool {
	if a == b {
		return true
	}
	la, lb := len(a), len(b)
	if la > lb {
		a, b, la, lb = b, a, lb, la
	}
	if lb-la > 1 {
		return false
	}
	i := 0
	for i < la && a[i] == b[i] {
		i++
	}
	if la == lb {
		if a[i+1:] == b[i+1:] {
			return true
		}
		return i+1 < la && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	}
	return a[i:] == b[i+1:]
}

// inflection reports whether w is another regular form of the word sp
// ("closes", "close" of "closed"): a real word, not a typo.
func inflection(w, sp string) bool {
	stem := sp
	for _, suf := range []string{"ed", "d", "es", "s"} {
		if strings.HasSuffix(sp, suf) && len(sp) > len(suf)+2 {
			stem = sp[:len(sp)-len(suf)]
			break
		}
	}
	for _, suf := range []string{"", "s", "es", "e", "ing"} {
		if w == stem+suf {
			return true
		}
	}
	return false
}

// unitDeletes indexes the one-word unit spellings of four letters or
// more by each string with one letter deleted, for misspelt units right
// after a number ("minuts", "dyas", "hourss", "eruos").
var unitDeletes = map[string]string{}

func init() {
	words := make([]string, 0, len(unitTable))
	for w, es := range unitTable {
		for _, e := range es {
			if len(e.words) == 1 && len(w) >= 4 && isLetters(w) && e.u.kind != uTimeSuffix {
				words = append(words, w)
				break
			}
		}
	}
	sort.Strings(words)
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			if d := w[:i] + w[i+1:]; unitDeletes[d] == "" {
				unitDeletes[d] = w
			}
		}
	}
}

// unitFuzzyAt reads a unit spelling with one letter missing, one extra
// or two swapped at toks[i] (a word of four letters or more that is not
// a word of the lexicons, with the unit's first letter). Only the value
// parser calls it, for the word right after a number.
func unitFuzzyAt(toks []tok, i int) (unit, int) {
	w := toks[i].low
	if toks[i].kind != tWord || len(w) < 4 || !isLetters(w) {
		return unit{}, 0
	}
	if _, ok := lexWords[w]; ok {
		return unit{}, 0
	}
	if _, ok := langStop[w]; ok {
		return unit{}, 0
	}
	if _, ok := numberWords[w]; ok {
		return unit{}, 0
	}
	one := func(target string) (unit, int) {
		if target == "" || target[0] != w[0] {
			return unit{}, 0
		}
		for _, e := range unitTable[target] {
			if len(e.words) == 1 {
				return e.u, 1
			}
		}
		return unit{}, 0
	}
	// a letter missing
	if u, n := one(unitDeletes[w]); n > 0 {
		return u, n
	}
	for k := 0; k < len(w); k++ {
		d := w[:k] + w[k+1:]
		// an extra letter
		if len(d) >= 4 {
			if u, n := one(d); n > 0 && isLetters(d) {
				return u, n
			}
		}
		// two letters swapped
		if t := unitDeletes[d]; len(t) == len(w) && swapped(w, t) {
			if u, n := one(t); n > 0 {
				return u, n
			}
		}
	}
	return unit{}, 0
}
