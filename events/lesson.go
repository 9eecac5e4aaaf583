package events

import "strings"

// Lesson event types: the lifecycle of a knowledge item that feedback
// taught (docs/architecture.md sections 2 and 5). Stream: lesson-<ID>.
const (
	TypeLessonProposed   = "lesson.proposed"
	TypeLessonPromoted   = "lesson.promoted"
	TypeLessonSuperseded = "lesson.superseded"
	TypeLessonRetired    = "lesson.retired"
)

// LessonStream is the stream of one lesson's lifecycle.
func LessonStream(id string) string { return "lesson-" + id }

// Lesson kinds: what a statement is.
const (
	// LessonFact: the right answer to a kind of question ("The right
	// answer is 9am."), from customers' corrections.
	LessonFact = "fact"
	// LessonGuidance: how to answer (a preference, a format rule or a
	// method), from the hints customers' comments carry.
	LessonGuidance = "guidance"
)

// LessonScope says where a lesson applies. A lesson never applies outside
// its tenant; a lesson with a User applies to that user's requests only.
type LessonScope struct {
	Tenant   string `json:"tenant"`
	TaskType string `json:"task_type,omitempty"`
	User     string `json:"user,omitempty"`
	// Anchors are the questions (a request's last user message) the
	// lesson was taught on; a request is in scope when its question is
	// close enough to one of them (the memory cluster).
	Anchors []string `json:"anchors,omitempty"`
	// Answers are the answers those feedbacks corrected: an answer close
	// to one of them, stating the same numbers, is in scope too (the
	// gateway then answers again with the lesson in the context).
	Answers []string `json:"answers,omitempty"`
}

// LessonEvidence is one feedback that agrees or disagrees with a lesson.
type LessonEvidence struct {
	Feedback    string `json:"feedback"`
	Interaction string `json:"interaction"`
	User        string `json:"user,omitempty"`
	// Value is what this feedback said is right (a correction), when it
	// differs from the lesson's.
	Value string `json:"value,omitempty"`
}

// LessonRetirement is the evidence that the weights carry a lesson: on
// the lesson's anchors, how many answers of the version without the
// lesson in its context state the lesson's value, against how many with
// it.
type LessonRetirement struct {
	Version     string `json:"version"`
	Asked       int    `json:"asked"`
	Without     int    `json:"without"`
	WithLesson  int    `json:"with_lesson"`
	Explanation string `json:"explanation,omitempty"`
}

// LessonChange is the payload of every lesson.* event; the event type says
// which step of the lifecycle it is. The statement and scope are repeated
// in each, so any one event describes the lesson.
type LessonChange struct {
	LessonID  string      `json:"lesson_id"`
	Kind      string      `json:"kind"`
	Statement string      `json:"statement"`
	Value     string      `json:"value,omitempty"` // a fact lesson's normalised value
	Scope     LessonScope `json:"scope"`
	// For and Against are the feedbacks behind the decision.
	For     []LessonEvidence `json:"for,omitempty"`
	Against []LessonEvidence `json:"against,omitempty"`
	// Users is how many distinct users agree (For); Rule the evidence rule
	// that decided ("2 users agree, 0 disagree"), and Actor who decided
	// (the learner, or an operator).
	Users int    `json:"users,omitempty"`
	Rule  string `json:"rule,omitempty"`
	Actor string `json:"actor,omitempty"`
	// SupersededBy names the lesson that replaced this one.
	SupersededBy string            `json:"superseded_by,omitempty"`
	Retirement   *LessonRetirement `json:"retirement,omitempty"`
	Reason       string            `json:"reason,omitempty"`
}

// Lesson returns the payload's common part (promoted to every lesson.*
// type, so LessonChangeOf needs no switch).
func (c LessonChange) Lesson() LessonChange { return c }

// The lesson lifecycle's events; each embeds LessonChange.
type (
	LessonProposed   struct{ LessonChange }
	LessonPromoted   struct{ LessonChange }
	LessonSuperseded struct{ LessonChange }
	LessonRetired    struct{ LessonChange }
)

