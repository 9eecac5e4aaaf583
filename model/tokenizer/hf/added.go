package hf

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is one entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// trie finds added tokens leftmost-longest, as the Aho-Corasick automaton of
// Hugging Face's AddedVocabulary does.
type trie struct {
	first [256]bool
	nodes []trieNode
}

type trieNode struct {
	next map[byte]int32
	tok  int32 // index into added, or -1
}

func newTrie() *trie { return &trie{nodes: []trieNode{{tok: -1}}} }

// insert adds pattern p for token index tok and reports false when p is
// already present.
func (t *trie) insert(p string, tok int) bool {
	n := int32(0)
	for i := 0; i < len(p); i++ {
		nx, ok := t.nodes[n].next[p[i]]
		if !ok {
			if t.nodes[n].next == nil {
				t.nodes[n].next = make(map[byte]int32)
			}
			nx = int32(len(t.nodes))
			t.nodes = append(t.nodes, trieNode{tok: -1})
			t.nodes[n].next[p[i]] = nx
		}
		n = nx
	}
	if t.nodes[n].tok >= 0 {
		return false
	}
	t.nodes[n].tok = int32(tok)
	t.first[p[0]] = true
	return true
}

// longestAt returns the token index and end of the longest pattern starting
// at s[i], or -1.
func (t *trie) longestAt(s string, i int) (int, int) {
	tok, end := -1, 0
	n := int32(0)
	for j := i; j < len(s); j++ {
		nx, ok := t.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = nx
		if t.nodes[n].tok >= 0 {
			tok, end = int(t.nodes[n].tok), j+1
		}
	}
	return tok, end
}

// segment is a piece of text, or an added token (tok >= 0) with its text.
type segment struct {
	text string
	tok  int
}

// isWord reports whether r is matched by Rust regex's \w.
func isWord(r rune) bool { return r >= 0 && classOf(r)&cWord != 0 }

func isSpaceRune(r rune) bool { return r >= 0 && unicode.IsSpace(r) }

// findAdded splits s on the tokens of tr as AddedVocabulary::find_matches
// does, appending to out. With skipSpecial, matches of special tokens are
// passed over (encode_special_tokens).
func (t *Tokenizer) findAdded(s string, tr *trie, skipSpecial bool, out []segment) []segment {
	if s == "" {
		return out
	}
	if tr == nil {
		return append(out, segment{s, -1})
	}
	startOffset := 0
	for i := 0; i < len(s); {
		if !tr.first[s[i]] {
			i++
			continue
		}
		k, stop := tr.longestAt(s, i)
		if k < 0 {
			i++
			continue
		}
		start := i
		i = stop
		at := &t.added[k]
		if skipSpecial && at.Special {
			continue
		}
		if at.SingleWord {
			startSpace := start == 0 || !isWord(lastRune(s[:start]))
			stopSpace := stop == len(s)
			if !stopSpace {
				r, _ := runeAt(s, stop)
				stopSpace = !isWord(r)
			}
			if !startSpace || !stopSpace {
				continue
			}
		}
		if at.LStrip {
			ns := start
			for ns > 0 {
				r := lastRune(s[:ns])
				if !isSpaceRune(r) {
					break
				}
				ns -= utf8.RuneLen(r)
			}
			start = max(ns, startOffset)
		}
		if at.RStrip {
			for stop < len(s) {
				r, w := runeAt(s, stop)
				if !isSpaceRune(r) {
					break
				}
				stop += w
			}
		}
		if startOffset < start {
			out = append(out, segment{s[startOffset:start], -1})
		}
		out = append(out, segment{s[start:stop], k})
		startOffset = stop
	}
	if startOffset < len(s) {
		out = append(out, segment{s[startOffset:], -1})
	}
	return out
}
