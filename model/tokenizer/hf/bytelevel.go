package hf

import (
	"strings"
	"unicode/utf8"
)

// byteChar maps every byte to the character that stands for it in a
// byte-level vocabulary (GPT-2's bytes_to_unicode): printable Latin-1 bytes
// stand for themselves, the others for U+0100 upwards in byte order.
var byteChar, charByte = func() ([256]rune, map[rune]byte) {
	var bc [256]rune
	cb := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			bc[b] = rune(b)
		} else {
			bc[b] = rune(256 + n)
			n++
		}
		cb[bc[b]] = byte(b)
	}
	return bc, cb
}()

// toByteLevel returns the byte-level spelling of raw bytes.
func toByteLevel(raw string) string {
	var b strings.Builder
	b.Grow(2 * len(raw))
	for i := 0; i < len(raw); i++ {
		b.WriteRune(byteChar[raw[i]])
	}
	return b.String()
}

// fromByteLevel returns the bytes a byte-level token stands for, and false
// when some character of tok is not a byte-level character.
func fromByteLevel(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// decodeToken is what the ByteLevel decoder makes of one token: its bytes
// when every character is a byte-level character, else its own UTF-8 text.
func decodeToken(tok string) []byte {
	if b, ok := fromByteLevel(tok); ok {
		return b
	}
	return []byte(tok)
}

// appendLossy appends b to dst with each maximal ill-formed subsequence
// replaced by U+FFFD, as Rust's String::from_utf8_lossy does (Unicode's
// "substitution of maximal subparts").
func appendLossy(dst *strings.Builder, b []byte) {
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			dst.WriteByte(c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		}
		if need == 0 {
			dst.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if j-i == need+1 {
			dst.Write(b[i:j])
		} else {
			dst.WriteRune(utf8.RuneError)
		}
		i = j
	}
}