func (LessonProposed) EventType() string   { return TypeLessonProposed }
func (LessonPromoted) EventType() string   { return TypeLessonPromoted }
func (LessonSuperseded) EventType() string { return TypeLessonSuperseded }
func (LessonRetired) EventType() string    { return TypeLessonRetired }

// LessonChangeOf returns the LessonChange of any lesson.* payload, and
// false for other payloads.
func LessonChangeOf(p Payload) (LessonChange, bool) {
	if x, ok := p.(interface{ Lesson() LessonChange }); ok {
		return x.Lesson(), true
	}
	return LessonChange{}, false
}

// LessonTypes lists the lesson.* event types.
var LessonTypes = []string{TypeLessonProposed, TypeLessonPromoted, TypeLessonSuperseded, TypeLessonRetired}

// AppliedLesson is a lesson the gateway placed in a request's context
// (interaction.recorded lessons).
type AppliedLesson struct {
	ID        string `json:"id"`
	Statement string `json:"statement"`
}

// LessonsHeading opens the block of lessons the gateway places in a
// request's context.
const LessonsHeading = "Lessons from earlier feedback:"

// LessonsBlock is the text of the lessons block for ls.
func LessonsBlock(ls []AppliedLesson) string {
	var b strings.Builder
	b.WriteString(LessonsHeading)
	for _, l := range ls {
		b.WriteString("\n- ")
		b.WriteString(l.Statement)
	}
	return b.String()
}

// WithLessons returns msgs with the lessons block in its context: appended
// to a leading system message, or as a new leading system message. It is
// how the gateway composes the context it sends the engine, and how
// training rebuilds it from a recorded interaction (ContextMessages). msgs
// is not modified.
func WithLessons(msgs []ChatMessage, ls []AppliedLesson) []ChatMessage {
	if len(ls) == 0 {
		return msgs
	}
	block := LessonsBlock(ls)
	out := make([]ChatMessage, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == "system" {
		first := msgs[0]
		first.Content = first.Content + "\n\n" + block
		out = append(out, first)
		return append(out, msgs[1:]...)
	}
	out = append(out, ChatMessage{Role: "system", Content: block})
	return append(out, msgs...)
}

// ContextMessages are the messages the engine saw: the client's messages
// with the lessons the gateway placed in the context.
func (r *InteractionRecorded) ContextMessages() []ChatMessage {
	return WithLessons(r.Messages, r.Lessons)
}

func init() {
	Types.Register(TypeLessonProposed, 1, func() Payload { return &LessonProposed{} })
	Types.Register(TypeLessonPromoted, 1, func() Payload { return &LessonPromoted{} })
	Types.Register(TypeLessonSuperseded, 1, func() Payload { return &LessonSuperseded{} })
	Types.Register(TypeLessonRetired, 1, func() Payload { return &LessonRetired{} })
}

// LessonCarry is a candidate's answers to a consolidated lesson's
// questions (held-out questions the lesson covers, else its anchors):
// asked, how many state the lesson's value without it in the context,
// how many with it, and how many of its parent's answers (without it)
// do.
type LessonCarry struct {
	Lesson  string `json:"lesson"`
	Asked   int    `json:"asked"`
	Without int    `json:"without"`
	With    int    `json:"with_lesson"`
	Parent  int    `json:"parent"`
}

// Learnt reports whether the weights learnt the lesson: without it in
// the context the candidate states its value in more than half the
// answers, and in more than its parent did.
func (c LessonCarry) Learnt() bool { return 2*c.Without > c.Asked && c.Without > c.Parent }

// Carried reports whether the weights answer the lesson's questions as
// well without it as with it (at least one asked, and with it the value
// stated at least once).
func (c LessonCarry) Carried() bool { return c.Asked > 0 && c.With > 0 && c.Without >= c.With }
