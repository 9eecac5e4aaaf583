package distill

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
	"citizen/workplace"
)

// openBaseChat opens the shipped base checkpoint; the test is skipped
// with -short or when model/base is absent (a checkpoint that is there
// but does not open fails it).
func openBaseChat(t *testing.T) *chat.Model {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a cycle on the base checkpoint")
	}
	dir := filepath.Join("..", "model", "base")
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		t.Skip("no base checkpoint in model/base")
	}
	cm, err := chat.Open(dir, model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Close)
	return cm
}

// recordBaseAnswer has cm answer task's first turn greedily and records
// the interaction as the gateway would (exact tokens and logprobs, model
// version base).
func recordBaseAnswer(ctx context.Context, t *testing.T, cm *chat.Model, w *world, id, fam string, task workplace.Task) *chat.Completion {
	t.Helper()
	var msgs []events.ChatMessage
	if task.System != "" {
		msgs = append(msgs, events.ChatMessage{Role: "system", Content: task.System})
	}
	msgs = append(msgs, events.ChatMessage{Role: "user", Content: task.Turns[0].User})
	c, err := cm.Complete(ctx, chat.Request{Messages: toTok(msgs), MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	ch := events.Choice{Message: fromTok(c.Message), FinishReason: string(c.FinishReason)}
	for _, tk := range c.Tokens {
		ch.CompletionTokens = append(ch.CompletionTokens, tk.ID)
		ch.Logprobs = append(ch.Logprobs, events.TokenLogprob{Token: tk.ID, Logprob: tk.Logprob})
	}
	w.n++
	w.append(events.InteractionStream(id), &events.InteractionRecorded{InteractionID: id, Tenant: "t1", TaskType: fam,
		Model: "citizen", ModelVersion: "base", Engine: "embedded", Messages: msgs, PromptTokens: c.PromptIDs, Choices: []events.Choice{ch}})
	return c
}

// TestBaseCheckpointLearnsChangedPolicy runs one cycle on the shipped
// base checkpoint (skipped when model/base is absent or with -short):
// the base answers workplace questions itself (exact tokens and
// logprobs, as the gateway records them); the refund window changed from
// 30 to 60 days, so its refund answers get reward -1 and the correction
// "60 days"; the other answers are graded by the workplace's checkers.
func TestBaseCheckpointLearnsChangedPolicy(t *testing.T) {
	ctx := context.Background()
	cm := openBaseChat(t)
	base := cm.Engine.Model()
	w := newWorld(t)
	r := rand.New(rand.NewPCG(5, 6))
	wp := workplace.InitialWorld()
	refunds := 0
	for i := 0; i < 72; i++ {
		fam := []string{"policy", "policy", "classify"}[i%3]
		task := workplace.FamilyByName(fam).Generate(r, wp)
		turn := task.Turns[0]
		refund := strings.HasPrefix(turn.Answer, "The refund window is")
		id := "base-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		c := recordBaseAnswer(ctx, t, cm, w, id, fam, task)
		reward := -1.0
		if turn.Check(c.Message.Content).Correct {
			reward = 1
		}
		if refund { // the world changed: whatever the base said about 30 days is now wrong
			reward = -1
			refunds++
		}
		w.evaluate(id, fam, 1, reward, true)
		if refund {
			w.feedback(id, "60 days", "")
		}
	}
	d := newDistiller(t, w, func(c *Config) {
		c.Chat, c.Base = cm, base
		c.Hyper = Hyper{Seed: 1} // the defaults
		c.Pipeline.HoldOutFraction = 0.3
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("refund interactions %d; cycle: accepted=%v reason=%q eval=%v parent=%v kl=%.4f examples=%v steps=%v",
		refunds, wt.Accepted, wt.Reason, wt.OfflineEval, wt.ParentEval, wt.KLToParent, wt.ExamplesPerType, wt.Hyper["steps"])
	if !wt.Accepted {
		t.Fatalf("rejected: %s", wt.Reason)
	}
	cand, err := LoadVersion(wt, d.cfg.DataDir, base.Config)
	if err != nil {
		t.Fatal(err)
	}
	user := "Hi, how long can I wait before returning my desk lamp?"
	before := targetLogprob(t, cm.Tok, base, nil, user, "The refund window is 60 days.")
	after := targetLogprob(t, cm.Tok, base, cand, user, "The refund window is 60 days.")
	if err := cm.Engine.RegisterAdapter("cand", cand); err != nil {
		t.Fatal(err)
	}
	ans, err := cm.Complete(ctx, chat.Request{Messages: []tokenizer.Message{{Role: "user", Content: user}}, MaxTokens: 24, Adapter: "cand"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("corrected answer mean logprob: base %.3f candidate %.3f; candidate answers %q", before, after, ans.Message.Content)
	if after <= before+0.05 {
		t.Fatalf("corrected answer's logprob did not rise: %.3f -> %.3f", before, after)
	}
	// With the default hyper-parameters (50 steps here) the greedy answer
	// itself changes.
	if !strings.Contains(ans.Message.Content, "60 days") {
		t.Fatalf("candidate still answers %q", ans.Message.Content)
	}
}
