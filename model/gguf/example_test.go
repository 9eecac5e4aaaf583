package gguf_test

import (
	"context"
	"fmt"
	"os"

	"citizen/model"
	"citizen/model/gguf"
)

// Serving a GGUF checkpoint: load the model, read the tokenizer metadata and the chat template
// for the tokenizer package, and generate from token ids.
func Example() {
	m, f, err := gguf.LoadModel(os.Getenv("CITIZEN_SMOLLM2_GGUF"))
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := f.Tokenizer() // tok.Tokens, tok.Merges, tok.Pre, tok.ChatTemplate, ...
	if err != nil {
		fmt.Println(err)
		return
	}
	engine := model.NewEngine(m, model.EngineConfig{})
	defer engine.Close()
	res, err := engine.Generate(context.Background(), model.Request{
		PromptIDs: []int{*tok.BOSID}, MaxTokens: 8, StopIDs: []int{*tok.EOSID},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(res.Tokens) > 0)
}
