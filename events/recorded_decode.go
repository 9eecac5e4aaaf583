package events

import "citizen/internal/jsondec"

// fastDecoder is a payload that reads its canonical encoding itself,
// without reflection. decode reports false for anything it does not read
// exactly as the strict encoding/json path (Registry.Decode's) reads it: a
// key it does not know, in other case or given twice, a value of another
// type. The payload may then hold part of the input, and Decode starts
// again from a zero payload on the general path.
type fastDecoder interface {
	decode(r *jsondec.Reader) bool
}

// decode implements fastDecoder: an interaction.recorded is decoded by
// every reader of the full payload (the evaluator first), and under
// encoding/json it was the largest decoding cost per interaction.
// FuzzDecodeRecorded compares it with the general path.
func (x *InteractionRecorded) decode(r *jsondec.Reader) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "interaction_id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&x.InteractionID)
		case "tenant":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&x.Tenant)
		case "user":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&x.User)
		case "conversation":
			return jsondec.Once(&seen, 1<<3) && r.StringInto(&x.Conversation)
		case "task_type":
			return jsondec.Once(&seen, 1<<4) && r.StringInto(&x.TaskType)
		case "metadata":
			return jsondec.Once(&seen, 1<<5) && r.StringMapInto(&x.Metadata)
		case "model":
			return jsondec.Once(&seen, 1<<6) && r.StringInto(&x.Model)
		case "model_version":
			return jsondec.Once(&seen, 1<<7) && r.StringInto(&x.ModelVersion)
		case "engine":
			return jsondec.Once(&seen, 1<<8) && r.StringInto(&x.Engine)
		case "tokenizer":
			return jsondec.Once(&seen, 1<<9) && r.StringInto(&x.Tokenizer)
		case "constraint":
			return jsondec.Once(&seen, 1<<10) && r.StringInto(&x.Constraint)
		case "messages":
			return jsondec.Once(&seen, 1<<11) && decodeSlice(r, &x.Messages, decodeChatMessage)
		case "lessons":
			return jsondec.Once(&seen, 1<<12) && decodeSlice(r, &x.Lessons, decodeAppliedLesson)
		case "tools":
			return jsondec.Once(&seen, 1<<13) && decodeSlice(r, &x.Tools, decodeTool)
		case "params":
			return jsondec.Once(&seen, 1<<14) && r.RawInto((*[]byte)(&x.Params))
		case "prompt_tokens":
			return jsondec.Once(&seen, 1<<15) && r.IntsInto(&x.PromptTokens)
		case "choices":
			return jsondec.Once(&seen, 1<<16) && decodeSlice(r, &x.Choices, decodeChoice)
		case "usage":
			return jsondec.Once(&seen, 1<<17) && decodeUsage(r, &x.Usage)
		case "latency_ms":
			return jsondec.Once(&seen, 1<<18) && r.Float64Into(&x.LatencyMS)
		case "ttft_ms":
			return jsondec.Once(&seen, 1<<19) && r.Float64Into(&x.TTFTMS)
		case "stream":
			return jsondec.Once(&seen, 1<<20) && r.BoolInto(&x.Stream)
		}
		return false
	})
}

// decodeSlice reads a slice field whose elements elem reads (null sets it
// to nil; a null element is a zero one, as encoding/json leaves it).
func decodeSlice[T any](r *jsondec.Reader, s *[]T, elem func(*jsondec.Reader, *T) bool) bool {
	if r.Null() {
		*s = nil
		return true
	}
	out := []T{}
	ok := r.Array(func() bool {
		var zero T
		out = append(out, zero)
		if r.Null() {
			return true
		}
		return elem(r, &out[len(out)-1])
	})
	*s = out
	return ok
}

func decodeChatMessage(r *jsondec.Reader, m *ChatMessage) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "role":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&m.Role)
		case "content":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&m.Content)
		case "name":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&m.Name)
		case "tool_calls":
			return jsondec.Once(&seen, 1<<3) && decodeSlice(r, &m.ToolCalls, decodeToolCall)
		case "tool_call_id":
			return jsondec.Once(&seen, 1<<4) && r.StringInto(&m.ToolCallID)
		}
		return false
	})
}

