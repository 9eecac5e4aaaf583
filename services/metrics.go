package services

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"citizen/distill"
	"citizen/events"
	"citizen/events/bus"
)

// workerMetrics are the worker roles' metrics, labelled by handler (the
// evaluator's event age is reflection's lag):
//
//	citizen_worker_event_age_seconds{handler}      event time (a recorded interaction: its request's start) to handled
//	citizen_worker_handle_errors_total{handler}    failed handler attempts (retried, then poisoned)
//	citizen_bus_poison_messages_total{worker}      messages set aside on the poison topic
type workerMetrics struct {
	age    *prometheus.HistogramVec
	errs   *prometheus.CounterVec
	poison *prometheus.CounterVec
}

func newWorkerMetrics(reg prometheus.Registerer) (*workerMetrics, error) {
	m := &workerMetrics{
		age: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "citizen_worker_event_age_seconds",
			Help:    "Time from an event's time (a recorded interaction's: its request's start) to the end of its handling, per worker handler (the evaluator's is reflection's lag).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60, 300}}, []string{"handler"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "citizen_worker_handle_errors_total",
			Help: "Failed handler attempts per worker handler (retried, and set aside on the poison topic after bus.max_attempts)."}, []string{"handler"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "citizen_bus_poison_messages_total",
			Help: "Messages a worker set aside on the poison topic."}, []string{"worker"}),
	}
	for _, c := range []prometheus.Collector{m.age, m.errs, m.poison} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observe wraps h's handler with the age and error metrics.
func (m *workerMetrics) observe(h bus.EventHandler) bus.EventHandler {
	handle, age, errs := h.Handle, m.age.WithLabelValues(h.Name), m.errs.WithLabelValues(h.Name)
	h.Handle = func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		out, err := handle(ctx, ev)
		if err != nil {
			errs.Inc()
		} else {
			age.Observe(time.Since(ev.Time).Seconds())
		}
		return out, err
	}
	return h
}

// poisonCounter counts what a worker publishes to the poison topic.
type poisonCounter struct {
	message.Publisher
	n prometheus.Counter
}

func (p poisonCounter) Publish(topic string, msgs ...*message.Message) error {
	err := p.Publisher.Publish(topic, msgs...)
	if err == nil {
		p.n.Add(float64(len(msgs)))
	}
	return err
}

// registerDistillerMetrics exposes the distiller's cycles:
//
//	citizen_distill_cycles_total                weights.trained events (accepted or rejected) in the store
//	citizen_distill_last_cycle_accepted         1 if the last cycle's candidate passed the gate, else 0
//	citizen_distill_last_train_seconds          the last training run's duration in this process
//	citizen_distill_abandoned_cycles_total      cycles this process abandoned for a promoted lesson
//	citizen_distill_training                    1 while a cycle runs in this process
func registerDistillerMetrics(reg prometheus.Registerer, d *distill.Distiller) error {
	fs := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "citizen_distill_cycles_total", Help: "Training cycles recorded (weights.trained events, accepted or rejected)."},
			func() float64 { return float64(d.Status().Cycles) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "citizen_distill_last_cycle_accepted", Help: "1 if the last recorded cycle's candidate passed the offline gate, else 0."},
			func() float64 {
				if lc := d.Status().LastCycle; lc != nil && lc.Accepted {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "citizen_distill_last_train_seconds", Help: "Duration of the last training run in this process."},
			func() float64 { return d.Status().TrainTime.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "citizen_distill_abandoned_cycles_total", Help: "Cycles this process abandoned for a lesson their data did not know."},
			func() float64 { return float64(d.Status().Abandoned) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "citizen_distill_training", Help: "1 while a training cycle runs in this process."},
			func() float64 {
				if s := d.Status().State; s != "" && s != "idle" {
					return 1
				}
				return 0
			}),
	}
	for _, c := range fs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// workerMetrics returns the process's worker metrics, registered once.
func (a *App) workerMetrics() (*workerMetrics, error) {
	a.workerMetricsOnce.Do(func() { a.workerMetricsV, a.workerMetricsErr = newWorkerMetrics(a.metrics()) })
	return a.workerMetricsV, a.workerMetricsErr
}
