package workplace

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Feedback polarities.
const (
	Positive = "positive"
	Negative = "negative"
	Mixed    = "mixed"
	Neutral  = "neutral"
)

// Verdict is what a user meant to express about an answer. It is never sent to citizen; tests
// and the summary use it as the ground truth that citizen's feedback interpreter should recover.
type Verdict struct {
	Polarity string `json:"polarity"` // positive, negative, mixed, neutral
	Aspect   string `json:"aspect"`   // correctness, length, tone, format, fault, none
	Correct  bool   `json:"correct"`  // the checker's verdict on the judged answer
}

// Feedback is one piece of free-text feedback a user writes.
type Feedback struct {
	Kind       string  `json:"kind"` // praise, correction, complaint, vague, sarcasm, style, fault
	Text       string  `json:"text"`
	Rating     int     `json:"rating,omitempty"`     // 1..5, 0 when none given
	Correction string  `json:"correction,omitempty"` // the right answer, when sent as a field
	Verdict    Verdict `json:"verdict"`
}

// User is a simulated customer. Its preferences come from its segment in the current World, so a
// drift event can flip a whole segment; its propensities are its own.
type User struct {
	ID         string  `json:"id"`
	Segment    string  `json:"segment"`
	Sarcasm    float64 `json:"sarcasm"`     // share of negative feedback written sarcastically
	Corrects   float64 `json:"corrects"`    // share of negative feedback that states the right answer
	RatingProb float64 `json:"rating_prob"` // probability of attaching a 1..5 rating
}

// NewUsers draws n users spread over the given segments (sorted names), deterministically from seed.
func NewUsers(n int, seed int64, segments []string) []User {
	r := rand.New(rand.NewPCG(uint64(seed), 0x05e75))
	us := make([]User, n)
	for i := range us {
		us[i] = User{
			ID:         fmt.Sprintf("user-%03d", i),
			Segment:    segments[i%len(segments)],
			Sarcasm:    0.05 + 0.25*r.Float64(),
			Corrects:   0.2 + 0.5*r.Float64(),
			RatingProb: 0.2 + 0.6*r.Float64(),
		}
	}
	return us
}

// Judge forms the user's verdict on an answer the checker graded g. faulted is true when the
// environment (not the model) broke the conversation, and g then grades the fault handling.
func (u User) Judge(g Grade, answer, canonical string, prefs Preferences, faulted bool) Verdict {
	switch {
	case faulted && g.Correct:
		return Verdict{Polarity: Neutral, Aspect: "fault", Correct: true}
	case !g.Correct:
		return Verdict{Polarity: Negative, Aspect: "correctness"}
	}
	aspect := prefs.Violation(answer, canonical)
	if aspect == "" && g.Score < 1 {
		aspect = "format"
	}
	if aspect != "" {
		return Verdict{Polarity: Mixed, Aspect: aspect, Correct: true}
	}
	return Verdict{Polarity: Positive, Aspect: "none", Correct: true}
}

var (
	praiseTexts = []string{"Perfect, thanks!", "That's exactly right.", "Great, thank you.", "Spot on.",
		"Thanks, that helps!", "Correct, appreciate it.", "Nice, quick and accurate.", "Yes, that's it. Thanks.",
		"Exactly what I needed.", "Good answer, thank you.", "Right on, cheers."}
	correctionTexts = []string{"no - it's {short} now", "That's wrong, the answer is {short}.",
		"Actually it should be {short}.", "Not quite. It's {short}.", "Incorrect: {short}.",
		"Hmm, I think you mean {short}.", "Wrong. Correct answer: {short}", "That's outdated, it's {short} now.",
		"Nope, {short}.", "The right answer is {short}, not what you said."}
	complaintTexts = []string{"That's not right.", "Wrong answer.", "This is incorrect.", "No, that's not it.",
		"You got that wrong.", "That doesn't match what I know.", "That answer is wrong, please check again."}
	vagueTexts = []string{"hmm, not what I needed", "Not really helpful.", "meh", "That didn't help much.",
		"I'm not sure about this one...", "Not great.", "I expected something else."}
	sarcasmTexts = []string{"Wow, really helpful. Not.", "Great, another wrong answer. Super.",
		"Oh sure, because that makes sense.", "Brilliant. Totally wrong, but brilliant.", "Thanks for nothing.",
		"Yeah, right.", "Amazing how confidently wrong that is."}
	styleTexts = map[string][]string{
		"length-long":  {"Right, but way too long. Just the answer please.", "Correct, though I didn't need an essay.", "Fine, but shorter next time."},
		"length-short": {"Correct, but a bit too short - could you explain more?", "OK, but I'd like more detail.", "Right, though a sentence or two of context would help."},
		"tone-formal":  {"The answer is fine, but please keep it professional.", "Correct, but the casual tone isn't appropriate."},
		"tone-casual":  {"Right answer, but you sound like a legal letter.", "Correct, but no need to be so stiff."},
		"format":       {"Correct, but please skip the markdown.", "Right, but the formatting is off - plain text please.", "Fine answer, messy format."},
	}
	faultTexts = []string{"Ugh, the lookup failed. I'll try later.", "OK, I'll check back later.",
		"Your system seems to be down.", "Fine, I'll try again tomorrow."}
)

// Write draws feedback text expressing v about an answer to turn; r supplies the randomness.
// Praise is only written for positive verdicts; corrections always state turn.Short.
func (u User) Write(r *rand.Rand, v Verdict, turn Turn, prefs Preferences) Feedback {
	f := Feedback{Verdict: v}
	switch v.Polarity {
	case Positive:
		f.Kind, f.Text = "praise", pick(r, praiseTexts)
	case Neutral:
		f.Kind, f.Text = "fault", pick(r, faultTexts)
	case Mixed:
		key := v.Aspect
		switch v.Aspect {
		case "length":
			key = "length-long"
			if prefs.Verbosity == "detailed" {
				key = "length-short"
			}
		case "tone":
			key = "tone-formal"
			if prefs.Tone == "casual" {
				key = "tone-casual"
			}
		}
		f.Kind, f.Text = "style", pick(r, styleTexts[key])
	default:
		x := r.Float64()
		switch {
		case x < u.Corrects && turn.Short != "":
			f.Kind = "correction"
			f.Text = fill(pick(r, correctionTexts), "short", turn.Short)
			if r.IntN(2) == 0 {
				f.Correction = turn.Answer
			}
		case x < u.Corrects+u.Sarcasm:
			f.Kind, f.Text = "sarcasm", pick(r, sarcasmTexts)
		case r.IntN(2) == 0:
			f.Kind, f.Text = "complaint", pick(r, complaintTexts)
		default:
			f.Kind, f.Text = "vague", pick(r, vagueTexts)
		}
	}
	if r.Float64() < u.RatingProb {
		switch v.Polarity {
		case Positive:
			f.Rating = 4 + r.IntN(2)
		case Negative:
			f.Rating = 1 + r.IntN(2)
		default:
			f.Rating = 3
		}
	}
	if r.IntN(4) == 0 {
		f.Text = casualize(r, f.Text)
	}
	return f
}

// casualize varies surface form without changing meaning.
func casualize(r *rand.Rand, s string) string {
	switch r.IntN(3) {
	case 0:
		return strings.ToLower(s)
	case 1:
		return strings.TrimRight(s, ".!") + "!"
	default:
		return strings.TrimRight(s, ".") + " " + pick(r, []string{"Thanks.", "Anyway.", "Just saying."})
	}
}
