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

// AppendFloat writes what encoding/json writes for float64 and float32.
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, -0.0, 1, -1.5, 0.1, 1e-6, 9.99999e-7, 1e-7, 1e20, 1e21, 123456789.125, 3.4e38, 1e-45, 5e-324} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		want, err := json.Marshal(v)
		got, ok := AppendFloat(nil, v, 64)
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("AppendFloat(%v, 64) = %s, %v; json.Marshal = %s, %v", v, got, ok, want, err)
		}
		v32 := float32(v)
		want, err = json.Marshal(v32)
		got, ok = AppendFloat(nil, float64(v32), 32)
		if ok != (err == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("AppendFloat(%v, 32) = %s, %v; json.Marshal = %s, %v", v32, got, ok, want, err)
		}
	})
}
