package workplace

import (
	"context"
	"strings"
	"testing"
)

// Quiz asks the same questions for the same world, n and seed (two
// models compare question by question), n per key, none of order_status
// (it needs its tool), and grades with the turns' checkers: the canonical
// answers are all right, an empty one never.
func TestQuizSameQuestionsGraded(t *testing.T) {
	w := InitialWorld()
	expected := map[string]string{}
	var users []string
	right := func(_ context.Context, system, user string) (string, error) {
		users = append(users, system+"|"+user)
		return expected[system+"|"+user], nil
	}
	// First pass: learn the canonical answers.
	first, err := Quiz(context.Background(), w, QuizConfig{N: 5, Seed: 7}, func(_ context.Context, system, user string) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, q := range first {
		expected[q.System+"|"+q.User] = q.Expected
		perKey[q.Key]++
		if q.Correct {
			t.Errorf("an empty answer graded right: %+v", q)
		}
		if q.Family == "order_status" {
			t.Errorf("order_status asked: %+v", q)
		}
	}
	for k, n := range perKey {
		if n != 5 {
			t.Errorf("%s: %d questions, want 5", k, n)
		}
	}
	if len(perKey) < 4 {
		t.Fatalf("keys %v: want the tool-free families of the initial world", perKey)
	}
	second, err := Quiz(context.Background(), w, QuizConfig{N: 5, Seed: 7}, right)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != len(first) {
		t.Fatalf("%d questions, then %d", len(first), len(second))
	}
	for i, q := range second {
		if q.User != first[i].User || !q.Correct {
			t.Errorf("question %d: %q (first pass %q), correct %v with the canonical answer %q", i, q.User, first[i].User, q.Correct, q.Expected)
		}
	}
	// Split divides a family; each key gets its N.
	split, err := Quiz(context.Background(), w, QuizConfig{N: 3, Seed: 7,
		Split: map[string]func(Turn) string{"policy": func(tn Turn) string {
			if strings.Contains(tn.Answer, "refund window") {
				return "policy/refund"
			}
			return "policy"
		}},
		Keys: map[string][]string{"policy": {"policy/refund", "policy"}}}, right)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, q := range split {
		n[q.Key]++
	}
	if n["policy/refund"] != 3 || n["policy"] != 3 {
		t.Fatalf("split keys %v: want 3 refund and 3 other policy questions", n)
	}
}
