package events

import (
	"encoding/binary"
	"math/bits"
)

// ValidJSON reports whether data is one valid JSON value, with the same
// answer as encoding/json.Valid for every input (FuzzValidJSON checks
// that): RFC 8259 grammar, surrounding whitespace allowed, string bytes
// other than control characters, '"' and '\' accepted as they are
// (encoding/json does not check UTF-8 inside strings) and nesting deeper
// than 10,000 refused.
//
// It is written here rather than taken from encoding/json because every
// Append validates every event's data with it, on the appender's
// goroutine: encoding/json's byte-at-a-time state machine (a function
// call per byte) was 27% of the store's CPU per 1 KB append (pprof of
// BenchmarkAppend in events/eventlog). This one skips string contents
// eight bytes at a time; see BenchmarkValidJSON.
func ValidJSON(data []byte) bool {
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '[' per open container
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; c {
		case '{':
			if len(stack) >= maxNestingDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == '}' {
				i++
				break
			}
			stack = append(stack, '{')
			if i = objectKey(data, i); i < 0 {
				return false
			}
			continue
		case '[':
			if len(stack) >= maxNestingDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == ']' {
				i++
				break
			}
			stack = append(stack, '[')
			continue
		case '"':
			if i = skipString(data, i+1); i < 0 {
				return false
			}
		case 't':
			if i = literal(data, i, "true"); i < 0 {
				return false
			}
		case 'f':
			if i = literal(data, i, "false"); i < 0 {
				return false
			}
		case 'n':
			if i = literal(data, i, "null"); i < 0 {
				return false
			}
		default:
			if i = skipNumber(data, i); i < 0 {
				return false
			}
		}
		// A value ended at i: close containers or go on to the next
		// element.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if top == '{' {
					if i = objectKey(data, i); i < 0 {
						return false
					}
				}
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// maxNestingDepth is encoding/json's limit on nested containers.
const maxNestingDepth = 10000

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// objectKey parses `"key" :` at i (whitespace around the colon and after
// it skipped) and returns where the value starts, or -1.
func objectKey(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = skipString(data, i+1); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

func literal(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// skipString returns the index after the closing quote of the string
// whose contents start at i, or -1.
func skipString(data []byte, i int) int {
	for {
		// Eight bytes at a time while none is '"', '\' or below 0x20.
		for i+8 <= len(data) {
			x := binary.LittleEndian.Uint64(data[i:])
			q := x ^ ('"' * ones)
			bs := x ^ ('\\' * ones)
			special := ((q - ones) &^ q) | ((bs - ones) &^ bs) | ((x - 0x20*ones) &^ x)
			special &= highs
			if special == 0 {
				i += 8
				continue
			}
			// The lowest flagged byte is a true match (a borrow only
			// flags bytes above a real one).
			i += bits.TrailingZeros64(special) / 8
			break
		}
		if i >= len(data) {
			return -1
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipNumber returns the index after the number at i, or -1.
func skipNumber(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}
