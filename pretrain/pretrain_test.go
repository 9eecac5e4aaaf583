package pretrain

import (
	"bytes"
	"citizen/distill"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPretrainWritesRehearsal: a (tiny) pretraining run leaves the first
// --rehearsal conversations of its corpus in rehearsal.jsonl and lists
// the file, its count and its sha256 in the model card.
func TestPretrainWritesRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains a model for a few steps")
	}
	out := t.TempDir()
	card, err := Run(context.Background(), Config{Out: out, Preset: "tiny", Conversations: 120, Vocab: 400,
		BatchTokens: 2048, Epochs: 0.1, Budget: time.Minute, LR: 2e-3, Seed: 3, EvalPerType: 1, Rehearsal: 50}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, distill.RehearsalFile))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := distill.ParseRehearsal(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		if cases[i].Margin == nil {
			t.Fatalf("case %d records no margin", i)
		}
		cases[i].Margin = nil
	}
	var have, want bytes.Buffer
	if err := distill.WriteRehearsal(&have, cases); err != nil {
		t.Fatal(err)
	}
	if err := distill.WriteRehearsal(&want, RehearsalSample(3, 50)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if !bytes.Equal(have.Bytes(), want.Bytes()) || card.Rehearsal != 50 || card.Artifacts[distill.RehearsalFile] != hex.EncodeToString(sum[:]) {
		t.Fatalf("rehearsal.jsonl (%d bytes) is not the corpus's first 50 conversations, or the card (%d, %q) does not say so",
			len(b), card.Rehearsal, card.Artifacts[distill.RehearsalFile])
	}
}
