package gateway

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus metrics, registered on the
// registerer given in Deps (a fresh registry if nil).
//
// OpenTelemetry GenAI semantic conventions (metric names translated to
// Prometheus: dots become underscores, seconds get their suffix; buckets
// are the conventions' advice), each with the required attributes
// gen_ai_operation_name ("chat", "embeddings") and gen_ai_provider_name
// ("citizen"), and gen_ai_request_model (what the client asked for) and
// gen_ai_response_model (what the answer's "model" says, e.g.
// "citizen@base"):
//
//	gen_ai_server_request_duration_seconds        + error_type ("" on success, else the HTTP status)
//	gen_ai_server_time_to_first_token_seconds     successful generations
//	gen_ai_server_time_per_output_token_seconds   (duration − time to first token) / (output tokens − 1)
//	gen_ai_client_token_usage                     + gen_ai_token_type (input, output)
//
// vLLM's engine metrics under citizen_ (vllm:X is citizen_X), label
// model_name ("citizen"):
//
//	citizen_num_requests_running                  generation and embedding requests being served
//	citizen_time_to_first_token_seconds
//	citizen_request_time_per_output_token_seconds
//	citizen_e2e_request_latency_seconds
//	citizen_prompt_tokens_total, citizen_generation_tokens_total
//
// vllm:num_requests_waiting has no counterpart: the gateway queues nothing
// (its limiter refuses with 429), and an upstream vLLM exports its own.
//
// HTTP and recording: citizen_gateway_http_request_duration_seconds (route,
// method, status), citizen_gateway_errors_total (route, status, type),
// citizen_gateway_interactions_recorded_total,
// citizen_gateway_record_failures_total, citizen_gateway_record_duration_seconds,
// citizen_gateway_lessons_placed_total.
type metrics struct {
	httpDuration *prometheus.HistogramVec
	errors       *prometheus.CounterVec
	recorded     prometheus.Counter
	recordFail   prometheus.Counter
	// recordTime is the durable append of an interaction (the store's
	// append latency as the gateway sees it).
	recordTime prometheus.Histogram
	// lessonsPlaced counts the lessons placed in requests' contexts.
	lessonsPlaced prometheus.Counter
	// lessonRevisions counts answers given again because their first
	// draft stated what a lesson corrects.
	lessonRevisions prometheus.Counter

	opDuration *prometheus.HistogramVec // op, provider, request model, response model, error type
	ttft       *prometheus.HistogramVec // op, provider, request model, response model
	tpot       *prometheus.HistogramVec // op, provider, request model, response model
	tokens     *prometheus.HistogramVec // op, provider, token type, request model, response model

	running      prometheus.Gauge
	vTTFT        prometheus.Histogram
	vTPOT        prometheus.Histogram
	vE2E         prometheus.Histogram
	promptTotal  prometheus.Counter
	genTotal     prometheus.Counter
	generationMu sync.RWMutex
	generation   map[[2]string]*genObservers
}

// genObservers are one (request model, response model) pair's series of a
// successful chat generation, looked up once.
type genObservers struct {
	duration, ttft, tpot, input, output prometheus.Observer
}

// Operation names (gen_ai.operation.name) and the provider.
const (
	opChat       = "chat"
	opEmbeddings = "embeddings"
	providerName = "citizen"
)

var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// Bucket advice of the GenAI semantic conventions.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	ttftBuckets     = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	tpotBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
	tokenBuckets    = prometheus.ExponentialBuckets(1, 4, 14)
)

