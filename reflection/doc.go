// Package reflection owns the judgement of interactions: interaction
// typing (given, or inferred from rubric patterns), per-type rubrics and
// deterministic graders (exact and normalised match, numeric tolerance,
// regex, JSON validity and JSON-schema conformance, tool-call validity,
// length and format), self-evaluation from recorded logprobs,
// environment-fault attribution, the reward and its policy, reward-hacking
// detectors over sliding windows and the per-(type, version) scoreboard.
// The feedback ingester lives in reflection/feedback.
//
// Reference answers. Citizen does not know the right answer to workplace
// traffic. Graders that need one (exact, normalized, numeric) apply only
// when the interaction carries it in its metadata (key "expected" unless
// the rubric names another) or when feedback stated a correction (the
// latest one wins; the grader's explanation says which source was used).
// Without a reference these graders are left out of the evaluation, not
// scored as failures; the other graders always apply.
//
// Everything here is derived from events: Evaluate is a pure function of
// the recording, the feedback, the rubrics and the config; the detectors
// and the scoreboard are projections rebuilt by replay.
package reflection
