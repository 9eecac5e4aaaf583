package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descActive  = prometheus.NewDesc("citizen_rollout_active", "1 while a rollout runs.", nil, nil)
	descWeight  = prometheus.NewDesc("citizen_rollout_weight", "The candidate's traffic share of the running rollout.", []string{"candidate", "stable"}, nil)
	descStep    = prometheus.NewDesc("citizen_rollout_step", "The step of the running rollout (0-based).", []string{"candidate", "stable"}, nil)
	descPaused  = prometheus.NewDesc("citizen_rollout_paused", "1 while the running rollout is paused.", nil, nil)
	descWaiting = prometheus.NewDesc("citizen_rollout_waiting_candidates", "Accepted candidates waiting for a rollout.", nil, nil)
	descEvals   = prometheus.NewDesc("citizen_rollout_evaluations", "Evaluations counted in the running rollout, per arm.", []string{"arm"}, nil)
	descPos     = prometheus.NewDesc("citizen_rollout_position", "Store position of the last event the controller applied.", nil, nil)
)

// collector exports the controller's state on each scrape.
type collector struct{ c *Controller }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descActive, descWeight, descStep, descPaused, descWaiting, descEvals, descPos} {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	k.c.mu.Lock()
	st := k.c.st
	pos, waiting := st.pos, len(st.waiting)
	var a active
	running := st.active != nil
	if running {
		a = *st.active
	}
	k.c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descPos, prometheus.GaugeValue, float64(pos))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(waiting))
	if !running {
		ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, 0)
		return
	}
	paused := 0.0
	if a.paused {
		paused = 1
	}
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused)
	ch <- prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, a.weight, a.candidate, a.stable)
	ch <- prometheus.MustNewConstMetric(descStep, prometheus.GaugeValue, float64(a.step), a.candidate, a.stable)
	ch <- prometheus.MustNewConstMetric(descEvals, prometheus.GaugeValue, float64(a.all[armCandidate].reward.n), "candidate")
	ch <- prometheus.MustNewConstMetric(descEvals, prometheus.GaugeValue, float64(a.all[armStable].reward.n), "stable")
}

// Register adds the controller's metrics to reg: citizen_rollout_active,
// _weight and _step (labels candidate, stable), _paused,
// _waiting_candidates, _evaluations (label arm), _position, and
// citizen_rollout_decisions_total (labels type, reason code) for the
// decisions this controller appended.
func (c *Controller) Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{c}); err != nil {
		return err
	}
	return reg.Register(c.decisions)
}