func decodeToolCall(r *jsondec.Reader, c *ToolCall) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&c.ID)
		case "name":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&c.Name)
		case "arguments":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&c.Arguments)
		}
		return false
	})
}

func decodeAppliedLesson(r *jsondec.Reader, l *AppliedLesson) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&l.ID)
		case "statement":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&l.Statement)
		}
		return false
	})
}

func decodeTool(r *jsondec.Reader, t *Tool) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "name":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&t.Name)
		case "description":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&t.Description)
		case "parameters":
			return jsondec.Once(&seen, 1<<2) && r.RawInto((*[]byte)(&t.Parameters))
		}
		return false
	})
}

func decodeUsage(r *jsondec.Reader, u *Usage) bool {
	if r.Null() {
		return true
	}
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "prompt_tokens":
			return jsondec.Once(&seen, 1<<0) && r.IntInto(&u.PromptTokens)
		case "completion_tokens":
			return jsondec.Once(&seen, 1<<1) && r.IntInto(&u.CompletionTokens)
		case "total_tokens":
			return jsondec.Once(&seen, 1<<2) && r.IntInto(&u.TotalTokens)
		}
		return false
	})
}

func decodeChoice(r *jsondec.Reader, c *Choice) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "index":
			return jsondec.Once(&seen, 1<<0) && r.IntInto(&c.Index)
		case "message":
			return jsondec.Once(&seen, 1<<1) && (r.Null() || decodeChatMessage(r, &c.Message))
		case "finish_reason":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&c.FinishReason)
		case "completion_tokens":
			return jsondec.Once(&seen, 1<<3) && r.IntsInto(&c.CompletionTokens)
		case "logprobs":
			return jsondec.Once(&seen, 1<<4) && decodeSlice(r, &c.Logprobs, decodeTokenLogprob)
		}
		return false
	})
}

func decodeTokenLogprob(r *jsondec.Reader, t *TokenLogprob) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "token":
			return jsondec.Once(&seen, 1<<0) && r.IntInto(&t.Token)
		case "logprob":
			return jsondec.Once(&seen, 1<<1) && r.Float32Into(&t.Logprob)
		case "top":
			return jsondec.Once(&seen, 1<<2) && decodeSlice(r, &t.Top, decodeTopLogprob)
		}
		return false
	})
}

func decodeTopLogprob(r *jsondec.Reader, a *TopLogprob) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "token":
			return jsondec.Once(&seen, 1<<0) && r.IntInto(&a.Token)
		case "logprob":
			return jsondec.Once(&seen, 1<<1) && r.Float32Into(&a.Logprob)
		}
		return false
	})
}

