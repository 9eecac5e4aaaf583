package workplace

import "encoding/json"

// Message is one chat message in OpenAI's shape. Content is empty (and encoded as "") for an
// assistant message that only calls tools.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is an assistant's call of a function tool, in OpenAI's shape.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as a JSON string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool declares a function tool the model may call, in OpenAI's shape.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a function's name, description and JSON-schema parameters.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResponseFormat is OpenAI's response_format request field ("text" or "json_object").
type ResponseFormat struct {
	Type string `json:"type"`
}

// Conversation is one training or evaluation conversation: messages in OpenAI form plus the
// tools and response format the request declared, and the task type it exercises.
type Conversation struct {
	Type           string          `json:"type"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Hinted is true when a message in the context (a note or a correction) changes the answer
	// from the one correct at time zero.
	Hinted bool `json:"hinted,omitempty"`
}
