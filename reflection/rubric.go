package reflection

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync/atomic"

	"gopkg.in/yaml.v3"

	"citizen/events"
)

// ErrRubric: a rubric file is invalid. The message names the line at fault.
var ErrRubric = errors.New("reflection: invalid rubric")

// RubricFile is the YAML layout of a rubric file:
//
//	version: "2026-11-30.1"      # recorded in every evaluation (default: sha256 of the file)
//	default:                     # for interactions whose type has no rubric
//	  graders:
//	    - {name: length, kind: length, max_chars: 4000}
//	types:
//	  arithmetic:
//	    match: ['(?i)\bwhat is \d']   # type inference from the last user message
//	    graders:
//	      - {name: answer, kind: numeric, tolerance: 0.01, weight: 2}
//
// Unknown keys are refused with their line.
type RubricFile struct {
	Version string                `yaml:"version"`
	Default *TypeRubric           `yaml:"default"`
	Types   map[string]TypeRubric `yaml:"types"`
}

// TypeRubric is the rubric of one task type.
type TypeRubric struct {
	// Match: regular expressions on the last user message that infer this
	// type when the interaction does not carry one.
	Match   []string     `yaml:"match"`
	Graders []GraderSpec `yaml:"graders"`
}

// GraderSpec configures one grader. Kind selects it; the other fields
// apply to the kinds named in their comments.
type GraderSpec struct {
	Name   string  `yaml:"name"`
	Kind   string  `yaml:"kind"` // exact, normalized, numeric, regex, json_valid, json_schema, tool_call, length, format, verdict
	Weight float64 `yaml:"weight"`
	// Mode: "reward" (the score earns reward, 2*score-1; default for
	// exact, normalized, numeric), "penalty" (a constraint that only
	// counts when it fails, as score-1; default for the other kinds, so
	// that passing a length or format check alone earns nothing) or
	// "check" (never in the reward; default for verdict): the grader vets
	// the answers citizen writes itself, the distiller's revised answers
	// and its answers with a lesson in the context (Rubrics.Check).
	//
	// A consistency check is kept out of the reward because the reward is
	// what the rollout compares: after a limit changed, a half-learnt fix
	// that states the new limit with the old verdict is inconsistent, the
	// stable version's answer with the old limit is consistent (and as
	// wrong), and penalising only the fix would hold back the version
	// that knows the new limit. The evaluation records a check's
	// result beside the reward (InteractionEvaluated.Checks), for the
	// operators watching the stream; neither the reward nor the rollout
	// reads it.
	Mode string `yaml:"mode"`
	// Reference is the metadata key holding the reference answer (exact,
	// normalized, numeric; default "expected"). Without one in the
	// interaction's metadata, a correction received as feedback is used;
	// without either the grader does not apply.
	Reference string `yaml:"reference"`
	// numeric
	Tolerance    float64 `yaml:"tolerance"`
	RelTolerance float64 `yaml:"rel_tolerance"`
	// regex
	Pattern string `yaml:"pattern"`
	Negate  bool   `yaml:"negate"`
	// normalized: also pass when the answer contains the reference as
	// whole words and is at most 4 times longer.
	Contains bool `yaml:"contains"`
	// json_valid, json_schema: accept an answer wrapped in ``` fences.
	AllowFences bool `yaml:"allow_fences"`
	// json_schema
	Schema any `yaml:"schema"`
	// length
	MinChars int `yaml:"min_chars"`
	MaxChars int `yaml:"max_chars"`
	MinWords int `yaml:"min_words"`
	MaxWords int `yaml:"max_words"`
	// format: single_line, no_markdown, no_code_fence, bullet_list,
	// numbered_list, plain_number
	Checks []string `yaml:"checks"`
	// verdict: "below" (the answer's yes means the question's number is
	// below the number the answer states: an age against a window) or
	// "above".
	YesWhen string `yaml:"yes_when"`
}

// Rubrics is a compiled rubric file: graders per type, type inference
// patterns and the version recorded in evaluations. Immutable; safe for
// concurrent use.
type Rubrics struct {
	Version string
	types   map[string]*compiledType
	order   []string // type names in a fixed order for inference
	deflt   *compiledType
}

type compiledType struct {
	match   []*regexp.Regexp
	pre     []*prefilter // parallel to match
	graders []Grader
}

