package ops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/memory"
	"citizen/memory/lessons"
	"citizen/reflection"

	"github.com/labstack/echo/v4"
)

// The routes the dashboard reads that services serves from other
// components (services/routes.go, services/lessonroutes.go), mounted
// here the same way on the test's store: the scoreboard (operators
// only), the failure modes (a tenant's own) and the lessons view with
// retire (operators only).
func mountComponents(fl *memory.FailureLog) func(e *echo.Echo, store events.Store) {
	return func(e *echo.Echo, store events.Store) {
		deps := tenantDeps()
		guard := func(operator bool, next func(c echo.Context, who Caller) error) echo.HandlerFunc {
			return func(c echo.Context) error {
				if err := deps.Auth(c); err != nil {
					return writeError(c, http.StatusUnauthorized, "missing or wrong API key")
				}
				who := deps.Caller(c)
				if operator && !who.Operator {
					return writeError(c, http.StatusForbidden, "this endpoint needs an operator key")
				}
				return next(c, who)
			}
		}
		tenantOf := func(c echo.Context, who Caller) string {
			if who.Operator {
				return c.QueryParam("tenant")
			}
			return who.Tenant
		}
		view := func(ctx context.Context) (*lessons.View, error) {
			v := lessons.NewView(lessons.Config{}, fixedEmbedder{})
			evs, err := store.ReadAll(ctx, 0, events.Filter{Types: events.LessonTypes}, 0)
			for _, ev := range evs {
				_ = v.Apply(ctx, ev)
			}
			return v, err
		}
		e.GET("/v1/ops/scoreboard", guard(true, func(c echo.Context, _ Caller) error {
			sb := reflection.NewScoreboard()
			evs, err := store.ReadAll(c.Request().Context(), 0, events.Filter{Types: []string{events.TypeInteractionEvaluated}}, 0)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				_ = sb.Apply(ev)
			}
			reflection.ScoreboardHandler(sb).ServeHTTP(c.Response(), c.Request())
			return nil
		}))
		e.GET("/v1/ops/failure-modes", guard(false, func(c echo.Context, who Caller) error {
			memory.FailureModesHandler(fl, func(*http.Request) string { return tenantOf(c, who) }).ServeHTTP(c.Response(), c.Request())
			return nil
		}))
		e.GET("/v1/ops/lessons", guard(false, func(c echo.Context, who Caller) error {
			v, err := view(c.Request().Context())
			if err != nil {
				return err
			}
			list := v.List(tenantOf(c, who), c.QueryParam("state"))
			if list == nil {
				list = []lessons.Lesson{}
			}
			return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": list})
		}))
		e.POST("/v1/ops/lessons/:id/retire", guard(true, func(c echo.Context, _ Caller) error {
			v, err := view(c.Request().Context())
			if err != nil {
				return err
			}
			l, ok := v.Get(c.Param("id"))
			if !ok {
				return writeError(c, http.StatusNotFound, "no lesson "+c.Param("id"))
			}
			var body ActionRequest
			if err := json.NewDecoder(c.Request().Body).Decode(&body); err != nil {
				return writeError(c, http.StatusBadRequest, err.Error())
			}
			ch := l.LessonChange
			ch.Actor, ch.Reason, ch.Rule = "operator", body.Reason, ""
			ev, err := events.Encode(&events.LessonRetired{LessonChange: ch}, events.Meta{Stream: events.LessonStream(l.LessonID), Tenant: l.Scope.Tenant})
			if err == nil {
				_, err = store.Append(c.Request().Context(), ev.Stream, events.Any, ev)
			}
			if err != nil {
				return err
			}
			return c.JSON(http.StatusOK, map[string]any{"lesson_id": l.LessonID, "state": "retired"})
		}))
	}
}

type fixedEmbedder struct{}

func (fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range texts {
		out[i] = []float32{1, 0, 0}
	}
	return out, nil
}

