package events

import (
	"encoding/json"
	"fmt"
)

// Event type names (docs/architecture.md section 2).
const (
	TypeInteractionRecorded  = "interaction.recorded"
	TypeFeedbackReceived     = "feedback.received"
	TypeInteractionEvaluated = "interaction.evaluated"
	TypeFeedbackInterpreted  = "feedback.interpreted"
	TypeAnomalyDetected      = "anomaly.detected"
	TypeWeightsTrained       = "weights.trained"
	TypeVersionUnavailable   = "version.unavailable"
	TypeRolloutStarted       = "rollout.started"
	TypeRolloutAdvanced      = "rollout.advanced"
	TypeRolloutPaused        = "rollout.paused"
	TypeRolloutResumed       = "rollout.resumed"
	TypeRolloutPromoted      = "rollout.promoted"
	TypeRolloutRolledBack    = "rollout.rolled_back"
	// The stored-completions API's changes to an interaction
	// (docs/adr/0012-stored-completions.md).
	TypeInteractionMetadataUpdated = "interaction.metadata_updated"
	TypeInteractionDeleted         = "interaction.deleted"
)

// Stream name helpers: one place for the naming scheme.
func InteractionStream(id string) string { return "interaction-" + id }
func VersionStream(v string) string      { return "version-" + v }
func RolloutStream(id string) string     { return "rollout-" + id }

// Payload is implemented by every typed event.
type Payload interface {
	EventType() string
}

// ChatMessage is an OpenAI-style chat message as recorded.
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call made by the assistant.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function the client offered the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// TokenLogprob is the behaviour policy's logprob of one sampled token, with
// optional alternatives.
type TokenLogprob struct {
	Token   int          `json:"token"`
	Logprob float32      `json:"logprob"`
	Top     []TopLogprob `json:"top,omitempty"`
}

// TopLogprob is one alternative token and its logprob.
type TopLogprob struct {
	Token   int     `json:"token"`
	Logprob float32 `json:"logprob"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Choice is one generated answer (n > 1 gives several).
type Choice struct {
	Index            int            `json:"index"`
	Message          ChatMessage    `json:"message"`
	FinishReason     string         `json:"finish_reason"`
	CompletionTokens []int          `json:"completion_tokens,omitempty"`
	Logprobs         []TokenLogprob `json:"logprobs,omitempty"`
}

// InteractionRecorded is appended by the gateway before the client is
// answered. Stream: interaction-<ID>.
type InteractionRecorded struct {
	InteractionID string            `json:"interaction_id"`
	Tenant        string            `json:"tenant"`
	User          string            `json:"user,omitempty"`
	Conversation  string            `json:"conversation,omitempty"`
	TaskType      string            `json:"task_type,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Model         string            `json:"model"`
	ModelVersion  string            `json:"model_version"`
	Engine        string            `json:"engine"`
	Tokenizer     string            `json:"tokenizer,omitempty"`
	// Constraint names the grammar the answer was sampled under
	// (json_object, json_schema, tool_call): its logprobs are those of the
	// constrained distribution. Empty for free decoding.
	Constraint string `json:"constraint,omitempty"`
	// Messages are the client's messages; Lessons, the lessons the gateway
	// placed in the context it sent the engine (ContextMessages composes
	// it). PromptTokens, when the engine reports them, are that context's.
	Messages     []ChatMessage   `json:"messages"`
	Lessons      []AppliedLesson `json:"lessons,omitempty"`
	Tools        []Tool          `json:"tools,omitempty"`
	Params       json.RawMessage `json:"params,omitempty"`
	PromptTokens []int           `json:"prompt_tokens,omitempty"`
	Choices      []Choice        `json:"choices"`
	Usage        Usage           `json:"usage"`
	LatencyMS    float64         `json:"latency_ms"`
	TTFTMS       float64         `json:"ttft_ms,omitempty"`
	Stream       bool            `json:"stream,omitempty"`
}

func (InteractionRecorded) EventType() string { return TypeInteractionRecorded }

// FeedbackReceived is a customer's, harness's or operator's word on an
// interaction. Stream: interaction-<ID>.
type FeedbackReceived struct {
	InteractionID string   `json:"interaction_id"`
	FeedbackID    string   `json:"feedback_id"`
	Source        string   `json:"source"` // customer, harness, operator
	Text          string   `json:"text,omitempty"`
	Rating        *float64 `json:"rating,omitempty"`
	Outcome       string   `json:"outcome,omitempty"` // success, failure, timeout, abandoned
	Correction    string   `json:"correction,omitempty"`
	User          string   `json:"user,omitempty"`
}

func (FeedbackReceived) EventType() string { return TypeFeedbackReceived }