// decode implements fastDecoder: every worker of a process reads each
// interaction.evaluated (the first read fills the decode cache).
// FuzzDecodeEvaluated compares it with the general path.
func (x *InteractionEvaluated) decode(r *jsondec.Reader) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "interaction_id":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&x.InteractionID)
		case "seq":
			return jsondec.Once(&seen, 1<<1) && r.IntInto(&x.Seq)
		case "user":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&x.User)
		case "lessons":
			return jsondec.Once(&seen, 1<<3) && r.StringsInto(&x.Lessons)
		case "task_type":
			return jsondec.Once(&seen, 1<<4) && r.StringInto(&x.TaskType)
		case "type_source":
			return jsondec.Once(&seen, 1<<5) && r.StringInto(&x.TypeSource)
		case "type_confidence":
			return jsondec.Once(&seen, 1<<6) && r.Float64Into(&x.TypeConfidence)
		case "model_version":
			return jsondec.Once(&seen, 1<<7) && r.StringInto(&x.ModelVersion)
		case "graders":
			return jsondec.Once(&seen, 1<<8) && decodeSlice(r, &x.Graders, decodeGraderResult)
		case "checks":
			return jsondec.Once(&seen, 1<<9) && decodeSlice(r, &x.Checks, decodeGraderResult)
		case "self":
			if !jsondec.Once(&seen, 1<<10) {
				return false
			}
			if r.Null() {
				x.Self = nil
				return true
			}
			x.Self = &SelfEvaluation{}
			return decodeSelfEvaluation(r, x.Self)
		case "faults":
			return jsondec.Once(&seen, 1<<11) && decodeSlice(r, &x.Faults, decodeFault)
		case "outcome":
			return jsondec.Once(&seen, 1<<12) && r.StringInto(&x.Outcome)
		case "feedback_polarity":
			if !jsondec.Once(&seen, 1<<13) {
				return false
			}
			if r.Null() {
				x.FeedbackPolarity = nil
				return true
			}
			var v float64
			x.FeedbackPolarity = &v
			return r.Float64Into(&v)
		case "reward":
			return jsondec.Once(&seen, 1<<14) && r.Float64Into(&x.Reward)
		case "reward_terms":
			return jsondec.Once(&seen, 1<<15) && r.Float64MapInto(&x.RewardTerms)
		case "trainable":
			return jsondec.Once(&seen, 1<<16) && r.BoolInto(&x.Trainable)
		case "policy":
			return jsondec.Once(&seen, 1<<17) && r.StringInto(&x.Policy)
		case "rubric_version":
			return jsondec.Once(&seen, 1<<18) && r.StringInto(&x.RubricVersion)
		case "graded_as":
			return jsondec.Once(&seen, 1<<19) && r.StringInto(&x.GradedAs)
		case "evaluator_version":
			return jsondec.Once(&seen, 1<<20) && r.StringInto(&x.EvaluatorVersion)
		case "answer_length":
			return jsondec.Once(&seen, 1<<21) && r.IntInto(&x.AnswerLength)
		case "tool_calls":
			return jsondec.Once(&seen, 1<<22) && r.IntInto(&x.ToolCalls)
		case "turn_tool_calls":
			return jsondec.Once(&seen, 1<<23) && r.IntInto(&x.TurnToolCalls)
		}
		return false
	})
}

func decodeGraderResult(r *jsondec.Reader, g *GraderResult) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "name":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&g.Name)
		case "version":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&g.Version)
		case "score":
			return jsondec.Once(&seen, 1<<2) && r.Float64Into(&g.Score)
		case "weight":
			return jsondec.Once(&seen, 1<<3) && r.Float64Into(&g.Weight)
		case "label":
			return jsondec.Once(&seen, 1<<4) && r.StringInto(&g.Label)
		case "explanation":
			return jsondec.Once(&seen, 1<<5) && r.StringInto(&g.Explanation)
		}
		return false
	})
}

func decodeFault(r *jsondec.Reader, f *Fault) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "kind":
			return jsondec.Once(&seen, 1<<0) && r.StringInto(&f.Kind)
		case "attribution":
			return jsondec.Once(&seen, 1<<1) && r.StringInto(&f.Attribution)
		case "detail":
			return jsondec.Once(&seen, 1<<2) && r.StringInto(&f.Detail)
		}
		return false
	})
}

func decodeSelfEvaluation(r *jsondec.Reader, s *SelfEvaluation) bool {
	var seen uint64
	return r.Object(func(k []byte) bool {
		switch string(k) {
		case "mean_logprob":
			return jsondec.Once(&seen, 1<<0) && r.Float64Into(&s.MeanLogprob)
		case "min_logprob":
			return jsondec.Once(&seen, 1<<1) && r.Float64Into(&s.MinLogprob)
		case "entropy":
			return jsondec.Once(&seen, 1<<2) && r.Float64Into(&s.Entropy)
		case "verdict":
			return jsondec.Once(&seen, 1<<3) && r.StringInto(&s.Verdict)
		case "score":
			return jsondec.Once(&seen, 1<<4) && r.Float64Into(&s.Score)
		}
		return false
	})
}
