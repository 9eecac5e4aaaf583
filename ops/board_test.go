package ops

import (
	"math"
	"net/http"
	"testing"
	"time"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// Keys of the tenancy tests: an operator and two tenants.
const (
	opKey     = "sk-op"
	acmeKey   = "sk-acme"
	globexKey = "sk-globex"
	noTenant  = "sk-none"
)

var testCallers = map[string]Caller{
	opKey:     {Key: opKey, Operator: true},
	acmeKey:   {Key: acmeKey, Tenant: "acme"},
	globexKey: {Key: globexKey, Tenant: "globex"},
	noTenant:  {Key: noTenant},
}

func keyOf(c echo.Context) string {
	h := c.Request().Header.Get("Authorization")
	if len(h) > 7 && h[:7] == "Bearer " {
		return h[7:]
	}
	return ""
}

// tenantDeps authenticates the keys of testCallers, as services does
// with the gateway's keys.
func tenantDeps() Deps {
	return Deps{
		Auth: func(c echo.Context) error {
			if _, ok := testCallers[keyOf(c)]; !ok {
				return echo.NewHTTPError(http.StatusUnauthorized, "missing or wrong API key")
			}
			return nil
		},
		Caller: func(c echo.Context) Caller { return testCallers[keyOf(c)] },
	}
}

// appendAt appends p with the envelope time at.
func (e *env) appendAt(stream, tenant string, at time.Time, p events.Payload) events.Event {
	e.t.Helper()
	ev, err := events.Encode(p, events.Meta{Stream: stream, Tenant: tenant, Time: at})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.store.Append(e.ctx, stream, events.Any, ev)
	if err != nil {
		e.t.Fatal(err)
	}
	ev.Position, ev.Revision = res.LastPosition, res.NextRevision
	return ev
}

// evalAt records an evaluation of interaction id at time at.
func (e *env) evalAt(id, tenant, taskType, version string, seq int, reward float64, outcome string, at time.Time) {
	e.t.Helper()
	e.appendAt(events.InteractionStream(id), tenant, at, &events.InteractionEvaluated{InteractionID: id, Seq: seq, TaskType: taskType,
		ModelVersion: version, Reward: reward, Outcome: outcome, AnswerLength: 40, RubricVersion: "r", EvaluatorVersion: "e"})
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestSeries(t *testing.T) {
	e := newEnvWith(t, tenantDeps(), nil)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// qa v2 at 10:00 (acme): rewards 0.2, 0.4, 0.9; outcomes success,
	// failure, none; at 11:00 (globex) 0.5 success
	e.evalAt("a1", "acme", "qa", "v2", 1, 0.2, "success", t0)
	e.evalAt("a2", "acme", "qa", "v2", 1, 0.4, "failure", t0.Add(10*time.Second))
	e.evalAt("a3", "acme", "qa", "v2", 1, 0.1, "", t0.Add(20*time.Second))
	e.evalAt("g1", "globex", "qa", "v2", 1, 0.5, "success", t0.Add(time.Hour))
	// a later evaluation supersedes the earlier one and stays at 10:00
	e.evalAt("a3", "acme", "qa", "v2", 2, 0.9, "", t0.Add(3*time.Hour))
	// an older one does not
	e.evalAt("a1", "acme", "qa", "v2", 1, -1, "failure", t0.Add(3*time.Hour))
	e.evalAt("p1", "acme", "policy", "v1", 1, -0.5, "", t0.Add(2*time.Hour))
	// checks decide when there is no outcome
	e.appendAt(events.InteractionStream("p2"), "acme", t0.Add(2*time.Hour), &events.InteractionEvaluated{InteractionID: "p2", Seq: 1, TaskType: "policy",
		ModelVersion: "v1", Reward: 0.5, RubricVersion: "r", EvaluatorVersion: "e", Checks: []events.GraderResult{{Name: "verdict", Score: 1}}})

	var res SeriesResponse
	if code := e.do(http.MethodGet, "/v1/ops/series?bucket=1h", opKey, "", &res); code != http.StatusOK {
		t.Fatalf("series: %d", code)
	}
	if res.BucketSeconds != 3600 || len(res.Series) != 2 || res.Series[0].TaskType != "policy" || res.Series[1].TaskType != "qa" {
		t.Fatalf("series %+v", res)
	}
	qa := res.Series[1]
	if len(qa.Points) != 2 || !qa.Points[0].T.Equal(t0) || !qa.Points[1].T.Equal(t0.Add(time.Hour)) {
		t.Fatalf("qa points %+v", qa.Points)
	}
	p := qa.Points[0]
	// rewards 0.2, 0.4, 0.9: mean 0.5, s = sqrt(0.13), ci 1.96 s/sqrt(3)
	if p.N != 3 || !near(p.Reward, 0.5) || !near(p.RewardCI95, round6(1.96*math.Sqrt(0.13/3))) {
		t.Fatalf("10:00 %+v", p)
	}
	// 1 of 2 judged correct: Wilson [0.094529, 0.905471]
	if p.Judged != 2 || p.Correct != 1 || !near(*p.Accuracy, 0.5) || !near(*p.AccuracyLo, 0.094529) || !near(*p.AccuracyHi, 0.905471) {
		t.Fatalf("10:00 accuracy %+v", p)
	}
	if tot := qa.Total; tot.N != 4 || !near(tot.Reward, 0.5) || tot.Judged != 3 || tot.Correct != 2 || tot.T != nil {
		t.Fatalf("qa total %+v", tot)
	}
	if pol := res.Series[0].Total; pol.N != 2 || pol.Judged != 1 || pol.Correct != 1 || !near(pol.Reward, 0) {
		t.Fatalf("policy total %+v", pol)
	}
	// the automatic bucket spans 10:00 to 12:00 (121 minutes) in 5 minutes
	if code := e.do(http.MethodGet, "/v1/ops/series", opKey, "", &res); code != http.StatusOK || res.BucketSeconds != 300 {
		t.Fatalf("auto bucket: %d %d", code, res.BucketSeconds)
	}
	// filters
	if code := e.do(http.MethodGet, "/v1/ops/series?type=qa&version=v2&since=2026-03-02T10:30:00Z", opKey, "", &res); code != http.StatusOK ||
		len(res.Series) != 1 || res.Series[0].Total.N != 1 {
		t.Fatalf("filtered: %d %+v", code, res)
	}

	// tenancy: a tenant's key sees its own tenant only
	if code := e.do(http.MethodGet, "/v1/ops/series?type=qa", globexKey, "", &res); code != http.StatusOK || len(res.Series) != 1 ||
		res.Series[0].Total.N != 1 || !near(res.Series[0].Total.Reward, 0.5) {
		t.Fatalf("globex: %d %+v", code, res)
	}
	if code := e.do(http.MethodGet, "/v1/ops/series?tenant=acme", globexKey, "", nil); code != http.StatusForbidden {
		t.Fatalf("globex naming acme: %d", code)
	}
	if code := e.do(http.MethodGet, "/v1/ops/series?tenant=acme&type=qa", opKey, "", &res); code != http.StatusOK || res.Series[0].Total.N != 3 {
		t.Fatalf("operator naming acme: %d %+v", code, res)
	}
	for _, tc := range []struct {
		key, query string
		code       int
	}{
		{"", "", http.StatusUnauthorized},
		{noTenant, "", http.StatusForbidden},
		{opKey, "?bucket=30s", http.StatusBadRequest},
		{opKey, "?bucket=90s", http.StatusBadRequest},
		{opKey, "?bucket=soon", http.StatusBadRequest},
		{opKey, "?since=yesterday", http.StatusBadRequest},
		{opKey, "?tenant=a&tenant=b", http.StatusBadRequest},
	} {
		if code := e.do(http.MethodGet, "/v1/ops/series"+tc.query, tc.key, "", nil); code != tc.code {
			t.Errorf("series%s with %q: %d, want %d", tc.query, tc.key, code, tc.code)
		}
	}
	// too many buckets for the span
	e.evalAt("late", "acme", "qa", "v2", 1, 0, "", t0.Add(30*24*time.Hour))
	if code := e.do(http.MethodGet, "/v1/ops/series?bucket=1m", opKey, "", nil); code != http.StatusBadRequest {
		t.Fatalf("43,000 buckets: %d", code)
	}
}

func TestRecent(t *testing.T) {
	e := newEnvWith(t, tenantDeps(), nil)
	e.startRollout()
	e.append(events.VersionStream("v2"), "", &events.AnomalyDetected{Kind: "length_drift", Version: "v2", Value: 0.4, Baseline: 1, Detector: "d"})
	fa := e.append(events.InteractionStream("a1"), "acme", &events.FeedbackInterpreted{InteractionID: "a1", FeedbackID: "f1", Polarity: 0.8, Confidence: 0.9, InterpreterVersion: "i"})
	fg := e.append(events.InteractionStream("g1"), "globex", &events.FeedbackInterpreted{InteractionID: "g1", FeedbackID: "f2", Polarity: -0.6, Confidence: 0.7, InterpreterVersion: "i"})
	e.evaluated("a1", "v2", "acme", 0.5) // not a recent family

	type list struct {
		Data []events.Event `json:"data"`
	}
	var l list
	if code := e.do(http.MethodGet, "/v1/ops/recent", opKey, "", &l); code != http.StatusOK || len(l.Data) != 4 {
		t.Fatalf("operator: %d %d events", code, len(l.Data))
	}
	for i := 1; i < len(l.Data); i++ {
		if l.Data[i].Position >= l.Data[i-1].Position {
			t.Fatalf("not newest first: %d after %d", l.Data[i].Position, l.Data[i-1].Position)
		}
	}
	if code := e.do(http.MethodGet, "/v1/ops/recent?type=rollout", opKey, "", &l); code != http.StatusOK || len(l.Data) != 1 || l.Data[0].Type != events.TypeRolloutStarted {
		t.Fatalf("rollout: %d %+v", code, l.Data)
	}
	if code := e.do(http.MethodGet, "/v1/ops/recent?type=feedback&limit=1", opKey, "", &l); code != http.StatusOK || len(l.Data) != 1 || l.Data[0].ID != fg.ID {
		t.Fatalf("feedback limit 1: %d %+v", code, l.Data)
	}
	// a tenant's key: its own feedback only, no rollouts or anomalies
	if code := e.do(http.MethodGet, "/v1/ops/recent", acmeKey, "", &l); code != http.StatusOK || len(l.Data) != 1 || l.Data[0].ID != fa.ID {
		t.Fatalf("acme: %d %+v", code, l.Data)
	}
	if code := e.do(http.MethodGet, "/v1/ops/recent?tenant=globex", acmeKey, "", nil); code != http.StatusForbidden {
		t.Fatalf("acme naming globex: %d", code)
	}
	if code := e.do(http.MethodGet, "/v1/ops/recent?tenant=globex", opKey, "", &l); code != http.StatusOK || len(l.Data) != 1 || l.Data[0].ID != fg.ID {
		t.Fatalf("operator naming globex: %d %+v", code, l.Data)
	}
	for _, q := range []string{"?type=interaction.recorded", "?limit=0", "?limit=201", "?limit=x"} {
		if code := e.do(http.MethodGet, "/v1/ops/recent"+q, opKey, "", nil); code != http.StatusBadRequest {
			t.Errorf("recent%s: %d", q, code)
		}
	}
	// the ring keeps the latest recentCap
	for i := range recentCap + 5 {
		e.append(events.VersionStream("v2"), "", &events.AnomalyDetected{Kind: "drop_rate", Version: "v2", Window: i, Detector: "d"})
	}
	if code := e.do(http.MethodGet, "/v1/ops/recent?type=anomaly.detected&limit=200", opKey, "", &l); code != http.StatusOK || len(l.Data) != recentCap {
		t.Fatalf("ring: %d %d", code, len(l.Data))
	}
	if p, _ := events.Decode(&l.Data[0]); p.(*events.AnomalyDetected).Window != recentCap+4 {
		t.Fatalf("newest anomaly %+v", p)
	}
}

func TestApproveLesson(t *testing.T) {
	e := newEnvWith(t, tenantDeps(), nil)
	ch := events.LessonChange{LessonID: "l1", Kind: events.LessonFact, Statement: "The museum opens at 9am.", Value: "9am",
		Scope: events.LessonScope{Tenant: "acme", TaskType: "qa"}, Users: 1, Rule: "1 user agrees", Actor: "learner"}
	e.append(events.LessonStream("l1"), "acme", &events.LessonProposed{LessonChange: ch})
	if code := e.do(http.MethodPost, "/v1/ops/lessons/l1/approve", acmeKey, "", nil); code != http.StatusForbidden {
		t.Fatalf("a tenant's key: %d", code)
	}
	if code := e.do(http.MethodPost, "/v1/ops/lessons/nope/approve", opKey, "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown lesson: %d", code)
	}
	if code := e.do(http.MethodPost, "/v1/ops/lessons/l1/approve", opKey, "{bad", nil); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	var res LessonDecisionResponse
	if code := e.do(http.MethodPost, "/v1/ops/lessons/l1/approve", opKey, `{"reason":"checked the opening hours"}`, &res); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	if res.State != "promoted" || res.Event.Type != events.TypeLessonPromoted || res.Event.Tenant != "acme" || res.Event.Position == 0 {
		t.Fatalf("approve answer %+v", res)
	}
	p, err := events.Decode(&res.Event)
	if err != nil {
		t.Fatal(err)
	}
	got := p.(*events.LessonPromoted)
	if got.Actor != "operator" || got.Reason != "checked the opening hours" || got.Statement != ch.Statement || got.Scope.Tenant != "acme" {
		t.Fatalf("promoted %+v", got)
	}
	if code := e.do(http.MethodPost, "/v1/ops/lessons/l1/approve", opKey, "", nil); code != http.StatusConflict {
		t.Fatalf("approving a promoted lesson: %d", code)
	}
	// a late proposal does not make a decided lesson a proposal again
	e.append(events.LessonStream("l1"), "acme", &events.LessonProposed{LessonChange: ch})
	if code := e.do(http.MethodPost, "/v1/ops/lessons/l1/approve", opKey, "", nil); code != http.StatusConflict {
		t.Fatalf("approving after a late proposal: %d", code)
	}
}
