package gguf

import (
	"context"
	"os"
	"slices"
	"testing"

	"citizen/model"
	"citizen/model/tokenizer/hf"
)

// agreePrompts are ordinary requests of several kinds (facts, arithmetic, summaries,
// instructions, JSON, code, other languages) for comparing greedy answers across weight paths.
var agreePrompts = []string{
	"What is the capital of France?",
	"What is the capital of Japan?",
	"Who wrote Romeo and Juliet?",
	"How many legs does a spider have?",
	"What is the boiling point of water in Celsius?",
	"Name the largest planet in our solar system.",
	"What gas do plants absorb from the air?",
	"Who painted the Mona Lisa?",
	"What is 12 + 7?",
	"What is 9 times 8?",
	"If I have 5 apples and eat 2, how many are left?",
	"What is the square root of 81?",
	"Summarize in one sentence: The city council met on Tuesday to discuss the new park. After a long debate, they voted to approve the budget, and construction will start in spring.",
	"Summarize: Cats are popular pets. They are independent, clean, and often affectionate with their owners.",
	"Give me three tips for better sleep.",
	"Write a haiku about the ocean.",
	"Explain what a computer virus is in simple words.",
	"Translate to French: Good morning, how are you?",
	"Translate to Spanish: I like to read books.",
	"Quelle est la capitale de l'Italie ?",
	"¿Cuántos días tiene una semana?",
	"Wie heißt die Hauptstadt von Deutschland?",
	"Return a JSON object with keys name and age for a person called Anna who is 30.",
	"Write a JSON list of three colors.",
	"List the days of the week.",
	"Write a Python function that adds two numbers.",
	"What does HTML stand for?",
	"Give a synonym for happy.",
	"Is a tomato a fruit or a vegetable?",
	"Write a short email asking my manager for a day off on Friday.",
	"What is the opposite of cold?",
	"Describe the color blue to someone who cannot see.",
	"Why is the sky blue?",
	"Complete the sentence: The early bird catches the",
	"What year did World War II end?",
	"Convert 3 kilometers to meters.",
	"Sort these numbers from smallest to largest: 7, 2, 9, 4.",
	"Answer yes or no: Is the Earth flat?",
	"Tell me a fun fact about dolphins.",
	"What is the chemical symbol for gold?",
}

// agreeTokens is how many tokens of each greedy answer are compared.
const agreeTokens = 16

// smolPrompts renders agreePrompts in SmolLM2's ChatML template (default system prompt) with
// the file's tokenizer; the first must give chatmlParis.
func smolPrompts(t *testing.T, path string) (prompts [][]int, eos int) {
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := f.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	bc := hf.BPEConfig{Tokens: meta.Tokens, Merges: meta.Merges, Pre: meta.Pre, BOS: -1, EOS: *meta.EOSID}
	for _, tt := range meta.TokenTypes {
		bc.TokenTypes = append(bc.TokenTypes, int32(tt))
	}
	tok, err := hf.NewByteLevelBPE(bc)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range agreePrompts {
		text := "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"
		prompts = append(prompts, tok.Encode(text))
	}
	if !slices.Equal(prompts[0], chatmlParis) {
		t.Fatalf("ChatML rendering: %v, want %v", prompts[0], chatmlParis)
	}
	return prompts, *meta.EOSID
}

// greedyAnswers decodes each prompt greedily for at most agreeTokens tokens.
func greedyAnswers(t *testing.T, m *model.Model, prompts [][]int, eos int) [][]int {
	e := model.NewEngine(m, model.EngineConfig{})
	defer e.Close()
	var out [][]int
	for _, p := range prompts {
		res, err := e.Generate(context.Background(), model.Request{PromptIDs: p, MaxTokens: agreeTokens, StopIDs: []int{eos}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.IDs())
	}
	return out
}

// agreement counts the answers whose first token, and whose whole (agreeTokens-token) answer,
// equal ref's.
func agreement(got, ref [][]int) (first, whole int) {
	for i := range ref {
		if len(got[i]) > 0 && len(ref[i]) > 0 && got[i][0] == ref[i][0] {
			first++
		}
		if slices.Equal(got[i], ref[i]) {
			whole++
		}
	}
	return first, whole
}

// TestSmolLM2GreedyAgreement decodes agreePrompts greedily with the default load path
// (quantized weights) and with the float32 dequantization: at least 97% of the answers must
// start with the same token. With CITIZEN_QUANT_SURVEY=1 it also reports the other ways of
// running the quantized model (quantOption; several minutes).
func TestSmolLM2GreedyAgreement(t *testing.T) {
	path := smolPath(t)
	prompts, eos := smolPrompts(t, path)
	ref := greedyAnswers(t, loadSmol(t, "f32"), prompts, eos)
	options := []string{"quant"}
	if os.Getenv("CITIZEN_QUANT_SURVEY") == "1" {
		options = append(options, "quant-act8", "quant-tiles", "quant-act8-f32head", "quant-act8-f32attn",
			"quant-act8-f32v", "quant-act8-f32mlp", "quant-act8-f32head+attn")
	}
	for _, o := range options {
		t.Run(o, func(t *testing.T) {
			got := greedyAnswers(t, quantOption(t, o), prompts, eos)
			first, whole := agreement(got, ref)
			t.Logf("%s: first token %d/%d, whole %d-token answer %d/%d, Paris question's first token same: %v",
				o, first, len(ref), agreeTokens, whole, len(ref), got[0][0] == ref[0][0])
			if o == "quant" && float64(first) < 0.97*float64(len(ref)) {
				t.Errorf("default quantized path: first tokens agree with float32 on %d/%d prompts, want ≥ 97%%", first, len(ref))
			}
		})
	}
}
