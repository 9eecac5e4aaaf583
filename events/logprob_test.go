package events

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// reference decodes b as encoding/json does without UnmarshalJSON.
func referenceLogprob(b []byte) (TokenLogprob, error) {
	var t tokenLogprobJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return TokenLogprob{}, err
	}
	return TokenLogprob(t), nil
}

// FuzzTokenLogprob checks that a logprob decodes to what encoding/json
// makes of it, or fails where it fails, inside an array as a recorded
// interaction holds them.
func FuzzTokenLogprob(f *testing.F) {
	for _, s := range []string{
		`{"token":1000,"logprob":-0.125}`, `{"token":1,"logprob":-1.5,"top":[{"token":2,"logprob":-2},{"token":3,"logprob":-3e-2}]}`,
		`{"token":1,"logprob":0,"top":[]}`, ` { "token" : 5 , "logprob" : -1 } `, `{}`, `{"Token":1}`, `{"token":1.5}`, `{"token":1e2}`,
		`{"token":null}`, `{"top":null}`, `{"bogus":1}`, `{"top":[{"top":[]}]}`, `{"token":"1"}`, `{"logprob":1e39}`, `{"tok\u0065n":7}`,
		`{"token":1,"token":2}`, `{"token":-0}`, `{"token":99999999999999999999}`, `null`, `{"logprob":-1.401298464324817e-45}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		arr := append(append([]byte("["), b...), ']')
		var got []TokenLogprob
		gerr := json.Unmarshal(arr, &got)
		want, werr := referenceLogprob(b)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%s: error %v, encoding/json's %v", b, gerr, werr)
		}
		if gerr != nil || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
			return
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d elements", b, len(got))
		}
		g := got[0]
		if math.IsNaN(float64(g.Logprob)) || !reflect.DeepEqual(g, want) {
			t.Fatalf("%s: decoded %+v, encoding/json %+v", b, g, want)
		}
	})
}

// A recorded interaction's logprobs round-trip through the encoder.
func TestTokenLogprobRoundTrip(t *testing.T) {
	in := []TokenLogprob{{Token: 1, Logprob: -0.125}, {Token: 2, Logprob: -3.0517578e-05, Top: []TopLogprob{{Token: 3, Logprob: -1}, {Token: -4, Logprob: -100}}},
		{Token: 5, Logprob: -1e30, Top: []TopLogprob{}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []TokenLogprob
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	in[2].Top = nil // omitempty: an empty list is not written
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("got %+v\nwant %+v", out, in)
	}
}
