package services

import "testing"

// Adapters name a base that tools can resolve: the model's Hugging Face
// repository, or the checkpoint served.
func TestAdaptersNameAResolvableBase(t *testing.T) {
	a := &App{Config: DefaultConfig()}
	if got := a.baseModel(); got != "HuggingFaceTB/SmolLM2-135M-Instruct" {
		t.Fatalf("default base %q", got)
	}
	a.Config.Model.Name = "tiny"
	if got := a.baseModel(); got != "citizen-base-tiny" {
		t.Fatalf("tiny base %q", got)
	}
	a.Config.Model.Checkpoint = "/models/x.gguf"
	if got := a.baseModel(); got != "/models/x.gguf" {
		t.Fatalf("checkpoint base %q", got)
	}
}