// InteractionMetadataUpdated replaces the metadata of a stored completion
// (POST /v1/chat/completions/{id}). It changes what the stored-completions
// API returns and filters on; the recorded request, its task type and its
// routing stay as they were. Stream: interaction-<ID>.
type InteractionMetadataUpdated struct {
	InteractionID string            `json:"interaction_id"`
	Metadata      map[string]string `json:"metadata"`
}

func (InteractionMetadataUpdated) EventType() string { return TypeInteractionMetadataUpdated }

// InteractionDeleted withdraws an interaction (DELETE
// /v1/chat/completions/{id}): the stored-completions API no longer lists or
// returns it and it is never trained on. The earlier events stay in the
// append-only store. Stream: interaction-<ID>.
type InteractionDeleted struct {
	InteractionID string `json:"interaction_id"`
	// Source says who deleted it: "api" (the tenant's key) or "operator".
	Source string `json:"source"`
}

func (InteractionDeleted) EventType() string { return TypeInteractionDeleted }

// GraderResult is one grader's verdict.
type GraderResult struct {
	Name        string  `json:"name"`
	Version     string  `json:"version"`
	Score       float64 `json:"score"`
	Weight      float64 `json:"weight"`
	Label       string  `json:"label,omitempty"`
	Explanation string  `json:"explanation,omitempty"`
}

// Fault is an environment or model fault found in an interaction.
type Fault struct {
	Kind        string `json:"kind"`        // tool_error, tool_timeout, invalid_tool_args, unknown_tool, timeout, abandoned
	Attribution string `json:"attribution"` // environment or model
	Detail      string `json:"detail,omitempty"`
}

// SelfEvaluation summarises the serving model's own confidence.
type SelfEvaluation struct {
	MeanLogprob float64 `json:"mean_logprob"`
	MinLogprob  float64 `json:"min_logprob"`
	Entropy     float64 `json:"entropy,omitempty"`
	Verdict     string  `json:"verdict,omitempty"` // upstream self-judgement, or "unparsable"/"failed"
	Score       float64 `json:"score"`
}

// InteractionEvaluated is reflection's judgement. A later evaluation of
// the same interaction (after feedback) supersedes an earlier one; both
// stay in the stream. Stream: interaction-<ID>.
type InteractionEvaluated struct {
	InteractionID string `json:"interaction_id"`
	Seq           int    `json:"seq"` // 1 for the first evaluation, then 2, ...
	// User and Lessons are the interaction's user and the ids of the
	// lessons its context held, so a lesson's effect on rewards is read
	// from evaluations alone.
	User           string         `json:"user,omitempty"`
	Lessons        []string       `json:"lessons,omitempty"`
	TaskType       string         `json:"task_type"`
	TypeSource     string         `json:"type_source"` // given, inferred, unknown
	TypeConfidence float64        `json:"type_confidence"`
	ModelVersion   string         `json:"model_version"`
	Graders        []GraderResult `json:"graders"`
	// Checks are the results of the rubric's check-mode graders that
	// apply (a yes/no verdict that must follow from the answer's own
	// number): never part of the reward. Absent in events of evaluators
	// before 2026-12-01.
	Checks           []GraderResult     `json:"checks,omitempty"`
	Self             *SelfEvaluation    `json:"self,omitempty"`
	Faults           []Fault            `json:"faults,omitempty"`
	Outcome          string             `json:"outcome,omitempty"`
	FeedbackPolarity *float64           `json:"feedback_polarity,omitempty"`
	Reward           float64            `json:"reward"`
	RewardTerms      map[string]float64 `json:"reward_terms,omitempty"`
	Trainable        bool               `json:"trainable"`
	Policy           string             `json:"policy,omitempty"` // why not trainable, etc.
	RubricVersion    string             `json:"rubric_version"`
	// GradedAs names the rubric that graded an interaction whose own type
	// has none (the rubric whose patterns match its question).
	GradedAs         string `json:"graded_as,omitempty"`
	EvaluatorVersion string `json:"evaluator_version"`
	AnswerLength     int    `json:"answer_length"`
	ToolCalls        int    `json:"tool_calls"`
	// TurnToolCalls counts the model's tool calls in the user turn this
	// interaction belongs to, before it (the assistant tool calls after
	// the last user message of the request): for an answer, how many tool
	// rounds it took. Absent in events of evaluators before 2026-11-30.
	TurnToolCalls int `json:"turn_tool_calls,omitempty"`
}

func (InteractionEvaluated) EventType() string { return TypeInteractionEvaluated }

