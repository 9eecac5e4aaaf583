package workplace

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

type jsonFamily struct{}

func (jsonFamily) Name() string { return "json_extract" }

// JSONSystem is the system prompt of the json_extract family.
const JSONSystem = "Reply with a single JSON object and nothing else."

type field struct {
	key    string
	value  any // string or float64
	string bool
}

var (
	personSentences = []string{
		"{name} is {age} and lives in {city}.",
		"Meet {name}, a {age}-year-old from {city}.",
		"{name}, age {age}, moved to {city} last year.",
		"Our new customer {name} ({age}) is based in {city}.",
		"Living in {city}, {name} just turned {age}.",
	}
	orderSentences = []string{
		"Please send {q} units of {product} at {price} each.",
		"I'd like {q} of the {product}, priced at {price} apiece.",
		"Order: {q} x {product}, {price} per item.",
		"Can I get {q} {product} items? They're {price} each.",
	}
	contactSentences = []string{
		"You can reach {name} at {email}.",
		"{name}'s email address is {email}.",
		"Contact: {name}, email {email}.",
		"Please write to {name} ({email}) about the invoice.",
	}
	extractAsks = []string{
		"Extract {keys} from this text as JSON: {text}",
		"Return a JSON object with the keys {keys} for: {text}",
		"Give me JSON with {keys}. Text: {text}",
		"Pull out {keys} as a JSON object. {text}",
	}
)

func joinKeys(fs []field) string {
	ks := make([]string, len(fs))
	for i, f := range fs {
		ks[i] = f.key
	}
	return strings.Join(ks[:len(ks)-1], ", ") + " and " + ks[len(ks)-1]
}

func (jsonFamily) Generate(r *rand.Rand, w World) Task {
	var fs []field
	var text string
	switch r.IntN(3) {
	case 0:
		name := pick(r, firstNames) + " " + pick(r, lastNames)
		age, city := 18+r.IntN(60), pick(r, cities)
		fs = []field{{"name", name, true}, {"city", city, true}, {"age", float64(age), false}}
		text = fill(pick(r, personSentences), "name", name, "age", itoa(age), "city", city)
	case 1:
		prod := pick(r, products)
		q := 1 + r.IntN(20)
		price := float64(100+r.IntN(9900)) / 100
		fs = []field{{"product", prod, true}, {"quantity", float64(q), false}, {"price", price, false}}
		text = fill(pick(r, orderSentences), "product", prod, "q", itoa(q), "price", fmtMoney(price))
	default:
		first, last := pick(r, firstNames), pick(r, lastNames)
		email := strings.ToLower(first+"."+last) + "@" + pick(r, []string{"example.com", "mail.test", "shop.test"})
		fs = []field{{"name", first + " " + last, true}, {"email", email, true}}
		text = fill(pick(r, contactSentences), "name", first+" "+last, "email", email)
	}
	user := fill(pick(r, extractAsks), "keys", joinKeys(fs), "text", text)
	canon := canonicalJSON(fs)
	return Task{Type: "json_extract", System: JSONSystem, ResponseFormat: &ResponseFormat{Type: "json_object"},
		PolicyVersion: w.Policy.Version,
		Turns:         []Turn{{User: user, Answer: canon, Short: canon, check: jsonCheck(fs)}}}
}

