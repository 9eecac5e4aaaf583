package gateway

import (
	"math"
	"sync"
	"time"
)

// limiter enforces per-key requests and tokens per minute with token
// buckets: each bucket holds up to one minute's allowance and refills
// continuously. A request takes one request token at admission; its tokens
// (prompt + completion) are charged after it is answered, and a key whose
// token bucket is empty is refused until it refills. Safe for concurrent
// use.
type limiter struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*keyBuckets
}

type keyBuckets struct {
	reqs, toks bucket
}

type bucket struct {
	capacity float64 // per minute; 0 = unlimited
	level    float64
	last     time.Time
}

func (b *bucket) refill(now time.Time, perMinute int) {
	c := float64(perMinute)
	if b.capacity != c { // first use or the limit changed
		if b.last.IsZero() || b.level > c {
			b.level = c
		}
		b.capacity = c
	}
	if !b.last.IsZero() {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.capacity/60)
	}
	b.last = now
}

// wait is how long until the bucket holds need.
func (b *bucket) wait(need float64) time.Duration {
	if b.level >= need || b.capacity == 0 {
		return 0
	}
	return time.Duration((need - b.level) / (b.capacity / 60) * float64(time.Second))
}

func newLimiter() *limiter {
	return &limiter{now: time.Now, buckets: map[string]*keyBuckets{}}
}

// admit takes one request from the key's bucket. It returns ok=false and
// how long to wait when the key is over its request or token limit.
// rpm or tpm of 0 means unlimited.
func (l *limiter) admit(keyID string, rpm, tpm int) (bool, time.Duration, string) {
	if rpm <= 0 && tpm <= 0 {
		return true, 0, ""
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	kb := l.buckets[keyID]
	if kb == nil {
		kb = &keyBuckets{}
		l.buckets[keyID] = kb
	}
	if tpm > 0 {
		kb.toks.refill(now, tpm)
		if kb.toks.level < 1 {
			return false, kb.toks.wait(1), "tokens"
		}
	}
	if rpm > 0 {
		kb.reqs.refill(now, rpm)
		if kb.reqs.level < 1 {
			return false, kb.reqs.wait(1), "requests"
		}
		kb.reqs.level--
	}
	return true, 0, ""
}

// charge debits used tokens (the bucket may go negative: a large answer
// delays the next requests).
func (l *limiter) charge(keyID string, tpm, tokens int) {
	if tpm <= 0 || tokens <= 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	kb := l.buckets[keyID]
	if kb == nil {
		kb = &keyBuckets{}
		l.buckets[keyID] = kb
	}
	kb.toks.refill(now, tpm)
	kb.toks.level -= float64(tokens)
	l.mu.Unlock()
}
