// Package gateway is citizen's HTTP front door: an OpenAI-compatible Chat
// Completions API on echo that authenticates tenants, enforces per-key
// limits, routes each request to a model version (sticky canary), asks an
// Engine for the answer and records the whole interaction in the event
// store before the client is answered.
//
// # Endpoints
//
//	POST /v1/chat/completions              OpenAI Chat Completions (stream or not)
//	GET  /v1/chat/completions              stored completions: after, limit, order, model, metadata[k]=v
//	GET  /v1/chat/completions/{id}         one stored completion
//	POST /v1/chat/completions/{id}         update its metadata
//	DELETE /v1/chat/completions/{id}       delete it (never trained on)
//	GET  /v1/chat/completions/{id}/messages its request messages (after, limit, order)
//	POST /v1/responses                     OpenAI Responses over the chat path (responses.go)
//	POST /v1/embeddings                    vectors from Deps.Embedder (embeddings.go)
//	POST /v1/chat/completions/{id}/feedback
//	POST /v1/feedback                      {interaction_id, feedback_id, text, rating, outcome, correction, source, user}
//	GET  /v1/interactions/{id}             the recorded interaction and every later event on its stream
//	GET  /v1/models, /v1/models/{model}    "citizen" and "citizen@<version>" (with parent)
//	GET  /healthz, /readyz, /metrics
//
// Every response carries x-request-id; errors use OpenAI's shape
// {"error": {"message", "type", "param", "code"}}; 429 and 503 carry
// Retry-After (seconds) and retry-after-ms.
//
// # Ids
//
// The interaction id is a UUIDv7 and the completion id is
// "chatcmpl-<interaction id>", so each is derivable from the other
// (InteractionID, CompletionID). Every endpoint taking an id accepts both.
// The interaction's stream is events.InteractionStream(id).
//
// # Recording
//
// interaction.recorded is appended to interaction-<id> with
// events.NoStream, and the event id is events.DeterministicID of the type
// and interaction id. It carries the exact prompt token ids, the sampled
// completion token ids with their logprobs (and top alternatives), the
// tokenizer version, the served version, params, usage, latency and time to
// first token. Non-streaming: the append completes before the response is
// written. Streaming: content deltas flow as the engine produces them, but
// the chunks carrying finish_reason, the usage chunk and [DONE] are sent
// only after the append succeeded; if it fails the stream ends with an
// error event and no [DONE] (non-streaming: 500 api_error). A refused
// request (4xx) never reaches the engine or the store. Every interaction
// is recorded whatever the request's "store" flag says (the flag is kept in
// params); "store": false only keeps it out of the stored-completions API,
// and metadata updates and deletions are events on its stream
// (docs/adr/0012-stored-completions.md). The list is served from an
// in-memory index (id, tenant, current metadata per stored completion)
// rebuilt from the store by Start; the completions themselves are read
// from the store.
//
// # Tenancy and keys
//
// API keys are stored as SHA-256 hashes in a JSON key file
// (Config.KeysFile, normally <data dir>/keys.json, mode 0600, rewritten
// atomically). Keys are configuration, not history, so they are not events.
// CreateKey, ListKeys and RevokeKey are what `citizen keys create|list|revoke`
// call; FileKeys reloads the file when it changes (within RecheckEvery, 1 s).
// A key maps to a tenant, an optional user and optional per-minute request
// and token limits (token buckets; Config.Limits are the defaults; 0 is
// unlimited); the buckets live in each gateway process, so N gateways behind
// a load balancer allow up to N times the limit. Every read and feedback checks the interaction's tenant;
// another tenant's interaction is answered 404, as an unknown one.
//
// Development mode: the key DevKey ("sk-citizen-dev", tenant "dev") is
// accepted when Config.DevMode is "on", or "auto" (the default) and the
// gateway listens on a loopback address. Bound to 0.0.0.0 or ":8080" it is
// off unless DevMode is "on".
//
// # Routing
//
// "citizen" goes to the stable version, or to the candidate for a sticky
// share of conversations (conversation id from metadata "conversation_id",
// else the user): each step's new conversations are drawn against a quota
// per declared task type (metadata "task_type", else "type") under the
// step's overall bound, so the candidate serves at most ⌈weight·N⌉ of N
// conversations and keeps its share of every type within about two, and a
// conversation keeps its version for the candidate's whole rollout, across
// restarts: the assignments are rebuilt from the recorded interactions (see
// Router).
// "citizen@<version>" pins a served version; anything else is 404
// model_not_found. Router.SetRollout(stable, candidate, weight) sets the
// state directly; Server.Start also follows rollout.* and
// interaction.recorded events from the store (Router.Apply), so the rollout
// controller only appends events. The
// version is returned in X-Citizen-Model-Version and in the "model" field
// ("citizen@<version>") and is recorded.
//
// # Engines
//
// Engine is declared here; StubEngine (scriptable, answers at once) and
// Upstream (any OpenAI-compatible server, with retries and streaming
// pass-through) implement it; the embedded model's adapter will too.
package gateway
