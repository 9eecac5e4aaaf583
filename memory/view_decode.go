package memory

import "citizen/internal/jsondec"

// ReadView implements events.ViewReader: the fold reads every recorded
// interaction, and skipping its token ids and logprobs by reflection cost
// more than the rest of the fold. FuzzRecordedView compares it with
// json.Unmarshal.
func (x *recordedView) ReadView(r *jsondec.Reader) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "interaction_id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&x.InteractionID)
		case "tenant":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&x.Tenant)
		case "task_type":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&x.TaskType)
		case "model_version":
			return jsondec.Once(&seen, 1<<3) && r.StringInto(&x.ModelVersion)
		case "messages":
			if !jsondec.Once(&seen, 1<<4) {
				return false
			}
			if r.Null() {
				return true
			}
			x.Messages = []recordedMessage{}
			return r.Array(func() bool {
				x.Messages = append(x.Messages, recordedMessage{})
				m := &x.Messages[len(x.Messages)-1]
				if r.Null() {
					return true
				}
				var mseen uint64
				return r.Object(func(k []byte) bool {
					switch string(k) {
					case "role":
						return jsondec.Once(&mseen, 1<<0) && r.StringInto(&m.Role)
					case "content":
						return jsondec.Once(&mseen, 1<<1) && r.StringInto(&m.Content)
					}
					return !jsondec.Known(k, "role", "content") && r.Skip()
				})
			})
		case "choices":
			if !jsondec.Once(&seen, 1<<5) {
				return false
			}
			if r.Null() {
				return true
			}
			x.Choices = []recordedChoice{}
			return r.Array(func() bool {
				x.Choices = append(x.Choices, recordedChoice{})
				c := &x.Choices[len(x.Choices)-1]
				if r.Null() {
					return true
				}
				var cseen uint64
				return r.Object(func(k []byte) bool {
					if string(k) != "message" {
						return !jsondec.Known(k, "message") && r.Skip()
					}
					if !jsondec.Once(&cseen, 1) {
						return false
					}
					if r.Null() {
						return true
					}
					var mseen uint64
					return r.Object(func(k []byte) bool {
						if string(k) != "content" {
							return !jsondec.Known(k, "content") && r.Skip()
						}
						return jsondec.Once(&mseen, 1) && r.StringInto(&c.Message.Content)
					})
				})
			})
		}
		return !jsondec.Known(k, "interaction_id", "tenant", "task_type", "model_version", "messages", "choices") && r.Skip()
	})
}