// boardData is what the panels test stores, with the figures the page
// must show.
type boardData struct {
	hourly map[string][]float64 // "qa v2" → mean reward of each hour
	total  map[string][2]float64
	acc    map[string][2]int // correct, judged
}

// seedBoard stores six hours of evaluations of two types and two
// versions over two tenants, a rollout with a decision and its evidence,
// feedback, anomalies and lessons.
func seedBoard(e *env, t0 time.Time) boardData {
	d := boardData{hourly: map[string][]float64{}, total: map[string][2]float64{}, acc: map[string][2]int{}}
	e.startRollout()
	var st struct {
		Active *struct {
			RolloutID string `json:"rollout_id"`
		} `json:"active"`
	}
	if code := e.do(http.MethodGet, "/v1/ops/rollout", opKey, "", &st); code != http.StatusOK || st.Active == nil {
		e.t.Fatalf("rollout: %d", code)
	}
	id := st.Active.RolloutID
	for h := range 6 {
		for _, typ := range []string{"qa", "policy"} {
			for vi, v := range []string{"v1", "v2"} {
				k := typ + " " + v
				sum := 0.0
				for i := range 8 {
					// v2 improves over the hours; policy is harder
					r := math.Round((0.15+0.05*float64(vi*h)-0.2*b2f(typ == "policy")+0.1*float64(i%4)-0.1+0.04*math.Sin(float64(h*(vi+2))))*1000) / 1000
					outcome := "failure"
					if float64(i%4)*0.25+0.1*float64(vi*h) > 0.4 {
						outcome = "success"
					}
					tenant := []string{"acme", "globex"}[i%2]
					iid := fmt.Sprintf("%s-%s-%d-%d", typ, v, h, i)
					e.evalAt(iid, tenant, typ, v, 1, r, outcome, t0.Add(time.Duration(h)*time.Hour+time.Duration(i)*10*time.Second))
					sum += r
					tot := d.total[k]
					d.total[k] = [2]float64{tot[0] + r, tot[1] + 1}
					a := d.acc[k]
					d.acc[k] = [2]int{a[0] + int(b2f(outcome == "success")), a[1] + 1}
				}
				d.hourly[k] = append(d.hourly[k], math.Round(sum/8*1e6)/1e6)
			}
		}
	}
	ch := events.RolloutChange{RolloutID: id, Candidate: "v2", Stable: "v1", Step: 1, Weight: 0.25, Actor: "controller",
		Reason: "reward above stable at the second look",
		Evidence: &events.RolloutEvidence{Test: "mixture sequential test, alpha 0.05",
			Counts:    map[string]int{"candidate": 96, "stable": 96, "candidate.step": 40, "stable.step": 40},
			Means:     map[string]float64{"reward.candidate": 0.41, "reward.stable": 0.2, "reward.diff": 0.21, "answer_length.candidate": 41.5, "answer_length.stable": 44, "answer_length.diff": -2.5},
			Intervals: map[string]float64{"reward.lo": 0.035, "reward.hi": 0.385, "answer_length.lo": -9.1, "answer_length.hi": 4.1},
			Detail:    "reward 0.410 vs 0.200: the interval of the difference [0.035, 0.385] excludes 0"}}
	e.append(events.RolloutStream(id), "", &events.RolloutAdvanced{RolloutChange: ch})
	e.append(events.VersionStream("v2"), "", &events.AnomalyDetected{Kind: "drop_rate", TaskType: "policy", Version: "v2",
		Window: 40, Value: 0.15, Baseline: 0.05, Detector: "d1", Evidence: json.RawMessage(`{"count":40,"stable":"","compared_with_stable":false}`)})
	e.append(events.VersionStream("v2"), "", &events.AnomalyDetected{Kind: "length_drift", TaskType: "qa", Version: "v2",
		Window: 50, Value: 31.5, Baseline: 44, Detector: "d1", Evidence: json.RawMessage(`{"count":50,"stable":"v1","compared_with_stable":true,"last_interaction":"qa-v2-5-7"}`)})
	fb := []struct {
		iid, tenant string
		fi          events.FeedbackInterpreted
	}{
		{"qa-v2-5-0", "acme", events.FeedbackInterpreted{Polarity: 0.8, Strength: 0.7, Confidence: 0.91, Aspects: []string{"correctness"}}},
		{"qa-v2-5-1", "globex", events.FeedbackInterpreted{Polarity: -0.6, Strength: 0.8, Confidence: 0.74, Aspects: []string{"correctness"}, Correction: "9am"}},
		{"qa-v1-5-2", "acme", events.FeedbackInterpreted{Polarity: -0.4, Strength: 0.5, Confidence: 0.62, Aspects: []string{"length"}, Hint: "Answer in one sentence."}},
		{"policy-v2-5-3", "acme", events.FeedbackInterpreted{Polarity: 0.1, Strength: 0.2, Confidence: 0.31, Uncertain: true}},
	}
	for i, f := range fb {
		f.fi.InteractionID, f.fi.FeedbackID, f.fi.InterpreterVersion = f.iid, fmt.Sprintf("fb-%d", i), "embedded-4"
		e.append(events.InteractionStream(f.iid), f.tenant, &f.fi)
	}
	lesson := func(id, kind, stmt, state string, sc events.LessonScope, users int, rule string) {
		ch := events.LessonChange{LessonID: id, Kind: kind, Statement: stmt, Scope: sc, Users: users, Rule: rule, Actor: "learner"}
		e.append(events.LessonStream(id), sc.Tenant, &events.LessonProposed{LessonChange: ch})
		switch state {
		case "promoted":
			e.append(events.LessonStream(id), sc.Tenant, &events.LessonPromoted{LessonChange: ch})
		case "retired":
			e.append(events.LessonStream(id), sc.Tenant, &events.LessonRetired{LessonChange: ch})
		}
	}
	lesson("l-open", events.LessonFact, `For "When does the museum open?": the right answer is 9am.`, "proposed",
		events.LessonScope{Tenant: "acme", TaskType: "qa", Anchors: []string{"When does the museum open?"}}, 1, "1 user agrees, 0 disagree")
	lesson("l-live", events.LessonGuidance, "Answer in one sentence.", "promoted", events.LessonScope{Tenant: "acme", User: "u7"}, 1, "the same hint on 2 interactions")
	lesson("l-old", events.LessonFact, `For "Is the shop open on Sunday?": the right answer is no.`, "retired", events.LessonScope{Tenant: "globex", TaskType: "qa"}, 2, "2 users agree, 0 disagree")
	return d
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// failureLog holds five similar low-reward qa answers of acme and three
// of globex, and three of acme's policy answers.
func failureLog(t0 time.Time) *memory.FailureLog {
	fl := memory.NewFailureLog(0, 100)
	for i := range 3 {
		r := -0.3
		fl.Observe(memory.InteractionView{ID: fmt.Sprintf("policy-fail-%d", i), Tenant: "acme", Type: "policy", Version: "v1", Reward: &r,
			Prompt: "Can I return an opened item after 30 days?", Answer: "Yes, any time.", Aspects: []string{"policy"},
			Time: t0.Add(time.Duration(4*60+i) * time.Minute)}, []float32{0, 1, 0})
	}
	for i := range 8 {
		r := -0.5 - 0.05*float64(i)
		tenant := "acme"
		if i >= 5 {
			tenant = "globex"
		}
		fl.Observe(memory.InteractionView{ID: fmt.Sprintf("fail-%d", i), Tenant: tenant, Type: "qa", Version: "v2", Reward: &r,
			Prompt: "When does the museum open on holidays?", Answer: "The museum opens at 10am.", Correction: "9am",
			Aspects: []string{"correctness"}, Time: t0.Add(time.Duration(i) * time.Minute)}, []float32{1, 0.1 * float32(i%2), 0})
	}
	return fl
}

// page is one tab of the dashboard.
type page struct {
	c *cdp
	s string
}

func openPage(t *testing.T, c *cdp, url string) *page {
	t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	p := &page{c: c, s: att.SessionID}
	c.call(p.s, "Page.enable", map[string]any{}, nil)
	c.call(p.s, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1360, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil)
	c.call(p.s, "Emulation.setTimezoneOverride", map[string]any{"timezoneId": "UTC"}, nil)
	c.call(p.s, "Page.navigate", map[string]any{"url": url}, nil)
	c.waitEvent("Page.loadEventFired")
	return p
}

func (p *page) wait(cond string)          { p.c.t.Helper(); p.c.eval(p.s, waitFor(cond), nil) }
func (p *page) eval(expr string, out any) { p.c.t.Helper(); p.c.eval(p.s, expr, out) }
func (p *page) text(selector string) (s string) {
	p.c.t.Helper()
	p.eval(fmt.Sprintf(`document.querySelector(%q).textContent`, selector), &s)
	return
}

// quiet waits until the page has not changed for half a second.
func (p *page) quiet() {
	p.c.t.Helper()
	p.eval(`new Promise((resolve) => {
  let t = setTimeout(done, 500);
  const obs = new MutationObserver(() => { clearTimeout(t); t = setTimeout(done, 500); });
  function done() { obs.disconnect(); resolve(true); }
  obs.observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
})`, nil)
}

// screenshot writes the panel with id to dir/name.png, clipped to it.
func (p *page) screenshot(t *testing.T, dir, id, name string) {
	t.Helper()
	var r struct{ X, Y, W, H float64 }
	p.eval(fmt.Sprintf(`(() => { const b = document.getElementById(%q).getBoundingClientRect(); return {X: b.left + scrollX, Y: b.top + scrollY, W: b.width, H: b.height}; })()`, id), &r)
	var shot struct {
		Data string `json:"data"`
	}
	p.c.call(p.s, "Page.captureScreenshot", map[string]any{"format": "png",
		"clip": map[string]any{"x": math.Floor(r.X), "y": math.Floor(r.Y), "width": math.Ceil(r.X+r.W) - math.Floor(r.X) + 1,
			"height": math.Ceil(r.Y+r.H) - math.Floor(r.Y) + 1, "scale": 1}}, &shot)
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 200<<10 {
		t.Fatalf("screenshot of %s: %d bytes, over 200 KB", id, len(b))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardPanels loads the dashboard on live data in headless
// Chromium: the key is asked once and nothing is requested before it,
// each panel shows the stored figures, Approve and Retire append the
// lessons' events, and a tenant's key shows only that tenant. With
// DASHBOARD_SCREENSHOTS=DIR (relative to the repository root) it writes
// one PNG per panel to DIR:
//
//	DASHBOARD_SCREENSHOTS=docs/dashboard go test ./ops -run TestDashboardPanels
func TestDashboardPanels(t *testing.T) {
	path := chromiumPath(t)
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	var mu sync.Mutex
	var early []string // API requests without a key
	e := newEnvWith(t, tenantDeps(), func(ec *echo.Echo, store events.Store) {
		mountComponents(failureLog(t0))(ec, store)
		ec.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if strings.HasPrefix(c.Request().URL.Path, "/v1/") && c.Request().Header.Get("Authorization") == "" {
					mu.Lock()
					early = append(early, c.Request().URL.Path)
					mu.Unlock()
				}
				return next(c)
			}
		})
	})
	d := seedBoard(e, t0)

	c := startChromium(t, path)
	p := openPage(t, c, e.srv.URL+"/ops")
	// the key is asked for before anything is requested, with no error shown
	p.wait(`document.getElementById('key-dialog').open`)
	time.Sleep(300 * time.Millisecond) // anything the page would request on its own
	var errs string
	p.eval(`[...document.querySelectorAll('.err')].map(e => e.textContent).join('|')`, &errs)
	mu.Lock()
	if len(early) > 0 || errs != "" {
		t.Fatalf("before the key: requests %v, errors %q", early, errs)
	}
	mu.Unlock()
	if txt := p.text("#key-dialog"); !strings.Contains(txt, "operator key") || !strings.Contains(txt, "sessionStorage") {
		t.Fatalf("key prompt %q", txt)
	}
	p.eval(`document.getElementById('key').value = 'sk-op'; document.getElementById('key-ok').click(); true`, nil)
	p.wait(`!document.getElementById('key-dialog').open`)

	// scoreboard: n, mean reward with its interval, accuracy
	sb := `#scoreboard tr[data-type="qa"][data-version="v2"]`
	p.wait(`document.querySelector('` + sb + `') && document.querySelector('` + sb + `').cells[5].textContent.includes('%')`)
	row := p.text(sb)
	tot, acc := d.total["qa v2"], d.acc["qa v2"]
	wantMean := fmt.Sprintf("%.3f", tot[0]/tot[1])
	wantAcc := fmt.Sprintf("%.1f%%", 100*float64(acc[0])/float64(acc[1]))
	if !strings.Contains(row, "48") || !strings.Contains(row, wantMean+" [") || !strings.Contains(row, wantAcc+" [") || !strings.Contains(row, "of 48") {
		t.Fatalf("scoreboard row %q; want n 48, reward %s, accuracy %s", row, wantMean, wantAcc)
	}
	var rows int
	p.eval(`document.querySelectorAll('#scoreboard tr').length`, &rows)
	if rows != 4 {
		t.Fatalf("%d scoreboard rows, want 4 (2 types × 2 versions)", rows)
	}

	// charts: one point per hour for each (type, version), at the hourly means
	for _, k := range []string{"qa v2", "policy v1"} {
		typ := strings.Fields(k)[0]
		var ys []float64
		p.wait(fmt.Sprintf(`document.querySelectorAll('svg[data-type=%q][data-metric="reward"] g[data-series=%q] circle').length === 6`, typ, k))
		p.eval(fmt.Sprintf(`[...document.querySelectorAll('svg[data-type=%q][data-metric="reward"] g[data-series=%q] circle')].map(c => Number(c.dataset.y))`, typ, k), &ys)
		for i, y := range ys {
			if !near(y, d.hourly[k][i]) {
				t.Fatalf("%s reward chart: %v, want %v", k, ys, d.hourly[k])
			}
		}
		var n int
		p.eval(fmt.Sprintf(`document.querySelectorAll('svg[data-type=%q][data-metric="accuracy"] g[data-series=%q] circle').length`, typ, k), &n)
		if n != 6 {
			t.Fatalf("%s accuracy chart: %d points", k, n)
		}
	}
	var tip string
	p.eval(`document.querySelector('svg[data-type="qa"][data-metric="accuracy"] g[data-series="qa v2"] circle:last-of-type title').textContent`, &tip)
	if !strings.Contains(tip, "accuracy 100.0% (8 of 8)") {
		t.Fatalf("last qa v2 accuracy point %q", tip)
	}

	// the rollout timeline with the decision's evidence
	p.wait(`document.querySelector('#timeline li[data-type="rollout.advanced"]')`)
	tl := p.text(`#timeline li[data-type="rollout.advanced"]`)
	for _, want := range []string{"v2", "vs v1", "step 2", "25% of traffic", "by controller", "reward above stable", "mixture sequential test",
		"0.410", "0.200", "0.210 [0.035, 0.385]", "96 (step 40)", "excludes 0"} {
		if !strings.Contains(tl, want) {
			t.Fatalf("timeline decision %q lacks %q", tl, want)
		}
	}
	p.wait(`document.querySelector('#timeline li[data-type="rollout.started"]')`)

	// the feedback feed: polarity, confidence (a bar and its value), aspects, correction, hint
	p.wait(`document.querySelectorAll('#feedback li').length === 4`)
	var fbs []string
	p.eval(`[...document.querySelectorAll('#feedback li')].map(li => li.textContent)`, &fbs)
	if !strings.Contains(fbs[0], "uncertain") || !strings.Contains(fbs[3], "+0.80") || !strings.Contains(fbs[3], "0.910") ||
		!strings.Contains(fbs[2], "correction: 9am") || !strings.Contains(fbs[2], "globex") || !strings.Contains(fbs[1], "hint: Answer in one sentence.") {
		t.Fatalf("feedback feed %q", fbs)
	}
	var width string
	p.eval(`document.querySelectorAll('#feedback li')[3].querySelector('.meter > span').style.width`, &width)
	if width != "91%" {
		t.Fatalf("confidence bar %q, want 91%%", width)
	}

	// failure modes and anomalies
	p.wait(`document.querySelector('#failures tr[data-type="qa"]')`)
	if fm := p.text(`#failures tr[data-type="qa"]`); !strings.Contains(fm, "8") || !strings.Contains(fm, "museum opens at 10am") || !strings.Contains(fm, "correctness 8") {
		t.Fatalf("failure mode %q", fm)
	}
	p.wait(`document.querySelector('#anomalies li[data-type="anomaly.detected"]')`)
	if an := p.text(`#anomalies li`); !strings.Contains(an, "length_drift") || !strings.Contains(an, "value 31.500 vs baseline 44.000") ||
		!strings.Contains(an, "compared with stable v1") || !strings.Contains(an, "over 50 evaluations") {
		t.Fatalf("anomaly %q", an)
	}

	// lessons with their state and buttons
	p.wait(`document.querySelectorAll('#lessons tr').length === 3`)
	var states map[string]string
	p.eval(`Object.fromEntries([...document.querySelectorAll('#lessons tr')].map(tr => [tr.dataset.lesson, tr.dataset.state + ' ' +
		tr.querySelector('[data-lesson-action="approve"]').disabled + ' ' + tr.querySelector('[data-lesson-action="retire"]').disabled]))`, &states)
	if states["l-open"] != "proposed false false" || states["l-live"] != "promoted true false" || states["l-old"] != "retired true true" {
		t.Fatalf("lessons and their buttons %v", states)
	}
	if dir := os.Getenv("DASHBOARD_SCREENSHOTS"); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join("..", dir) // from the repository root, not this package
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.wait(`document.querySelector('#rollout-kv').textContent.includes('v2')`)
		// a viewport as tall as the page: nothing reflows while capturing
		var height int
		p.eval(`document.documentElement.scrollHeight`, &height)
		c.call(p.s, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1360, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
		p.quiet()
		for _, id := range []string{"rollout", "scoreboard", "charts", "timeline", "feedback", "failures", "anomalies", "lessons"} {
			p.screenshot(t, dir, "p-"+id, id)
		}
	}

	// Approve appends lesson.promoted and Retire (pressed twice) lesson.retired, as the operator
	decided := make(chan events.Event, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last, _ := e.store.LastPosition(ctx)
	go e.store.Subscribe(ctx, last, events.Filter{Types: events.LessonTypes}, func(ctx context.Context, ev events.Event) error {
		select {
		case decided <- ev:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	next := func(what string) events.LessonChange {
		t.Helper()
		select {
		case ev := <-decided:
			pl, err := events.Decode(&ev)
			if err != nil {
				t.Fatal(err)
			}
			ch, _ := events.LessonChangeOf(pl)
			if ev.Type != what {
				t.Fatalf("got %s, want %s", ev.Type, what)
			}
			return ch
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
		return events.LessonChange{}
	}
	p.eval(`document.getElementById('lesson-reason').value = 'checked the opening hours';
		document.querySelector('#lessons tr[data-lesson="l-open"] [data-lesson-action="approve"]').click(); true`, nil)
	if ch := next(events.TypeLessonPromoted); ch.LessonID != "l-open" || ch.Actor != "operator" || ch.Reason != "checked the opening hours" {
		t.Fatalf("approved %+v", ch)
	}
	p.wait(`document.querySelector('#lessons tr[data-lesson="l-open"]').dataset.state === 'promoted'`)
	p.eval(`document.getElementById('lesson-reason').value = 'the weights carry it';
		document.querySelector('#lessons tr[data-lesson="l-live"] [data-lesson-action="retire"]').click(); true`, nil)
	p.wait(`document.querySelector('#lessons tr[data-lesson="l-live"] [data-lesson-action="retire"]').textContent === 'Confirm retire'`)
	time.Sleep(200 * time.Millisecond) // what one press would have appended
	select {
	case ev := <-decided:
		t.Fatalf("one press of Retire appended %s", ev.Type)
	default:
	}
	p.eval(`document.querySelector('#lessons tr[data-lesson="l-live"] [data-lesson-action="retire"]').click(); true`, nil)
	if ch := next(events.TypeLessonRetired); ch.LessonID != "l-live" || ch.Actor != "operator" || ch.Reason != "the weights carry it" {
		t.Fatalf("retired %+v", ch)
	}
	p.wait(`document.querySelector('#lessons tr[data-lesson="l-live"]').dataset.state === 'retired'`)

	// the key was asked once; a reload of the tab does not ask again
	var prompts string
	p.eval(`document.body.dataset.keyPrompts`, &prompts)
	if prompts != "1" {
		t.Fatalf("the key was asked %s times", prompts)
	}
	c.call(p.s, "Page.reload", map[string]any{}, nil)
	c.waitEvent("Page.loadEventFired")
	p.wait(`document.querySelector('` + sb + `')`)
	var open bool
	p.eval(`document.getElementById('key-dialog').open || document.body.dataset.keyPrompts !== '0'`, &open)
	if open {
		t.Fatal("the reloaded tab asked for the key again")
	}

	// a tenant's key in another tab: that tenant's data only
	q := openPage(t, c, e.srv.URL+"/ops")
	q.wait(`document.getElementById('key-dialog').open`)
	q.eval(`document.getElementById('key').value = 'sk-acme'; document.getElementById('key-ok').click(); true`, nil)
	q.wait(`document.querySelectorAll('#feedback li').length === 3 && document.getElementById('timeline-note').textContent !== '' &&
		document.getElementById('anomalies-note').textContent !== ''`)
	var feed string
	q.eval(`document.getElementById('feedback').textContent`, &feed)
	if strings.Contains(feed, "globex") || strings.Contains(feed, "9am") {
		t.Fatalf("acme's feed shows globex's feedback: %q", feed)
	}
	q.wait(`document.querySelector('` + sb + `') && document.getElementById('scoreboard-note').textContent.includes('tenant')`)
	if row := q.text(sb); !strings.Contains(row, "24") {
		t.Fatalf("acme's scoreboard row %q, want its 24 evaluations", row)
	}
	q.wait(`document.getElementById('lessons').textContent.includes('museum')`)
	if ls := q.text("#lessons"); strings.Contains(ls, "Sunday") {
		t.Fatalf("acme's lessons show globex's: %q", ls)
	}
	if n := q.text("#timeline-note") + "|" + q.text("#anomalies-note"); n != "nothing recorded yet|nothing recorded yet" {
		t.Fatalf("acme's rollout timeline and anomalies: %q", n)
	}
	q.wait(`document.querySelector('#failures tr[data-type="qa"]')`)
	if fm := q.text(`#failures tr[data-type="qa"]`); !strings.Contains(fm, "correctness 5") {
		t.Fatalf("acme's failure mode %q, want its 5 interactions", fm)
	}
	q.wait(`document.getElementById('msg').textContent.includes('operator key')`)
}
