package tokenizer

import (
	"testing"
)

// FuzzRoundTrip checks Decode(Encode(s)) == s for arbitrary bytes, that Encode
// never yields a special or out-of-range id, that encoding is stable across
// calls (cache) and concatenation of the pre-tokenized words, and that
// ParseAssistant never panics on the tokens.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "hello world", "\xff\xfe\xfd", "<|user|>x<|end|>",
		"日本語 Москва 123", "a  b\n\n c\t", `{"name":"f","arguments":{}}`} {
		f.Add(s)
	}
	tok := trained(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
		}
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() || tok.IsSpecial(id) {
				t.Fatalf("Encode(%q) produced id %d", s, id)
			}
		}
		again := tok.Encode(s)
		if len(again) != len(ids) {
			t.Fatalf("Encode(%q) not stable: %v then %v", s, ids, again)
		}
		for i := range ids {
			if ids[i] != again[i] {
				t.Fatalf("Encode(%q) not stable: %v then %v", s, ids, again)
			}
		}
		var joined string
		splitWords(s, func(w string) {
			if w == "" {
				t.Fatalf("empty word in %q", s)
			}
			if len(w) > maxWord {
				t.Fatalf("word of %d bytes in %q", len(w), s)
			}
			joined += w
		})
		if joined != s {
			t.Fatalf("words of %q concatenate to %q", s, joined)
		}
		// Parsing arbitrary text as an assistant turn with a tool call never panics.
		_, _ = tok.ParseAssistant(append(append([]int{TokenToolCall}, ids...), TokenToolCall))

		// Any text survives the chat template as assistant content, and any
		// arguments text yields a well-formed call.
		rendered, mask, err := tok.RenderChat([]Message{{Role: RoleAssistant, Content: s,
			ToolCalls: []ToolCall{{Name: "f", Arguments: s}}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		var gen []int
		for i, id := range rendered {
			if mask[i] {
				gen = append(gen, id)
			}
		}
		m, err := tok.ParseAssistant(gen)
		if err != nil || m.Content != s || len(m.ToolCalls) != 1 || m.ToolCalls[0].Name != "f" {
			t.Fatalf("template round trip of %q: %+v, %v", s, m, err)
		}
		if args := canonicalArgs(s); args[0] != '"' && m.ToolCalls[0].Arguments != args {
			t.Fatalf("arguments %q came back as %q", s, m.ToolCalls[0].Arguments)
		}
	})
}
