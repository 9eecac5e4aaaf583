package workplace

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"
)

type orderFamily struct{}

func (orderFamily) Name() string { return "order_status" }

// OrderTool is the get_order_status tool declared to the model.
var OrderTool = Tool{Type: "function", Function: FunctionDef{
	Name:        "get_order_status",
	Description: "Look up the current status of a customer's order.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string",` +
		`"description":"The order id, for example K48213."}},"required":["order_id"],"additionalProperties":false}`),
}}

// OrderSystem is the system prompt of the order_status family.
const OrderSystem = "You are a customer support assistant. Use the get_order_status tool to look up orders."

var (
	orderQs = []string{
		"Where is my order {id}?",
		"Can you check on order {id} for me?",
		"Hi, I ordered a {product} last week, order number {id}. What's the status?",
		"What's the status of order {id}?",
		"Has my order {id} shipped yet?",
		"I'm still waiting for {id}. Any news?",
		"Could you tell me what happened to my order {id}?",
	}
	etaQs = []string{"When will it arrive?", "When should I expect it?", "What's the delivery date?",
		"OK, and when does it get here?"}
	orderStatuses = []string{"processing", "shipped", "delivered", "cancelled"}
	// statusWords maps each status to phrases that express it; checked after negations are removed.
	statusWords = map[string][]string{
		"processing": {"processing", "being processed", "being prepared", "not shipped yet", "not yet shipped", "hasn't shipped", "has not shipped"},
		"shipped":    {"shipped", "on its way", "in transit", "dispatched", "out for delivery"},
		"delivered":  {"delivered", "arrived", "has been received"},
		"cancelled":  {"cancelled", "canceled"},
	}
	apologyWords = []string{"sorry", "couldn't", "could not", "unable", "can't", "cannot", "try again",
		"not available", "unavailable", "problem", "error", "timed out"}
	baseDate = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

func orderID(r *rand.Rand) string {
	return string(rune('A'+r.IntN(26))) + fmt.Sprintf("%05d", r.IntN(100000))
}

func (orderFamily) Generate(r *rand.Rand, w World) Task {
	id := orderID(r)
	status := pick(r, orderStatuses)
	date := baseDate.AddDate(0, 0, 1+r.IntN(20)).Format("2006-01-02") // an ETA ahead
	if status == "delivered" {
		date = baseDate.AddDate(0, 0, -r.IntN(20)).Format("2006-01-02") // a day past
	}
	result := map[string]string{"order_id": id, "status": status}
	var answer, short string
	switch status {
	case "processing":
		result["eta"] = date
		answer, short = "Order "+id+" is being processed. It should arrive on "+date+".", "being processed"
	case "shipped":
		result["eta"] = date
		answer, short = "Order "+id+" has shipped and should arrive on "+date+".", "shipped, arriving "+date
	case "delivered":
		result["delivered_on"] = date
		answer, short = "Order "+id+" was delivered on "+date+".", "delivered on "+date
	case "cancelled":
		answer, short = "Order "+id+" was cancelled.", "cancelled"
	}
	res, _ := json.Marshal(result)
	fault := "Sorry, I couldn't look up order " + id + " right now. Please try again later."
	t := Task{Type: "order_status", System: OrderSystem, Tools: []Tool{OrderTool}, PolicyVersion: w.Policy.Version}
	t.Turns = []Turn{{
		User:   fill(pick(r, orderQs), "id", id, "product", lowerFirst(pick(r, products))),
		Answer: answer, Short: short,
		Tool: &ToolStep{Name: "get_order_status", Args: map[string]string{"order_id": id}, Result: string(res),
			FaultAnswer: fault, checkFault: faultCheck},
		check: statusCheck(status, date),
	}}
	if (status == "shipped" || status == "processing") && r.Float64() < 0.35 {
		t.Turns = append(t.Turns, Turn{User: pick(r, etaQs), Answer: "It should arrive on " + date + ".", Short: date,
			check: dateCheck(date)})
	}
	return t
}

var negShipRe = regexp.MustCompile(`(?i)\b(not yet shipped|not shipped yet|hasn't shipped|has not shipped|hasn't been shipped|has not been shipped)\b`)

// mentionedStatuses lists the statuses an answer asserts.
func mentionedStatuses(answer string) map[string]bool {
	out := map[string]bool{}
	low := strings.ToLower(answer)
	if negShipRe.MatchString(low) {
		out["processing"] = true
		low = negShipRe.ReplaceAllString(low, " ")
	}
	for st, ws := range statusWords {
		for _, w := range ws {
			if hasPhrase(low, w) {
				out[st] = true
			}
		}
	}
	return out
}

// statusCheck grades an order answer: exactly the right status; any date stated must be right.
func statusCheck(status, date string) func(string) Grade {
	return func(answer string) Grade {
		got := mentionedStatuses(answer)
		if !got[status] {
			return fail("status %q not stated", status)
		}
		if len(got) > 1 {
			return fail("contradictory statuses")
		}
		if g := datesAgree(answer, date); !g.Correct {
			return g
		}
		return pass()
	}
}

func datesAgree(answer, date string) Grade {
	want, _ := time.Parse("2006-01-02", date)
	for _, d := range dates(answer) {
		if d.month != want.Month() || d.day != want.Day() {
			return fail("wrong date, want %s", date)
		}
	}
	return pass()
}

// dateCheck grades an answer that must state the given date.
func dateCheck(date string) func(string) Grade {
	return func(answer string) Grade {
		if len(dates(answer)) == 0 {
			return fail("no date in answer")
		}
		return datesAgree(answer, date)
	}
}

// faultCheck grades the answer after a failed tool call: it must admit the failure and assert no
// status.
func faultCheck(answer string) Grade {
	if len(mentionedStatuses(answer)) > 0 {
		return fail("invented a status after a failed lookup")
	}
	low := strings.ToLower(answer)
	for _, w := range apologyWords {
		if strings.Contains(low, w) {
			return pass()
		}
	}
	return fail("did not report the failed lookup")
}
