package lessons

import (
	"fmt"
	"sort"
	"strconv"

	"citizen/events"
	"citizen/internal/statement"
)

// cluster is the interactions of one tenant and task type that are about
// the same thing: their questions are close, or their answers are (the
// answers a model gives to paraphrases of one question look alike even
// when the questions do not), and the votes customers cast on them.
type cluster struct {
	questions, answers []anchor
	votes              map[string]vote // user → latest vote
	seq                int             // votes so far
	// epoch: the vote count at the cluster's last promotion; only votes
	// after it count against a lesson.
	epoch   int
	byValue map[string]*lesson
}

// vote is a user's word on an answer of the cluster: a correction's value,
// or praise of the answer (the answer itself is right).
type vote struct {
	value  string // normalised
	praise bool
	seq    int
	ev     events.LessonEvidence
}

// claim is one interpreted feedback about an interaction's answer.
type claim struct {
	tenant, typ      string
	question, answer anchor
	value            string // the correction; empty for praise
	comment          string // the customer's words
	praise           bool
	ev               events.LessonEvidence
}

// recentVotes is how many of a cluster's latest votes count.
const recentVotes = 12

// Answer is an interaction's answer text (its first choice).
func Answer(rec *events.InteractionRecorded) string {
	if len(rec.Choices) == 0 {
		return ""
	}
	return rec.Choices[0].Message.Content
}

// agrees reports whether a vote supports value: a correction that states
// it or that it states (number-bounded, case and spacing aside), or
// praise of an answer that states it.
func agrees(v vote, value string) bool {
	value = statement.Normalize(value)
	return statement.Contains(v.value, value) || !v.praise && statement.Contains(value, v.value)
}

// valuesAgree reports whether one value states the other ("9am" and
// "Yes, the museum opens at 9am."): such lessons do not contradict.
func valuesAgree(a, b string) bool {
	a, b = statement.Normalize(a), statement.Normalize(b)
	return statement.Contains(a, b) || statement.Contains(b, a)
}

// findCluster returns the cluster of c's tenant and type whose question
// or answer anchors c's are close to (Config.Similarity, stating the same
// numbers); a correction without one starts a new cluster, praise joins
// none (nil).
func (l *Learner) findCluster(c claim) *cluster {
	key := c.tenant + "\x00" + c.typ
	var best *cluster
	bestSim := l.cfg.Similarity
	for _, cl := range l.clusters[key] {
		for _, pair := range [][2][]anchor{{cl.questions, {c.question}}, {cl.answers, {c.answer}}} {
			for _, x := range pair[0] {
				a := pair[1][0]
				if !sameNumbers(x.nums, a.nums) {
					continue
				}
				if s := cosine(x.vec, a.vec); s >= bestSim {
					best, bestSim = cl, s
				}
			}
		}
	}
	if best == nil {
		if c.praise {
			return nil
		}
		best = &cluster{votes: map[string]vote{}, byValue: map[string]*lesson{}}
		l.clusters[key] = append(l.clusters[key], best)
	}
	if !c.praise {
		// Only what customers corrected defines the cluster.
		best.questions = l.addAnchor(best.questions, c.question)
		best.answers = l.addAnchor(best.answers, c.answer)
	}
	return best
}

func (l *Learner) addAnchor(as []anchor, a anchor) []anchor {
	if len(as) >= l.cfg.MaxAnchors {
		return as
	}
	for _, x := range as {
		if cosine(x.vec, a.vec) > 0.98 && sameNumbers(x.nums, a.nums) {
			return as
		}
	}
	return append(as, a)
}

func sameNumbers(a, b map[string]bool) bool {
	return len(a) == len(b) && numbersCovered(a, b)
}

