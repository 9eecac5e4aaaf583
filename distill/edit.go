package distill

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"citizen/events"
	"citizen/internal/statement"
)

// numberRe matches a number as answers write them ("30", "4.99", "$4.99",
// "1,200", "-3").
var numberRe = regexp.MustCompile(`[-+]?\$?\d+(?:[.,]\d+)*`)

// editAnswer puts a correction that states numbers into the answer in
// place of the span it corrects (correctionSpan).
func editAnswer(answer, correction string) (string, bool) {
	lo, hi, repl, ok := correctionSpan(answer, correction)
	if !ok {
		return "", false
	}
	return answer[:lo] + repl + answer[hi:], true
}

// rewriteAnswer takes a correction that restates the whole answer with a
// few words changed as the edited answer: the same words, case and
// trailing punctuation aside, in the same order, with at least one and at
// most a third of them (one for answers of three to five words) different
// ("Yes, the refund window is 60 days." for "No, the refund window is 30
// days."). The customer wrote what the answer should have been, keeping
// everything else, which is the edit editAnswer makes for a span. The
// correction is returned as written, with the answer's final punctuation
// when it has none. Anything else (another wording, other length, a
// correction of fewer than three words) is not an edit.
//
// Such corrections are the only ones that teach a verdict that changed:
// after the refund window went from 30 to 60 days, "No" became "Yes" for
// items bought 31-59 days ago, and the customers' corrections of those
// answers were whole answers. Taught as teacher fallbacks (weight 2, not
// the edits' 12, which taught "No, the refund window is 60 days." for items
// bought after 60 days) they left promoted fixes answering "No, the refund
// window is 60 days." to 19 of 23 such questions (bench learn seed 7).
func rewriteAnswer(answer, correction string) (string, bool) {
	a, c := strings.Fields(answer), strings.Fields(correction)
	if len(a) < 3 || len(a) != len(c) {
		return "", false
	}
	diff := 0
	for i := range a {
		if !strings.EqualFold(strings.TrimRight(a[i], sentenceEnd), strings.TrimRight(c[i], sentenceEnd)) {
			diff++
		}
	}
	if diff == 0 || diff > max(1, len(a)/3) {
		return "", false
	}
	out := strings.Join(c, " ")
	last := a[len(a)-1]
	if end := last[len(strings.TrimRight(last, sentenceEnd)):]; strings.TrimRight(out, sentenceEnd) == out {
		out += end
	}
	return out, true
}

// sentenceEnd is the punctuation a word may end with and still be the
// same word for rewriteAnswer.
const sentenceEnd = ".,!?;:"

// correctionSpan finds the span of answer that a correction stating
// numbers corrects: the one span that reads like the correction with
// other numbers (the same words, case and spacing aside; numbers not cut
// out of longer ones). repl is the correction as it replaces the span
// (capitalised at the start of the answer). It reports false when the
// correction states no number, when no span or more than one matches (a
// bare "8" against "3 + 4 = 7" says not which number it corrects), or
// when the answer already says it.
func correctionSpan(answer, correction string) (lo, hi int, repl string, ok bool) {
	c := strings.TrimRight(strings.TrimSpace(correction), ".!;")
	locs := numberRe.FindAllStringIndex(c, -1)
	if len(locs) == 0 || answer == "" {
		return 0, 0, "", false
	}
	// Literal text between numbers: its words in order, any spacing.
	lit := func(x string) string {
		words := strings.Fields(x)
		for i := range words {
			words[i] = regexp.QuoteMeta(words[i])
		}
		out := strings.Join(words, `\s+`)
		if len(words) > 0 && strings.TrimLeft(x, " \t") != x {
			out = `\s*` + out
		}
		if strings.TrimRight(x, " \t") != x {
			out += `\s*`
		}
		return out
	}
	var pat strings.Builder
	pat.WriteString(`(?i)`)
	last := 0
	for _, l := range locs {
		pat.WriteString(lit(c[last:l[0]]))
		pat.WriteString(numberRe.String())
		last = l[1]
	}
	pat.WriteString(lit(c[last:]))
	re, err := regexp.Compile(pat.String())
	if err != nil {
		return 0, 0, "", false
	}
	var spans [][]int
	for _, m := range re.FindAllStringIndex(answer, -1) {
		if statement.NumberBounded(answer, m[0], m[1]) {
			spans = append(spans, m)
		}
	}
	if len(spans) != 1 {
		return 0, 0, "", false
	}
	m := spans[0]
	if sameText(answer[m[0]:m[1]], c) {
		return 0, 0, "", false
	}
	repl = c
	if m[0] == 0 && answer[0] >= 'A' && answer[0] <= 'Z' && repl[0] >= 'a' && repl[0] <= 'z' {
		repl = strings.ToUpper(repl[:1]) + repl[1:]
	}
	return m[0], m[1], repl, true
}

