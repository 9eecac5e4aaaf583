package ops

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// board is the read side of the dashboard's panels that no other
// component serves: the reward and accuracy of each (task type, version)
// over time, and the recent rollout decisions, feedback interpretations
// and anomalies. Like rollout.Projection it catches up with the store on
// every request, so it holds nothing that replay could not rebuild.
//
// Memory: one small record per evaluated interaction (its latest
// evaluation supersedes earlier ones, as the scoreboard's does), one
// aggregate per (tenant, type, version, minute), and at most recentCap
// events per (family, tenant).
type board struct {
	store events.Store

	mu     sync.Mutex
	pos    uint64
	evals  map[string]evalRec
	aggs   map[seriesKey]*seriesAgg
	recent map[recentKey][]events.Event // oldest first, at most recentCap
}

// recentCap bounds the events kept per (family, tenant).
const recentCap = 200

// boardTypes are the event types the board folds.
var boardTypes = []string{
	events.TypeInteractionEvaluated, events.TypeFeedbackInterpreted, events.TypeAnomalyDetected,
	events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPaused,
	events.TypeRolloutResumed, events.TypeRolloutPromoted, events.TypeRolloutRolledBack,
}

// recentFamilies are the values of GET /v1/ops/recent?type=.
var recentFamilies = []string{"rollout", events.TypeFeedbackInterpreted, events.TypeAnomalyDetected}

type seriesKey struct {
	tenant, taskType, version string
	minute                    int64 // unix minutes
}

type seriesAgg struct {
	n               int
	sum, sumsq      float64
	judged, correct int
}

func (a *seriesAgg) add(r evalRec, sign int) {
	a.n += sign
	a.sum += float64(sign) * r.reward
	a.sumsq += float64(sign) * r.reward * r.reward
	if r.verdict != 0 {
		a.judged += sign
		if r.verdict > 0 {
			a.correct += sign
		}
	}
}

type evalRec struct {
	seq     int
	key     seriesKey
	reward  float64
	verdict int8 // 1 correct, -1 wrong, 0 no verdict
}

type recentKey struct{ family, tenant string }

func newBoard(store events.Store) *board {
	return &board{store: store, evals: map[string]evalRec{}, aggs: map[seriesKey]*seriesAgg{}, recent: map[recentKey][]events.Event{}}
}

// sync folds what the store gained since the last call; the caller holds
// b.mu.
func (b *board) sync(ctx context.Context) error {
	for {
		evs, err := b.store.ReadAll(ctx, b.pos, events.Filter{Types: boardTypes}, 1024)
		if err != nil {
			return fmt.Errorf("ops: board: %w", err)
		}
		for i := range evs {
			b.apply(&evs[i])
			b.pos = evs[i].Position
		}
		if len(evs) < 1024 {
			return nil
		}
	}
}

// verdict says whether an evaluation judged the answer correct: its
// outcome when the customer reported success or failure, else its check
// graders (all pass), else no verdict.
func verdict(x *events.InteractionEvaluated) int8 {
	switch x.Outcome {
	case "success":
		return 1
	case "failure":
		return -1
	}
	if len(x.Checks) == 0 {
		return 0
	}
	for _, c := range x.Checks {
		if c.Score < 1 {
			return -1
		}
	}
	return 1
}

func (b *board) apply(ev *events.Event) {
	if ev.Type != events.TypeInteractionEvaluated {
		fam := ev.Type
		if strings.HasPrefix(fam, "rollout.") {
			fam = "rollout"
		}
		k := recentKey{fam, ev.Tenant}
		list := append(b.recent[k], *ev)
		if len(list) > recentCap {
			list = append(list[:0:0], list[len(list)-recentCap:]...)
		}
		b.recent[k] = list
		return
	}
	p, err := events.Decode(ev)
	if err != nil {
		return // undecodable events are skipped, as the scoreboard does
	}
	x := p.(*events.InteractionEvaluated)
	old, seen := b.evals[x.InteractionID]
	if seen && old.seq >= x.Seq {
		return
	}
	// an interaction stays in the minute it was first evaluated in (when
	// it was served); a later evaluation only changes its numbers
	minute := ev.Time.Unix() / 60
	if seen {
		minute = old.key.minute
		if a := b.aggs[old.key]; a != nil {
			if a.add(old, -1); a.n <= 0 {
				delete(b.aggs, old.key)
			}
		}
	}
	r := evalRec{seq: x.Seq, key: seriesKey{ev.Tenant, x.TaskType, x.ModelVersion, minute}, reward: x.Reward, verdict: verdict(x)}
	b.evals[x.InteractionID] = r
	a := b.aggs[r.key]
	if a == nil {
		a = &seriesAgg{}
		b.aggs[r.key] = a
	}
	a.add(r, 1)
}

