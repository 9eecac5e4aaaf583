package jsondec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var seeds = []string{
	`""`, `"plain"`, `"q\"b\\s\/"`, `"\n\r\t\b\f"`, `"\u00e9\u65e5"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`,
	`"\ud83dx\ude00"`, `"\ud83d\u0041"`, "\"\xff\xfe bad\"", "\"a\xc3\"", "\"é ü 日本\"", `"\x"`, `"\u12"`, "\"\x01\"",
	`0`, `-0`, `12`, `-7`, `01`, `1.`, `1.5`, `-2.25e3`, `1e400`, `1E-2`, `9223372036854775807`, `9223372036854775808`,
	`123456789`, `-1234567890`, `true`, `false`, `null`, `nul`, ` [1, "a", {"k": null}] `, `{"a":[{"b":{}}],"c":"\u0022"}`,
	`{"a\u0062":1}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `[`, `{`, `{"a":1} x`, `1 2`,
}

// String unquotes as encoding/json does, and accepts every string it
// accepts.
func FuzzString(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want string
		stdErr := json.Unmarshal(b, &want)
		r := NewReader(b)
		got, ok := r.String()
		ok = ok && r.AtEnd()
		if ok && (stdErr != nil || got != want) {
			t.Fatalf("String(%q) = %q; encoding/json: %q, %v", b, got, want, stdErr)
		}
		if !ok && stdErr == nil && !bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			t.Fatalf("String(%q) refused what encoding/json reads as %q", b, want)
		}
	})
}

// Skip accepts exactly what encoding/json.Valid accepts, and Raw returns
// what a json.RawMessage field holds.
func FuzzSkip(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)))
	f.Add([]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000)))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		got := r.Skip() && r.AtEnd()
		if want := json.Valid(b); got != want {
			t.Fatalf("Skip(%q) = %v, json.Valid = %v", b, got, want)
		}
		if !got {
			return
		}
		// A json.RawMessage field holds the value's bytes without the
		// whitespace around them.
		raw, ok := NewReader(b).Raw()
		if want := bytes.Trim(b, " \t\r\n"); !ok || !bytes.Equal(raw, want) {
			t.Fatalf("Raw(%q) = %q, %v; want %q", b, raw, ok, want)
		}
	})
}

// Int and Float convert as encoding/json converts into int64, int32,
// float32 and float64 fields.
func FuzzNumber(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			return
		}
		var i64 int64
		err := json.Unmarshal(b, &i64)
		r := NewReader(b)
		v, ok := r.Int(64)
		ok = ok && r.AtEnd()
		if ok != (err == nil) || ok && v != i64 {
			t.Fatalf("Int(%q, 64) = %d, %v; encoding/json: %d, %v", b, v, ok, i64, err)
		}
		var i32 int32
		err = json.Unmarshal(b, &i32)
		r = NewReader(b)
		v, ok = r.Int(32)
		ok = ok && r.AtEnd()
		if ok != (err == nil) || ok && int32(v) != i32 {
			t.Fatalf("Int(%q, 32) = %d, %v; encoding/json: %d, %v", b, v, ok, i32, err)
		}
		var f32 float32
		err = json.Unmarshal(b, &f32)
		r = NewReader(b)
		fv, ok := r.Float(32)
		ok = ok && r.AtEnd()
		if ok != (err == nil) || ok && float32(fv) != f32 {
			t.Fatalf("Float(%q, 32) = %v, %v; encoding/json: %v, %v", b, fv, ok, f32, err)
		}
		var f64 float64
		err = json.Unmarshal(b, &f64)
		r = NewReader(b)
		fv, ok = r.Float(64)
		ok = ok && r.AtEnd()
		if ok != (err == nil) || ok && fv != f64 {
			t.Fatalf("Float(%q, 64) = %v, %v; encoding/json: %v, %v", b, fv, ok, f64, err)
		}
	})
}

func TestObjectAndArray(t *testing.T) {
	r := NewReader([]byte(` {"a": [1, 2], "b": {"c": "d"}, "e": null, "f": true} `))
	var keys []string
	var ints []int64
	ok := r.Object(func(k []byte) bool {
		keys = append(keys, string(k))
		switch string(k) {
		case "a":
			return r.Array(func() bool {
				v, ok := r.Int(64)
				ints = append(ints, v)
				return ok
			})
		case "e":
			return r.Null()
		default:
			return r.Skip()
		}
	})
	if !ok || !r.AtEnd() || strings.Join(keys, ",") != "a,b,e,f" || len(ints) != 2 || ints[1] != 2 {
		t.Fatalf("ok %v keys %v ints %v", ok, keys, ints)
	}
	for _, bad := range []string{`{"a":1,}`, `{"a" 1}`, `{"a\n":1}`, `{"a\u0062":1}`, `{a:1}`, `{"a":1`} {
		r := NewReader([]byte(bad))
		if r.Object(func([]byte) bool { return r.Skip() }) && r.AtEnd() {
			t.Errorf("Object accepted %s", bad)
		}
	}
}

func TestKnown(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{{"Choices", true}, {"CHOICES", true}, {"choice", false}, {"usage", true}, {"other", false}, {"\u212aey", true}} {
		if got := Known([]byte(c.key), "choices", "usage"); got != c.want {
			t.Errorf("Known(%q) = %v, want %v", c.key, got, c.want)
		}
	}
}
