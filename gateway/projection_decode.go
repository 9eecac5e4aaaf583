package gateway

import "citizen/internal/jsondec"

// ReadView implements events.ViewReader: the stored-completions index
// reads the recorded interactions that other gateways appended (and its
// own when the store delivers them before Append returns), skipping their
// messages, token ids and logprobs.
func (x *recordedEntry) ReadView(r *jsondec.Reader) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "interaction_id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&x.InteractionID)
		case "model_version":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&x.ModelVersion)
		case "metadata":
			return jsondec.Once(&seen, 1<<2) && r.StringMapInto(&x.Metadata)
		case "params":
			return jsondec.Once(&seen, 1<<3) && r.RawInto((*[]byte)(&x.Params))
		}
		return !jsondec.Known(k, "interaction_id", "model_version", "metadata", "params") && r.Skip()
	})
}