// SeriesPoint is one bucket of one series: the evaluations of
// interactions first evaluated in [T, T+bucket). Reward is the mean
// reward ± RewardCI95 (1.96 s/√n; 0 below two); Accuracy is Correct over
// Judged (the evaluations with a verdict: the customer's success or
// failure outcome, else the check graders) with a 95% Wilson interval
// [AccuracyLo, AccuracyHi]; Accuracy is null without a verdict.
type SeriesPoint struct {
	T          *time.Time `json:"t,omitempty"`
	N          int        `json:"n"`
	Reward     float64    `json:"reward"`
	RewardCI95 float64    `json:"reward_ci95"`
	Judged     int        `json:"judged"`
	Correct    int        `json:"correct"`
	Accuracy   *float64   `json:"accuracy"`
	AccuracyLo *float64   `json:"accuracy_lo,omitempty"`
	AccuracyHi *float64   `json:"accuracy_hi,omitempty"`
}

// Series is the reward and accuracy of one (task type, version) over
// time, with its total over the whole selection.
type Series struct {
	TaskType string        `json:"task_type"`
	Version  string        `json:"version"`
	Total    SeriesPoint   `json:"total"`
	Points   []SeriesPoint `json:"points"`
}

// SeriesResponse is GET /v1/ops/series.
type SeriesResponse struct {
	BucketSeconds int64    `json:"bucket_seconds"`
	Series        []Series `json:"series"`
}

// bucketSteps are the bucket widths chosen automatically: the smallest
// that puts the data's span in at most autoBuckets buckets.
var bucketSteps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

const (
	autoBuckets = 60
	maxBuckets  = 2000
)

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func point(a *seriesAgg) SeriesPoint {
	p := SeriesPoint{N: a.n, Judged: a.judged, Correct: a.correct}
	if a.n > 0 {
		n := float64(a.n)
		p.Reward = round6(a.sum / n)
		if a.n > 1 {
			v := (a.sumsq - a.sum*a.sum/n) / (n - 1)
			p.RewardCI95 = round6(1.96 * math.Sqrt(math.Max(v, 0)/n))
		}
	}
	if a.judged > 0 {
		n, ph, z := float64(a.judged), float64(a.correct)/float64(a.judged), 1.96
		den := 1 + z*z/n
		mid := (ph + z*z/(2*n)) / den
		half := z * math.Sqrt(ph*(1-ph)/n+z*z/(4*n*n)) / den
		acc, lo, hi := round6(ph), round6(math.Max(0, mid-half)), round6(math.Min(1, mid+half))
		p.Accuracy, p.AccuracyLo, p.AccuracyHi = &acc, &lo, &hi
	}
	return p
}

// scope is a read request's tenant selection after the access rules: a
// caller that is not an operator reads only its own tenant (naming
// another is a 403) and never events without a tenant; an operator reads
// every tenant, or the one it names.
// When ok is false the request has been answered (with err from
// writing it).
func (h *Handler) scope(c echo.Context) (tenant string, ok bool, err error) {
	ts := list(c.QueryParams()["tenant"])
	if len(ts) > 1 {
		return "", false, writeErrorParam(c, http.StatusBadRequest, fmt.Sprintf("at most one tenant, got %d", len(ts)), "tenant")
	}
	if len(ts) == 1 {
		tenant = ts[0]
	}
	who := h.callerOf(c)
	if who.Operator {
		return tenant, true, nil
	}
	if tenant != "" && tenant != who.Tenant {
		return "", false, writeErrorParam(c, http.StatusForbidden, "a tenant's key reads only its own tenant's data", "tenant")
	}
	if who.Tenant == "" {
		return "", false, writeError(c, http.StatusForbidden, "this key has no tenant")
	}
	return who.Tenant, true, nil
}

