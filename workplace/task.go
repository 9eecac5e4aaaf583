package workplace

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Grade is a checker's judgement of one answer.
type Grade struct {
	Correct bool    `json:"correct"`
	Score   float64 `json:"score"` // 0..1; partial credit where a family gives it
	Reason  string  `json:"reason,omitempty"`
}

func pass() Grade { return Grade{Correct: true, Score: 1} }
func fail(format string, args ...any) Grade {
	return Grade{Score: 0, Reason: fmt.Sprintf(format, args...)}
}
func partial(score float64, reason string) Grade {
	return Grade{Correct: true, Score: score, Reason: reason}
}

// Task is one fresh instance of a family: a conversation plan of one or more user turns, each
// with its canonical answer and a checker. A Task is immutable once generated.
type Task struct {
	Type           string          `json:"type"`
	System         string          `json:"system,omitempty"`
	Tools          []Tool          `json:"tools,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	Turns          []Turn          `json:"turns"`
	PolicyVersion  int             `json:"policy_version"`
}

// Turn is one user message and what a correct reply to it is.
type Turn struct {
	User   string    `json:"user"`
	Answer string    `json:"answer"` // canonical reply (after any tool call)
	Short  string    `json:"short"`  // the bare right answer, as a correction would state it
	Tool   *ToolStep `json:"tool,omitempty"`

	check func(answer string) Grade
}

// Check grades a final (non-tool) answer to this turn.
func (t Turn) Check(answer string) Grade {
	if strings.TrimSpace(answer) == "" {
		return fail("empty answer")
	}
	return t.check(answer)
}

// ToolStep is a tool call the model must make before answering a turn.
type ToolStep struct {
	Name        string            `json:"name"`
	Args        map[string]string `json:"args"`
	Result      string            `json:"result"`       // the tool message content when the tool works
	FaultAnswer string            `json:"fault_answer"` // canonical reply when the tool failed

	checkFault func(answer string) Grade
}

// CheckCall reports whether call is the expected tool with exactly the expected arguments
// (string values compared ignoring case and surrounding space).
func (s *ToolStep) CheckCall(call ToolCall) error {
	if call.Function.Name != s.Name {
		return fmt.Errorf("called %q, want %q", call.Function.Name, s.Name)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
		return fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	for k := range args {
		if _, ok := s.Args[k]; !ok {
			return fmt.Errorf("unexpected argument %q", k)
		}
	}
	for k, want := range s.Args {
		v, ok := args[k]
		if !ok {
			return fmt.Errorf("missing argument %q", k)
		}
		got, ok := v.(string)
		if !ok {
			return fmt.Errorf("argument %q is not a string", k)
		}
		if !strings.EqualFold(strings.TrimSpace(got), want) {
			return fmt.Errorf("argument %q = %q, want %q", k, got, want)
		}
	}
	return nil
}

// CheckFault grades the answer given after the tool failed: it must admit the failure and not
// invent a result.
func (s *ToolStep) CheckFault(answer string) Grade { return s.checkFault(answer) }

// CallJSON is the canonical arguments JSON of the expected call.
func (s *ToolStep) CallJSON() string {
	b, _ := json.Marshal(s.Args)
	return string(b)
}

// Family is a generator of task instances of one type.
type Family interface {
	// Name is the type label, sent to citizen as metadata "type".
	Name() string
	// Generate draws a fresh instance; it uses only r and w, so the same seed and world give the
	// same task.
	Generate(r *rand.Rand, w World) Task
}

// Families returns every family, the late ones included, in a fixed order.
func Families() []Family {
	return []Family{arithmeticFamily{}, unitFamily{}, policyFamily{}, orderFamily{}, jsonFamily{},
		classifyFamily{}, percentFamily{}}
}

// InitialFamilies names the families active at time zero.
func InitialFamilies() []string {
	return []string{"arithmetic", "unit_conversion", "policy", "order_status", "json_extract", "classify"}
}

// FamilyByName returns the named family, or nil.
func FamilyByName(name string) Family {
	for _, f := range Families() {
		if f.Name() == name {
			return f
		}
	}
	return nil
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// fill replaces {key} placeholders.
func fill(tmpl string, kv ...string) string {
	return strings.NewReplacer(braced(kv)...).Replace(tmpl)
}

func braced(kv []string) []string {
	out := make([]string, len(kv))
	for i := range kv {
		if i%2 == 0 {
			out[i] = "{" + kv[i] + "}"
		} else {
			out[i] = kv[i]
		}
	}
	return out
}

var (
	firstNames = []string{"Ana", "Sam", "Priya", "Tom", "Maria", "Kenji", "Lena", "Omar", "Grace", "Luis",
		"Chen", "Fatima", "Noah", "Ivy", "Mateo", "Zara", "Ben", "Aisha", "Leo", "Nina", "Raj", "Sofia"}
	lastNames = []string{"Lopez", "Smith", "Patel", "Kim", "Novak", "Okafor", "Rossi", "Berg", "Tanaka",
		"Silva", "Muller", "Haddad", "Clarke", "Moreau", "Ivanova"}
	cities = []string{"Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Madrid", "Oslo", "Austin",
		"Lyon", "Pune", "Dublin", "Seoul", "Quito", "Perth", "Krakow"}
	countables = []string{"apples", "pencils", "stickers", "books", "marbles", "cookies", "stamps",
		"cards", "candles", "shells", "tickets", "boxes"}
	products = []string{"Desk Lamp", "Coffee Mug", "Notebook", "Phone Case", "Water Bottle", "Backpack",
		"Wall Clock", "Yoga Mat", "Headphones", "Tea Kettle", "Picture Frame", "Umbrella"}
)
