package workplace

import (
	"math/rand/v2"
	"strings"
)

type policyFamily struct{}

func (policyFamily) Name() string { return "policy" }

var (
	refundQs = []string{
		"How many days do I have to return something?",
		"What is your refund window?",
		"How long do I have to ask for a refund?",
		"How long is the return period?",
		"Within how many days can I return an item?",
		"What's the deadline for returns?",
		"Hi, how long can I wait before returning my {product}?",
	}
	eligibleQs = []string{
		"I bought a {product} {k} days ago. Can I still return it?",
		"My {product} arrived {k} days ago. Am I still able to get a refund?",
		"It's been {k} days since I got my {product}. Can I still send it back?",
	}
	feeQs = []string{
		"How much is shipping?",
		"What does standard shipping cost?",
		"What is the shipping fee?",
		"How much do you charge for delivery?",
		"If I order a {product}, how much will shipping cost?",
	}
	freeQs = []string{
		"How much do I need to spend to get free shipping?",
		"Is there a minimum order for free shipping?",
		"When is shipping free?",
		"What's the free shipping threshold?",
	}
	hoursQs = []string{
		"When is customer support open?",
		"What are your support hours?",
		"What time can I reach support?",
		"When can I call customer service?",
		"Is support available in the evening? What are the hours?",
	}
)

// Policy question kinds; the policy field each asks about.
const (
	askRefund = iota
	askEligible
	askFee
	askFreeOver
	askHours
	numPolicyKinds
)

func (policyFamily) Generate(r *rand.Rand, w World) Task {
	return genPolicy(r, w, r.IntN(numPolicyKinds))
}

func genPolicy(r *rand.Rand, w World, kind int) Task {
	p := w.Policy
	prod := lowerFirst(pick(r, products))
	t := Task{Type: "policy", PolicyVersion: p.Version}
	var turn Turn
	switch kind {
	case askRefund:
		d := float64(p.RefundDays)
		turn = Turn{User: fill(pick(r, refundQs), "product", prod),
			Answer: "The refund window is " + itoa(p.RefundDays) + " days.", Short: itoa(p.RefundDays) + " days",
			check: numericCheck(d, 1e-9, 0, nil)}
	case askEligible:
		k := 2 + r.IntN(88)
		for k == p.RefundDays {
			k = 2 + r.IntN(88)
		}
		user := fill(pick(r, eligibleQs), "product", prod, "k", itoa(k))
		yes := k < p.RefundDays
		a := "No, the refund window is " + itoa(p.RefundDays) + " days."
		if yes {
			a = "Yes, the refund window is " + itoa(p.RefundDays) + " days."
		}
		short := "no, the refund window is " + itoa(p.RefundDays) + " days"
		if yes {
			short = "yes, the refund window is " + itoa(p.RefundDays) + " days"
		}
		turn = Turn{User: user, Answer: a, Short: short, check: eligibleCheck(yes, p.RefundDays, float64(k))}
	case askFee:
		turn = Turn{User: fill(pick(r, feeQs), "product", prod),
			Answer: "Standard shipping costs " + fmtMoney(p.ShippingFee) + ".", Short: fmtMoney(p.ShippingFee),
			check: numericCheck(p.ShippingFee, 0.005, 0, nil)}
	case askFreeOver:
		turn = Turn{User: pick(r, freeQs),
			Answer: "Shipping is free on orders over " + fmtMoney(p.FreeShippingOver) + ".", Short: "over " + fmtMoney(p.FreeShippingOver),
			check: numericCheck(p.FreeShippingOver, 0.005, 0, nil)}
	default:
		span := fmtHour(p.SupportOpen) + " to " + fmtHour(p.SupportClose)
		turn = Turn{User: pick(r, hoursQs), Answer: "Support is open from " + span + ".", Short: span,
			check: hoursCheck(p.SupportOpen, p.SupportClose)}
	}
	t.Turns = []Turn{turn}
	return t
}

// eligibleCheck grades a yes/no refund-eligibility answer; a window stated alongside must be right.
func eligibleCheck(yes bool, window int, asked float64) func(string) Grade {
	return func(answer string) Grade {
		said, ok := yesNo(answer)
		if !ok {
			return fail("no yes/no verdict")
		}
		if said != yes {
			return fail("wrong verdict")
		}
		for _, n := range numbers(answer) {
			if n.val != asked && n.val != float64(window) {
				return fail("states window %s, want %d", fmtNum(n.val), window)
			}
		}
		return pass()
	}
}

// yesNo finds an answer's yes/no verdict: the first of yes/no, else a negation, else "can".
func yesNo(answer string) (bool, bool) {
	for _, w := range words(answer) {
		switch strings.Trim(w, ".'-") {
		case "yes", "yep", "yeah", "sure":
			return true, true
		case "no", "nope":
			return false, true
		}
	}
	low := strings.ToLower(answer)
	for _, neg := range []string{"can't", "cannot", "can not", "not eligible", "no longer", "too late", "not able"} {
		if strings.Contains(low, neg) {
			return false, true
		}
	}
	for _, pos := range []string{"you can", "still eligible", "you are eligible", "you're eligible", "still able"} {
		if strings.Contains(low, pos) {
			return true, true
		}
	}
	return false, false
}

// hoursCheck grades support hours: the first two hours mentioned must be open and close.
func hoursCheck(open, close int) func(string) Grade {
	return func(answer string) Grade {
		hs := hours(answer)
		if len(hs) < 2 {
			return fail("no opening hours in answer")
		}
		if len(hs) > 2 {
			return fail("more than two hours mentioned")
		}
		if !sameHour(hs[0], open) || !sameHour(hs[1], close) {
			return fail("wrong hours, want %s to %s", fmtHour(open), fmtHour(close))
		}
		return pass()
	}
}
