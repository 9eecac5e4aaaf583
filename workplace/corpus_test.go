package workplace

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestCorpusDeterministicAndComplete(t *testing.T) {
	a := Corpus(42, 600, CorpusOptions{})
	b := Corpus(42, 600, CorpusOptions{})
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different corpora")
	}
	if c := Corpus(43, 600, CorpusOptions{}); reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same corpus")
	}
	types := map[string]int{}
	hinted, faults, multi := 0, 0, 0
	for _, c := range a {
		types[c.Type]++
		if c.Hinted {
			hinted++
		}
		users := 0
		for i, m := range c.Messages {
			switch m.Role {
			case "user":
				users++
			case "tool":
				if strings.Contains(m.Content, `"error"`) {
					faults++
				}
				prev := c.Messages[i-1]
				if len(prev.ToolCalls) != 1 || prev.ToolCalls[0].ID != m.ToolCallID {
					t.Fatalf("tool message %q does not answer the preceding call", m.Content)
				}
			}
		}
		if users > 1 && !c.Hinted {
			multi++
		}
		last := c.Messages[len(c.Messages)-1]
		if last.Role != "assistant" || last.Content == "" {
			t.Fatalf("%s conversation does not end with an assistant answer: %+v", c.Type, last)
		}
	}
	for _, f := range InitialFamilies() {
		if types[f] < 40 {
			t.Errorf("family %s has %d conversations of 600", f, types[f])
		}
	}
	if types["percentage"] != 0 {
		t.Errorf("late family in the time-zero corpus")
	}
	if hinted < 40 || hinted > 150 {
		t.Errorf("hinted = %d of 600, want about 15%%", hinted)
	}
	if faults == 0 || multi == 0 {
		t.Errorf("faults=%d multi-turn=%d, want both > 0", faults, multi)
	}
	if n := len(Corpus(1, 50, CorpusOptions{Families: []string{"percentage"}})); n != 50 {
		t.Errorf("late family on request: %d conversations", n)
	}
}

// The final answer of every corpus conversation passes the checker of the task it answers, and
// a tool failure is answered with an apology.
func TestCorpusAnswersCorrect(t *testing.T) {
	o := CorpusOptions{}.withDefaults()
	var fams []Family
	for _, n := range o.Families {
		fams = append(fams, FamilyByName(n))
	}
	for i := 0; i < 500; i++ {
		c, task := corpusEntry(9, i, fams, o)
		last := c.Messages[len(c.Messages)-1].Content
		turn := task.Turns[len(task.Turns)-1]
		var g Grade
		if prev := c.Messages[len(c.Messages)-2]; prev.Role == "tool" && strings.Contains(prev.Content, "error") {
			turn = task.Turns[0]
			g = turn.Tool.CheckFault(last)
		} else {
			g = turn.Check(last)
		}
		if !g.Correct {
			t.Fatalf("conversation %d (%s) ends with %q, graded %+v", i, c.Type, last, g)
		}
	}
}

// A policy note changes the answer: the answer states the noted value, not the time-zero one.
func TestCorpusPolicyNotes(t *testing.T) {
	checked := 0
	for _, c := range Corpus(5, 3000, CorpusOptions{Families: []string{"policy"}, HintRate: 1}) {
		var note string
		for _, m := range c.Messages {
			if m.Role == "system" || m.Role == "user" {
				note += m.Content + " "
			}
		}
		if !strings.Contains(note, "refund") || strings.Count(note, "Note") > 1 || !strings.Contains(note, "The refund window") && !strings.Contains(note, "refund window is now") {
			continue
		}
		ans := c.Messages[len(c.Messages)-1].Content
		if !strings.HasPrefix(ans, "The refund window") {
			continue
		}
		nv := vals(note[:strings.Index(note, "days")])
		if len(nv) == 0 {
			continue
		}
		checked++
		if !strings.Contains(ans, fmtNum(nv[len(nv)-1])+" days") || strings.Contains(ans, "30 days") {
			t.Errorf("note %q, answer %q", note, ans)
		}
	}
	if checked < 20 {
		t.Fatalf("only %d refund notes checked", checked)
	}
}

func TestCorpusOpenAIShape(t *testing.T) {
	for _, c := range Corpus(3, 200, CorpusOptions{Families: []string{"order_status"}, FaultRate: -1}) {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Messages []map[string]any `json:"messages"`
			Tools    []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Tools[0]["type"] != "function" {
			t.Fatalf("tools: %v", raw.Tools)
		}
		for _, m := range raw.Messages {
			if tc, ok := m["tool_calls"].([]any); ok {
				call := tc[0].(map[string]any)
				fn := call["function"].(map[string]any)
				var args map[string]string
				if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil || args["order_id"] == "" {
					t.Fatalf("tool call arguments %v: %v", fn["arguments"], err)
				}
			}
			if m["role"] == "tool" && (m["tool_call_id"] == "" || strings.Contains(m["content"].(string), "error")) {
				t.Fatalf("bad tool message %v (faults disabled)", m)
			}
		}
	}
}

// Near misses made for correction examples are wrong answers of the same shape.
func TestPerturb(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := InitialWorld()
	made := 0
	for _, name := range []string{"arithmetic", "unit_conversion", "policy", "json_extract", "percentage"} {
		f := FamilyByName(name)
		for i := 0; i < 200; i++ {
			turn := f.Generate(r, w).Turns[0]
			p, ok := perturb(r, turn.Answer)
			if !ok {
				continue
			}
			made++
			if p == turn.Answer {
				t.Errorf("%s: perturb left %q unchanged", name, p)
			}
			if len(vals(p)) != len(vals(turn.Answer)) {
				t.Errorf("%s: perturb changed the shape: %q -> %q", name, turn.Answer, p)
			}
		}
	}
	if made < 800 {
		t.Errorf("only %d perturbations", made)
	}
	if p, _ := perturb(rand.New(rand.NewPCG(1, 1)), "The total is $12.50."); !strings.HasPrefix(p, "The total is $") || len(p) < len("The total is $1.25.") {
		t.Errorf("money perturbation %q", p)
	}
}
