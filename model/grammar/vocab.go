package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Vocab is a tokenizer's vocabulary as byte strings, with a byte trie of them built once. It is
// immutable and safe for concurrent use; build one per tokenizer and share it.
type Vocab struct {
	tokens [][]byte
	eos    int
	maxLen int
	// The trie in preorder: node 0 is the root (the empty prefix); node i > 0 extends its parent
	// by nodeByte[i] at depth nodeDepth[i]; its subtree is nodes i .. nodeEnd[i]-1; the tokens
	// spelled by node i are tokIDs[tokStart[i]:tokStart[i+1]].
	nodeByte  []byte
	nodeDepth []int32
	nodeEnd   []int32
	tokStart  []int32
	tokIDs    []int32
}

// NewVocab builds the vocabulary: tokens[i] is the exact bytes token i decodes to (after
// byte-level decoding: a GPT-2 byte-level token's bytes, not its printable form; a
// SentencePiece "▁" as a space). eos is the id that ends generation, allowed only when the value
// is complete; -1 for none. Tokens with no bytes (control and special tokens other than eos) are
// never allowed. Several ids may spell the same bytes. The slices are copied.
func NewVocab(tokens [][]byte, eos int) (*Vocab, error) {
	if eos < -1 || eos >= len(tokens) {
		return nil, fmt.Errorf("grammar: eos id %d outside the vocabulary of %d tokens", eos, len(tokens))
	}
	if len(tokens) >= 1<<31-1 {
		return nil, fmt.Errorf("grammar: vocabulary of %d tokens is too large", len(tokens))
	}
	v := &Vocab{tokens: make([][]byte, len(tokens)), eos: eos}
	var ids []int32
	for i, t := range tokens {
		v.tokens[i] = bytes.Clone(t)
		if len(t) > 0 && i != eos {
			ids = append(ids, int32(i))
			v.maxLen = max(v.maxLen, len(t))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
	v.nodeByte = []byte{0}
	v.nodeDepth = []int32{0}
	v.tokStart = []int32{0}
	// path[d] is the node at depth d on the path to the previous token.
	path := []int32{0}
	var prev []byte
	for _, id := range ids {
		t := tokens[id]
		lcp := 0
		for lcp < len(prev) && lcp < len(t) && prev[lcp] == t[lcp] {
			lcp++
		}
		path = path[:lcp+1]
		for d := lcp; d < len(t); d++ {
			v.nodeByte = append(v.nodeByte, t[d])
			v.nodeDepth = append(v.nodeDepth, int32(d+1))
			v.tokStart = append(v.tokStart, int32(len(v.tokIDs)))
			path = append(path, int32(len(v.nodeByte)-1))
		}
		v.tokIDs = append(v.tokIDs, id)
		prev = t
	}
	v.tokStart = append(v.tokStart, int32(len(v.tokIDs)))
	// Tokens were appended in order, so the tokens of node i are those appended after its
	// creation and before the next node's.
	n := len(v.nodeByte)
	v.nodeEnd = make([]int32, n)
	stack := []int32{}
	for i := 0; i < n; i++ {
		d := v.nodeDepth[i]
		for len(stack) > 0 && v.nodeDepth[stack[len(stack)-1]] >= d {
			v.nodeEnd[stack[len(stack)-1]] = int32(i)
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, int32(i))
	}
	for _, s := range stack {
		v.nodeEnd[s] = int32(n)
	}
	return v, nil
}

// Size returns the number of token ids.
func (v *Vocab) Size() int { return len(v.tokens) }

// Words returns the number of uint64 words of a mask over this vocabulary.
func (v *Vocab) Words() int { return (len(v.tokens) + 63) / 64 }

// EOS returns the end-of-generation id (-1 for none).
func (v *Vocab) EOS() int { return v.eos }

// Token returns the bytes of token id (nil when out of range). The caller must not modify them.
func (v *Vocab) Token(id int) []byte {
	if id < 0 || id >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// Nodes returns the number of trie nodes (the work bound of one uncached mask walk).
func (v *Vocab) Nodes() int { return len(v.nodeByte) }
