package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus metrics, registered on the
// registerer given in Deps (a fresh registry if nil). Names follow the
// OpenTelemetry GenAI semantic conventions where they fit (with
// Prometheus' unit suffixes), plus citizen_gateway_* for HTTP.
type metrics struct {
	httpDuration *prometheus.HistogramVec // route, method, status
	errors       *prometheus.CounterVec   // route, status, type
	genDuration  *prometheus.HistogramVec // gen_ai_server_request_duration: version, status
	ttft         *prometheus.HistogramVec // gen_ai_server_time_to_first_token: version
	tokens       *prometheus.HistogramVec // gen_ai_client_token_usage: version, token type
	recorded     prometheus.Counter
	recordFail   prometheus.Counter
	// lessonsPlaced counts the lessons placed in requests' contexts.
	lessonsPlaced prometheus.Counter
}

var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "citizen_gateway_http_request_duration_seconds", Help: "HTTP request duration by route, method and status.",
			Buckets: latencyBuckets}, []string{"route", "method", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "citizen_gateway_errors_total", Help: "Error responses by route, status and error type."}, []string{"route", "status", "type"}),
		genDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_request_duration_seconds", Help: "GenAI server request duration (chat completions) by model version and status.",
			Buckets: latencyBuckets}, []string{"gen_ai_request_model", "gen_ai_response_model", "status"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_to_first_token_seconds", Help: "Time to the first generated token, by model version.",
			Buckets: latencyBuckets}, []string{"gen_ai_response_model", "stream"}),
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_token_usage", Help: "Tokens used per request by model version and token type (input, output).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"gen_ai_response_model", "gen_ai_token_type"}),
		recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_interactions_recorded_total", Help: "Interactions appended to the event store."}),
		recordFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_record_failures_total", Help: "Failed appends of interactions (the client got an error)."}),
		lessonsPlaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_lessons_placed_total", Help: "Lessons placed in the context of requests (fast memory)."}),
	}
	reg.MustRegister(m.httpDuration, m.errors, m.genDuration, m.ttft, m.tokens, m.recorded, m.recordFail, m.lessonsPlaced)
	return m
}

func (m *metrics) observeHTTP(route, method string, status int, d time.Duration) {
	st := strconv.Itoa(status)
	m.httpDuration.WithLabelValues(route, method, st).Observe(d.Seconds())
}

func (m *metrics) observeError(route string, status int, typ string) {
	m.errors.WithLabelValues(route, strconv.Itoa(status), typ).Inc()
}

func (m *metrics) observeGeneration(model, version string, status int, d, ttft time.Duration, stream bool, u Usage) {
	m.genDuration.WithLabelValues(model, version, strconv.Itoa(status)).Observe(d.Seconds())
	if status == 200 {
		m.ttft.WithLabelValues(version, strconv.FormatBool(stream)).Observe(ttft.Seconds())
		m.tokens.WithLabelValues(version, "input").Observe(float64(u.PromptTokens))
		m.tokens.WithLabelValues(version, "output").Observe(float64(u.CompletionTokens))
	}
}
