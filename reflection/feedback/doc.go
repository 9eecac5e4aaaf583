// Package feedback owns feedback ingestion: it turns a feedback.received
// event (free text, an optional rating, outcome or correction) into one
// feedback.interpreted event with polarity, strength, aspects, an extracted
// correction or hint, a calibrated confidence, an uncertain mark and the
// interpreter's version.
//
// Interpreters: Embedded (the default; no dependencies), LLM (an
// OpenAI-compatible upstream given a rubric and asked for a JSON object
// under a JSON schema, validated strictly, with a recorded low-confidence
// "unparsable" result when the model's answer cannot be used) and Judge
// (the LLM path: N votes of the LLM combined with the embedded
// interpreter, their agreement recorded on every feedback.interpreted);
// NewInterpreter(Config) picks the Judge when an upstream is configured.
// Reinterpreter re-reads recorded feedback with the current embedded
// interpreter and counts what changed (citizen events replay). Bad input (empty, over
// MaxTextBytes, binary, a script other than Latin) is never an error: it
// gives a neutral, low-confidence interpretation.
//
// The embedded interpreter reads comments in English, German, Spanish,
// French, Italian, Portuguese and Dutch against the answer they were
// written under (the Ingester reads it from the interaction's stream):
//
//   - lex tokenizes any Latin-script text; the value parser (values.go,
//     units.go) reads numbers (digits and number words), money, percentages,
//     times and time ranges, weekdays and day ranges, dates, durations,
//     quantities and order or ticket statuses into the canonical forms of
//     testdata/general/GUIDE.md ("€4.99", "09:00-17:00", "3-5 business
//     days", "2.54 cm", "delivered");
//   - the candidate generator (candidates.go) reads the comment's values
//     against the answer's: typed by them ("45" under "20 minutes"), one end
//     of a range replaced, a unit swapped, computed ("double that", "an
//     hour earlier", "a quarter of that", "25% cheaper", "you forgot the 8%
//     tax"), worked out in the comment itself (arith.go: "17 × 23 = 391",
//     "25 por 4 son 100"), a yes/no answer reversed, or a name; a value
//     the comment takes back by restating the answer's with approval is
//     dropped;
//   - a multinomial logistic regression over word and character n-grams,
//     multilingual lexicon classes with negation (lang.go) and rule
//     features (features.go) gives the polarity: its classes are the
//     labelling guide's kinds of comment, each with its polarity, and
//     their probabilities are summed by polarity (model.go,
//     polClassifier); a logistic ranker scores
//     the candidates, P(correction) = sqrt(P(negative)) · P(candidate |
//     negative); a logistic calibrator turns both (and the share of the
//     comment's words the model has no weight for) into the confidence.
//     Their weights (testdata/model.json, embedded) are trained and their
//     thresholds chosen by 5-fold cross-validation on the general set's
//     training files (testdata/general/train.jsonl, heldout.jsonl,
//     heldout2.jsonl, train4.jsonl and train5.jsonl) and the older
//     in-sample sets; testdata/general/heldout3.jsonl and heldout4.jsonl,
//     written apart from them, are the held-out sets;
//   - the English rules of the first interpreter (embedded.go) add
//     aspects and hints.
//
// The Ingester is a pure event -> events handler for the bus router.
//
// Training and evaluation:
//
//	go test ./reflection/feedback -run TestTrainModel -update   # retrain, write testdata/model.json
//	go test ./reflection/feedback -run TestTrainModel -v        # cross-validated figures on the general set
//	go test ./reflection/feedback -run TestGeneralSet -v        # the general set's in-sample tables
//	go test ./reflection/feedback -run TestSecondSet -v         # heldout2's in-sample tables
//	go test ./reflection/feedback -run TestThirdHeldOut -v      # heldout3's tables and calibration (RESULTS.md; its evaluations used)
//	go test ./reflection/feedback -run TestFourthHeldOut -v     # heldout4's tables and calibration (RESULTS.md; counted evaluations)
//	go test ./reflection/feedback -run XXX -bench BenchmarkInterpretLatency -cpu 1
package feedback
