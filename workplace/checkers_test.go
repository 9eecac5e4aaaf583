package workplace

import (
	"math/rand/v2"
	"strings"
	"testing"
)

type answerCase struct {
	answer string
	want   bool
}

func runCases(t *testing.T, name string, check func(string) Grade, cases []answerCase) {
	t.Helper()
	for _, c := range cases {
		if g := check(c.answer); g.Correct != c.want {
			t.Errorf("%s: check(%q) = %+v, want correct=%v", name, c.answer, g, c.want)
		}
	}
}

func TestArithmeticChecker(t *testing.T) {
	q := "Sam has 12 apples and buys 7 more. How many apples does Sam have now?"
	runCases(t, "add", numericCheck(19, 1e-9, 0, vals(q)), []answerCase{
		{"The answer is 19.", true},
		{"19", true},
		{"12 + 7 = 19", true},
		{"Sam has nineteen apples.", true},
		{"Sam has 19 apples now!", true},
		{"The answer is 18.", false},
		{"The answer is 190.", false},
		{"The answer is 1.9", false},
		{"12 + 7", false},
		{"I don't know.", false},
		{"", false},
	})
	runCases(t, "money", numericCheck(12.5, 0.005, 0, []float64{2.5, 5}), []answerCase{
		{"The total is $12.50.", true},
		{"12.5", true},
		{"$12.5 in total", true},
		{"That comes to 12.50 dollars.", true},
		{"The total is $12.05.", false},
		{"The total is $125.", false},
		{"The total is $1,250.00", false},
		{"The total is $12.51.", false},
	})
	runCases(t, "thousands", numericCheck(1250, 1e-9, 0, nil), []answerCase{
		{"1,250", true}, {"1250.", true}, {"125", false}, {"1,205", false},
	})
	// The answer equals a question number: falls back to the last number stated.
	runCases(t, "repeat", numericCheck(4, 1e-9, 0, []float64{8, 4}), []answerCase{
		{"4", true}, {"8 - 4 = 4", true}, {"The answer is 8.", false},
	})
}

func TestUnitChecker(t *testing.T) {
	runCases(t, "m->cm", numericCheck(350, 0.011, 0.001, []float64{3.5}), []answerCase{
		{"3.5 meters is 350 centimeters.", true},
		{"350 cm", true},
		{"350.0", true},
		{"3.5 m = 350cm", true},
		{"3.5 meters is 35 centimeters.", false},
		{"3,500 cm", false},
		{"3.5 meters", false},
	})
	runCases(t, "in->cm", numericCheck(12.7, 0.011, 0.001, []float64{5}), []answerCase{
		{"5 inches is 12.7 centimeters.", true},
		{"about 12.70 cm", true},
		{"12.07 cm", false},
		{"127 cm", false},
	})
	runCases(t, "C->F", numericCheck(23, 0.011, 0.001, []float64{-5}), []answerCase{
		{"-5 degrees Celsius is 23 degrees Fahrenheit.", true},
		{"23°F", true},
		{"-5 degrees Celsius is 32 degrees Fahrenheit.", false},
	})
}

func TestPolicyCheckers(t *testing.T) {
	runCases(t, "refund", numericCheck(30, 1e-9, 0, nil), []answerCase{
		{"The refund window is 30 days.", true},
		{"You have thirty days to return it.", true},
		{"30", true},
		{"The refund window is 300 days.", false},
		{"The refund window is 3 days.", false},
		{"The refund window is 60 days.", false},
		{"Returns are accepted.", false},
	})
	runCases(t, "eligible-yes", eligibleCheck(true, 60, 45), []answerCase{
		{"Yes, the refund window is 60 days.", true},
		{"yes", true},
		{"You can still return it, you bought it 45 days ago.", true},
		{"No, the refund window is 30 days.", false},
		{"Yes, the refund window is 30 days.", false},
		{"No.", false},
		{"The window is 60 days.", false},
	})
	runCases(t, "eligible-no", eligibleCheck(false, 30, 45), []answerCase{
		{"No, the refund window is 30 days.", true},
		{"Sorry, it's too late: returns are accepted within 30 days.", true},
		{"Yes, the refund window is 30 days.", false},
		{"No, the refund window is 14 days.", false},
	})
	runCases(t, "fee", numericCheck(4.99, 0.005, 0, nil), []answerCase{
		{"Standard shipping costs $4.99.", true},
		{"4.99", true},
		{"It's $4.99 per order.", true},
		{"Standard shipping costs $4.90.", false},
		{"Standard shipping costs $49.90.", false},
		{"Shipping is free.", false},
	})
	runCases(t, "hours", hoursCheck(9, 17), []answerCase{
		{"Support is open from 9am to 5pm.", true},
		{"9 AM - 5 PM", true},
		{"from 09:00 to 17:00", true},
		{"9 to 5", true},
		{"Support is open from 9am to 6pm.", false},
		{"Support is open from 8am to 5pm.", false},
		{"Support is open from 9pm to 5am.", false},
		{"Support is open all day.", false},
		{"9am to 5pm, or 8am to 8pm on weekends", false},
	})
}

