package model_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"citizen/model"
)

// A distiller-style cycle: train a LoRA adapter on weighted examples, save it in PEFT layout,
// load it into a serving engine next to the base model and generate with it.
func Example() {
	cfg := model.Tiny3M()
	cfg.NumHiddenLayers, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 1, 32, 64, 2, 2, 16
	base, _ := model.NewRandom(cfg, 1)

	// Training: only assistant tokens are targets; per-token weights (e.g. advantages).
	adapter, _ := model.NewAdapter("support-v2", cfg, model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj"}}, 7)
	trainer, _ := model.NewTrainer(base, adapter, model.TrainConfig{LR: 1e-3, WarmupSteps: 2, TotalSteps: 10, GradClip: 1})
	var batch model.Batch
	ids := []int{1, 17, 42, 5, 6, 7, 2}
	assistant := []bool{false, false, false, true, true, true, true}
	batch.AddSequence(ids, assistant, []float32{0, 0, 0, 1.5, 1.5, 1.5, 1.5}, nil, 1)
	for i := 0; i < 10; i++ {
		if _, err := trainer.Step(&batch); err != nil {
			panic(err)
		}
	}

	// Artifacts: a PEFT folder with sha256 per file.
	dir := filepath.Join(os.TempDir(), "citizen-example-adapter")
	defer os.RemoveAll(dir)
	arts, _ := adapter.SavePEFT(dir, "citizen-base")
	fmt.Println(len(arts), "files")

	// Serving: adapters are chosen per request by name.
	engine := model.NewEngine(base, model.EngineConfig{})
	defer engine.Close()
	loaded, err := model.LoadPEFT(dir, base.Config)
	if err != nil {
		panic(err)
	}
	engine.RegisterAdapter("support-v2", loaded)
	res, err := engine.Generate(context.Background(), model.Request{
		PromptIDs: []int{1, 17, 42}, MaxTokens: 8, Temperature: 0.8, Seed: 1, TopLogprobs: 2, Adapter: "support-v2",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(res.Tokens), res.FinishReason, len(res.Tokens[0].TopLogprobs))
	// Output:
	// 2 files
	// 8 length 2
}
