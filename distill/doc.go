// Package distill turns graded interactions into LoRA weight updates
// (docs/architecture.md sections 4-5). It owns:
//
//   - the graded-chat projection (Projection): every interaction.recorded
//     joined with its latest interaction.evaluated (highest Seq) and its
//     interpreted feedback (correction, hint), rebuilt by replay from the
//     store, with retention limits per type and by age (the training
//     buffer);
//   - the data pipeline (BuildDataset): selection by type and reward,
//     exclusion of evaluations with Trainable=false (attributed environment
//     faults get neither good nor bad credit), near-duplicate removal (exact
//     token-sequence hash and, optionally, embedder cosine), per-type
//     balance, replay anchors per type, and a stable hold-out slice per type
//     for the offline gate; the cycle's step budget (Dataset.FitBudget:
//     MaxSteps·BatchSeqs/Epochs examples, self-distilled answers and
//     corrected answers first, newest first, round-robin over types); the
//     answers a promoted fact lesson contradicts (Config.Lesson: it covers
//     them and they do not state its value) are no positive examples,
//     anchors or hold-out answers, but the cycle's stale questions; each cycle's
//     dataset is written as JSONL with a manifest naming the store
//     positions it came from (VerifyManifest);
//   - the objectives (Objective): advantage-weighted policy gradient with
//     truncated importance ratios against the recorded behaviour logprobs,
//     self-distillation from corrections and hints (the teacher sees the
//     note and, for a hint, optionally exemplars from memory; the student
//     does not; a one-off correction, one that states no promoted lesson's
//     value, weighs only OneOffWeight), consolidation of lessons by
//     context distillation (lessons.go: answers given with a lesson in the
//     context and graded good, and the teacher's answers with the lesson
//     to the older stale questions, are learnt for the prompt without
//     it; the newest stale questions stay out, for the lesson check), a k3
//     KL term to the stable version on the examples that
//     keep what it said (not on corrected ones), anchor replay, and
//     rehearsal of the base's own training data (Config.Rehearsal,
//     RehearsalCase; rehearsal.go): RehearsalSeqs of its near-ties (the
//     answers the base wins by under RehearsalMargin) beside every step,
//     leaving out the task types of the lessons it consolidates;
//   - training cycles (Distiller): trigger by count of new graded
//     interactions or time, train through a Trainer (EmbeddedTrainer in Go,
//     CommandTrainer for an external trainer), the offline gate (per-type
//     hold-out and regression examples vs the parent, KL budget, then the
//     operator's fixed regression suite of questions with right answers,
//     answered greedily, vs the parent and the base: SuiteCase, LoadSuite,
//     GateConfig.SuiteReasons; the base answers it all once, a candidate
//     only where the base's answer is a near-tie, teacher-forced first and
//     decoded where its answer may differ: suite.go), weight artifacts
//     under <data>/weights/<version>/ with sha256, and the weights.trained
//     event with full lineage, with the lesson check (lessonCheck: each
//     lesson's held-out stale questions asked of the candidate without
//     and with the lesson and of its parent, weights.trained lessons,
//     which the rollout and retirement read); a failing cycle is recorded
//     with Accepted=false and its reason, and the next cycle still runs;
//   - the offline evaluators (LogLikelihood by default, Accuracy as the
//     grader hook, Combine) and the gate (GateConfig; a key's tolerance
//     grows as sqrt(RefExamples/n) for a hold-out of n < RefExamples
//     examples, GateConfig.Tolerance);
//   - engine weight sync (SyncVersions): every accepted version's adapter,
//     checked against its sha256, is added to the serving engine.
//
// Wiring (services): build a Config with DataDir, Base (the base
// checkpoint's model), optionally Chat (a chat model over the same base:
// teacher and tokenizer), then d, err := distill.New(cfg, store, logger);
// go d.Run(ctx) (it replays the store, follows it, and runs cycles when
// due); go distill.SyncVersions(ctx, store, embeddedEngine, dataDir, base.Config,
// logger); the dashboard reads d.Status(). The stable version is the last
// rollout.promoted candidate (base until then); a cycle trains on top of it.
//
// distill depends only on events, model (and model/chat, model/tokenizer),
// memory and the internal helpers (statement, parallel). Serving a new
// version (gateway/embedded AddVersion) and deciding the rollout are other
// components' jobs: they read weights.trained.
package distill
