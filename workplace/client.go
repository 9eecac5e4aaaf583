package workplace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// VersionHeader is the response header in which citizen names the model version that served.
const VersionHeader = "X-Citizen-Model-Version"

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	Model          string            `json:"model,omitempty"`
	Messages       []Message         `json:"messages"`
	Tools          []Tool            `json:"tools,omitempty"`
	ResponseFormat *ResponseFormat   `json:"response_format,omitempty"`
	User           string            `json:"user,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

// chatResponse is the part of an OpenAI chat completion the harness reads.
type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message      Message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
}

// completion is one model reply as the harness sees it.
type completion struct {
	ID      string
	Message Message
	Version string
	Latency time.Duration
}

// completer produces the model's next message for a conversation.
type completer interface {
	complete(ctx context.Context, req chatRequest) (completion, error)
}

// feedbackRequest is the body of POST /v1/feedback.
type feedbackRequest struct {
	InteractionID string `json:"interaction_id"`
	Text          string `json:"text,omitempty"`
	Rating        int    `json:"rating,omitempty"`
	Outcome       string `json:"outcome,omitempty"`
	Correction    string `json:"correction,omitempty"`
	FeedbackID    string `json:"feedback_id"`
}

// feedbackPoster delivers feedback; nil means feedback is not sent (offline evaluation).
type feedbackPoster interface {
	postFeedback(ctx context.Context, f feedbackRequest) error
}

// httpClient talks to citizen's OpenAI-compatible API.
type httpClient struct {
	base   string
	apiKey string
	hc     *http.Client
}

func (c *httpClient) do(ctx context.Context, path string, body any) (*http.Response, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return resp, data, fmt.Errorf("workplace: POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(truncate(string(data), 200))))
	}
	return resp, data, nil
}

func (c *httpClient) complete(ctx context.Context, req chatRequest) (completion, error) {
	start := time.Now()
	resp, data, err := c.do(ctx, "/v1/chat/completions", req)
	if err != nil {
		return completion{}, err
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return completion{}, fmt.Errorf("workplace: decode completion: %w", err)
	}
	if len(cr.Choices) == 0 {
		return completion{}, errors.New("workplace: completion has no choices")
	}
	return completion{ID: cr.ID, Message: cr.Choices[0].Message, Version: resp.Header.Get(VersionHeader), Latency: time.Since(start)}, nil
}

func (c *httpClient) postFeedback(ctx context.Context, f feedbackRequest) error {
	_, _, err := c.do(ctx, "/v1/feedback", f)
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// AnswerFunc is a model seen offline: given the conversation so far and the declared tools, it
// returns the assistant's next message (content, or tool calls).
type AnswerFunc func(ctx context.Context, msgs []Message, tools []Tool) (Message, error)

type funcCompleter struct {
	f AnswerFunc
	n atomic.Int64
}

func (c *funcCompleter) complete(ctx context.Context, req chatRequest) (completion, error) {
	start := time.Now()
	m, err := c.f(ctx, req.Messages, req.Tools)
	if err != nil {
		return completion{}, err
	}
	return completion{ID: fmt.Sprintf("offline-%d", c.n.Add(1)), Message: m, Version: "offline", Latency: time.Since(start)}, nil
}
