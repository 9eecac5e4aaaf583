package reflection

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"citizen/events"
)

// GradeInput is what graders see of one interaction.
type GradeInput struct {
	// Answer is the content of the first choice.
	Answer string
	// ToolCalls of the first choice and the Tools the client offered.
	ToolCalls []events.ToolCall
	Tools     []events.Tool
	// Metadata of the interaction (reference answers live here).
	Metadata map[string]string
	// Correction is the right answer stated in feedback, if any: the
	// fallback reference.
	Correction string
	// Question is the last user message (the verdict grader compares a
	// number in it with the answer's).
	Question string

	schemas map[string]*Schema // compiled tool schemas, by tool name
}

// reference returns the reference under key and where it came from.
func (in *GradeInput) reference(key string) (ref, source string, ok bool) {
	if key == "" {
		key = "expected"
	}
	if v, found := in.Metadata[key]; found && v != "" {
		return v, "metadata", true
	}
	if in.Correction != "" {
		return in.Correction, "feedback", true
	}
	return "", "", false
}

// Grader is one deterministic check of an answer. Implementations are
// immutable and safe for concurrent use.
type Grader interface {
	// Name is the grader's name in its rubric.
	Name() string
	// Mode is ModeReward (the score can earn reward: 2*score-1) or
	// ModePenalty (a constraint: only a failure counts, as score-1).
	Mode() string
	// Grade returns the verdict with Score in [0, 1], or ok false when the
	// grader does not apply (no reference, no tool calls).
	Grade(in *GradeInput) (res events.GraderResult, ok bool)
}

// graderVersion versions the grading code per kind; bump on change.
var graderVersion = map[string]string{
	"exact": "exact-1", "normalized": "normalized-1", "numeric": "numeric-1", "regex": "regex-1",
	"json_valid": "json_valid-1", "json_schema": "json_schema-1", "tool_call": "tool_call-1",
	"length": "length-1", "format": "format-1", "verdict": "verdict-1",
}

// Grader modes.
const (
	ModeReward  = "reward"
	ModePenalty = "penalty"
	// ModeCheck graders never count toward the reward: they vet answers
	// citizen writes itself (the distiller's revised and updated answers;
	// Rubrics.Check). See GraderSpec.Mode for why a check can be kept out
	// of the reward.
	ModeCheck = "check"
)

// defaultMode: graders that compare with a reference judge correctness and
// can earn reward; the others are constraints.
func defaultMode(kind string) string {
	switch kind {
	case "exact", "normalized", "numeric":
		return ModeReward
	case "verdict":
		return ModeCheck
	}
	return ModePenalty
}

// NewGrader builds a grader from its spec, validating it.
func NewGrader(s GraderSpec) (Grader, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("grader without a name")
	}
	switch s.Mode {
	case "":
		s.Mode = defaultMode(s.Kind)
	case ModeReward, ModePenalty, ModeCheck:
	default:
		return nil, fmt.Errorf("grader %q: mode %q (reward|penalty|check)", s.Name, s.Mode)
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	if s.Weight < 0 || math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) {
		return nil, fmt.Errorf("grader %q: weight must be positive", s.Name)
	}
	b := base{spec: s, version: graderVersion[s.Kind]}
	switch s.Kind {
	case "exact", "normalized":
		return &matchGrader{base: b, normalized: s.Kind == "normalized"}, nil
	case "numeric":
		if s.Tolerance < 0 || s.RelTolerance < 0 {
			return nil, fmt.Errorf("grader %q: tolerances must be >= 0", s.Name)
		}
		return &numericGrader{base: b}, nil
	case "regex":
		re, err := regexp.Compile(s.Pattern)
		if err != nil || s.Pattern == "" {
			return nil, fmt.Errorf("grader %q: bad pattern %q: %v", s.Name, s.Pattern, err)
		}
		return &regexGrader{base: b, re: re}, nil
	case "json_valid":
		return &jsonGrader{base: b}, nil
	case "json_schema":
		if s.Schema == nil {
			return nil, fmt.Errorf("grader %q: json_schema needs a schema", s.Name)
		}
		sc, err := CompileSchema(s.Schema, true)
		if err != nil {
			return nil, fmt.Errorf("grader %q: %v", s.Name, err)
		}
		return &jsonGrader{base: b, schema: sc}, nil
	case "tool_call":
		return &toolGrader{base: b}, nil
	case "length":
		if s.MinChars < 0 || s.MaxChars < 0 || s.MinWords < 0 || s.MaxWords < 0 ||
			s.MaxChars > 0 && s.MinChars > s.MaxChars || s.MaxWords > 0 && s.MinWords > s.MaxWords ||
			s.MinChars+s.MaxChars+s.MinWords+s.MaxWords == 0 {
			return nil, fmt.Errorf("grader %q: length needs consistent min/max chars or words", s.Name)
		}
		return &lengthGrader{base: b}, nil
	case "format":
		if len(s.Checks) == 0 {
			return nil, fmt.Errorf("grader %q: format needs checks", s.Name)
		}
		for _, c := range s.Checks {
			if _, ok := formatChecks[c]; !ok {
				return nil, fmt.Errorf("grader %q: unknown format check %q", s.Name, c)
			}
		}
		return &formatGrader{base: b}, nil
	case "verdict":
		if s.YesWhen != "below" && s.YesWhen != "above" {
			return nil, fmt.Errorf("grader %q: verdict needs yes_when: below or above, got %q", s.Name, s.YesWhen)
		}
		return &verdictGrader{base: b}, nil
	}
	return nil, fmt.Errorf("grader %q: unknown kind %q", s.Name, s.Kind)
}