// canonicalJSON writes the fields in order, as {"name": "Maria Lopez", "age": 34}.
func canonicalJSON(fs []field) string {
	var b strings.Builder
	b.WriteString("{")
	for i, f := range fs {
		if i > 0 {
			b.WriteString(", ")
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteString(": ")
		if f.string {
			v, _ := json.Marshal(f.value)
			b.Write(v)
		} else {
			b.WriteString(strconv.FormatFloat(f.value.(float64), 'f', -1, 64))
		}
	}
	b.WriteString("}")
	return b.String()
}

// jsonCheck grades a JSON answer: it must parse as an object with every key and the right value
// (strings ignoring case and space; numbers as numbers or numeric strings). Extra keys cost score.
func jsonCheck(fs []field) func(string) Grade {
	return func(answer string) Grade {
		m, ok := jsonObject(answer)
		if !ok {
			return fail("not a JSON object")
		}
		for _, f := range fs {
			v, ok := m[f.key]
			if !ok {
				return fail("missing key %q", f.key)
			}
			if f.string {
				s, ok := v.(string)
				if !ok || !strings.EqualFold(strings.Join(strings.Fields(s), " "), f.value.(string)) {
					return fail("wrong %s", f.key)
				}
				continue
			}
			var got float64
			switch x := v.(type) {
			case float64:
				got = x
			case string:
				ns := numbers(x)
				if len(ns) != 1 {
					return fail("%s is not a number", f.key)
				}
				got = ns[0].val
			default:
				return fail("%s is not a number", f.key)
			}
			if !closeTo(got, f.value.(float64), 0.005, 0) {
				return fail("wrong %s", f.key)
			}
		}
		if len(m) > len(fs) {
			var extra []string
			for k := range m {
				if !hasField(fs, k) {
					extra = append(extra, k)
				}
			}
			sort.Strings(extra)
			return partial(0.8, "extra keys "+strings.Join(extra, ","))
		}
		return pass()
	}
}

func hasField(fs []field, k string) bool {
	for _, f := range fs {
		if f.key == k {
			return true
		}
	}
	return false
}

type classifyFamily struct{}

func (classifyFamily) Name() string { return "classify" }

var (
	sentimentTexts = map[string][]string{
		"positive": {"I love my new {product}, it works perfectly.", "The {product} arrived early and looks great!",
			"Fantastic service, the {product} is exactly what I wanted.", "Really happy with the {product}, thanks!",
			"Best {product} I've ever owned."},
		"negative": {"The {product} broke after two days.", "My {product} arrived damaged and nobody answered my emails.",
			"Terrible quality, the {product} stopped working.", "I'm very disappointed with this {product}.",
			"Worst purchase ever, the {product} is useless."},
		"neutral": {"The {product} arrived on Tuesday.", "I ordered a {product} in blue.",
			"The {product} comes in two sizes.", "I received the {product} today.", "The {product} is made of plastic."},
	}
	topicTexts = map[string][]string{
		"billing":   {"I was charged twice for my {product}.", "Why is there an extra fee on my invoice?", "My card was billed the wrong amount.", "I need a copy of my receipt for the {product}."},
		"shipping":  {"My {product} still hasn't arrived.", "The tracking number for my package doesn't work.", "Can you deliver the {product} to a different address?", "The courier left my parcel at the wrong door."},
		"technical": {"The app crashes when I open it.", "My {product} won't turn on after the update.", "The website shows an error at checkout.", "The {product} keeps disconnecting from wifi."},
		"account":   {"I can't reset my password.", "How do I change the email on my account?", "My account got locked after too many logins.", "Please delete my account."},
	}
	sentimentAsks = []string{
		"Classify the sentiment of this review as positive, negative or neutral. Answer with one word.\n{text}",
		"Is this message positive, negative or neutral? Reply with just the label.\n\"{text}\"",
		"Sentiment (positive/negative/neutral), one word only: {text}",
	}
	topicAsks = []string{
		"Which topic is this ticket about: billing, shipping, technical or account? Answer with one word.\n{text}",
		"Label this support message with one of billing, shipping, technical, account. Just the label.\n\"{text}\"",
		"Topic (billing/shipping/technical/account), one word only: {text}",
	}
)

func (classifyFamily) Generate(r *rand.Rand, w World) Task {
	texts, asks := sentimentTexts, sentimentAsks
	if r.IntN(2) == 0 {
		texts, asks = topicTexts, topicAsks
	}
	labels := make([]string, 0, len(texts))
	for l := range texts {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	label := pick(r, labels)
	text := fill(pick(r, texts[label]), "product", lowerFirst(pick(r, products)))
	user := fill(pick(r, asks), "text", text)
	return Task{Type: "classify", PolicyVersion: w.Policy.Version,
		Turns: []Turn{{User: user, Answer: label, Short: label, check: labelCheck(label, labels)}}}
}

// labelCheck grades a classification: exactly one label named, the right one. The asked style is
// one lowercase word; a right label in another style is correct with a lower score.
func labelCheck(label string, labels []string) func(string) Grade {
	return func(answer string) Grade {
		var named []string
		for _, l := range labels {
			if hasWord(answer, l) {
				named = append(named, l)
			}
		}
		if len(named) == 0 {
			return fail("no label")
		}
		if len(named) > 1 {
			return fail("several labels: %s", strings.Join(named, ","))
		}
		if named[0] != label {
			return fail("label %s, want %s", named[0], label)
		}
		if strings.Trim(strings.TrimSpace(answer), ".!") != label {
			return partial(0.7, "not a single lowercase label")
		}
		return pass()
	}
}