func TestOrderCheckers(t *testing.T) {
	runCases(t, "shipped", statusCheck("shipped", "2026-12-03"), []answerCase{
		{"Order K48213 has shipped and should arrive on 2026-12-03.", true},
		{"It's on its way! Expected December 3rd.", true},
		{"Your order shipped.", true},
		{"Order K48213 has shipped and should arrive on 2026-12-30.", false},
		{"It was shipped on Dec 4.", false},
		{"Order K48213 was delivered on 2026-12-03.", false},
		{"Your order has not shipped yet.", false},
		{"It shipped, or maybe it was cancelled.", false},
	})
	runCases(t, "processing", statusCheck("processing", "2026-12-05"), []answerCase{
		{"Order B00042 is being processed. It should arrive on 2026-12-05.", true},
		{"It hasn't shipped yet.", true},
		{"Order B00042 has shipped.", false},
	})
	runCases(t, "cancelled", statusCheck("cancelled", "2026-12-05"), []answerCase{
		{"Order B00042 was cancelled.", true}, {"It was canceled.", true}, {"It was delivered.", false},
	})
	runCases(t, "eta", dateCheck("2026-12-03"), []answerCase{
		{"It should arrive on 2026-12-03.", true}, {"December 3", true}, {"3 Dec", true},
		{"It should arrive on 2026-12-13.", false}, {"Soon.", false}, {"Dec 30", false},
	})
	runCases(t, "fault", faultCheck, []answerCase{
		{"Sorry, I couldn't look up order K48213 right now. Please try again later.", true},
		{"The order system is unavailable at the moment.", true},
		{"Order K48213 has shipped.", false},
		{"Sorry, your order was cancelled.", false},
		{"Here you go.", false},
	})

	step := &ToolStep{Name: "get_order_status", Args: map[string]string{"order_id": "K48213"}}
	calls := []struct {
		name, args string
		ok         bool
	}{
		{"get_order_status", `{"order_id":"K48213"}`, true},
		{"get_order_status", `{"order_id":" k48213 "}`, true},
		{"get_order_status", `{"order_id":"K48231"}`, false},
		{"get_order_status", `{"order_id":"K4821"}`, false},
		{"get_order_status", `{"id":"K48213"}`, false},
		{"get_order_status", `{"order_id":"K48213","verbose":true}`, false},
		{"get_order_status", `{"order_id":48213}`, false},
		{"get_order_status", `order_id=K48213`, false},
		{"get_status", `{"order_id":"K48213"}`, false},
	}
	for _, c := range calls {
		err := step.CheckCall(ToolCall{Type: "function", Function: FunctionCall{Name: c.name, Arguments: c.args}})
		if (err == nil) != c.ok {
			t.Errorf("CheckCall(%s %s) = %v, want ok=%v", c.name, c.args, err, c.ok)
		}
	}
}

