package distill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
)

// The fixture: a tiny tokenizer and a tiny model pretrained for a moment
// on the "old world", where the refund window is 30 days.
type qa struct{ typ, user, answer string }

func oldWorld(i int) qa {
	switch i % 4 {
	case 0:
		return qa{"policy", fmt.Sprintf("what is the refund window for order %d?", i), "The refund window is 30 days."}
	case 1:
		return qa{"policy", fmt.Sprintf("when is support open on day %d?", i%7), "Support is open 9 to 5."}
	case 2:
		return qa{"order_status", fmt.Sprintf("where is order %d?", i), fmt.Sprintf("Order %d has shipped.", i)}
	default:
		a, b := i%10, (i/3)%10
		return qa{"arithmetic", fmt.Sprintf("what is %d plus %d?", a, b), fmt.Sprintf("The answer is %d.", a+b)}
	}
}

var fixture struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	base *model.Model
	err  error
}

func tinyBase(t testing.TB) (*tokenizer.Tokenizer, *model.Model) {
	t.Helper()
	fixture.once.Do(func() {
		var corpus []string
		for i := 0; i < 200; i++ {
			q := oldWorld(i)
			corpus = append(corpus, q.user, q.answer)
		}
		corpus = append(corpus, "The refund window is 60 days.", "The correct answer is 60 days.", "Note:", "Order is lost.")
		tok, err := tokenizer.Train(corpus, 360, nil)
		if err != nil {
			fixture.err = err
			return
		}
		cfg := model.Tiny3M()
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 384, 64, 128, 2
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.MaxPositionEmbeddings = 4, 4, 16, 128
		m, err := model.NewRandom(cfg, 7)
		if err != nil {
			fixture.err = err
			return
		}
		tr, err := model.NewTrainer(m, nil, model.TrainConfig{LR: 3e-3, WarmupSteps: 10, TotalSteps: 300, GradClip: 1})
		if err != nil {
			fixture.err = err
			return
		}
		r := rand.New(rand.NewPCG(1, 2))
		for s := 0; s < 300; s++ {
			var seqs [][]int
			var masks [][]bool
			for k := 0; k < 16; k++ {
				q := oldWorld(r.IntN(400))
				ids, mask, err := tok.RenderChat([]tokenizer.Message{{Role: "user", Content: q.user}, {Role: "assistant", Content: q.answer}}, false)
				if err != nil {
					fixture.err = err
					return
				}
				seqs, masks = append(seqs, ids), append(masks, mask)
			}
			if _, err := tr.Step(model.NextTokenBatch(seqs, masks, nil)); err != nil {
				fixture.err = err
				return
			}
		}
		fixture.tok, fixture.base = tok, m
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.tok, fixture.base
}

// recordQA appends one interaction answered with answer, its tokens and
// the base model's logprobs as the behaviour policy's.
func (w *world) recordQA(tok *tokenizer.Tokenizer, m *model.Model, typ, user, answer string) string {
	w.t.Helper()
	msgs := []events.ChatMessage{{Role: "user", Content: user}}
	prompt, _, err := tok.RenderChat(toTok(msgs), true)
	if err != nil {
		w.t.Fatal(err)
	}
	comp, err := answerTokens(tok, msgs, answer)
	if err != nil {
		w.t.Fatal(err)
	}
	lps, err := m.SequenceLogprobs([][]int{append(append([]int(nil), prompt...), comp...)}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return w.record(chatRec{typ: typ, user: user, answer: answer, prompt: prompt, completion: comp, logprobs: lps[0][len(prompt):]})
}

// correctedQA records answer (recordQA), graded wrong (reward -1), with a
// customer's feedback: correction and hint.
func (w *world) correctedQA(tok *tokenizer.Tokenizer, m *model.Model, typ, user, answer, correction, hint string) string {
	w.t.Helper()
	id := w.recordQA(tok, m, typ, user, answer)
	w.evaluate(id, typ, 1, -1, true)
	w.feedback(id, correction, hint)
	return id
}

// newWorldData writes a cycle's worth of graded interactions in the new
// world: the refund window is now 60 days, so the base's "30 days" gets a
// bad reward and the customer's correction; other types are graded as
// before (mostly right, some wrong).
func newWorldData(w *world, tok *tokenizer.Tokenizer, m *model.Model, n, offset int) {
	for i := offset; i < offset+n; i++ {
		q := oldWorld(i)
		switch {
		case q.typ == "policy" && i%4 == 0:
			id := w.recordQA(tok, m, q.typ, q.user, q.answer)
			w.evaluate(id, q.typ, 1, 0, true)
			w.feedback(id, "60 days", "")
			w.evaluate(id, q.typ, 2, -1, true)
		case i%8 == 7 || i%8 == 6: // wrong answers
			wrong := "Order is lost."
			if q.typ == "arithmetic" {
				wrong = "The answer is 0."
			}
			id := w.recordQA(tok, m, q.typ, q.user, wrong)
			w.evaluate(id, q.typ, 1, -1, true)
		default:
			id := w.recordQA(tok, m, q.typ, q.user, q.answer)
			w.evaluate(id, q.typ, 1, 1, true)
		}
	}
}

// targetLogprob is the mean per-token logprob of answer to user under
// base+adapter.
func targetLogprob(t *testing.T, tok chat.Format, m *model.Model, a *model.Adapter, user, answer string) float64 {
	t.Helper()
	msgs := []events.ChatMessage{{Role: "user", Content: user}}
	prompt, _, _ := tok.RenderChat(toTok(msgs), true)
	comp, err := answerTokens(tok, msgs, answer)
	if err != nil {
		t.Fatal(err)
	}
	lp, _, err := completionLogprobs(context.Background(), m, a, []*Example{{PromptTokens: prompt, CompletionTokens: comp}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := 0.0
	for _, x := range lp[0] {
		s += float64(x)
	}
	return s / float64(len(lp[0]))
}

func newChat(tok *tokenizer.Tokenizer, m *model.Model) *chat.Model {
	return chat.New(tok, model.NewEngine(m, model.EngineConfig{}))
}

// renderedQA is a one-turn conversation asking user, rendered by tok: its
// messages, prompt tokens and answer's completion tokens.
func renderedQA(t testing.TB, tok *tokenizer.Tokenizer, user, answer string) (msgs []events.ChatMessage, prompt, comp []int) {
	t.Helper()
	msgs = []events.ChatMessage{{Role: "user", Content: user}}
	prompt, _, err := tok.RenderChat(toTok(msgs), true)
	if err != nil {
		t.Fatal(err)
	}
	if comp, err = answerTokens(tok, msgs, answer); err != nil {
		t.Fatal(err)
	}
	return msgs, prompt, comp
}
