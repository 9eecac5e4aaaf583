package feedback

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// nameStop are words that are capitalised at the start of a sentence
// but are not names.
func nameStop(w, lang string) bool {
	if _, ok := lexWords[w]; ok {
		return true
	}
	if l, ok := langStop[w]; ok && (l == lang || l == "*" || l == "en" || lang == "") {
		return true
	}
	if _, ok := numberWords[w]; ok {
		return true
	}
	if _, ok := monthNames[w]; ok {
		return true
	}
	if _, ok := weekdayNames[w]; ok {
		return true
	}
	if statusFamilies[w] { // "order": what a status is the status of
		return true
	}
	switch w {
	case "our", "your", "yes", "no", "oh", "ah", "wow", "well", "so", "hmm", "ok", "okay",
		"the", "a", "an", "there", "they", "we", "you", "it", "that", "this", "these", "those", "he", "she", "mine",
		"standard", "express", "delivery", "shipping", "store", "support", "customer", "service", "tracking", "items",
		"uk", "us", "usa", "eu", "faq", "app", "email", "website", "bot", "sale", "price", "total", "budget", "summary",
		"and", "or", "if", "isn't", "wasn't", "didn't", "don't", "shouldn't", "aren't", "also", "plus", "capital",
		"chat", "live", "members", "member", "premium", "plan", "trial", "warranty", "free", "returns", "return", "gift",
		"cards", "card", "mr", "mrs", "ms", "dr", "lol", "omg", "btw", "fyi", "pls", "thx", "im", "i'm", "i've", "i'd",
		"pretty", "maybe", "probably", "sure", "right", "wrong", "correct", "false", "true", "is", "was", "are", "were",
		"isnt", "wasnt", "its", "it's", "that's", "thats", "what", "why", "how", "when", "where", "who", "which",
		"hello", "hi", "hey", "dear", "thanks", "thank", "cheers", "great", "good", "nice", "love", "perfect", "fun",
		"json", "pdf", "csv", "sms", "id", "nope", "nah", "yep", "yeah", "haha", "meh", "ugh", "hm", "nein", "ja",
		"doch", "bitte", "danke", "non", "oui", "merci", "si", "sim", "nao", "nee", "grazie", "gracias":
		return true
	}
	return false
}

// phraseWords marks the words of lexicon phrases ("Nichts
// hinzuzufügen", "Hallo zusammen"): they are not names.
func phraseWords(toks []tok) []bool {
	in := make([]bool, len(toks))
	for i := 0; i < len(toks); {
		if _, n := lexMatch(toks, i); n > 1 {
			for k := i; k < i+n; k++ {
				in[k] = true
			}
			i += n
			continue
		}
		i++
	}
	return in
}

// germanDeterminer are words that precede German nouns.
var germanDeterminer = map[string]bool{"der": true, "die": true, "das": true, "den": true, "dem": true, "des": true, "ein": true,
	"eine": true, "einen": true, "einem": true, "einer": true, "eines": true, "kein": true, "keine": true, "keinen": true,
	"keiner": true, "mein": true, "meine": true, "meinen": true, "meinem": true, "meiner": true, "dein": true, "deine": true,
	"ihr": true, "ihre": true, "ihrer": true, "ihren": true, "ihrem": true, "unser": true, "unsere": true, "euer": true,
	"eure": true, "laut": true, "im": true, "am": true, "zum": true, "zur": true, "beim": true, "vom": true, "ins": true,
	"diese": true, "dieser": true, "dieses": true, "diesen": true, "jede": true, "jeder": true, "alle": true, "viele": true,
	"zwei": true, "drei": true, "paar": true, "auf": true, "mit": true, "fur": true, "von": true, "in": true, "nach": true}

var nameJoin = map[string]bool{"da": true, "de": true, "di": true, "del": true, "della": true, "van": true, "von": true,
	"der": true, "den": true, "du": true, "la": true, "le": true, "dos": true, "das": true, "do": true, "of": true, "y": true}

