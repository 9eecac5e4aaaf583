// Package workplace owns the simulated customer harness: a client that talks to citizen only over
// its OpenAI-compatible HTTP API, exactly as a real customer would.
//
// It owns:
//   - task families (arithmetic, unit_conversion, policy, order_status, json_extract, classify,
//     and the late-arriving percentage family), each a generator of fresh instances from a seeded
//     *rand.Rand with a checker that grades answers, and the canonical answers they accept;
//   - the world state the answers depend on (a versioned Policy, user segments' preferences, the
//     active families) and a drift schedule that changes it at given interaction counts;
//   - simulated users with hidden preferences who judge answers and write free-text feedback,
//     each piece carrying the verdict it was meant to express;
//   - environment faults: failing and timing-out tools, turn and time budgets;
//   - the runner (Run), the offline evaluator (Evaluate), the command entry point (Main);
//   - the base model's training corpus (Corpus).
//
// It imports no other citizen package (a test enforces this).
package workplace
