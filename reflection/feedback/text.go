package feedback

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The tokenizer shared by the value parser, the candidate generator and
// the classifier's features. It works on any language written in Latin
// script: words are runs of letters (with inner apostrophes), numbers are
// runs of digits (with inner "." or "," before a digit), every other
// visible rune is a symbol of its own, and emoji sequences (with their
// joiners, variation selectors and skin tones) are one token.

// tkind is the class of a token.
type tkind uint8

const (
	tWord tkind = iota
	tNum
	tSym
	tEmoji
)

// tok is one token of a text.
type tok struct {
	raw  string // as written
	low  string // lower case with diacritics folded ("Größe" -> "grosse"); raw for numbers and symbols
	kind tkind
	// start, end are byte offsets into the text.
	start, end int
	// gap: whitespace (or the start of the text) precedes the token.
	gap bool
	// sent is the index of the sentence the token is in (sentences end
	// at ".", "!", "?", ";" and line breaks).
	sent int
	// upper: the word starts with an upper-case letter; caps: every
	// letter is upper case (and there are at least two).
	upper, caps bool
}

func (t tok) is(words ...string) bool {
	for _, w := range words {
		if t.low == w {
			return true
		}
	}
	return false
}

// foldRune maps a lower-case Latin letter with a diacritic to its base
// letters.
var foldRunes = map[rune]string{
	'à': "a", 'á': "a", 'â': "a", 'ã': "a", 'ä': "a", 'å': "a", 'æ': "ae", 'ç': "c", 'è': "e", 'é': "e",
	'ê': "e", 'ë': "e", 'ì': "i", 'í': "i", 'î': "i", 'ï': "i", 'ñ': "n", 'ò': "o", 'ó': "o", 'ô': "o",
	'õ': "o", 'ö': "o", 'ø': "o", 'ù': "u", 'ú': "u", 'û': "u", 'ü': "u", 'ý': "y", 'ÿ': "y", 'ß': "ss",
	'œ': "oe", 'ā': "a", 'ē': "e", 'ī': "i", 'ō': "o", 'ū': "u", 'ł': "l", 'ś': "s", 'ź': "z", 'ż': "z",
	'č': "c", 'š': "s", 'ž': "z", 'ř': "r", 'ě': "e", 'ů': "u", 'ğ': "g", 'ı': "i", 'ș': "s", 'ț': "t",
	'’': "'", '‘': "'", 'ʼ': "'",
}

// fold lower-cases s and removes diacritics from Latin letters.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf || ('A' <= s[i] && s[i] <= 'Z') {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		r = unicode.ToLower(r)
		if f, ok := foldRunes[r]; ok {
			b.WriteString(f)
			continue
		}
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isApostrophe(r rune) bool { return r == '\'' || r == '’' || r == 'ʼ' || r == '‘' }

// emojiJoiner: runes that continue an emoji sequence.
func emojiJoiner(r rune) bool {
	return r == 0x200D || r == 0xFE0F || r == 0xFE0E || (r >= 0x1F3FB && r <= 0x1F3FF) || r == 0x20E3
}

func isEmoji(r rune) bool {
	return r >= 0x1F000 || (r >= 0x2600 && r <= 0x27BF) || (r >= 0x2B00 && r <= 0x2BFF) || r == 0x2122 || r == 0x2139 ||
		(r >= 0x2190 && r <= 0x21FF && r != '→') || r == 0x231A || r == 0x231B || r == 0x23F0 || r == 0x23F3 || r == 0x3030 || r == 0x303D
}

// sentenceSym reports the symbols that end a sentence.
func sentenceSym(s string) bool {
	return s == "." || s == "!" || s == "?" || s == ";" || s == "\n" || s == "…" || s == "¡" || s == "¿"
}