func TestJSONChecker(t *testing.T) {
	fs := []field{{"name", "Maria Lopez", true}, {"city", "Lisbon", true}, {"age", float64(34), false}}
	check := jsonCheck(fs)
	runCases(t, "person", check, []answerCase{
		{`{"name": "Maria Lopez", "city": "Lisbon", "age": 34}`, true},
		{`{"age":34,"city":"lisbon","name":"maria  lopez"}`, true},
		{"```json\n{\"name\": \"Maria Lopez\", \"city\": \"Lisbon\", \"age\": \"34\"}\n```", true},
		{`{"name": "Maria Lopez", "city": "Lisbon"}`, false},
		{`{"name": "Maria Lopez", "city": "Lisbon", "age": 43}`, false},
		{`{"name": "Maria", "city": "Lisbon", "age": 34}`, false},
		{`{"name": "Maria Lopez", "city": "Lisbon", "age": 34`, false},
		{`Here it is: {"name": "Maria Lopez", "city": "Lisbon", "age": 34}`, false},
		{`["Maria Lopez", "Lisbon", 34]`, false},
		{`{"name": "Maria Lopez", "city": "Lisbon", "age": true}`, false},
	})
	if g := check(`{"name": "Maria Lopez", "city": "Lisbon", "age": 34, "country": "PT"}`); !g.Correct || g.Score >= 1 {
		t.Errorf("extra key: %+v, want correct with reduced score", g)
	}
	price := jsonCheck([]field{{"product", "Desk Lamp", true}, {"quantity", float64(3), false}, {"price", 12.5, false}})
	runCases(t, "order", price, []answerCase{
		{`{"product": "Desk Lamp", "quantity": 3, "price": 12.5}`, true},
		{`{"product": "Desk Lamp", "quantity": 3, "price": "$12.50"}`, true},
		{`{"product": "Desk Lamp", "quantity": 3, "price": 12.05}`, false},
		{`{"product": "Desk Lamp", "quantity": 30, "price": 12.5}`, false},
	})
}

func TestClassifyChecker(t *testing.T) {
	check := labelCheck("negative", []string{"negative", "neutral", "positive"})
	runCases(t, "sentiment", check, []answerCase{
		{"negative", true}, {"Negative.", true}, {"The sentiment is negative.", true},
		{"positive", false}, {"neutral", false}, {"negative or neutral", false}, {"bad", false},
		{"non-negative", false},
	})
	if g := check("negative"); g.Score != 1 {
		t.Errorf("styled label scored %v", g.Score)
	}
	if g := check("The sentiment is negative."); g.Score >= 1 {
		t.Errorf("unstyled label scored %v, want < 1", g.Score)
	}
}

// Every generated turn's canonical answer and short answer pass its own checker, and the answer
// of a different instance of the same family (almost always) fails it.
func TestFamiliesSelfConsistent(t *testing.T) {
	w := InitialWorld()
	for _, f := range Families() {
		r := rand.New(rand.NewPCG(1, 2))
		wrong, total := 0, 0
		for i := 0; i < 300; i++ {
			task := f.Generate(r, w)
			other := f.Generate(r, w)
			if task.Type != f.Name() || len(task.Turns) == 0 {
				t.Fatalf("%s: bad task %+v", f.Name(), task)
			}
			for j, turn := range task.Turns {
				if strings.TrimSpace(turn.User) == "" {
					t.Fatalf("%s: empty user message", f.Name())
				}
				if g := turn.Check(turn.Answer); !g.Correct || g.Score != 1 {
					t.Errorf("%s: canonical %q for %q graded %+v", f.Name(), turn.Answer, turn.User, g)
				}
				if g := turn.Check(turn.Short); !g.Correct && f.Name() != "classify" {
					t.Errorf("%s: short %q for %q graded %+v", f.Name(), turn.Short, turn.User, g)
				}
				if turn.Tool != nil {
					if g := turn.Tool.CheckFault(turn.Tool.FaultAnswer); !g.Correct {
						t.Errorf("%s: fault answer graded %+v", f.Name(), g)
					}
					if g := turn.Tool.CheckFault(turn.Answer); g.Correct {
						t.Errorf("%s: real answer accepted after a fault: %q", f.Name(), turn.Answer)
					}
				}
				if j < len(other.Turns) && other.Turns[j].Answer != turn.Answer {
					total++
					if !turn.Check(other.Turns[j].Answer).Correct {
						wrong++
					}
				}
			}
		}
		if total > 0 && float64(wrong)/float64(total) < 0.5 {
			t.Errorf("%s: only %d/%d other instances' answers rejected", f.Name(), wrong, total)
		}
	}
}

func TestGenerationVaried(t *testing.T) {
	w := InitialWorld()
	for _, f := range Families() {
		r := rand.New(rand.NewPCG(7, 7))
		seen := map[string]bool{}
		for i := 0; i < 100; i++ {
			seen[f.Generate(r, w).Turns[0].User] = true
		}
		if len(seen) < 40 {
			t.Errorf("%s: only %d distinct prompts in 100", f.Name(), len(seen))
		}
	}
}
