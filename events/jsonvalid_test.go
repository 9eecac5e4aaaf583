package events

import (
	"encoding/json"
	"strings"
	"testing"
)

var validJSONCases = []string{
	``, ` `, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5x`, `-01`, `123456789012345678901234567890`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`, `Infinity`,
	`""`, `"`, `"abc`, `"a\"b"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\x"`, `"\u00e9"`, `"\u00G9"`, `"\u00e"`, `"\`,
	"\"tab\there\"", "\"nl\nhere\"", "\"\x7f\"", "\"\xff\xfe invalid utf8\"", `"é ✓ 😀"`,
	`[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `[`, `]`, `[[[]]]`, `[[[]]`, `[{}]`, `[{]}`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : 1 , "b":[true,null]}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`,
	`{"a":1}}`, `{"a":1}{`, ` {"a":1} `, "\t\r\n[1]\n", `1 2`, `"a""b"`, `{"":""}`, "\"\x00\"", "\x00",
	`{"k":"` + strings.Repeat("x", 100) + `\n` + strings.Repeat("y", 37) + `"}`,
	`"12345678"`, `"1234567"`, `"123456789\"x"`, `"12345678\`, `"1234567\u0041"`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 9999) + "{}" + strings.Repeat("]", 9999),
	strings.Repeat("[", 10000) + "{}" + strings.Repeat("]", 10000),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range validJSONCases {
		if got, want := ValidJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("ValidJSON(%.80q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

// FuzzValidJSON: ValidJSON agrees with encoding/json.Valid on every input.
func FuzzValidJSON(f *testing.F) {
	for _, c := range validJSONCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := ValidJSON(data), json.Valid(data); got != want {
			t.Fatalf("ValidJSON(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

// BenchmarkValidJSON compares ValidJSON with encoding/json.Valid on a
// 1 KB event payload (the eventlog benchmarks' event).
func BenchmarkValidJSON(b *testing.B) {
	ev, err := Encode(&FeedbackReceived{InteractionID: "i-bench", FeedbackID: "f", Source: "harness",
		Text: strings.Repeat("x", 800) + "\n\"quoted\" é"}, Meta{Tenant: "tenant-a"})
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"impl=citizen", ValidJSON}, {"impl=encoding-json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(ev.Data)))
			for b.Loop() {
				if !v.valid(ev.Data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
