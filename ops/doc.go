// Package ops owns what operators touch (docs/architecture.md section 3): the HTTP
// surface of the rollout (state, versions, pause, resume, promote, abort),
// the live event stream (Server-Sent Events), the dashboard page and the
// `citizen ops` commands. The rollout controller itself is the subpackage
// rollout. Everything here reads the event store and appends operator
// events to it; nothing holds state that replay could not rebuild.
//
// # HTTP
//
//	GET  /v1/ops/rollout                    rollout.Status: stable, the running rollout with its live evidence, waiting candidates, history
//	POST /v1/ops/rollout/{pause,resume,promote,abort}   body {"reason": "..."} (optional); 200 ActionResponse, 409 when the action does not apply
//	GET  /v1/ops/versions                   lineage of trained versions (weights.trained) with their status, and the rollout state
//	GET  /v1/ops/stream                     Server-Sent Events (see Handler.stream): evaluations, interpreted feedback, anomalies, weights.trained, rollout.*
//	GET  /ops                               the dashboard: one self-contained page (embedded, no external resources)
//
// The /v1/ops routes run Deps.Auth; errors have OpenAI's shape
// {"error": {"message", "type", "code"}}. State is read by a projection
// (rollout.Projection) that catches up with the store on every request,
// so a GET after a POST sees the action.
//
// # Mounting
//
// On the gateway (its authenticated /v1 group and its root):
//
//	h, err := ops.New(ops.Deps{Store: store, Auth: auth, Rollout: cfg, Logger: logger})
//	gateway.Deps{..., Routes: func(v1 *echo.Group) { h.RegisterAPI(v1) },
//		Pages: func(e *echo.Echo) { h.RegisterPages(e) }}
//
// On any other echo root: ops.Register(e, deps) adds everything; or serve
// h.HTTPHandler() for the paths /v1/ops/ and /ops next to another handler.
//
// # The stream
//
// `curl -N -H "Authorization: Bearer $KEY" localhost:8080/v1/ops/stream?type=rollout,anomaly.detected&version=v7`
// prints one event per stored event: "id:" is the store position (send it
// back as Last-Event-ID to resume without gaps or duplicates), "event:"
// the type, "data:" the JSON envelope. Each event is flushed as it is
// written; an idle stream gets a comment line every Deps.Heartbeat.
package ops
