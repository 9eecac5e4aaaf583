package learn

import (
	"context"
	"fmt"
	"io"

	"citizen/bench/badcandidate"
)

// badReason is the reason the bench's operator start records.
const badReason = "bench learn --bad-candidate: the canary of a candidate trained to be bad, to check that the rollout controller rolls it back in its first step"

// startBadCandidate runs the operator's side of bench learn's rollback
// check while citizen serves at base: once bad's decorated cycle is
// recorded and the offline gate rejected it, its canary is started
// through the operator API (badcandidate.StartWhenRejected, with the
// development key, an operator's). The outcome arrives on the channel
// when the start is done or ctx ends; nil bad: no check, a nil channel.
func startBadCandidate(ctx context.Context, bad *badcandidate.Trainer, base string, progress io.Writer) <-chan badcandidate.Outcome {
	if bad == nil {
		return nil
	}
	out := make(chan badcandidate.Outcome, 1)
	go func() {
		o := badcandidate.StartWhenRejected(ctx, bad, badcandidate.Operator{BaseURL: base, APIKey: "sk-citizen-dev"}, badReason)
		switch {
		case o.Error != "":
			fmt.Fprintf(progress, "bench learn: bad candidate %s: %s\n", o.Version, o.Error)
		case o.StartedBy == "operator":
			fmt.Fprintf(progress, "bench learn: bad candidate %s rejected by the offline gate; its canary started as an operator\n", o.Version)
		default:
			fmt.Fprintf(progress, "bench learn: bad candidate %s accepted by the offline gate; the controller starts it\n", o.Version)
		}
		out <- o
	}()
	return out
}

// badCandidateStarted attaches how the decorated candidate reached the
// canary to the rollback check.
func (rep *Report) badCandidateStarted(o badcandidate.Outcome) {
	if rep.BadCandidate != nil {
		rep.BadCandidate.Start = &o
	}
}

// startOK reports whether the check's canary is the decorated candidate,
// started without error (true when the run has no record of the start).
func (b *BadCandidateCheck) startOK() bool {
	return b.Start == nil || b.Start.Error == "" && b.Start.Version == b.Version
}

// startText says how the candidate reached the canary.
func (b *BadCandidateCheck) startText() string {
	switch s := b.Start; {
	case s == nil:
		return "start not recorded"
	case s.Error != "":
		return "start failed: " + s.Error
	case s.Version != b.Version:
		return fmt.Sprintf("the first canary, but the decorated candidate was %s", s.Version)
	case s.StartedBy == "operator":
		return "rejected by the offline gate, canary started by the operator API"
	default:
		return "accepted by the offline gate, started by the controller"
	}
}
