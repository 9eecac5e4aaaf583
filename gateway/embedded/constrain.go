package embedded

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"sync"

	"citizen/gateway"
	"citizen/model/grammar"
)

// Constraints: response_format json_object and json_schema, and a forced
// tool call (tool_choice "required" or a named function), are enforced by
// grammar-constrained decoding (model/grammar): at every step the tokens
// that cannot continue a valid output are masked before sampling, the value
// is closed before max_tokens runs out, and the end of turn is allowed only
// once it is complete. The logprobs recorded and returned are those of the
// constrained (renormalised) distribution the tokens were sampled from; the
// result names the constraint (Result.Constraint) so training knows.
//
// A forced tool call is the chat format's own form: for citizen's tokenizer
// its tool-call token and then the call's JSON; for a Hugging Face template
// a Hermes block (<tool_call>\n{...}\n</tool_call>). With tool_choice
// "auto" the model may answer or call; a call naming an undeclared
// function is never returned as a call (it stays in the content).

// constraint is one request's grammar, or nil.
type constraint struct {
	name  string // json_object, json_schema, tool_call
	g     *grammar.Grammar
	force int // a token to force first (citizen's tool-call token), or -1
}

// grammars caches compiled grammars by what they were compiled from.
type grammars struct {
	mu    sync.Mutex
	vocab *grammar.Vocab
	byKey map[[32]byte]*grammar.Grammar
}

// vocabFor builds the grammar vocabulary of the engine's tokenizer once:
// every token's bytes, control tokens empty (never allowed) but the end
// of turn, which ends a complete value.
func (e *Engine) vocabFor() (*grammar.Vocab, error) {
	e.gram.mu.Lock()
	defer e.gram.mu.Unlock()
	if e.gram.vocab != nil {
		return e.gram.vocab, nil
	}
	tok := e.cm.Tok
	eos := tok.StopIDs()[0]
	toks := make([][]byte, tok.VocabSize())
	for id := range toks {
		if !tok.IsSpecial(id) {
			toks[id] = tok.TokenBytes(id)
		}
	}
	v, err := grammar.NewVocab(toks, eos)
	if err != nil {
		return nil, err
	}
	e.gram.vocab = v
	return v, nil
}

func (e *Engine) compiled(key string, build func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	k := sha256.Sum256([]byte(key))
	e.gram.mu.Lock()
	g, ok := e.gram.byKey[k]
	e.gram.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := build()
	if err != nil {
		return nil, err
	}
	e.gram.mu.Lock()
	if e.gram.byKey == nil || len(e.gram.byKey) > 256 {
		e.gram.byKey = map[[32]byte]*grammar.Grammar{}
	}
	e.gram.byKey[k] = g
	e.gram.mu.Unlock()
	return g, nil
}

// constraintFor returns the request's constraint (nil for none), or a 400
// when its schema cannot be enforced.
func (e *Engine) constraintFor(req *gateway.GenerateRequest) (*constraint, error) {
	bad := func(err error) error {
		return &gateway.EngineError{Status: 400, Message: err.Error()}
	}
	switch req.ToolChoice {
	case "required", "function":
		var tools []grammar.Tool
		for _, t := range req.Tools {
			if req.ToolChoice == "function" && t.Name != req.ToolName {
				continue
			}
			tools = append(tools, grammar.Tool{Name: t.Name, Parameters: t.Parameters})
		}
		if len(tools) == 0 {
			return nil, bad(fmt.Errorf("tool_choice names %q, which is not among the tools", req.ToolName))
		}
		opts := grammar.ToolOptions{}
		force := e.cm.Tok.ToolCallID()
		if force < 0 {
			opts.Prefix, opts.Suffix = "<tool_call>\n", "\n</tool_call>"
		}
		key, _ := json.Marshal(struct {
			T []grammar.Tool
			O grammar.ToolOptions
		}{tools, opts})
		g, err := e.compiled("tools:"+string(key), func() (*grammar.Grammar, error) { return grammar.ToolCalls(tools, opts) })
		if err != nil {
			return nil, bad(fmt.Errorf("tools: %w", err))
		}
		return &constraint{name: "tool_call", g: g, force: force}, nil
	}
	switch req.ResponseFormat.Type {
	case "json_object":
		g, err := e.compiled("json_object", func() (*grammar.Grammar, error) { return grammar.Compile([]byte(`{"type":"object"}`)) })
		if err != nil {
			return nil, bad(err)
		}
		return &constraint{name: "json_object", g: g, force: -1}, nil
	case "json_schema":
		schema := req.ResponseFormat.Schema
		g, err := e.compiled("schema:"+string(schema), func() (*grammar.Grammar, error) { return grammar.Compile(schema) })
		if err != nil {
			return nil, bad(fmt.Errorf("response_format.json_schema: %w", err))
		}
		return &constraint{name: "json_schema", g: g, force: -1}, nil
	}
	return nil, nil
}

// mask returns the logit mask enforcing c within maxTokens, composed with
// extra (which may be nil).
func (e *Engine) mask(c *constraint, maxTokens int, extra func([]int, []float32)) (func([]int, []float32), error) {
	v, err := e.vocabFor()
	if err != nil {
		return nil, err
	}
	inner := grammar.LogitMask(c.g.Start(v), maxTokens-boolInt(c.force >= 0))
	force := c.force
	return func(generated []int, logits []float32) {
		if extra != nil {
			extra(generated, logits)
		}
		if force >= 0 {
			if len(generated) == 0 {
				for i := range logits {
					if i != force {
						logits[i] = float32(math.Inf(-1))
					}
				}
				return
			}
			generated = generated[1:]
		}
		inner(generated, logits)
	}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// declared drops tool calls that name a function the request did not
// offer: they are returned as text, never as calls.
func declared(req *gateway.GenerateRequest, calls []gateway.ToolCall) (kept []gateway.ToolCall, dropped []string) {
	names := map[string]bool{}
	for _, t := range req.Tools {
		names[t.Name] = true
	}
	for _, c := range calls {
		if names[c.Name] && req.ToolChoice != "none" {
			kept = append(kept, c)
		} else {
			dropped = append(dropped, fmt.Sprintf("<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", c.Name, c.Arguments))
		}
	}
	return kept, dropped
}
