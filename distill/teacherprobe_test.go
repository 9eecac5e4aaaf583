package distill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
	"citizen/workplace"
)

// TestBenchTeacherForms (measurement; CITIZEN_PROBE_TEACHER=1): on the
// base checkpoint, refund questions answered in the old world (30 days)
// get a correction to 60 days as a workplace user writes it (the bare
// short form or the whole answer); per teacher prompt form, with and
// without two old-world exemplars, how many of the teacher's answers
// contain the correction (what corrections() keeps) and pass the new
// world's checker.
func TestBenchTeacherForms(t *testing.T) {
	if os.Getenv("CITIZEN_PROBE_TEACHER") != "1" {
		t.Skip("CITIZEN_PROBE_TEACHER not set")
	}
	ctx := context.Background()
	cm := openBaseChat(t)
	oldW := workplace.InitialWorld()
	newW := oldW.Clone()
	newW.Policy.RefundDays = 60
	newW.Policy.Version++
	fam := workplace.FamilyByName("policy")
	type q struct {
		user, answer string
		turn         workplace.Turn
	}
	var qs []q
	for i := uint64(0); len(qs) < 24 && i < 500; i++ {
		to := fam.Generate(rand.New(rand.NewPCG(11, i)), oldW)
		tn := fam.Generate(rand.New(rand.NewPCG(11, i)), newW)
		if !strings.Contains(tn.Turns[0].Answer, "refund window") || to.Turns[0].User != tn.Turns[0].User {
			continue
		}
		c, err := cm.Complete(ctx, chat.Request{Messages: []tokenizer.Message{{Role: "user", Content: to.Turns[0].User}}, MaxTokens: 48})
		if err != nil {
			t.Fatal(err)
		}
		if tn.Turns[0].Check(c.Message.Content).Correct {
			continue // right in the new world too (no feedback would come)
		}
		qs = append(qs, q{to.Turns[0].User, c.Message.Content, tn.Turns[0]})
	}
	shots := []Exemplar{{Prompt: "What is your refund window?", Answer: "The refund window is 30 days."},
		{Prompt: "How long is the return period?", Answer: "The refund window is 30 days."}}
	for _, form := range []string{"note"} {
		for _, withShots := range []bool{false, true} {
			for _, corr := range []string{"short", "answer"} {
				contains, correct := 0, 0
				var sample string
				for _, x := range qs {
					ex := Example{Type: "policy", Kind: KindPolicy, Messages: []events.ChatMessage{{Role: "user", Content: x.user}},
						Answer: events.ChatMessage{Role: "assistant", Content: x.answer}, Correction: x.turn.Short}
					if corr == "answer" {
						ex.Correction = x.turn.Answer
					}
					var exs []Exemplar
					if withShots {
						exs = shots
					}
					c, err := cm.Complete(ctx, chat.Request{Messages: teacherMessages(&ex, exs), MaxTokens: 96})
					if err != nil {
						t.Fatal(err)
					}
					if c.FinishReason == model.FinishStop && containsFold(c.Message.Content, ex.Correction) {
						contains++
					}
					if x.turn.Check(c.Message.Content).Correct {
						correct++
					}
					if sample == "" {
						sample = fmt.Sprintf("%q [%q] -> %q", x.user, ex.Correction, c.Message.Content)
					}
				}
				t.Logf("form %-8s exemplars %-5v correction %-6s: contains the correction %d/%d, correct %d/%d; e.g. %s",
					form, withShots, corr, contains, len(qs), correct, len(qs), sample)
			}
		}
	}
}