// getSeries serves GET /v1/ops/series: reward and accuracy per (task type,
// version) over time. Query: type, version (exact; empty: all), tenant
// (see scope), since (RFC 3339: only interactions first evaluated in that
// minute or later), bucket (a duration, whole minutes; default: the smallest of 1m,
// 5m, 15m, 1h, 6h, 24h, 168h that spans the data in at most 60 buckets;
// at most 2000 buckets). Series are sorted by type then version; points
// by time, empty buckets left out.
func (h *Handler) getSeries(c echo.Context) error {
	tenant, ok, err := h.scope(c)
	if !ok {
		return err
	}
	q := c.QueryParams()
	taskType, version := q.Get("type"), q.Get("version")
	var since int64 = math.MinInt64
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return writeErrorParam(c, http.StatusBadRequest, "since must be an RFC 3339 time such as 2026-01-02T15:04:05Z", "since")
		}
		since = t.Unix() / 60
	}
	var bucket int64 // minutes
	if s := q.Get("bucket"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Minute || d%time.Minute != 0 {
			return writeErrorParam(c, http.StatusBadRequest, "bucket must be a whole number of minutes such as 5m or 1h", "bucket")
		}
		bucket = int64(d / time.Minute)
	}
	h.board.mu.Lock()
	if err := h.board.sync(c.Request().Context()); err != nil {
		h.board.mu.Unlock()
		h.log.Error("series", "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the event store is not available")
	}
	type sk struct{ taskType, version string }
	sel := map[sk]map[int64]*seriesAgg{} // minute aggregates of the selection
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k, a := range h.board.aggs {
		if tenant != "" && k.tenant != tenant || taskType != "" && k.taskType != taskType || version != "" && k.version != version || k.minute < since {
			continue
		}
		s := sk{k.taskType, k.version}
		if sel[s] == nil {
			sel[s] = map[int64]*seriesAgg{}
		}
		m := sel[s][k.minute]
		if m == nil {
			m = &seriesAgg{}
			sel[s][k.minute] = m
		}
		m.n, m.sum, m.sumsq, m.judged, m.correct = m.n+a.n, m.sum+a.sum, m.sumsq+a.sumsq, m.judged+a.judged, m.correct+a.correct
		lo, hi = min(lo, k.minute), max(hi, k.minute)
	}
	h.board.mu.Unlock()
	span := int64(0)
	if len(sel) > 0 {
		span = hi - lo + 1
	}
	if bucket == 0 {
		bucket = int64(bucketSteps[len(bucketSteps)-1] / time.Minute)
		for _, d := range bucketSteps {
			if m := int64(d / time.Minute); (span+m-1)/m <= autoBuckets {
				bucket = m
				break
			}
		}
	}
	if n := (span + bucket - 1) / bucket; n > maxBuckets {
		return writeErrorParam(c, http.StatusBadRequest, fmt.Sprintf("bucket %s gives %d buckets over the data (at most %d): choose a larger one or a later since",
			time.Duration(bucket)*time.Minute, n, maxBuckets), "bucket")
	}
	resp := SeriesResponse{BucketSeconds: bucket * 60, Series: []Series{}}
	for s, mins := range sel {
		var total seriesAgg
		buckets := map[int64]*seriesAgg{}
		for m, a := range mins {
			start := m - ((m%bucket)+bucket)%bucket // floor to the bucket, negative minutes too
			b := buckets[start]
			if b == nil {
				b = &seriesAgg{}
				buckets[start] = b
			}
			for _, x := range []*seriesAgg{b, &total} {
				x.n, x.sum, x.sumsq, x.judged, x.correct = x.n+a.n, x.sum+a.sum, x.sumsq+a.sumsq, x.judged+a.judged, x.correct+a.correct
			}
		}
		out := Series{TaskType: s.taskType, Version: s.version, Total: point(&total)}
		for start, a := range buckets {
			p := point(a)
			t := time.Unix(start*60, 0).UTC()
			p.T = &t
			out.Points = append(out.Points, p)
		}
		sort.Slice(out.Points, func(i, j int) bool { return out.Points[i].T.Before(*out.Points[j].T) })
		resp.Series = append(resp.Series, out)
	}
	sort.Slice(resp.Series, func(i, j int) bool {
		a, b := resp.Series[i], resp.Series[j]
		if a.TaskType != b.TaskType {
			return a.TaskType < b.TaskType
		}
		return a.Version < b.Version
	})
	return c.JSON(http.StatusOK, resp)
}

// getRecent serves GET /v1/ops/recent: the latest stored events of one or
// more families, newest first. Query: type (rollout, feedback.interpreted
// or anomaly.detected; repeated or comma-separated; default all three),
// tenant (see scope: a tenant's key never sees rollouts or anomalies,
// which have no tenant), limit (1 to 200, default 50). The panels then
// follow GET /v1/ops/stream for what comes next.
func (h *Handler) getRecent(c echo.Context) error {
	tenant, ok, err := h.scope(c)
	if !ok {
		return err
	}
	who := h.callerOf(c)
	q := c.QueryParams()
	var fams []string
	for _, t := range list(append(q["type"], q["types"]...)) {
		t = strings.TrimSuffix(t, ".*")
		switch t {
		case "rollout", events.TypeFeedbackInterpreted, events.TypeAnomalyDetected:
			fams = append(fams, t)
		case "feedback", "anomaly":
			fams = append(fams, map[string]string{"feedback": events.TypeFeedbackInterpreted, "anomaly": events.TypeAnomalyDetected}[t])
		default:
			return writeErrorParam(c, http.StatusBadRequest, fmt.Sprintf("type %q is not one of %s", t, strings.Join(recentFamilies, ", ")), "type")
		}
	}
	if len(fams) == 0 {
		fams = recentFamilies
	}
	limit := 50
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > recentCap {
			return writeErrorParam(c, http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d", recentCap), "limit")
		}
		limit = n
	}
	h.board.mu.Lock()
	if err := h.board.sync(c.Request().Context()); err != nil {
		h.board.mu.Unlock()
		h.log.Error("recent", "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the event store is not available")
	}
	var out []events.Event
	for k, evs := range h.board.recent {
		if !slices.Contains(fams, k.family) || tenant != "" && k.tenant != tenant || !who.Operator && k.tenant == "" {
			continue
		}
		out = append(out, evs...)
	}
	h.board.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Position > out[j].Position })
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []events.Event{}
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}