// FeedbackInterpreted turns free text into signals. Stream: interaction-<ID>.
type FeedbackInterpreted struct {
	InteractionID string   `json:"interaction_id"`
	FeedbackID    string   `json:"feedback_id"`
	Polarity      float64  `json:"polarity"` // [-1, 1]
	Strength      float64  `json:"strength"` // [0, 1]
	Aspects       []string `json:"aspects,omitempty"`
	Correction    string   `json:"correction,omitempty"`
	Hint          string   `json:"hint,omitempty"`
	Confidence    float64  `json:"confidence"`
	// Uncertain marks an interpretation whose confidence is below the
	// interpreter's calibrated threshold: it is recorded, but its
	// correction and hint are used by nothing (grading, training data,
	// memory); its polarity still enters the reward weighted by Confidence.
	Uncertain          bool   `json:"uncertain,omitempty"`
	InterpreterVersion string `json:"interpreter_version"`
	// Agreement is set when a second interpreter judged the same feedback
	// (an LLM judge beside the embedded interpreter): how the two agreed.
	Agreement *InterpreterAgreement `json:"agreement,omitempty"`
}

func (FeedbackInterpreted) EventType() string { return TypeFeedbackInterpreted }

// InterpreterAgreement records how a judge's votes and a reference
// interpreter agreed on one feedback.
type InterpreterAgreement struct {
	// Votes asked of the judge, and how many gave a usable answer.
	Votes int `json:"votes"`
	Valid int `json:"valid"`
	// Share of the valid votes that agree with the judge's majority.
	Share float64 `json:"share"`
	// Reference is the other interpreter's version and its reading.
	Reference           string  `json:"reference"`
	ReferencePolarity   float64 `json:"reference_polarity"`
	ReferenceCorrection string  `json:"reference_correction,omitempty"`
	// Polarity and Correction: whether the judge's majority and the
	// reference agree on the polarity's sign and on the correction.
	Polarity   bool `json:"polarity"`
	Correction bool `json:"correction"`
}

// AnomalyDetected is a reward-hacking or health detector tripping.
// Stream: version-<V>.
type AnomalyDetected struct {
	Kind     string          `json:"kind"`
	TaskType string          `json:"task_type,omitempty"`
	Version  string          `json:"version"`
	Window   int             `json:"window"`
	Value    float64         `json:"value"`
	Baseline float64         `json:"baseline"`
	Evidence json.RawMessage `json:"evidence,omitempty"`
	Detector string          `json:"detector_version"`
}

func (AnomalyDetected) EventType() string { return TypeAnomalyDetected }

// VersionUnavailable records that a serving engine could not load an
// accepted version (its artifact is missing, fails its sha256 or does not
// load): the engine serves ServedBy (the version's parent, or the base) in
// its place until the artifact is fixed. Stream: version-<V>.
type VersionUnavailable struct {
	Version  string `json:"version"`
	ServedBy string `json:"served_by"`
	Reason   string `json:"reason"`
	SHA256   string `json:"sha256,omitempty"` // the artifact's recorded sha256
}

func (VersionUnavailable) EventType() string { return TypeVersionUnavailable }

