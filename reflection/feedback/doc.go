// Package feedback owns feedback ingestion: it turns a feedback.received
// event (free text, an optional rating, outcome or correction) into one
// feedback.interpreted event with polarity, strength, aspects, an extracted
// correction or hint, confidence and the interpreter's version.
//
// Interpreters: Embedded (deterministic rules, no dependencies, the
// default) and LLM (an OpenAI-compatible upstream asked for a JSON object
// under a JSON schema, validated strictly, with a recorded low-confidence
// "unparsable" result when the model's answer cannot be used). Bad input
// (empty, over MaxTextBytes, binary, not English) is never an error: it
// gives a neutral, low-confidence interpretation.
//
// The Ingester is a pure event -> events handler for the bus router.
//
// Evaluation on the hand-written labelled set (testdata/labelled.jsonl):
//
//	go test ./reflection/feedback -run TestLabelledSet -v
package feedback