// lex splits text into tokens. It is linear in the length of text.
func lex(text string) []tok {
	toks := make([]tok, 0, len(text)/4+1)
	sent := 0
	gap := true
	i := 0
	n := len(text)
	for i < n {
		r, size := utf8.DecodeRuneInString(text[i:])
		start := i
		switch {
		case r == '\n':
			toks = append(toks, tok{raw: "\n", low: "\n", kind: tSym, start: i, end: i + size, gap: gap, sent: sent})
			sent++
			i += size
			gap = true
			continue
		case unicode.IsSpace(r) || r == utf8.RuneError && size == 1:
			i += size
			gap = true
			continue
		case unicode.IsLetter(r):
			j := i + size
			for j < n {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if unicode.IsLetter(r2) || unicode.Is(unicode.Mn, r2) {
					j += s2
					continue
				}
				if isApostrophe(r2) && j+s2 < n {
					r3, _ := utf8.DecodeRuneInString(text[j+s2:])
					if unicode.IsLetter(r3) {
						j += s2
						continue
					}
				}
				break
			}
			low := ""
			// chat spellings with a digit: "gr8", "m8", "b4", "evry1"
			if k := chatWordEnd(text, j); k > j {
				if w, ok := chatWords[fold(text[i:k])]; ok {
					low, j = w, k
				}
			}
			raw := text[i:j]
			if low == "" {
				low = fold(raw)
			}
			t := tok{raw: raw, low: low, kind: tWord, start: i, end: j, gap: gap, sent: sent}
			t.upper = unicode.IsUpper(r)
			t.caps = isCaps(raw)
			toks = append(toks, t)
			i = j
		case unicode.IsDigit(r) && chatDigitWord(text, i) > i:
			// "2day", "4ever"
			j := chatDigitWord(text, i)
			toks = append(toks, tok{raw: text[i:j], low: chatWords[fold(text[i:j])], kind: tWord, start: i, end: j, gap: gap, sent: sent})
			i = j
		case unicode.IsDigit(r):
			j := i + size
			for j < n {
				c := text[j]
				if c >= '0' && c <= '9' {
					j++
					continue
				}
				if (c == '.' || c == ',') && j+1 < n && text[j+1] >= '0' && text[j+1] <= '9' {
					j++
					continue
				}
				break
			}
			raw := text[i:j]
			if !asciiDigits(raw) {
				// other scripts' digits are words
				toks = append(toks, tok{raw: raw, low: raw, kind: tWord, start: i, end: j, gap: gap, sent: sent})
			} else {
				toks = append(toks, tok{raw: raw, low: raw, kind: tNum, start: i, end: j, gap: gap, sent: sent})
			}
			i = j
		case r == '-' && i+1 < n && text[i+1] == '>':
			toks = append(toks, tok{raw: "->", low: "→", kind: tSym, start: i, end: i + 2, gap: gap, sent: sent})
			i += 2
		case r == '=' && i+1 < n && text[i+1] == '>':
			toks = append(toks, tok{raw: "=>", low: "→", kind: tSym, start: i, end: i + 2, gap: gap, sent: sent})
			i += 2
		case isEmoji(r) || emojiJoiner(r):
			j := i + size
			prev := r
			for j < n {
				r2, s2 := utf8.DecodeRuneInString(text[j:])
				if emojiJoiner(r2) || prev == 0x200D && isEmoji(r2) || (r >= 0x1F1E6 && r <= 0x1F1FF && r2 >= 0x1F1E6 && r2 <= 0x1F1FF && j == i+size) {
					j += s2
					prev = r2
					continue
				}
				break
			}
			raw := text[i:j]
			toks = append(toks, tok{raw: raw, low: strings.TrimRight(raw, "\uFE0F\uFE0E"), kind: tEmoji, start: i, end: j, gap: gap, sent: sent})
			i = j
		default:
			raw := text[i : i+size]
			low := raw
			switch r {
			case '–', '—', '‒', '−':
				low = "-"
			case '“', '”', '„', '«', '»':
				low = "\""
			case '’', '‘', '`', '´':
				low = "'"
			case '…':
				low = "..."
			}
			t := tok{raw: raw, low: low, kind: tSym, start: i, end: i + size, gap: gap, sent: sent}
			// collapse runs of the same punctuation ("!!!", "...", "??")
			if k := len(toks); k > 0 && !gap && toks[k-1].kind == tSym && (low == "!" || low == "?" || low == ".") && strings.HasPrefix(toks[k-1].low, low) {
				toks[k-1].end = i + size
				toks[k-1].raw = text[toks[k-1].start : i+size]
				toks[k-1].low += low
				i += size
				gap = false
				continue
			}
			toks = append(toks, t)
			i += size
			if sentenceSym(low) || low == "..." || strings.HasPrefix(low, "!") || strings.HasPrefix(low, "?") {
				sent++
			}
		}
		gap = false
		_ = start
	}
	// sentence ends also after collapsed runs
	return resentence(toks)
}

// resentence recomputes sentence indices: a sentence ends after ".", "!",
// "?" (and runs of them), ";", "…" and line breaks.
func resentence(toks []tok) []tok {
	sent := 0
	for k := range toks {
		toks[k].sent = sent
		if toks[k].kind == tSym {
			l := toks[k].low
			if l == "\n" || l == ";" || l == "…" || strings.HasPrefix(l, ".") || strings.HasPrefix(l, "!") || strings.HasPrefix(l, "?") {
				// "a.m." and "3." before a month are not sentence ends, but a
				// split there costs little
				sent++
			}
		}
	}
	return toks
}

func asciiDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && c != '.' && c != ',' {
			return false
		}
	}
	return true
}

// isCaps: at least two letters, all upper case.
func isCaps(s string) bool {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			if !unicode.IsUpper(r) {
				return false
			}
			n++
		}
	}
	return n >= 2
}

// capsRatio is the share of upper-case letters among the letters of s.
func capsRatio(s string) (ratio float64, letters int) {
	up := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				up++
			}
		}
	}
	if letters == 0 {
		return 0, 0
	}
	return float64(up) / float64(letters), letters
}

// chatWords are chat spellings with a digit in them, and the word they
// stand for.
var chatWords = map[string]string{"gr8": "great", "m8": "mate", "m8s": "mates", "l8": "late", "l8r": "later", "w8": "wait",
	"b4": "before", "h8": "hate", "str8": "straight", "evry1": "everyone", "every1": "everyone", "any1": "anyone",
	"some1": "someone", "2day": "today", "2moro": "tomorrow", "2morrow": "tomorrow", "2nite": "tonight", "4ever": "forever"}

// chatWordEnd returns the end of the digits and letters right after a
// run of letters ending at j ("gr" + "8", "evry" + "1"), or j.
func chatWordEnd(text string, j int) int {
	k := j
	for k < len(text) && text[k] >= '0' && text[k] <= '9' {
		k++
	}
	if k == j {
		return j
	}
	for k < len(text) && (text[k] >= 'a' && text[k] <= 'z' || text[k] >= 'A' && text[k] <= 'Z') {
		k++
	}
	return k
}

// chatDigitWord returns the end of a chat word that starts with a digit
// at i ("2day"), or i.
func chatDigitWord(text string, i int) int {
	k := i
	for k < len(text) && text[k] >= '0' && text[k] <= '9' {
		k++
	}
	if k == i || k-i > 1 {
		return i
	}
	e := k
	for e < len(text) && (text[e] >= 'a' && text[e] <= 'z' || text[e] >= 'A' && text[e] <= 'Z') {
		e++
	}
	if e == k {
		return i
	}
	if _, ok := chatWords[strings.ToLower(text[i:e])]; ok {
		return e
	}
	return i
}
