package workplace

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
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

// TestQuizParallel: asking 8 at a time gives the questions, answers and
// grades of asking one at a time, in the same order; a larger quiz of the
// same seed begins, per family, with the smaller one's questions; an
// error of ask ends the quiz with it.
func TestQuizParallel(t *testing.T) {
	w := InitialWorld()
	var calls atomic.Int64
	ask := func(_ context.Context, system, user string) (string, error) {
		calls.Add(1)
		if len(user)%2 == 0 {
			return "", nil
		}
		return "The answer is 12. " + user, nil
	}
	one, err := Quiz(context.Background(), w, QuizConfig{N: 20, Seed: 3}, ask)
	if err != nil {
		t.Fatal(err)
	}
	calls.Store(0)
	many, err := Quiz(context.Background(), w, QuizConfig{N: 20, Seed: 3, Parallel: 8}, ask)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, many) || calls.Load() != int64(len(one)) {
		t.Fatalf("parallel quiz differs (%d questions, %d asked)", len(many), calls.Load())
	}
	larger, err := Quiz(context.Background(), w, QuizConfig{N: 30, Seed: 3, Parallel: 8}, ask)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var prefix []Question
	for _, q := range larger {
		if seen[q.Family] < 20 {
			prefix = append(prefix, q)
		}
		seen[q.Family]++
	}
	if !reflect.DeepEqual(prefix, one) {
		t.Fatal("the larger quiz does not begin with the smaller one's questions")
	}
	boom := errors.New("engine down")
	_, err = Quiz(context.Background(), w, QuizConfig{N: 20, Seed: 3, Parallel: 4}, func(_ context.Context, _, user string) (string, error) {
		if strings.Contains(user, "7") {
			return "", boom
		}
		return "", nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("ask's error: got %v", err)
	}
}
