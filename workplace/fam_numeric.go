package workplace

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// numericCheck grades an answer whose committed number (see finalNumber) must equal want within
// tol absolute or rel relative; question holds the numbers the conversation already mentioned.
func numericCheck(want, tol, rel float64, question []float64) func(string) Grade {
	return func(answer string) Grade {
		got, ok := finalNumber(answer, question)
		if !ok {
			return fail("no number in answer")
		}
		if !closeTo(got, want, tol, rel) {
			return fail("got %s, want %s", fmtNum(got), fmtNum(want))
		}
		return pass()
	}
}

func vals(s string) []float64 {
	var out []float64
	for _, n := range numbers(s) {
		out = append(out, n.val)
	}
	return out
}

type arithmeticFamily struct{}

func (arithmeticFamily) Name() string { return "arithmetic" }

var (
	addTemplates = []string{
		"{name} has {a} {items} and buys {b} more. How many {items} does {name} have now?",
		"{name} picked {a} {items} in the morning and {b} in the afternoon. How many {items} in total?",
		"A shelf holds {a} {items}. Another {b} are added. How many {items} are on the shelf?",
		"What is {a} plus {b}?",
		"Add {a} and {b}.",
		"There are {a} {items} in one bag and {b} in another. How many altogether?",
		"{name} collected {a} {items} last week and {b} this week. What's the total?",
	}
	subTemplates = []string{
		"{name} had {a} {items} and gave {b} to a friend. How many are left?",
		"There were {a} {items} in the box; {b} were sold. How many remain?",
		"What is {a} minus {b}?",
		"Subtract {b} from {a}.",
		"{name} starts with {a} {items} and loses {b}. How many does {name} still have?",
	}
	mulTemplates = []string{
		"{name} buys {a} packs of {items} with {b} in each pack. How many {items} is that?",
		"What is {a} times {b}?",
		"Multiply {a} by {b}.",
		"There are {a} rows with {b} {items} in each row. How many {items} are there?",
	}
	divTemplates = []string{
		"{name} shares {a} {items} equally among {b} friends. How many does each friend get?",
		"What is {a} divided by {b}?",
		"{a} {items} are packed into {b} equal boxes. How many {items} go in each box?",
	}
	moneyTemplates = []string{
		"A {product} costs {price} and {name} buys {q}. What is the total?",
		"{name} orders {q} of the {product} at {price} each. How much is that altogether?",
		"How much do {q} {product}s cost if one costs {price}?",
	}
	followAdd = []string{"Then {name} gets {c} more. How many now?", "And if {name} buys {c} more?",
		"Now add {c}. What's the new total?", "What if there were {c} more?"}
	followSub = []string{"Then {name} gives away {c}. How many now?", "And if {c} of them are lost?",
		"Now take away {c}. What's left?"}
	followDouble = []string{"Now double that. What do you get?", "What is twice that number?"}
)

func countAnswer(n float64) string { return "The answer is " + fmtNum(n) + "." }

func (arithmeticFamily) Generate(r *rand.Rand, w World) Task {
	name, items := pick(r, firstNames), pick(r, countables)
	t := Task{Type: "arithmetic", PolicyVersion: w.Policy.Version}
	var user string
	var ans float64
	kind := r.IntN(5)
	switch kind {
	case 0:
		a, b := 2+r.IntN(60), 2+r.IntN(40)
		user, ans = fill(pick(r, addTemplates), "name", name, "items", items, "a", itoa(a), "b", itoa(b)), float64(a+b)
	case 1:
		a := 10 + r.IntN(80)
		b := 1 + r.IntN(a-1)
		user, ans = fill(pick(r, subTemplates), "name", name, "items", items, "a", itoa(a), "b", itoa(b)), float64(a-b)
	case 2:
		a, b := 2+r.IntN(11), 2+r.IntN(11)
		user, ans = fill(pick(r, mulTemplates), "name", name, "items", items, "a", itoa(a), "b", itoa(b)), float64(a*b)
	case 3:
		b, q := 2+r.IntN(8), 2+r.IntN(12)
		user, ans = fill(pick(r, divTemplates), "name", name, "items", items, "a", itoa(b*q), "b", itoa(b)), float64(q)
	default:
		cents := 50 + r.IntN(1950)
		price := float64(cents) / 100
		q := 2 + r.IntN(8)
		total := math.Round(price*float64(q)*100) / 100
		user = fill(pick(r, moneyTemplates), "name", name, "product", lowerFirst(pick(r, products)),
			"price", fmtMoney(price), "q", itoa(q))
		a := "The total is " + fmtMoney(total) + "."
		t.Turns = []Turn{{User: user, Answer: a, Short: fmtMoney(total), check: numericCheck(total, 0.005, 0, vals(user))}}
		return t
	}
	t.Turns = []Turn{{User: user, Answer: countAnswer(ans), Short: fmtNum(ans), check: numericCheck(ans, 1e-9, 0, vals(user))}}
	if r.Float64() < 0.4 {
		seen := append(vals(user), ans)
		var f string
		var next float64
		switch r.IntN(3) {
		case 0:
			c := 1 + r.IntN(20)
			f, next = fill(pick(r, followAdd), "name", name, "c", itoa(c)), ans+float64(c)
		case 1:
			if ans < 2 {
				c := 1 + r.IntN(20)
				f, next = fill(pick(r, followAdd), "name", name, "c", itoa(c)), ans+float64(c)
				break
			}
			c := 1 + r.IntN(int(ans)-1)
			f, next = fill(pick(r, followSub), "name", name, "c", itoa(c)), ans-float64(c)
		default:
			f, next = pick(r, followDouble), 2*ans
		}
		seen = append(seen, vals(f)...)
		t.Turns = append(t.Turns, Turn{User: f, Answer: countAnswer(next), Short: fmtNum(next), check: numericCheck(next, 1e-9, 0, seen)})
	}
	return t
}

