package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendString writes what encoding/json writes, with and without HTML
// escaping.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "<a href='x'>&amp;</a>", "\n\r\t\x00\x1f\x7f", "é ü 日本", "\u2028\u2029", "\xff\xfe bad", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q, html) = %s, json.Marshal = %s", s, got, want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if got := AppendString(nil, s, false); !bytes.Equal(got, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
			t.Fatalf("AppendString(%q) = %s, an Encoder without HTML escaping = %s", s, got, buf.Bytes())
		}
	})
}