type base struct {
	spec    GraderSpec
	version string
}

func (b *base) Name() string { return b.spec.Name }
func (b *base) Mode() string { return b.spec.Mode }

func (b *base) result(score float64, label, explanation string) events.GraderResult {
	return events.GraderResult{Name: b.spec.Name, Version: b.version, Score: score, Weight: b.spec.Weight,
		Label: label, Explanation: explanation}
}

func passFail(ok bool) (float64, string) {
	if ok {
		return 1, "pass"
	}
	return 0, "fail"
}

// matchGrader: exact or normalised match with the reference.
type matchGrader struct {
	base
	normalized bool
}

func (g *matchGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	ref, src, ok := in.reference(g.spec.Reference)
	if !ok {
		return events.GraderResult{}, false
	}
	var pass bool
	if g.normalized {
		a, r := NormalizeAnswer(in.Answer), NormalizeAnswer(ref)
		pass = a == r
		if !pass && g.spec.Contains && r != "" && len(a) <= 4*len(r)+8 {
			pass = strings.Contains(" "+a+" ", " "+r+" ")
		}
	} else {
		pass = strings.TrimSpace(in.Answer) == strings.TrimSpace(ref)
	}
	s, l := passFail(pass)
	return g.result(s, l, "reference from "+src), true
}

// NormalizeAnswer is the comparison form used by the normalized grader:
// lower case, punctuation other than inside numbers removed, leading
// articles dropped, whitespace collapsed.
func NormalizeAnswer(s string) string {
	var b strings.Builder
	rs := []rune(strings.ToLower(s))
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case (r == '.' || r == ',') && i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]):
			if r == '.' {
				b.WriteRune(r)
			}
		case r == '%' || r == '-' && i+1 < len(rs) && unicode.IsDigit(rs[i+1]):
			b.WriteRune(r)
		default:
			b.WriteRune(' ')
		}
	}
	f := strings.Fields(b.String())
	for len(f) > 1 && (f[0] == "the" || f[0] == "a" || f[0] == "an") {
		f = f[1:]
	}
	return strings.Join(f, " ")
}

// numericGrader compares the last number of the answer with the reference.
type numericGrader struct{ base }

var reNumber = regexp.MustCompile(`[-+]?[$€£]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?`)

// numberMarks are the currency signs and thousands separators ParseNumbers
// drops (built once: a Replacer compiles its table on first use).
var numberMarks = strings.NewReplacer("$", "", "€", "", "£", "", ",", "")

// ParseNumbers returns the numbers in s in order ("$1,240.50" -> 1240.5).
func ParseNumbers(s string) []float64 {
	var out []float64
	for _, m := range reNumber.FindAllString(s, -1) {
		m = numberMarks.Replace(m)
		if f, err := strconv.ParseFloat(m, 64); err == nil && !math.IsInf(f, 0) {
			out = append(out, f)
		}
	}
	return out
}

func (g *numericGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	ref, src, ok := in.reference(g.spec.Reference)
	if !ok {
		return events.GraderResult{}, false
	}
	rn := ParseNumbers(ref)
	if len(rn) == 0 {
		return events.GraderResult{}, false
	}
	want := rn[len(rn)-1]
	an := ParseNumbers(in.Answer)
	if len(an) == 0 {
		return g.result(0, "fail", "no number in answer; reference from "+src), true
	}
	got := an[len(an)-1]
	tol := math.Max(g.spec.Tolerance, g.spec.RelTolerance*math.Abs(want))
	s, l := passFail(math.Abs(got-want) <= tol)
	return g.result(s, l, fmt.Sprintf("got %g want %g (tolerance %g); reference from %s", got, want, tol, src)), true
}

