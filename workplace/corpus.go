package workplace

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// CorpusOptions tune Corpus. Zero values take the defaults.
type CorpusOptions struct {
	// Families to draw from; default InitialFamilies().
	Families []string
	// World whose answers are correct; default InitialWorld().
	World *World
	// HintRate is the share of conversations where a note or a correction in the context changes
	// the answer (default 0.15; negative for none).
	HintRate float64
	// FaultRate is the share of tool calls whose result is an error (default 0.1; negative for none).
	FaultRate float64
}

func (o CorpusOptions) withDefaults() CorpusOptions {
	if len(o.Families) == 0 {
		o.Families = InitialFamilies()
	}
	if o.World == nil {
		w := InitialWorld()
		o.World = &w
	}
	if o.HintRate == 0 {
		o.HintRate = 0.15
	}
	if o.FaultRate == 0 {
		o.FaultRate = 0.1
	}
	return o
}

// Corpus returns n conversations in OpenAI message form whose assistant turns are correct in
// opts.World (time zero by default): every family, tool calls with their results included, a share
// of failed tool calls answered with an apology, and a share of hinted conversations where a note
// ("Note: the refund window is now 60 days.") or a user's correction of a wrong answer changes
// the right answer. The same seed and options give the same corpus.
func Corpus(seed int64, n int, opts CorpusOptions) []Conversation {
	o := opts.withDefaults()
	var fams []Family
	for _, name := range o.Families {
		if f := FamilyByName(name); f != nil {
			fams = append(fams, f)
		}
	}
	if len(fams) == 0 {
		return nil
	}
	out := make([]Conversation, 0, n)
	for i := 0; i < n; i++ {
		c, _ := corpusEntry(seed, i, fams, o)
		out = append(out, c)
	}
	return out
}

// corpusEntry builds conversation i and returns the task whose last turn it answers.
func corpusEntry(seed int64, i int, fams []Family, o CorpusOptions) (Conversation, Task) {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
	f := fams[r.IntN(len(fams))]
	if r.Float64() < o.HintRate {
		if c, t, ok := hinted(r, f, *o.World); ok {
			return c, t
		}
	}
	t := f.Generate(r, *o.World)
	return transcript(r, t, o.FaultRate), t
}

// transcript plays a task with every answer correct; a tool call fails with probability faultRate.
func transcript(r *rand.Rand, t Task, faultRate float64) Conversation {
	c := Conversation{Type: t.Type, Tools: t.Tools, ResponseFormat: t.ResponseFormat}
	if t.System != "" {
		c.Messages = append(c.Messages, Message{Role: "system", Content: t.System})
	}
	for _, turn := range t.Turns {
		c.Messages = append(c.Messages, Message{Role: "user", Content: turn.User})
		if turn.Tool != nil {
			call := ToolCall{ID: callID(r), Type: "function",
				Function: FunctionCall{Name: turn.Tool.Name, Arguments: turn.Tool.CallJSON()}}
			result, answer := turn.Tool.Result, turn.Answer
			faulted := r.Float64() < faultRate
			if faulted {
				result, answer = pick(r, faultResults), turn.Tool.FaultAnswer
			}
			c.Messages = append(c.Messages,
				Message{Role: "assistant", ToolCalls: []ToolCall{call}},
				Message{Role: "tool", ToolCallID: call.ID, Content: result},
				Message{Role: "assistant", Content: answer})
			if faulted {
				return c
			}
			continue
		}
		c.Messages = append(c.Messages, Message{Role: "assistant", Content: turn.Answer})
	}
	return c
}

var faultResults = []string{`{"error":"upstream unavailable"}`, `{"error":"timeout"}`, `{"error":"internal error"}`}

func callID(r *rand.Rand) string { return fmt.Sprintf("call_%08x", r.Uint32()) }