func (l *Learner) factClaim(src events.Event, c claim) ([]events.Event, error) {
	cl := l.findCluster(c)
	if cl == nil {
		return nil, nil
	}
	cl.seq++
	v := vote{value: statement.Normalize(c.value), seq: cl.seq, ev: c.ev}
	if c.praise {
		v.value, v.praise = statement.Normalize(c.answer.text), true
	} else {
		v.ev.Value = c.value
	}
	cl.votes[c.ev.User] = v
	var out []events.Event
	// Praise promotes nothing by itself; it weighs against the lessons it
	// disagrees with.
	if c.praise {
		return nil, nil
	}
	nv := normValue(c.value)
	ls := cl.byValue[nv]
	if ls == nil {
		id := lessonID("fact", c.tenant, c.typ, cl.questions[0].text, nv)
		ls = &lesson{cl: cl, state: "proposed", change: events.LessonChange{
			LessonID: id, Kind: events.LessonFact, Statement: factStatement(c.question.text, c.value, c.comment), Value: c.value,
			Scope: events.LessonScope{Tenant: c.tenant, TaskType: c.typ},
		}}
		cl.byValue[nv] = ls
		l.lessons[id] = ls
		ch := l.snapshot(ls)
		ch.Rule = "one user's claim"
		e, err := encode(&events.LessonProposed{LessonChange: ch}, src, events.DeterministicID(events.TypeLessonProposed, id))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	// Every lesson of the cluster may be decided by this vote (an
	// agreeing value counts for all the values it agrees with).
	for _, cand := range sortedLessons(cl.byValue) {
		if cand.state != "proposed" && cand.state != "superseded" {
			continue
		}
		ch := l.snapshot(cand)
		if ch.Users < l.cfg.MinUsers || float64(ch.Users) < l.cfg.Majority*float64(len(ch.Against)) || !agrees(v, cand.change.Value) {
			continue
		}
		cand.state = "promoted"
		cl.epoch = cl.seq
		ch.Rule = fmt.Sprintf("%d users agree, %d disagree among the cluster's latest %d votes (need %d and %g×)", ch.Users, len(ch.Against), recentVotes, l.cfg.MinUsers, l.cfg.Majority)
		e, err := encode(&events.LessonPromoted{LessonChange: ch}, src, events.DeterministicID(events.TypeLessonPromoted, cand.change.LessonID+"/"+c.ev.Feedback))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		for _, other := range sortedLessons(cl.byValue) {
			if other == cand || other.state != "promoted" || valuesAgree(other.change.Value, cand.change.Value) {
				continue
			}
			other.state = "superseded"
			oc := l.snapshot(other)
			oc.SupersededBy = cand.change.LessonID
			oc.Reason = "a promoted lesson of the same questions states " + strconv.Quote(cand.change.Value)
			e, err := encode(&events.LessonSuperseded{LessonChange: oc}, src, events.DeterministicID(events.TypeLessonSuperseded, other.change.LessonID+"/"+c.ev.Feedback))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		break
	}
	return out, nil
}

func sortedLessons(m map[string]*lesson) []*lesson {
	out := make([]*lesson, 0, len(m))
	for _, x := range m {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].change.LessonID < out[j].change.LessonID })
	return out
}

// snapshot is ls's change with its current scope and evidence. For a fact:
// among the cluster's latest recentVotes votes (each user's latest), For
// are the users whose vote agrees with its value, and Against the users
// whose vote after the cluster's last promotion does not. For guidance:
// its user's repeats.
func (l *Learner) snapshot(ls *lesson) events.LessonChange {
	ch := ls.change
	ch.Actor = LearnerActor
	ch.For, ch.Against = nil, nil
	if ls.cl != nil {
		cl := ls.cl
		users := make([]string, 0, len(cl.votes))
		for u := range cl.votes {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			v := cl.votes[u]
			if v.seq <= cl.seq-recentVotes {
				continue
			}
			switch {
			case agrees(v, ch.Value):
				ch.For = append(ch.For, v.ev)
			case v.seq > cl.epoch:
				ch.Against = append(ch.Against, v.ev)
			}
		}
		ch.Users = len(ch.For)
		ch.Scope.Anchors = anchorTexts(cl.questions)
		ch.Scope.Answers = anchorTexts(cl.answers)
		return ch
	}
	keys := make([]string, 0, len(ls.repeats))
	for k := range ls.repeats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ch.For = append(ch.For, ls.repeats[k])
	}
	if len(ch.For) > 0 {
		ch.Users = 1
	}
	return ch
}

func anchorTexts(as []anchor) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.text
	}
	return out
}
