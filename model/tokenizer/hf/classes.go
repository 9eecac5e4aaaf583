package hf

import (
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Character class bits. The regex classes follow Oniguruma as the tokenizers
// wheel builds it (Unicode 16.0); Digits follows Rust's char::is_numeric
// (Unicode 17.0); the added-token word test follows Rust regex's \w.
const (
	cLetter  = 1 << iota // \p{L}
	cNumber              // \p{N}
	cSpace               // \s (White_Space)
	cNumeric             // char::is_numeric
	cWord                // \w
	cMark                // \p{Mn} or \p{Mc}
)

// classPages caches the class bits of every rune, 256 runes to a page,
// each page computed on first use.
var classPages [(unicode.MaxRune + 1) >> 8]atomic.Pointer[[256]uint8]

func computeClass(r rune) uint8 {
	var c uint8
	if unicode.Is(letter16, r) {
		c |= cLetter
	}
	if unicode.Is(number16, r) {
		c |= cNumber
	}
	if unicode.IsSpace(r) {
		c |= cSpace
	}
	if unicode.Is(number17, r) {
		c |= cNumeric
	}
	if unicode.Is(word16, r) || unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r) {
		c |= cWord
	}
	if unicode.Is(mark16, r) {
		c |= cMark
	}
	return c
}

// classOf returns the class bits of r; a negative r (an invalid UTF-8 byte)
// has none.
func classOf(r rune) uint8 {
	if r < 0 || r > unicode.MaxRune {
		return 0
	}
	p := classPages[r>>8].Load()
	if p == nil {
		p = new([256]uint8)
		base := r &^ 0xff
		for i := range p {
			p[i] = computeClass(base + rune(i))
		}
		classPages[r>>8].Store(p)
	}
	return p[r&0xff]
}

// runeAt decodes the character at s[i]. An invalid UTF-8 byte decodes as -1
// with width 1, so every byte string splits losslessly.
func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return -1, 1
	}
	return r, w
}

// classAt returns the class bits and width of the character at s[i].
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := runeAt(s, i)
	return classOf(r), w
}

var asciiClass = func() (t [128]uint8) {
	for i := range t {
		t[i] = computeClass(rune(i))
	}
	return t
}()

// lastRune decodes the last character of s (-1 for an invalid byte).
func lastRune(s string) rune {
	r, w := utf8.DecodeLastRuneInString(s)
	if r == utf8.RuneError && w == 1 {
		return -1
	}
	return r
}