// hinted builds a conversation whose right answer differs from time zero because of its context:
// for policy, a note announcing a changed policy; for any family, a wrong first answer followed by
// the user's correction and the corrected answer.
func hinted(r *rand.Rand, f Family, w World) (Conversation, Task, bool) {
	if f.Name() == "policy" && r.IntN(3) > 0 {
		kind := r.IntN(numPolicyKinds)
		nw := w.Clone()
		note := changePolicy(r, &nw.Policy, kind)
		t := genPolicy(r, nw, kind)
		if r.IntN(4) == 0 { // an unrelated note that does not change this answer
			other := (kind + 2) % numPolicyKinds
			if other == askEligible {
				other = askFee
			}
			nw2 := nw.Clone()
			note2 := changePolicy(r, &nw2.Policy, other)
			note = note + " " + note2
			nw.Policy = mergeField(nw.Policy, nw2.Policy, other)
			t = genPolicy(r, nw, kind)
		}
		if kind != askEligible && r.IntN(3) == 0 {
			// The hint is a customer's earlier correction rather than an announcement.
			note = pick(r, []string{"Feedback from a customer: ", "A customer wrote: ", "Earlier feedback: "}) +
				`"` + fill(pick(r, correctionTexts), "short", t.Turns[0].Short) + `"`
		}
		c := Conversation{Type: t.Type, Hinted: true}
		if r.IntN(2) == 0 {
			c.Messages = []Message{{Role: "system", Content: note}, {Role: "user", Content: t.Turns[0].User}}
		} else {
			c.Messages = []Message{{Role: "user", Content: note + " " + t.Turns[0].User}}
		}
		c.Messages = append(c.Messages, Message{Role: "assistant", Content: t.Turns[0].Answer})
		return c, t, true
	}
	// Correction in context: the task, a wrong answer, the correction, the right answer.
	t := f.Generate(r, w)
	turn := t.Turns[0]
	if turn.Tool != nil {
		return Conversation{}, Task{}, false
	}
	wrong, ok := perturb(r, turn.Answer)
	if !ok || turn.Check(wrong).Correct {
		wrong = f.Generate(r, w).Turns[0].Answer
	}
	if turn.Check(wrong).Correct {
		return Conversation{}, Task{}, false
	}
	fb := fill(pick(r, correctionTexts), "short", turn.Short)
	c := Conversation{Type: t.Type, Tools: t.Tools, ResponseFormat: t.ResponseFormat, Hinted: true}
	if t.System != "" {
		c.Messages = append(c.Messages, Message{Role: "system", Content: t.System})
	}
	c.Messages = append(c.Messages,
		Message{Role: "user", Content: turn.User},
		Message{Role: "assistant", Content: wrong},
		Message{Role: "user", Content: fb},
		Message{Role: "assistant", Content: turn.Answer})
	t.Turns = t.Turns[:1]
	return c, t, true
}

var (
	refundAlts = []int{14, 21, 45, 60, 90}
	feeAlts    = []float64{2.99, 3.99, 5.99, 6.5, 7.99}
	freeAlts   = []float64{25, 35, 40, 75, 100}
	hourAlts   = [][2]int{{8, 16}, {8, 20}, {10, 18}, {7, 19}, {9, 21}}
)

// changePolicy changes the field that question kind asks about to a new value and returns a note
// announcing it.
func changePolicy(r *rand.Rand, p *Policy, kind int) string {
	p.Version++
	switch kind {
	case askRefund, askEligible:
		p.RefundDays = pickOther(r, refundAlts, p.RefundDays)
		return fill(pick(r, []string{"Note: the refund window is now {d} days.",
			"Policy update: refunds are accepted within {d} days.", "As of today the refund window is {d} days."}), "d", itoa(p.RefundDays))
	case askFee:
		p.ShippingFee = pickOther(r, feeAlts, p.ShippingFee)
		return fill(pick(r, []string{"Note: standard shipping now costs {x}.", "Policy update: the shipping fee is now {x}."}), "x", fmtMoney(p.ShippingFee))
	case askFreeOver:
		p.FreeShippingOver = pickOther(r, freeAlts, p.FreeShippingOver)
		return fill(pick(r, []string{"Note: shipping is now free on orders over {x}.", "Policy update: free shipping now starts at {x}."}), "x", fmtMoney(p.FreeShippingOver))
	default:
		h := hourAlts[r.IntN(len(hourAlts))]
		for h[0] == p.SupportOpen && h[1] == p.SupportClose {
			h = hourAlts[r.IntN(len(hourAlts))]
		}
		p.SupportOpen, p.SupportClose = h[0], h[1]
		return fill(pick(r, []string{"Note: support is now open from {a} to {b}.", "Policy update: support hours are now {a} to {b}."}),
			"a", fmtHour(h[0]), "b", fmtHour(h[1]))
	}
}

func mergeField(dst, src Policy, kind int) Policy {
	switch kind {
	case askRefund, askEligible:
		dst.RefundDays = src.RefundDays
	case askFee:
		dst.ShippingFee = src.ShippingFee
	case askFreeOver:
		dst.FreeShippingOver = src.FreeShippingOver
	default:
		dst.SupportOpen, dst.SupportClose = src.SupportOpen, src.SupportClose
	}
	return dst
}

func pickOther[T comparable](r *rand.Rand, xs []T, not T) T {
	alts := slices.DeleteFunc(slices.Clone(xs), func(x T) bool { return x == not })
	return pick(r, alts)
}

// perturb turns a right answer into a near miss by changing the last number it states (off by a
// little, by a factor of ten, or with a slipped decimal), as a small model's mistakes tend to be.
func perturb(r *rand.Rand, answer string) (string, bool) {
	ns := numbers(answer)
	for i := len(ns) - 1; i >= 0; i-- {
		loc := numRe.FindStringIndex(answer[ns[i].pos:])
		if loc == nil || loc[0] != 0 {
			continue // a number word
		}
		end := ns[i].pos + loc[1]
		v := ns[i].val
		var nv float64
		switch r.IntN(3) {
		case 0:
			nv = v + float64(1+r.IntN(5))*pick(r, []float64{-1, 1})
		case 1:
			nv = v * 10
		default:
			nv = v / 10
		}
		if nv == v || nv < 0 {
			nv = v + 1
		}
		s := fmtNum(nv)
		if strings.HasSuffix(answer[:ns[i].pos], "$") {
			s = strconv.FormatFloat(nv, 'f', 2, 64)
		}
		return answer[:ns[i].pos] + s + answer[end:], true
	}
	return "", false
}
