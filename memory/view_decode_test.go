package memory

import (
	"encoding/json"
	"reflect"
	"testing"

	"citizen/internal/jsondec"
)

// FuzzRecordedView: whatever recordedView's ReadView accepts,
// json.Unmarshal reads into the same view.
func FuzzRecordedView(f *testing.F) {
	for _, s := range []string{
		`{"interaction_id":"i","tenant":"t","task_type":"qa","model_version":"v1","engine":"upstream","messages":[{"role":"system","content":"s"},` +
			`{"role":"user","content":"caf\u00e9?","name":"n"},null],"params":{"a":[1,{"b":null}]},"prompt_tokens":[1,2],` +
			`"choices":[{"index":0,"message":{"role":"assistant","content":"ok","tool_calls":[]},"logprobs":[{"token":1,"logprob":-0.5,"top":[]}]},null],"usage":{"total_tokens":3}}`,
		`{"Tenant":"t"}`, `{"tenant":"a","tenant":"b"}`, `{"messages":[{"Role":"user"}]}`, `{"choices":[{"message":{"Content":"x"}}]}`,
		`{"messages":null,"choices":[]}`, `{"tenant":5}`, `{"te\u006eant":"x"}`, `{"choices":[{"message":null}]}`, `null`, `{} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast recordedView
		r := jsondec.NewReader(b)
		if !fast.ReadView(r) || !r.AtEnd() {
			return
		}
		var want recordedView
		if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("ReadView(%q) = %+v; json.Unmarshal: %+v, %v", b, fast, want, err)
		}
	})
}
