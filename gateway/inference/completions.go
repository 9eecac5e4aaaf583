package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"citizen/gateway"
	"citizen/model"
)

// completionRequest is POST /v1/completions' body: OpenAI's legacy
// completion with vLLM's token-id fields. One prompt (a string, or token
// ids) per request.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Seed          *int64          `json:"seed"`
	N             *int            `json:"n"`
	Stop          json.RawMessage `json:"stop"`
	Logprobs      *int            `json:"logprobs"`
	Echo          bool            `json:"echo"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User                   string `json:"user"`
	ReturnTokenIDs         bool   `json:"return_token_ids"`
	ReturnTokensAsTokenIDs bool   `json:"return_tokens_as_token_ids"`
}

type completionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
}

type completionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *completionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     *string             `json:"stop_reason"`
	PromptTokenIDs []int               `json:"prompt_token_ids,omitempty"`
	TokenIDs       []int               `json:"token_ids,omitempty"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *gateway.Usage     `json:"usage,omitempty"`
}

// promptIDs reads a prompt: a string (tokenized without special tokens,
// after the base's BOS when it has one), token ids, or a one-element list
// of either.
func (s *Server) promptIDs(raw json.RawMessage) ([]int, error) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		tok := s.eng.Chat().Tok
		ids := tok.Encode(str)
		if bos := tok.BOS(); bos >= 0 {
			ids = append([]int{bos}, ids...)
		}
		return ids, nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) == nil {
		return ids, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) == 1 {
		return s.promptIDs(list[0])
	}
	return nil, errors.New("'prompt' must be a string, a list of token ids, or a list of one of them")
}

func stopStrings(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("'stop' must be a string or a list of strings")
	}
	return many, nil
}