func itoa(i int) string { return strconv.Itoa(i) }

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	for i := range b {
		if i == 0 || b[i-1] == ' ' {
			if b[i] >= 'A' && b[i] <= 'Z' {
				b[i] += 'a' - 'A'
			}
		}
	}
	return string(b)
}

type unitFamily struct{}

func (unitFamily) Name() string { return "unit_conversion" }

type unitPair struct {
	from, fromPl, to, toPl string
	factor, offset         float64
}

var unitPairs = []unitPair{
	{"meter", "meters", "centimeter", "centimeters", 100, 0},
	{"kilometer", "kilometers", "meter", "meters", 1000, 0},
	{"kilogram", "kilograms", "gram", "grams", 1000, 0},
	{"gram", "grams", "kilogram", "kilograms", 0.001, 0},
	{"centimeter", "centimeters", "millimeter", "millimeters", 10, 0},
	{"hour", "hours", "minute", "minutes", 60, 0},
	{"minute", "minutes", "second", "seconds", 60, 0},
	{"liter", "liters", "milliliter", "milliliters", 1000, 0},
	{"foot", "feet", "inch", "inches", 12, 0},
	{"pound", "pounds", "ounce", "ounces", 16, 0},
	{"inch", "inches", "centimeter", "centimeters", 2.54, 0},
	{"mile", "miles", "kilometer", "kilometers", 1.609344, 0},
	{"degree Celsius", "degrees Celsius", "degree Fahrenheit", "degrees Fahrenheit", 1.8, 32},
	{"day", "days", "hour", "hours", 24, 0},
}

var unitTemplates = []string{
	"How many {toPl} are in {v} {fromPl}?",
	"Convert {v} {fromPl} to {toPl}.",
	"What is {v} {fromPl} in {toPl}?",
	"I have {v} {fromPl}. How much is that in {toPl}?",
	"Please convert {v} {fromPl} into {toPl}.",
	"{v} {fromPl} equals how many {toPl}?",
}

func (unitFamily) Generate(r *rand.Rand, w World) Task {
	u := pick(r, unitPairs)
	var v float64
	if r.IntN(3) == 0 {
		v = float64(1+r.IntN(99)) / 2 // halves
	} else {
		v = float64(1 + r.IntN(50))
	}
	if u.offset != 0 {
		v = float64(r.IntN(41) - 5)
	}
	res := math.Round((v*u.factor+u.offset)*100) / 100
	fromN, toN := u.fromPl, u.toPl
	if v == 1 {
		fromN = u.from
	}
	if res == 1 {
		toN = u.to
	}
	user := fill(pick(r, unitTemplates), "v", fmtNum(v), "fromPl", u.fromPl, "toPl", u.toPl)
	user = fixFirstCap(user)
	return Task{Type: "unit_conversion", PolicyVersion: w.Policy.Version, Turns: []Turn{{
		User:   user,
		Answer: fmtNum(v) + " " + fromN + " is " + fmtNum(res) + " " + toN + ".",
		Short:  fmtNum(res) + " " + toN,
		check:  numericCheck(res, 0.011, 0.001, []float64{v}),
	}}}
}

func fixFirstCap(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// percentFamily is a late family: absent at time zero, it appears through drift.
type percentFamily struct{}

func (percentFamily) Name() string { return "percentage" }

var percentTemplates = []string{
	"What is {p}% of {n}?",
	"Calculate {p} percent of {n}.",
	"How much is {p}% of {n}?",
}

var discountTemplates = []string{
	"A {product} costs {price} and is {p}% off. What is the sale price?",
	"The {product} is {price}, with a {p}% discount. How much do I pay?",
}

func (percentFamily) Generate(r *rand.Rand, w World) Task {
	p := 5 * (1 + r.IntN(19))
	t := Task{Type: "percentage", PolicyVersion: w.Policy.Version}
	if r.IntN(2) == 0 {
		n := 20 * (1 + r.IntN(30))
		res := float64(p*n) / 100
		user := fill(pick(r, percentTemplates), "p", itoa(p), "n", itoa(n))
		t.Turns = []Turn{{User: user, Answer: countAnswer(res), Short: fmtNum(res), check: numericCheck(res, 0.005, 0, vals(user))}}
		return t
	}
	price := float64(10 * (1 + r.IntN(30)))
	res := math.Round(price*float64(100-p)) / 100
	user := fixFirstCap(fill(pick(r, discountTemplates), "product", lowerFirst(pick(r, products)), "price", fmtMoney(price), "p", itoa(p)))
	t.Turns = []Turn{{User: user, Answer: "The sale price is " + fmtMoney(res) + ".", Short: fmtMoney(res), check: numericCheck(res, 0.005, 0, vals(user))}}
	return t
}