// ParseRubrics compiles a rubric file. Errors wrap ErrRubric and name the
// line at fault.
func ParseRubrics(data []byte) (*Rubrics, error) {
	var f RubricFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrRubric, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRubric, err)
	}
	r := &Rubrics{Version: f.Version, types: map[string]*compiledType{}}
	if r.Version == "" {
		sum := sha256.Sum256(data)
		r.Version = "sha256:" + hex.EncodeToString(sum[:6])
	}
	compile := func(path []string, tr TypeRubric) (*compiledType, error) {
		ct := &compiledType{}
		for i, p := range tr.Match {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: match: %v", ErrRubric, lineOf(&root, append(path, "match"), i), err)
			}
			ct.match = append(ct.match, re)
			ct.pre = append(ct.pre, newPrefilter(re))
		}
		seen := map[string]bool{}
		for i, gs := range tr.Graders {
			g, err := NewGrader(gs)
			if err == nil && seen[gs.Name] {
				err = fmt.Errorf("duplicate grader name %q", gs.Name)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: %v", ErrRubric, lineOf(&root, append(path, "graders"), i), err)
			}
			seen[gs.Name] = true
			ct.graders = append(ct.graders, g)
		}
		return ct, nil
	}
	if f.Default != nil {
		ct, err := compile([]string{"default"}, *f.Default)
		if err != nil {
			return nil, err
		}
		r.deflt = ct
	} else {
		r.deflt = &compiledType{}
	}
	for name := range f.Types {
		r.order = append(r.order, name)
	}
	sortStrings(r.order)
	for _, name := range r.order {
		ct, err := compile([]string{"types", name}, f.Types[name])
		if err != nil {
			return nil, err
		}
		r.types[name] = ct
	}
	return r, nil
}

// lineOf returns the line of the idx-th item of the sequence at path in a
// YAML document (0 if not found).
func lineOf(root *yaml.Node, path []string, idx int) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return n.Line
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			return n.Line
		}
	}
	if n.Kind == yaml.SequenceNode && idx >= 0 && idx < len(n.Content) {
		return n.Content[idx].Line
	}
	return n.Line
}

// For returns the graders for a task type and whether the type has its
// own rubric (else the default rubric's graders are returned).
func (r *Rubrics) For(taskType string) ([]Grader, bool) {
	if ct, ok := r.types[taskType]; ok {
		return ct.graders, true
	}
	return r.deflt.graders, false
}

// Judge says whether answer is right for a question of taskType whose
// right answer is expected: every reward-mode grader of the type (those
// that compare with a reference: exact, normalized, numeric) passes with
// expected as the reference. ok is false when none of them applies (the
// type has no reference grader, or expected holds no number for a
// numeric one). Constraints (length, format) do not decide it. It is the
// grade of a regression suite's case (distill.SuiteGrade).
func (r *Rubrics) Judge(taskType, answer, expected string) (right, ok bool) {
	// Without metadata a grader's reference is the correction, whatever
	// key its spec names (GradeInput.reference).
	results := r.grade(taskType, ModeReward, &GradeInput{Answer: answer, Correction: expected})
	right = len(results) > 0
	for _, res := range results {
		right = right && res.Score >= 1
	}
	return right, len(results) > 0
}

// Check vets an answer citizen wrote itself (a revised or updated answer
// to question, of taskType) with the type's check-mode graders: pass is
// false when one that applies fails, checked is whether any applied.
// why names the failures.
func (r *Rubrics) Check(taskType, question, answer string) (pass, checked bool, why string) {
	results := r.grade(taskType, ModeCheck, &GradeInput{Answer: answer, Question: question})
	var failed []string
	for _, res := range results {
		if res.Score < 1 {
			failed = append(failed, res.Name+": "+res.Explanation)
		}
	}
	return len(failed) == 0, len(results) > 0, strings.Join(failed, "; ")
}

// grade returns the results of taskType's graders of mode that apply to
// in.
func (r *Rubrics) grade(taskType, mode string, in *GradeInput) []events.GraderResult {
	graders, _ := r.For(taskType)
	var out []events.GraderResult
	for _, g := range graders {
		if g.Mode() != mode {
			continue
		}
		if res, applies := g.Grade(in); applies {
			out = append(out, res)
		}
	}
	return out
}

// Infer returns the first type (in name order) whose match patterns match
// the prompt, or "".
func (r *Rubrics) Infer(prompt string) string {
	if prompt == "" {
		return ""
	}
	t := &text{s: prompt}
	for _, name := range r.order {
		ct := r.types[name]
		for i, re := range ct.match {
			if ct.pre[i].may(t) && re.MatchString(prompt) {
				return name
			}
		}
	}
	return ""
}

// RubricStore holds the current rubrics of a file and reloads them on
// demand; a failed reload keeps the previous rubrics. Safe for concurrent
// use.
type RubricStore struct {
	path string
	cur  atomic.Pointer[Rubrics]
}

// LoadRubrics reads and compiles the rubric file at path.
func LoadRubrics(path string) (*RubricStore, error) {
	s := &RubricStore{path: path}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// StaticRubrics wraps compiled rubrics in a store that never reloads.
func StaticRubrics(r *Rubrics) *RubricStore {
	s := &RubricStore{}
	s.cur.Store(r)
	return s
}

// Reload re-reads the file; on error the current rubrics stay in force.
func (s *RubricStore) Reload() error {
	if s.path == "" {
		return nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("reflection: reading rubrics: %w", err)
	}
	r, err := ParseRubrics(data)
	if err != nil {
		return fmt.Errorf("%s: %w", s.path, err)
	}
	s.cur.Store(r)
	return nil
}

// Current returns the rubrics in force.
func (s *RubricStore) Current() *Rubrics { return s.cur.Load() }
