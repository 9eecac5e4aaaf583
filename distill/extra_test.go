package distill

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"citizen/events"
	"citizen/model"
)

// regressionSuite is a fixed set of old-world good answers of the types
// that did not change.
func regressionSuite(t *testing.T) []Example {
	tok, _ := tinyBase(t)
	var out []Example
	for i := 1000; i < 1016; i++ {
		q := oldWorld(i)
		if q.typ == "policy" && i%4 == 0 {
			continue // the refund answer changed on purpose
		}
		msgs := []events.ChatMessage{{Role: "user", Content: q.user}}
		prompt, _, _ := tok.RenderChat(toTok(msgs), true)
		comp, err := answerTokens(tok, msgs, q.answer)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Example{Interaction: fmt.Sprint("reg", i), Type: q.typ, Kind: KindHoldOut, Messages: msgs,
			PromptTokens: prompt, CompletionTokens: comp, Reward: 1})
	}
	return out
}

func TestCommandTrainerSuccessAndRegressionSuite(t *testing.T) {
	tok, base := tinyBase(t)
	// A prepared adapter stands in for what an external trainer writes.
	ready := t.TempDir()
	a, err := model.NewAdapter("ext", base.Config, DefaultLoRA(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SavePEFT(ready, "citizen-base"); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	newWorldData(w, tok, base, 48, 0)
	d := newDistiller(t, w, func(c *Config) {
		c.Trainer = &CommandTrainer{Command: []string{"sh", "-c",
			`test -s "{dataset}/manifest.json" && test -s "$CITIZEN_DATASET/train.jsonl" && cp "` + ready + `"/* "{output}/"`}}
		c.Regression = regressionSuite(t)
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wt.Artifact == nil || !wt.Accepted || wt.KLToParent > 1e-9 {
		// A fresh adapter (B = 0) changes nothing: accepted, KL zero.
		t.Fatalf("external trainer cycle: %+v", wt)
	}
	if _, ok := wt.OfflineEval["regression/order_status"]; !ok {
		t.Fatalf("no regression suite scores in %v", wt.OfflineEval)
	}
	if wt.OfflineEval["regression/arithmetic"] != wt.ParentEval["regression/arithmetic"] {
		t.Fatalf("an unchanged model scored differently: %v vs %v", wt.OfflineEval, wt.ParentEval)
	}
}

func TestAccuracyEvaluator(t *testing.T) {
	tok, base := tinyBase(t)
	cm := newChat(tok, base)
	defer cm.Close()
	exs := regressionSuite(t)
	var mu sync.Mutex
	graded := 0
	acc := Accuracy(cm, 16, func(ex Example, ans events.ChatMessage) (float64, bool) {
		mu.Lock()
		graded++
		mu.Unlock()
		if ex.Type == "policy" {
			return 0, false // no checker for this type
		}
		if strings.Contains(ans.Content, "answer") || strings.Contains(ans.Content, "Order") {
			return 1, true
		}
		return 0, true
	})
	ad, _ := model.NewAdapter("x", base.Config, DefaultLoRA(), 1)
	ev := Combine(map[string]EvalFunc{"acc": acc, "ll": LogLikelihood(0.5)})
	got, err := ev(context.Background(), base, ad, exs)
	if err != nil {
		t.Fatal(err)
	}
	if graded != len(exs) {
		t.Fatalf("graded %d of %d", graded, len(exs))
	}
	if _, ok := got["acc/policy"]; ok {
		t.Fatal("a type no grader judged got a score")
	}
	for _, k := range []string{"acc/order_status", "acc/arithmetic", "ll/order_status", "ll/policy"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("missing %s in %v", k, got)
		}
	}
	if len(cm.Engine.Adapters()) != 0 {
		t.Fatalf("evaluation adapter left registered: %v", cm.Engine.Adapters())
	}
}

type adder struct {
	added     chan string
	fallbacks chan string
}

func (a *adder) AddVersion(id, parent string, ad *model.Adapter) error {
	a.added <- id + "<-" + parent
	return nil
}

func (a *adder) AddFallback(id, servedBy, reason string) error {
	a.fallbacks <- id + "->" + servedBy
	return nil
}

func TestSyncVersionsServesAccepted(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 48, 0)
	d := newDistiller(t, w, func(c *Config) { c.Hyper.Steps = 4 })
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil || !wt.Accepted {
		t.Fatalf("%v %+v", err, wt)
	}
	// A rejected version is not served.
	w.append(events.VersionStream("rejected"), &events.WeightsTrained{Version: "rejected", Parent: "base", Accepted: false, Reason: "gate"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if filepath.IsAbs(wt.Artifact.Path) {
		t.Fatalf("artifact path %s is absolute: a copied data dir would serve the original's weights", wt.Artifact.Path)
	}
	a := &adder{added: make(chan string, 4), fallbacks: make(chan string, 4)}
	done := make(chan error, 1)
	go func() { done <- SyncVersions(ctx, w.store, a, d.cfg.DataDir, base.Config, nil) }()
	if got := <-a.added; got != wt.Version+"<-base" {
		t.Fatalf("served %q", got)
	}
	// An accepted version without a loadable artifact is served by its
	// parent, and a version.unavailable says so; the next good one is
	// served, in store order.
	w.append(events.VersionStream("broken"), &events.WeightsTrained{Version: "broken", Parent: wt.Version, Accepted: true})
	bad := *wt.Artifact
	bad.SHA256 = strings.Repeat("0", 64) // fails its checksum
	w.append(events.VersionStream("tampered"), &events.WeightsTrained{Version: "tampered", Accepted: true, Artifact: &bad})
	w.append(events.VersionStream("two"), &events.WeightsTrained{Version: "two", Parent: wt.Version, Accepted: true, Artifact: wt.Artifact})
	if got := <-a.fallbacks; got != "broken->"+wt.Version {
		t.Fatalf("fallback %q", got)
	}
	if got := <-a.fallbacks; got != "tampered->base" {
		t.Fatalf("fallback %q", got)
	}
	if got := <-a.added; got != "two<-"+wt.Version {
		t.Fatalf("served %q", got)
	}
	// A rejected version with weights is served once a rollout starts it
	// (an operator's start), not before.
	w.append(events.VersionStream("gated"), &events.WeightsTrained{Version: "gated", Parent: wt.Version, Accepted: false, Reason: "gate", Artifact: wt.Artifact})
	w.append(events.VersionStream("three"), &events.WeightsTrained{Version: "three", Parent: wt.Version, Accepted: true, Artifact: wt.Artifact})
	if got := <-a.added; got != "three<-"+wt.Version {
		t.Fatalf("served %q before any rollout of the rejected version", got)
	}
	w.append(events.RolloutStream("r1"), &events.RolloutStarted{RolloutChange: events.RolloutChange{RolloutID: "r1", Candidate: "gated", Stable: wt.Version, Weight: 0.05, Actor: "operator"}})
	if got := <-a.added; got != "gated<-"+wt.Version {
		t.Fatalf("served %q", got)
	}
	cancel()
	<-done
	evs, err := w.store.ReadAll(context.Background(), 0, events.Filter{Types: []string{events.TypeVersionUnavailable}}, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("version.unavailable events: %d %v", len(evs), err)
	}
	p, _ := events.Decode(&evs[1])
	if u := p.(*events.VersionUnavailable); u.Version != "tampered" || u.ServedBy != "base" || !strings.Contains(u.Reason, "sha256") {
		t.Fatalf("%+v", u)
	}
}