// piece is a part of one choice's output: text and the tokens sampled
// for it.
type piece struct {
	choice int
	text   string
	toks   []model.Token
	finish string // set on a choice's last piece
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := decodeStrict(r, &req); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "invalid request body: %v", err)
		return
	}
	version, ok := s.version(req.Model)
	if !ok {
		fail(w, http.StatusNotFound, "NotFoundError", "The model `%s` does not exist.", req.Model)
		return
	}
	prompt, err := s.promptIDs(req.Prompt)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequestError", "%v", err)
		return
	}
	stops, err := stopStrings(req.Stop)
	n := 1
	if req.N != nil {
		n = *req.N
	}
	top := 0
	if req.Logprobs != nil {
		top = *req.Logprobs
	}
	maxTok := 16
	if req.MaxTokens != nil {
		maxTok = *req.MaxTokens
	}
	switch {
	case err != nil:
		fail(w, http.StatusBadRequest, "BadRequestError", "%v", err)
		return
	case n < 1 || n > 16:
		fail(w, http.StatusBadRequest, "BadRequestError", "'n' must be between 1 and 16, got %d.", n)
		return
	case top < 0 || top > 20:
		fail(w, http.StatusBadRequest, "BadRequestError", "'logprobs' must be between 0 and 20, got %d.", top)
		return
	case maxTok < 1:
		fail(w, http.StatusBadRequest, "BadRequestError", "'max_tokens' must be at least 1, got %d.", maxTok)
		return
	case req.Echo:
		fail(w, http.StatusBadRequest, "BadRequestError", "'echo' is not supported.")
		return
	}
	mreq := model.Request{PromptIDs: prompt, MaxTokens: maxTok, StopIDs: s.eng.Chat().Tok.StopIDs(), TopLogprobs: top}
	if version != "base" {
		mreq.Adapter = version
	}
	if req.Temperature != nil {
		mreq.Temperature = float32(*req.Temperature)
	}
	if req.TopP != nil {
		mreq.TopP = float32(*req.TopP)
	}
	seed := uint64(time.Now().UnixNano())
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	}
	head := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(), Model: req.Model}
	lp := req.Logprobs != nil
	asIDs := req.ReturnTokensAsTokenIDs
	var mu sync.Mutex
	if req.Stream {
		fl, _ := w.(http.Flusher)
		started := false
		write := func(c completionResponse) error {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if !started {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return err
			}
			if fl != nil {
				fl.Flush()
			}
			return nil
		}
		offsets := make([]int, n)
		usage, err := s.generate(r.Context(), mreq, n, seed, stops, func(p piece) error {
			mu.Lock()
			defer mu.Unlock()
			c := s.completionChoice(p, lp, asIDs, &offsets[p.choice])
			if req.ReturnTokenIDs {
				c.TokenIDs = orEmpty(model.TokenIDs(p.toks))
				if p.finish != "" {
					c.PromptTokenIDs = prompt
				}
			}
			out := head
			out.Choices = []completionChoice{c}
			return write(out)
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !started {
			engineFailed(w, err)
			return
		}
		if err == nil && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			out := head
			out.Choices = []completionChoice{}
			out.Usage = &usage
			_ = write(out)
		}
		if err == nil {
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
		return
	}
	all := make([]piece, n)
	for i := range all {
		all[i].choice = i
	}
	usage, err := s.generate(r.Context(), mreq, n, seed, stops, func(p piece) error {
		mu.Lock()
		defer mu.Unlock()
		a := &all[p.choice]
		a.text += p.text
		a.toks = append(a.toks, p.toks...)
		a.finish = p.finish
		return nil
	})
	if err != nil {
		engineFailed(w, err)
		return
	}
	out := head
	out.Usage = &usage
	for _, p := range all {
		off := 0
		c := s.completionChoice(p, lp, asIDs, &off)
		if req.ReturnTokenIDs {
			c.TokenIDs, c.PromptTokenIDs = orEmpty(model.TokenIDs(p.toks)), prompt
		}
		out.Choices = append(out.Choices, c)
	}
	writeJSON(w, http.StatusOK, out)
}

// completionChoice renders a piece; offset is the choice's text offset so
// far, advanced by the piece's tokens.
func (s *Server) completionChoice(p piece, withLP, asIDs bool, offset *int) completionChoice {
	c := completionChoice{Index: p.choice, Text: p.text}
	if p.finish != "" {
		f := p.finish
		c.FinishReason = &f
	}
	if withLP {
		tok := s.eng.Chat().Tok
		lp := &completionLogprobs{TextOffset: []int{}, TokenLogprobs: []float32{}, Tokens: []string{}, TopLogprobs: []map[string]float32{}}
		for _, t := range p.toks {
			text := string(tok.TokenBytes(t.ID))
			lp.TextOffset = append(lp.TextOffset, *offset)
			*offset += len(text)
			lp.TokenLogprobs = append(lp.TokenLogprobs, t.Logprob)
			lp.Tokens = append(lp.Tokens, tokenText(t.ID, text, asIDs))
			top := map[string]float32{tokenText(t.ID, text, asIDs): t.Logprob}
			for _, a := range t.TopLogprobs {
				top[tokenText(a.ID, string(tok.TokenBytes(a.ID)), asIDs)] = a.Logprob
			}
			lp.TopLogprobs = append(lp.TopLogprobs, top)
		}
		c.Logprobs = lp
	}
	return c
}

// generate runs n choices of a raw-prompt completion, handing out each
// choice's pieces in order (its last with the finish reason): text held
// back while it could be the start of a stop string, cut before one.
func (s *Server) generate(ctx context.Context, req model.Request, n int, seed uint64, stops []string, out func(piece) error) (gateway.Usage, error) {
	tok := s.eng.Chat().Tok
	holdBack := 0
	for _, st := range stops {
		holdBack = max(holdBack, len(st)-1)
	}
	usage := gateway.Usage{PromptTokens: len(req.PromptIDs)}
	var umu sync.Mutex
	errs := make([]error, n)
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			errStop := errors.New("stop string")
			var (
				text    []byte // every byte sampled
				sent    int    // bytes handed out
				pending []model.Token
				stopped bool
				outErr  error
			)
			r := req
			r.Seed = seed + uint64(c)
			r.OnToken = func(t model.Token) {
				if stopped || outErr != nil {
					return
				}
				pending = append(pending, t)
				if !tok.IsSpecial(t.ID) {
					text = append(text, tok.TokenBytes(t.ID)...)
				}
				valid := validUTF8Prefix(text)
				for _, st := range stops {
					if i := strings.Index(string(text[:valid]), st); i >= 0 && st != "" {
						stopped = true
						outErr = out(piece{choice: c, text: string(text[sent:max(i, sent)]), toks: pending, finish: gateway.FinishStop})
						cancel(errStop)
						return
					}
				}
				if safe := valid - holdBack; safe > sent {
					outErr = out(piece{choice: c, text: string(text[sent:safe]), toks: pending})
					sent, pending = safe, nil
					if outErr != nil {
						cancel(outErr)
					}
				}
			}
			res, err := s.eng.Chat().Engine.Generate(cctx, r)
			if res != nil {
				umu.Lock()
				usage.CompletionTokens += len(res.Tokens)
				umu.Unlock()
			}
			switch {
			case outErr != nil:
				errs[c] = outErr
			case stopped:
			case err != nil:
				errs[c] = err
			default:
				finish := gateway.FinishStop
				if res.FinishReason == model.FinishLength {
					finish = gateway.FinishLength
				}
				errs[c] = out(piece{choice: c, text: string(text[sent:]), toks: pending, finish: finish})
			}
		}()
	}
	wg.Wait()
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	return usage, errors.Join(errs...)
}

// validUTF8Prefix is the length of b without a trailing incomplete rune.
func validUTF8Prefix(b []byte) int {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		i := len(b) - k
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
