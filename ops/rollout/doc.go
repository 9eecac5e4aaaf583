// Package rollout owns citizen's rollout controller (docs/architecture.md section 6):
// it ships each accepted weights.trained version canary-first, compares it
// with the stable version on live evidence and appends every decision as a
// rollout.* event with its evidence. The gateway's Router follows those
// events to route traffic; this package never touches routing directly.
//
// # Lifecycle of a rollout
//
// An accepted weights.trained (Accepted=true) makes its version a waiting
// candidate. When no rollout runs, a waiting candidate starts
// (Config.Order):
// rollout.started with Candidate, Stable (the current stable version:
// the last promoted one, else Config.Stable, else the candidate's parent),
// Step 0 and Weight Config.Steps[0]. The stream is rollout-<ID>, with ID
// a deterministic UUID of the weights.trained event.
//
// Each step ends when both arms have Config.MinPerArm evaluations within
// it (interaction.evaluated of interactions served by the candidate and by
// the stable version, evaluated since the step began) and every common task
// type (at least TypeShare of the stable arm's evaluations) has MinPerType
// candidate evaluations. Then, if no test has failed, the controller
// appends rollout.advanced to the next step. At the last comparative step
// (the last step below 100%; default steps 5%, 25%, 50%, then 100%) it
// promotes (rollout.promoted, Weight 1: the candidate becomes stable) when
// the reward test shows a win; after MaxPerArm evaluations per arm in that
// step without a win it applies Config.Inconclusive: "rollback" (default:
// stable keeps serving, reason inconclusive) or "promote" if the candidate
// is non-inferior within NonInferiority.
//
// A step before the last comparative one ends only when the candidate
// shows no sign of harm (Config.HoldMargin); otherwise it is held at its
// share. A candidate gives way to a newer waiting one (rolled back) once
// its step has Config.GiveWayAfter evaluations and it is held (reason
// no_advance) or, at the last comparative step, no reward test would show
// a win by MaxPerArm even one standard error better than measured
// (reason futile). A candidate is superseded at once (rolled back,
// reason "superseded by V", Config.Supersede) when a waiting one learnt a
// lesson it did not and loses none it learnt (weights.trained lessons:
// the distiller's lesson check, events.LessonCarry.Learnt).
//
// At the last comparative step a candidate whose weights learnt a lesson
// the stable version's did not is promoted (reason "non_inferior: carries
// lessons") once its reward interval lies above -Config.LessonMargin and
// no type regressed: fast memory gives both arms the lesson, so carrying
// it cannot show as a win.
//
// The controller compares the rewards reflection computed and never
// rewrites one: an answer a promoted lesson contradicts is graded by
// reflection against the lesson's value.
//
// At any time (also during a pause) the candidate is rolled back at once
// (rollout.rolled_back: stable serves everything again) when
//   - an anomaly.detected names the candidate version (Guardrails.AnomalyKinds
//     limits the kinds), or
//   - a guardrail fails: answer length (down or up), tool calls per turn,
//     error rate (faults attributed to the model), drop rate (outcome
//     timeout or abandoned), latency (from interaction.recorded), or
//   - the reward test shows a regression.
//
// Only one rollout runs at a time. A candidate accepted while one runs
// waits; when the slot frees, Config.Order picks the one that starts: by
// default the one whose lesson check shows the most lessons learnt (the
// newest among equals), or the newest, or the oldest; the
// waiting ones trained before it are marked superseded. Each runs
// against whatever is stable when it starts (so a candidate trained from
// an older parent must still beat the newer stable). A version that is already stable or already had a rollout is
// skipped.
//
// With Config.TypeTau (default 0.5) the reward is also tested per task
// type (see Config.TypeTau) and stratified by type (the per-type
// differences weighted by the stable arm's type shares, with the
// within-type variance only, at Alpha with tau Tau): a fix or a
// regression confined to one type is found long before the overall mean
// shows it. Either test below 0 rolls back; above 0 (and no type below)
// promotes at the last comparative step. The per-type tests share Alpha
// (Bonferroni; half of it to the types of the lessons the candidate was
// trained to carry, when its lineage names some: typeAlphas, weighted
// Bonferroni, pre-specified by weights.trained before the rollout
// starts), so with them the A/A bound below becomes
// 3·Alpha + 5·Guardrails.Alpha (TestTypeTestAAFalseDecisionsBounded
// measures it on a workload whose types differ as the workplace's do).
//
// # The test and its error rates
//
// Reward and every guardrail metric are compared as the difference of
// means (candidate minus stable) with a normal-mixture confidence sequence
// (the mixture sequential probability ratio test, mSPRT: Robbins 1970;
// Johari, Pekelis and Walsh, "Always valid inference", 2017; the boundary
// as in Howard et al., "Time-uniform, nonparametric, nonasymptotic
// confidence sequences", 2021). With D the observed difference and V the
// estimated variance of D (sum of each arm's variance over its count), the
// interval is
//
//	D ± sqrt(V(V+tau²)/tau² · (2 ln(1/alpha) + ln((V+tau²)/V)))
//
// For Gaussian observations with known variances it contains the true
// difference at every look simultaneously with probability at least
// 1-alpha, however often it is looked at and whatever the (changing)
// traffic split, because the efficient score D/V has independent
// increments (Jennison and Turnbull's canonical joint distribution). The
// controller looks after every event. With estimated variances and
// non-Gaussian rewards the guarantee is asymptotic, which is why nothing
// is decided before MinLook evaluations per arm.
//
// Decisions and their error rates (defaults):
//   - reward: rollback when the whole interval lies below 0, promotion when
//     it lies above 0. When the candidate is no better than stable the
//     probability of ever rolling back for a regression is at most Alpha
//     (0.05); when it is no worse, the probability of a false win is at
//     most Alpha. tau (0.1 reward units) is the effect the test detects
//     fastest.
//   - guardrails: fail only when the interval lies beyond a tolerance
//     (length -25%/+100%, tool calls +50% or +0.5 per turn, error and drop
//     rate +5 points, latency +50%), each at Guardrails.Alpha (0.01) with
//     tau equal to the tolerance. With no true difference, each fails with
//     probability well below its alpha.
//   - so an A/A rollout (same distributions) is rolled back for a
//     regression or a guardrail with probability at most
//     Alpha + 5·Guardrails.Alpha = 0.10 by the union bound; the test
//     TestAAFalseRollbackRateBounded measures 2.5% over 200 simulated
//     rollouts (and 26% for a naive z-test repeated at every look). An A/A
//     rollout usually ends inconclusive, which the default policy rolls
//     back: a candidate has to earn its promotion.
//
// A later evaluation of the same interaction (after feedback) replaces
// the earlier one in the sums; observations are then not strictly fixed
// once seen, a small departure from the test's assumptions that we accept
// so that feedback and outcomes count.
//
// # Events, projection and leadership
//
// The controller's state (State) is a projection: it changes only by
// State.Apply on events in store order (weights.trained,
// interaction.evaluated, interaction.recorded, anomaly.detected and
// rollout.*), and holds no clock, so replaying the store rebuilds it
// exactly (tested). Decisions are a pure function of the state.
//
// Several controllers may run (one per replica, docs/architecture.md section 7): each
// appends its decision with the expected revision of the rollout stream
// (NoStream for a start, Exact(last revision) otherwise) and a
// deterministic event id (rollout id, type, step), so exactly one decision
// lands per revision; a controller that loses gets a wrong-revision error,
// logs it, applies the winner's event when it arrives and decides again
// from there. The same holds for operators (Pause, Resume, Promote,
// Abort), who append with Actor "operator". An operator may also Start
// the canary of any trained version with weights, one the offline gate
// rejected included; such a candidate is held in its first step on any
// evidence (Config.HoldMargin), which the controller derives from its
// weights.trained, not from anything the start says.
//
// Every decision carries events.RolloutEvidence: counts (whole rollout and
// current step, per arm, and requests served), means and interval bounds
// per metric (keys "reward.candidate", "reward.diff", "reward.lo", ...),
// the test used and a sentence of detail; Reason starts with one of the
// Reason* codes.
//
// # Routing
//
// gateway.Router reads Stable, Candidate and Weight of started, advanced
// and resumed; paused keeps the current share; promoted makes Candidate
// stable; rolled_back sends everything to Stable. Every event this
// package appends carries all three fields with their current values.
package rollout