// regexGrader: the answer matches (or, negated, does not match) a pattern.
type regexGrader struct {
	base
	re *regexp.Regexp
}

func (g *regexGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	m := g.re.MatchString(in.Answer)
	s, l := passFail(m != g.spec.Negate)
	return g.result(s, l, ""), true
}

// jsonGrader: the answer is JSON (and, with a schema, conforms to it).
type jsonGrader struct {
	base
	schema *Schema
}

var reFence = regexp.MustCompile("(?s)^```[a-zA-Z]*\\s*\n(.*?)\n?```$")

func (g *jsonGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	a := strings.TrimSpace(in.Answer)
	if g.spec.AllowFences {
		if m := reFence.FindStringSubmatch(a); m != nil {
			a = strings.TrimSpace(m[1])
		}
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(a))
	if err := dec.Decode(&v); err != nil {
		return g.result(0, "fail", "not JSON: "+truncate(err.Error(), 120)), true
	}
	if dec.More() {
		return g.result(0, "fail", "trailing data after JSON"), true
	}
	if g.schema != nil {
		if err := g.schema.Validate(v); err != nil {
			return g.result(0, "fail", truncate(err.Error(), 200)), true
		}
	}
	return g.result(1, "pass", ""), true
}

// toolGrader: every tool call names an offered tool and has arguments
// valid against its schema. Score is the share of valid calls.
type toolGrader struct{ base }

func (g *toolGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	if len(in.ToolCalls) == 0 {
		return events.GraderResult{}, false
	}
	valid := 0
	var problems []string
	for _, tc := range in.ToolCalls {
		if err := in.checkToolCall(tc); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		valid++
	}
	score := float64(valid) / float64(len(in.ToolCalls))
	label := "pass"
	if valid < len(in.ToolCalls) {
		label = "fail"
	}
	return g.result(score, label, truncate(strings.Join(problems, "; "), 300)), true
}

// toolCallError classifies an invalid tool call.
type toolCallError struct {
	kind   string // unknown_tool, invalid_tool_args
	detail string
}

func (e *toolCallError) Error() string { return e.kind + ": " + e.detail }

// checkToolCall validates one call against the offered tools.
func (in *GradeInput) checkToolCall(tc events.ToolCall) error {
	var tool *events.Tool
	for i := range in.Tools {
		if in.Tools[i].Name == tc.Name {
			tool = &in.Tools[i]
			break
		}
	}
	if tool == nil {
		return &toolCallError{"unknown_tool", fmt.Sprintf("%q was not offered", truncate(tc.Name, 64))}
	}
	var args any
	if err := json.Unmarshal([]byte(tc.Arguments), &args); err != nil {
		return &toolCallError{"invalid_tool_args", fmt.Sprintf("%s: arguments are not JSON", tc.Name)}
	}
	if _, ok := args.(map[string]any); !ok {
		return &toolCallError{"invalid_tool_args", fmt.Sprintf("%s: arguments are not an object", tc.Name)}
	}
	if len(tool.Parameters) == 0 || string(tool.Parameters) == "null" {
		return nil
	}
	if in.schemas == nil {
		in.schemas = map[string]*Schema{}
	}
	sc, ok := in.schemas[tool.Name]
	if !ok {
		var err error
		sc, err = CompileSchemaJSON(tool.Parameters, false)
		if err != nil {
			sc = nil // a schema we cannot read does not blame the model
		}
		in.schemas[tool.Name] = sc
	}
	if sc != nil {
		if err := sc.Validate(args); err != nil {
			return &toolCallError{"invalid_tool_args", fmt.Sprintf("%s: %v", tc.Name, err)}
		}
	}
	return nil
}

// lengthGrader: answer length within bounds; outside, the score decays
// with the relative excess.
type lengthGrader struct{ base }

func (g *lengthGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	chars := len([]rune(strings.TrimSpace(in.Answer)))
	words := len(strings.Fields(in.Answer))
	score := 1.0
	var why []string
	check := func(n, lo, hi int, unit string) {
		if lo > 0 && n < lo {
			score = math.Min(score, float64(n)/float64(lo))
			why = append(why, fmt.Sprintf("%d %s < %d", n, unit, lo))
		}
		if hi > 0 && n > hi {
			score = math.Min(score, math.Max(0, 1-float64(n-hi)/float64(hi)))
			why = append(why, fmt.Sprintf("%d %s > %d", n, unit, hi))
		}
	}
	check(chars, g.spec.MinChars, g.spec.MaxChars, "chars")
	check(words, g.spec.MinWords, g.spec.MaxWords, "words")
	label := "pass"
	if score < 1 {
		label = "fail"
	}
	return g.result(score, label, strings.Join(why, "; ")), true
}