// Artifact is a stored weights artifact.
type Artifact struct {
	Format string `json:"format"` // peft-lora, safetensors
	// Path is the artifact's folder, relative to the distiller's data
	// directory (<data_dir>/distill), so that a copied data dir serves its
	// own weights; older events may hold an absolute path.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// WeightsTrained records a candidate version and its lineage.
// Stream: version-<V>.
type WeightsTrained struct {
	Version         string             `json:"version"`
	Parent          string             `json:"parent"`
	Cycle           string             `json:"cycle"`
	WindowFrom      uint64             `json:"window_from"`
	WindowTo        uint64             `json:"window_to"`
	ExamplesPerType map[string]int     `json:"examples_per_type"`
	Objective       string             `json:"objective"`
	Hyper           map[string]float64 `json:"hyper,omitempty"`
	OfflineEval     map[string]float64 `json:"offline_eval,omitempty"`
	ParentEval      map[string]float64 `json:"parent_eval,omitempty"`
	KLToParent      float64            `json:"kl_to_parent"`
	// Suite is the candidate's, its parent's and the base's score on the
	// operator's fixed regression suite, per task type (absent without a
	// suite, or when the hold-out already rejected the candidate).
	Suite *SuiteCheck `json:"suite,omitempty"`
	// Lessons: for each lesson the cycle consolidated, how the candidate
	// (with and without the lesson in the context) and its parent
	// (without) answer the lesson's questions: the evidence the rollout
	// compares candidates on and retirement reads once the candidate is
	// promoted.
	Lessons []LessonCarry `json:"lessons,omitempty"`
	// LessonTypes are the task types of the lessons the cycle
	// consolidated (the rollout tests them whatever their share).
	LessonTypes []string  `json:"lesson_types,omitempty"`
	Accepted    bool      `json:"accepted"`
	Reason      string    `json:"reason,omitempty"`
	Artifact    *Artifact `json:"artifact,omitempty"`
}

func (WeightsTrained) EventType() string { return TypeWeightsTrained }

// upcastWeightsTrained1 reads weights.trained schema 1, which could record
// a candidate accepted although the offline gate had reasons to reject it
// (gate_failed, a test hook since removed): schema 2 records the gate's
// verdict only, so such a candidate reads as rejected (its reason keeps
// what the gate said), and a rollout of it reads as one an operator
// started against the gate (rollout.Start).
func upcastWeightsTrained1(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	raw, ok := m["gate_failed"]
	if !ok {
		return data, nil
	}
	var failed bool
	if err := json.Unmarshal(raw, &failed); err != nil {
		return nil, fmt.Errorf("gate_failed: %w", err)
	}
	delete(m, "gate_failed")
	if failed {
		m["accepted"] = json.RawMessage("false")
	}
	return json.Marshal(m)
}

// upcastWeightsTrained2 reads weights.trained schema 2, which carried the
// numeric-span correction check (corrections) and the statements
// corrections replaced (contradicted): schema 3 has the lesson check
// (lessons) in their place, and the two are dropped.
func upcastWeightsTrained2(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	_, c1 := m["corrections"]
	_, c2 := m["contradicted"]
	if !c1 && !c2 {
		return data, nil
	}
	delete(m, "corrections")
	delete(m, "contradicted")
	return json.Marshal(m)
}

// SuiteCheck is a regression suite's result per task type for a
// candidate, its parent (absent when the parent is the base) and the base.
type SuiteCheck struct {
	Candidate map[string]SuiteCount `json:"candidate"`
	Parent    map[string]SuiteCount `json:"parent,omitempty"`
	Base      map[string]SuiteCount `json:"base"`
	// SetAside are the questions left out because a promoted lesson
	// contradicts their expected answer.
	SetAside []SuiteAside `json:"set_aside,omitempty"`
}

// SuiteAside is one suite question set aside, and the lesson that
// contradicts its expected answer.
type SuiteAside struct {
	Type     string `json:"type"`
	Question string `json:"question"`
	Expected string `json:"expected"`
	Lesson   string `json:"lesson"`
}

// SuiteCount is how many of a type's N suite questions were answered
// right.
type SuiteCount struct {
	N     int `json:"n"`
	Right int `json:"right"`
}

// RolloutEvidence is the evidence behind a rollout decision.
type RolloutEvidence struct {
	Test      string             `json:"test,omitempty"`
	Counts    map[string]int     `json:"counts,omitempty"`
	Means     map[string]float64 `json:"means,omitempty"`
	Intervals map[string]float64 `json:"intervals,omitempty"`
	Detail    string             `json:"detail,omitempty"`
}

// RolloutChange is the payload of every rollout.* event; the event type
// says which decision it is. Stream: rollout-<ID>.
type RolloutChange struct {
	RolloutID string           `json:"rollout_id"`
	Candidate string           `json:"candidate"`
	Stable    string           `json:"stable"`
	Step      int              `json:"step"`
	Weight    float64          `json:"weight"` // candidate's traffic share [0,1]
	Actor     string           `json:"actor,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	Evidence  *RolloutEvidence `json:"evidence,omitempty"`
}

// The rollout decisions; each embeds RolloutChange (fields are flattened
// in JSON).
type (
	RolloutStarted    struct{ RolloutChange }
	RolloutAdvanced   struct{ RolloutChange }
	RolloutPaused     struct{ RolloutChange }
	RolloutResumed    struct{ RolloutChange }
	RolloutPromoted   struct{ RolloutChange }
	RolloutRolledBack struct{ RolloutChange }
)

// Change returns the payload's common part; it is promoted to every
// rollout decision type, so RolloutChangeOf needs no switch.
func (c RolloutChange) Change() RolloutChange { return c }

// RolloutChangeOf returns the RolloutChange of any rollout.* payload, and
// false for other payloads.
func RolloutChangeOf(p Payload) (RolloutChange, bool) {
	if x, ok := p.(interface{ Change() RolloutChange }); ok {
		return x.Change(), true
	}
	return RolloutChange{}, false
}

func (RolloutStarted) EventType() string    { return TypeRolloutStarted }
func (RolloutAdvanced) EventType() string   { return TypeRolloutAdvanced }
func (RolloutPaused) EventType() string     { return TypeRolloutPaused }
func (RolloutResumed) EventType() string    { return TypeRolloutResumed }
func (RolloutPromoted) EventType() string   { return TypeRolloutPromoted }
func (RolloutRolledBack) EventType() string { return TypeRolloutRolledBack }
