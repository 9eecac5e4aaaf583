package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"citizen/distill"
	"citizen/model"
	"citizen/model/chat"
	"citizen/pretrain"
)

var updateRehearsal = flag.Bool("update-rehearsal", false, "rewrite model/base/rehearsal.jsonl from the base's corpus")

// TestBaseRehearsalIsItsCorpus: the shipped base's rehearsal sample is
// exactly the first conversations of the corpus its model card names
// (seed, count), so what the distiller rehearses is the base's own
// training data. go test ./services -run TestBaseRehearsalIsItsCorpus
// -update-rehearsal rewrites it.
func TestBaseRehearsalIsItsCorpus(t *testing.T) {
	dir := filepath.Join("..", "model", "base")
	b, err := os.ReadFile(filepath.Join(dir, "card.json"))
	if err != nil {
		t.Fatal(err)
	}
	var card pretrain.ModelCard
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatal(err)
	}
	if card.Rehearsal <= 0 || card.Rehearsal > card.Conversations {
		t.Fatalf("card.json rehearsal_conversations %d: want 1..%d", card.Rehearsal, card.Conversations)
	}
	path := filepath.Join(dir, distill.RehearsalFile)
	cm, err := chat.Open(dir, model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	base := cm.Engine.Model()
	if *updateRehearsal {
		cases := pretrain.RehearsalSample(card.Seed, card.Rehearsal)
		if err := distill.MeasureRehearsal(context.Background(), base, cm.Tok, cases, base.Config.MaxPositionEmbeddings); err != nil {
			t.Fatal(err)
		}
		if _, err := pretrain.WriteRehearsal(path, cases); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(got); card.Artifacts[distill.RehearsalFile] != hex.EncodeToString(sum[:]) {
		t.Fatalf("card.json lists %s with sha256 %q; the file's is %x", distill.RehearsalFile, card.Artifacts[distill.RehearsalFile], sum)
	}
	cases, err := distill.ParseRehearsal(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	// Every case records the base's margin; a sample of them is what the
	// shipped model measures.
	var check []distill.RehearsalCase
	var recorded []float64
	plain := make([]distill.RehearsalCase, len(cases))
	for i, c := range cases {
		if c.Margin == nil {
			t.Fatalf("case %d records no margin", i)
		}
		if i%97 == 0 {
			check, recorded = append(check, distill.RehearsalCase{Type: c.Type, Messages: c.Messages}), append(recorded, *c.Margin)
		}
		plain[i] = distill.RehearsalCase{Type: c.Type, Messages: c.Messages}
	}
	if err := distill.MeasureRehearsal(context.Background(), base, cm.Tok, check, base.Config.MaxPositionEmbeddings); err != nil {
		t.Fatal(err)
	}
	for i, c := range check {
		if c.Margin == nil || math.Abs(*c.Margin-recorded[i]) > 1e-3 {
			t.Fatalf("case %d records margin %.4f; the base measures %v", i*97, recorded[i], c.Margin)
		}
	}
	var have, want bytes.Buffer
	if err := distill.WriteRehearsal(&have, plain); err != nil {
		t.Fatal(err)
	}
	if err := distill.WriteRehearsal(&want, pretrain.RehearsalSample(card.Seed, card.Rehearsal)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have.Bytes(), want.Bytes()) {
		t.Fatalf("%s differs from the first %d conversations of the corpus of seed %d", path, card.Rehearsal, card.Seed)
	}
	types := map[string]int{}
	for _, c := range cases {
		types[c.Type]++
	}
	if len(cases) != card.Rehearsal || len(types) < 6 {
		t.Fatalf("%d cases of %d types (%v): want %d of every initial type", len(cases), len(types), types, card.Rehearsal)
	}
}

// TestDistillRehearsalConfig: distill.rehearsal defaults to the
// checkpoint's rehearsal.jsonl (none when it has none), "off" turns it
// off, and a named file that is missing or has a bad line is an error
// naming it.
func TestDistillRehearsalConfig(t *testing.T) {
	dir := t.TempDir()
	line := `{"type":"arithmetic","messages":[{"role":"user","content":"2+3?"},{"role":"assistant","content":"5"}]}` + "\n"
	withFile := filepath.Join(dir, "ckpt")
	os.MkdirAll(withFile, 0o755)
	os.WriteFile(filepath.Join(withFile, distill.RehearsalFile), []byte(line+line), 0o644)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(line+`{"type":"arithmetic","messages":[{"role":"user","content":"2+3?"}]}`+"\n"), 0o644)
	for _, c := range []struct {
		checkpoint, setting string
		n                   int
		err                 string
	}{
		{withFile, "", 2, ""},
		{dir, "", 0, ""},
		{withFile, "off", 0, ""},
		{dir, filepath.Join(withFile, distill.RehearsalFile), 2, ""},
		{withFile, bad, 0, "distill.rehearsal: " + bad + ": rehearsal line 2: the last message is the user's"},
		{withFile, filepath.Join(dir, "none.jsonl"), 0, "none.jsonl: no such file"},
	} {
		a := &App{Config: DefaultConfig(), Log: slog.New(slog.DiscardHandler)}
		a.Config.Model.Checkpoint, a.Config.Distill.Rehearsal = c.checkpoint, c.setting
		cases, err := a.rehearsal()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: error %v, want %q", c.checkpoint, c.setting, err, c.err)
			}
			continue
		}
		if err != nil || len(cases) != c.n {
			t.Errorf("%s %q: %d cases, %v; want %d", c.checkpoint, c.setting, len(cases), err, c.n)
		}
	}
}