// formatGrader: share of format checks passed.
type formatGrader struct{ base }

var (
	reMarkdown = regexp.MustCompile("(?m)^\\s{0,3}(#{1,6}\\s|[-*+]\\s|\\d+[.)]\\s|>\\s)|\\*\\*[^*]+\\*\\*|`[^`]+`|\\[[^\\]]+\\]\\([^)]+\\)")
	reBullet   = regexp.MustCompile(`(?m)^\s*[-*•]\s+\S`)
	reNumbered = regexp.MustCompile(`(?m)^\s*\d+[.)]\s+\S`)
	rePlainNum = regexp.MustCompile(`^[-+]?[$€£]?\d[\d,]*(?:\.\d+)?%?$`)
)

var formatChecks = map[string]func(string) bool{
	"single_line":   func(a string) bool { return !strings.Contains(strings.TrimSpace(a), "\n") },
	"no_markdown":   func(a string) bool { return !reMarkdown.MatchString(a) },
	"no_code_fence": func(a string) bool { return !strings.Contains(a, "```") },
	"bullet_list":   func(a string) bool { return len(reBullet.FindAllString(a, 2)) >= 2 },
	"numbered_list": func(a string) bool { return len(reNumbered.FindAllString(a, 2)) >= 2 },
	"plain_number":  func(a string) bool { return rePlainNum.MatchString(strings.TrimSpace(a)) },
}

func (g *formatGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	passed := 0
	var failed []string
	for _, c := range g.spec.Checks {
		if formatChecks[c](in.Answer) {
			passed++
		} else {
			failed = append(failed, c)
		}
	}
	score := float64(passed) / float64(len(g.spec.Checks))
	label := "pass"
	if len(failed) > 0 {
		label = "fail"
	}
	return g.result(score, label, strings.Join(failed, ",")), true
}

// verdictGrader: a yes/no answer's verdict must follow from comparing the
// question's number with the number the answer states ("My parcel weighs
// 12 kg. Can I send it as standard?" against "No, standard parcels may
// weigh up to 20 kg.": yes_when below says 12 < 20 means yes, so "No"
// fails). It judges an answer's consistency with itself, not its truth:
// "No, standard parcels may weigh up to 10 kg." passes for the same
// question.
//
// It applies when the question holds exactly one number and the answer
// has a verdict (its first word yes or no, else a negation: yesNo) and
// states exactly one number other than the question's.
type verdictGrader struct{ base }

func (g *verdictGrader) Grade(in *GradeInput) (events.GraderResult, bool) {
	qn := ParseNumbers(in.Question)
	if len(qn) != 1 {
		return events.GraderResult{}, false
	}
	said, ok := yesNo(in.Answer)
	if !ok {
		return events.GraderResult{}, false
	}
	var stated []float64
	for _, n := range ParseNumbers(in.Answer) {
		if n != qn[0] {
			stated = append(stated, n)
		}
	}
	if len(stated) != 1 {
		return events.GraderResult{}, false
	}
	want := qn[0] < stated[0]
	if g.spec.YesWhen == "above" {
		want = qn[0] > stated[0]
	}
	s, l := passFail(said == want)
	return g.result(s, l, fmt.Sprintf("question's %g against the answer's %g: want %s, said %s", qn[0], stated[0], yesWord(want), yesWord(said))), true
}

func yesWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// yesNo finds an answer's verdict: its first word when that is yes or no
// (or a variant), else a negation anywhere ("cannot", "no longer").
func yesNo(answer string) (yes, ok bool) {
	low := strings.ToLower(answer)
	if f := strings.Fields(low); len(f) > 0 {
		switch strings.Trim(f[0], ".,!;:'\"-") {
		case "yes", "yep", "yeah", "sure", "certainly", "absolutely":
			return true, true
		case "no", "nope", "unfortunately":
			return false, true
		}
	}
	for _, neg := range []string{"can't", "cannot", "can not", "not eligible", "no longer", "too late", "not able", "unable"} {
		if strings.Contains(low, neg) {
			return false, true
		}
	}
	return false, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func sortStrings(s []string) { sort.Strings(s) }