// namesIn returns the folded names (runs of capitalised words that are
// not sentence-initial common words) in toks. caps: the whole text is in
// capitals, so every run of words that are not common words is a name.
func namesIn(toks []tok, caps bool, lang string) []string {
	var out []string
	for _, sp := range nameSpans(toks, caps, lang) {
		out = append(out, fold(sp.text))
	}
	return out
}

type nameSpan struct {
	lo, hi int
	text   string
}

func nameSpans(toks []tok, caps bool, lang string) []nameSpan {
	var out []nameSpan
	inPhrase := phraseWords(toks)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != tWord || !t.upper || inPhrase[i] {
			continue
		}
		if !unicode.IsLetter(firstRune(t.raw)) {
			continue
		}
		sentStart := i == 0 || toks[i-1].sent != t.sent || toks[i-1].low == "\"" || toks[i-1].low == ":" || toks[i-1].low == "¡" || toks[i-1].low == "¿"
		if t.low == "i" || strings.HasPrefix(t.low, "i'") {
			continue
		}
		known := knownName(t.low) || i+1 < len(toks) && knownName(t.low+" "+toks[i+1].low)
		if lang == "de" && (sentStart || i > 0 && germanDeterminer[toks[i-1].low]) && !known {
			continue // German capitalises nouns: a name needs more than a capital
		}
		j := i
		var words []string
		for j < len(toks) && toks[j].kind == tWord && toks[j].sent == t.sent {
			w := toks[j]
			if w.upper && len(w.low) > 1 && !inPhrase[j] && !(nameStop(w.low, lang) && (j == i && (sentStart || caps) || caps)) {
				words = append(words, w.raw)
				j++
				continue
			}
			if len(words) > 0 && nameJoin[w.low] && j+1 < len(toks) && toks[j+1].kind == tWord && toks[j+1].upper && !nameStop(toks[j+1].low, lang) {
				words = append(words, w.raw)
				j++
				continue
			}
			break
		}
		if len(words) == 0 {
			continue
		}
		if sentStart && !caps && !known && j < len(toks) && toks[j].kind == tWord && !toks[j].upper && toks[j].sent == t.sent {
			// "Bought headphones...", "Seems off": a sentence that starts
			// with a word, not a name
			i = j - 1
			continue
		}
		// "Jane Austen's": drop the possessive
		last := words[len(words)-1]
		if k := strings.IndexAny(last, "'’"); k > 0 {
			words[len(words)-1] = last[:k]
		}
		text := strings.Join(words, " ")
		if caps || isCaps(text) {
			text = titleCase(text)
		}
		out = append(out, nameSpan{lo: i, hi: j, text: text})
		i = j - 1
	}
	return out
}

// copulas2 are the words that introduce a complement ("it's Canberra",
// "c'est Victor Hugo", "è Berna", "ist Ottawa").
var copulas2 = map[string]bool{"is": true, "was": true, "it's": true, "its": true, "it": false, "are": true, "were": true, "be": true,
	"=": true, "→": true, "*": true, "by": true, "ist": true, "sind": true, "war": true, "es": true, "son": true, "era": true,
	"fue": true, "est": true, "c'est": true, "etait": true, "e": true, "sono": true, "fu": true, "sao": true, "foi": true,
	"zijn": true, "thought": true, "meant": true, "mean": true, "call": true, "called": true, "not": false}

// wordsContain reports whether the words of b appear in a, in order
// ("emile zola" contains "zola"; "brasilia" does not contain "brasil").
func wordsContain(a, b string) bool {
	return strings.Contains(" "+a+" ", " "+b+" ")
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// titleCase writes each word with an upper-case first letter (joining
// words such as "da" stay lower case).
func titleCase(s string) string {
	ws := strings.Fields(strings.ToLower(s))
	for k, w := range ws {
		if k > 0 && nameJoin[w] {
			continue
		}
		r, size := utf8.DecodeRuneInString(w)
		ws[k] = string(unicode.ToUpper(r)) + w[size:]
	}
	return strings.Join(ws, " ")
}
