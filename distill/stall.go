package distill

import (
	"sync"
	"time"
)

// stallWatch calls fire once no step has been reported for a while. It is
// armed by the first step, so the work a trainer does before its first
// step (reference logprobs, loading) is bounded by the training timeout
// alone.
type stallWatch struct {
	after time.Duration
	fire  func()

	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

func newStallWatch(after time.Duration, fire func()) *stallWatch {
	return &stallWatch{after: after, fire: fire}
}

// step reports a step: the watch (re)starts its countdown.
func (w *stallWatch) step() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.after, w.fire)
		return
	}
	w.timer.Reset(w.after)
}

// stop disarms the watch; later steps are ignored.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
