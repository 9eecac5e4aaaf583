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
//	GET  /v1/ops/series                     reward and accuracy per task type and version over time (SeriesResponse)
//	GET  /v1/ops/recent                     the latest rollout decisions, feedback interpretations and anomalies, newest first
//	POST /v1/ops/lessons/{id}/approve       promote a proposed lesson on the operator's word (lesson.promoted, actor operator)
//	GET  /ops, /ops/dashboard.js            the dashboard: an embedded page and its script (no external resources)
//
// series and recent read what a key may read, as the stream does (a
// tenant's key: its own tenant's data only); both come from one projection
// (board) that catches up with the store on each request.
//
// # The dashboard
//
// The page asks for the API key once per browser tab (sessionStorage) and
// requests nothing before. Its panels read this package's routes and
// those services mounts from other components: GET /v1/ops/scoreboard
// (reflection), GET /v1/ops/failure-modes (memory), GET /v1/ops/lessons
// and POST /v1/ops/lessons/{id}/retire (the lessons view). Charts are SVG
// drawn by the page itself. TestDashboardPanels checks every panel in
// headless Chromium and writes the screenshots in docs/dashboard.
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