func newMetrics(reg prometheus.Registerer) *metrics {
	genai := []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gen_ai_response_model"}
	vllm := prometheus.Labels{"model_name": ModelName}
	m := &metrics{
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "citizen_gateway_http_request_duration_seconds", Help: "HTTP request duration by route, method and status.",
			Buckets: latencyBuckets}, []string{"route", "method", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "citizen_gateway_errors_total", Help: "Error responses by route, status and error type."}, []string{"route", "status", "type"}),
		recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_interactions_recorded_total", Help: "Interactions appended to the event store."}),
		recordFail: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_record_failures_total", Help: "Failed appends of interactions (the client got an error)."}),
		recordTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "citizen_gateway_record_duration_seconds", Help: "Durable appends of interactions to the event store, successful or not.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5}}),
		lessonsPlaced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_lessons_placed_total", Help: "Lessons placed in the context of requests (fast memory)."}),
		lessonRevisions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_gateway_lesson_revisions_total", Help: "Answers given again with lessons in the context because the first stated what a lesson corrects."}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_request_duration_seconds", Help: "GenAI server request duration (OpenTelemetry gen_ai.server.request.duration).",
			Buckets: durationBuckets}, append(genai[:4:4], "error_type")),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_to_first_token_seconds", Help: "Time to generate the first token of successful requests (OpenTelemetry gen_ai.server.time_to_first_token).",
			Buckets: ttftBuckets}, genai),
		tpot: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_server_time_per_output_token_seconds", Help: "Time per output token after the first of successful requests (OpenTelemetry gen_ai.server.time_per_output_token).",
			Buckets: tpotBuckets}, genai),
		tokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gen_ai_client_token_usage", Help: "Tokens used per successful request by token type (OpenTelemetry gen_ai.client.token.usage).",
			Buckets: tokenBuckets}, []string{"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_token_type", "gen_ai_request_model", "gen_ai_response_model"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "citizen_num_requests_running", Help: "Generation and embedding requests being served (vLLM's vllm:num_requests_running).", ConstLabels: vllm}),
		vTTFT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "citizen_time_to_first_token_seconds", Help: "Time to the first token (vLLM's vllm:time_to_first_token_seconds).", ConstLabels: vllm,
			Buckets: ttftBuckets}),
		vTPOT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "citizen_request_time_per_output_token_seconds", Help: "Mean time per output token after the first, per request (vLLM's vllm:request_time_per_output_token_seconds).", ConstLabels: vllm,
			Buckets: tpotBuckets}),
		vE2E: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "citizen_e2e_request_latency_seconds", Help: "End-to-end latency of successful generations (vLLM's vllm:e2e_request_latency_seconds).", ConstLabels: vllm,
			Buckets: durationBuckets}),
		promptTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_prompt_tokens_total", Help: "Prompt tokens of successful generations (vLLM's vllm:prompt_tokens_total).", ConstLabels: vllm}),
		genTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "citizen_generation_tokens_total", Help: "Generated tokens of successful generations (vLLM's vllm:generation_tokens_total).", ConstLabels: vllm}),
		generation: map[[2]string]*genObservers{},
	}
	reg.MustRegister(m.httpDuration, m.errors, m.recorded, m.recordFail, m.recordTime, m.lessonsPlaced, m.lessonRevisions, m.opDuration, m.ttft, m.tpot, m.tokens,
		m.running, m.vTTFT, m.vTPOT, m.vE2E, m.promptTotal, m.genTotal)
	return m
}

func (m *metrics) observeHTTP(route, method string, status int, d time.Duration) {
	st := strconv.Itoa(status)
	m.httpDuration.WithLabelValues(route, method, st).Observe(d.Seconds())
}

func (m *metrics) observeError(route string, status int, typ string) {
	m.errors.WithLabelValues(route, strconv.Itoa(status), typ).Inc()
}

// errorType is error.type of a failed request: its HTTP status (499: the
// client went away).
func errorType(status int) string { return strconv.Itoa(status) }

// observeOperation records one request's duration (errType "" on success).
func (m *metrics) observeOperation(op, requestModel, responseModel, errType string, d time.Duration) {
	m.opDuration.WithLabelValues(op, providerName, requestModel, responseModel, errType).Observe(d.Seconds())
}

func (m *metrics) observeTokens(op, responseModel, tokenType string, n int) {
	m.tokens.WithLabelValues(op, providerName, tokenType, ModelName, responseModel).Observe(float64(n))
}

func (m *metrics) genSeries(requestModel, responseModel string) *genObservers {
	k := [2]string{requestModel, responseModel}
	m.generationMu.RLock()
	g := m.generation[k]
	m.generationMu.RUnlock()
	if g != nil {
		return g
	}
	m.generationMu.Lock()
	defer m.generationMu.Unlock()
	if g = m.generation[k]; g == nil {
		g = &genObservers{
			duration: m.opDuration.WithLabelValues(opChat, providerName, requestModel, responseModel, ""),
			ttft:     m.ttft.WithLabelValues(opChat, providerName, requestModel, responseModel),
			tpot:     m.tpot.WithLabelValues(opChat, providerName, requestModel, responseModel),
			input:    m.tokens.WithLabelValues(opChat, providerName, "input", requestModel, responseModel),
			output:   m.tokens.WithLabelValues(opChat, providerName, "output", requestModel, responseModel),
		}
		m.generation[k] = g
	}
	return g
}

// observeGeneration records one chat generation (chat completions and
// responses): model is what the client asked for, version the version that
// answered.
func (m *metrics) observeGeneration(model, version string, status int, d, ttft time.Duration, stream bool, u Usage) {
	resp := publicModel(version)
	if status != 200 {
		m.opDuration.WithLabelValues(opChat, providerName, model, resp, errorType(status)).Observe(d.Seconds())
		return
	}
	g := m.genSeries(model, resp)
	g.duration.Observe(d.Seconds())
	g.ttft.Observe(ttft.Seconds())
	g.input.Observe(float64(u.PromptTokens))
	g.output.Observe(float64(u.CompletionTokens))
	m.vTTFT.Observe(ttft.Seconds())
	m.vE2E.Observe(d.Seconds())
	m.promptTotal.Add(float64(u.PromptTokens))
	m.genTotal.Add(float64(u.CompletionTokens))
	if u.CompletionTokens > 1 && d > ttft {
		per := (d - ttft).Seconds() / float64(u.CompletionTokens-1)
		g.tpot.Observe(per)
		m.vTPOT.Observe(per)
	}
}