// contradicted returns the interactions whose answers state what a
// customer's correction of another answer of the same task type said is
// wrong, each with the statements it makes and their latest
// replacements (what staleQuestions asks): the span a correction
// replaced ("30 days", corrected to "60 days") marks every other answer
// of the type that states it,
// number-bounded, case and spacing aside, when it is a recurring
// statement of the type (at least contradictionShare of its answers
// state it: a fact, not an answer that is right for other questions).
// Corrections apply in the order they were interpreted, and one that
// states a marked span as right ("30 days" again, after a change back)
// clears it. Interactions with a correction or hint of their own are not
// marked (their feedback says what to learn).
//
// facts lists the changed facts, sorted: statements that at least two
// and at least half of their type's corrections replaced ("30 days",
// alone or within "the refund window is 30 days") and whose marked
// answers the self-evaluation graded good (reward at least good, for at
// least half of them). That is what was right and no longer is ("policy:
// 30 days" after the window became 60 days), not a wrong answer the
// model repeats and its graders already fail ("11" to many arithmetic
// questions), nor an answer right for some questions that a few of the
// type's many corrections replaced ("35", "11" in arithmetic: both made
// a running canary give way in bench runs). weights.trained carries them
// as contradicted (rollout supersede).
//
// replaced lists the statements of the same form without the grade
// condition: what most of a type's corrections (at least two) replaced,
// right before or not. The corrections that replace one are taught at
// the self-distillation weights (Objective.OneOffWeight).
//
// The self-evaluation cannot know that the world changed: after a
// policy drift, the answers no customer corrected keep their good
// grades while stating the old fact. As anchors, positive examples and
// the gate's "good answers" they teach the old fact and score a
// candidate that learnt the new one as a regression (bench learn: the
// gate rejected three candidates that answered 28-29 of 30 refund
// questions with the new value, for "policy regressed"; every
// candidate that had learnt it showed a lower policy score than its
// parent).
func contradicted(graded []*Interaction, good float64) (marked map[string][]replacement, facts, replaced []string) {
	type corr struct {
		pos           uint64
		typ, old, new string
	}
	var cs []corr
	for _, it := range graded {
		if it.Correction == "" || len(it.Answer.ToolCalls) > 0 {
			continue
		}
		lo, hi, repl, ok := correctionSpan(it.Answer.Content, it.Correction)
		if !ok {
			continue
		}
		cs = append(cs, corr{feedbackPosition(it), it.Type(), statement.Normalize(it.Answer.Content[lo:hi]), statement.Normalize(repl)})
	}
	if len(cs) == 0 {
		return nil, nil, nil
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].pos < cs[j].pos })
	wrong := map[string]map[string]string{} // type -> wrong span -> its latest replacement
	perType := map[string]int{}             // type -> corrections
	for _, c := range cs {
		perType[c.typ]++
		if wrong[c.typ] == nil {
			wrong[c.typ] = map[string]string{}
		}
		delete(wrong[c.typ], c.new)
		wrong[c.typ][c.old] = c.new
	}
	// Only a recurring statement (stated in at least contradictionShare
	// of its type's answers) is a fact that others contradict: "30 days"
	// in half the policy answers, not "The answer is 72" or "50" in an
	// arithmetic answer, which is right for other questions.
	type stated struct {
		it        *Interaction
		typ, span string
	}
	var found []stated
	stating := map[[2]string]int{} // (type, span) -> answers stating it
	total := map[string]int{}
	spans := map[string][]string{} // type -> its wrong spans, sorted (once, not per answer)
	for typ, w := range wrong {
		spans[typ] = sortedKeys(w)
	}
	for _, it := range graded {
		typ := it.Type()
		total[typ]++
		if len(spans[typ]) == 0 {
			continue
		}
		a := statement.Normalize(it.Answer.Content)
		for _, s := range spans[typ] {
			if statement.Contains(a, s) {
				stating[[2]string{typ, s}]++
				found = append(found, stated{it, typ, s})
			}
		}
	}
	recurring := func(typ, span string) bool {
		return float64(stating[[2]string{typ, span}]) >= contradictionShare*float64(total[typ])
	}
	marked = map[string][]replacement{}
	grades := map[string][2]int{} // statement -> its marked answers graded good, all of them
	for _, f := range found {
		if f.it.Correction == "" && f.it.Hint == "" && recurring(f.typ, f.span) {
			marked[f.it.ID] = append(marked[f.it.ID], replacement{f.span, wrong[f.typ][f.span]})
			g := grades[statement.Fact(f.typ, f.span)]
			if f.it.Eval != nil && f.it.Eval.Reward >= good {
				g[0]++
			}
			g[1]++
			grades[statement.Fact(f.typ, f.span)] = g
		}
	}
	for st := range stating {
		typ, span := st[0], st[1]
		if !recurring(typ, span) {
			continue
		}
		n := 0 // the type's corrections that replaced a span stating it
		for _, c := range cs {
			if c.typ == typ && statement.Contains(c.old, span) {
				n++
			}
		}
		if n < 2 || 2*n < perType[typ] {
			continue
		}
		fact := statement.Fact(typ, span)
		replaced = append(replaced, fact)
		if g := grades[fact]; 2*g[0] >= g[1] && g[1] > 0 {
			facts = append(facts, fact)
		}
	}
	slices.Sort(facts)
	slices.Sort(replaced)
	return marked, facts, replaced
}

// A replacement is a statement a customer's correction replaced and what
// replaced it (normalised: internal/statement).
type replacement struct{ old, new string }

// contradictionShare is the share of a type's answers that must state a
// corrected span for it to mark the others (contradicted).
const contradictionShare = 0.1

// feedbackPosition is the store position of the last feedback event an
// interaction was built from (0 without one).
func feedbackPosition(it *Interaction) uint64 {
	var pos uint64
	for _, s := range it.Sources {
		if s.Type == events.TypeFeedbackInterpreted {
			pos = max(pos, s.Position)
		}
	}
	return pos
}
