package workplace

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrBadDrift is returned for a drift event that names an unknown setting or an invalid value.
var ErrBadDrift = errors.New("workplace: bad drift event")

// DriftEvent changes the world for every conversation whose index is At or later.
//
// Set keys: refund_days, shipping_fee, free_shipping_over, support_open, support_close (policy
// fields; any of them bumps the policy version); family (adds an active family);
// segment.NAME.verbosity / .tone / .format (a segment's preference; "" or "any" clears it).
type DriftEvent struct {
	At  int               `json:"at"`
	Set map[string]string `json:"set"`
}

// Drift is a schedule of drift events.
type Drift []DriftEvent

// Apply changes w in place.
func (e DriftEvent) Apply(w *World) error {
	keys := make([]string, 0, len(e.Set))
	for k := range e.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	policyChanged := false
	for _, k := range keys {
		v := e.Set[k]
		bad := func(err error) error { return fmt.Errorf("%w: %s=%s: %v", ErrBadDrift, k, v, err) }
		switch k {
		case "refund_days", "support_open", "support_close":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (k != "refund_days" && n > 23) {
				return bad(fmt.Errorf("want an integer in range"))
			}
			switch k {
			case "refund_days":
				w.Policy.RefundDays = n
			case "support_open":
				w.Policy.SupportOpen = n
			default:
				w.Policy.SupportClose = n
			}
			policyChanged = true
		case "shipping_fee", "free_shipping_over":
			f, err := strconv.ParseFloat(strings.TrimPrefix(v, "$"), 64)
			if err != nil || f < 0 {
				return bad(fmt.Errorf("want a non-negative amount"))
			}
			if k == "shipping_fee" {
				w.Policy.ShippingFee = f
			} else {
				w.Policy.FreeShippingOver = f
			}
			policyChanged = true
		case "family":
			if FamilyByName(v) == nil {
				return bad(fmt.Errorf("unknown family"))
			}
			if !w.Active(v) {
				w.Families = append(w.Families, v)
			}
		default:
			parts := strings.Split(k, ".")
			if len(parts) != 3 || parts[0] != "segment" {
				return bad(fmt.Errorf("unknown setting"))
			}
			if v == "any" {
				v = ""
			}
			p := w.Segments[parts[1]]
			switch parts[2] {
			case "verbosity":
				if !slices.Contains([]string{"", "terse", "detailed"}, v) {
					return bad(fmt.Errorf("want terse or detailed"))
				}
				p.Verbosity = v
			case "tone":
				if !slices.Contains([]string{"", "formal", "casual"}, v) {
					return bad(fmt.Errorf("want formal or casual"))
				}
				p.Tone = v
			case "format":
				if !slices.Contains([]string{"", "plain"}, v) {
					return bad(fmt.Errorf("want plain"))
				}
				p.Format = v
			default:
				return bad(fmt.Errorf("unknown preference"))
			}
			if w.Segments == nil {
				w.Segments = map[string]Preferences{}
			}
			w.Segments[parts[1]] = p
		}
	}
	if policyChanged {
		w.Policy.Version++
	}
	return nil
}

// String renders the event in ParseDrift's syntax.
func (e DriftEvent) String() string {
	keys := make([]string, 0, len(e.Set))
	for k := range e.Set {
		keys = append(keys, k+"="+e.Set[k])
	}
	sort.Strings(keys)
	return strconv.Itoa(e.At) + ":" + strings.Join(keys, ",")
}

// Validate applies every event to a copy of base and reports the first error.
func (d Drift) Validate(base World) error {
	w := base.Clone()
	for _, e := range d {
		if e.At < 0 {
			return fmt.Errorf("%w: negative index %d", ErrBadDrift, e.At)
		}
		if err := e.Apply(&w); err != nil {
			return err
		}
	}
	return nil
}

// WorldAt is the world seen by conversation i: base with every event with At <= i applied in
// order of At (stable for equal At). Events that fail to apply are skipped; Validate first.
func (d Drift) WorldAt(base World, i int) World {
	w := base.Clone()
	for _, e := range d.sorted() {
		if e.At > i {
			break
		}
		_ = e.Apply(&w)
	}
	return w
}

func (d Drift) sorted() Drift {
	s := slices.Clone(d)
	slices.SortStableFunc(s, func(a, b DriftEvent) int { return a.At - b.At })
	return s
}

// ParseDrift parses "AT:key=value,key=value;AT:key=value", for example
// "500:refund_days=60;1000:segment.a.verbosity=detailed;1500:family=percentage".
func ParseDrift(s string) (Drift, error) {
	var d Drift
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		at, rest, ok := strings.Cut(part, ":")
		n, err := strconv.Atoi(strings.TrimSpace(at))
		if !ok || err != nil {
			return nil, fmt.Errorf("%w: %q: want AT:key=value", ErrBadDrift, part)
		}
		e := DriftEvent{At: n, Set: map[string]string{}}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: %q: want key=value", ErrBadDrift, kv)
			}
			e.Set[k] = v
		}
		d = append(d, e)
	}
	return d, d.Validate(InitialWorld())
}

// DefaultDrift is a schedule over n interactions: at n/4 the refund window goes from 30 to 60
// days, at n/2 segment a flips from terse to detailed, at 3n/4 the percentage family appears.
func DefaultDrift(n int) Drift {
	return Drift{
		{At: n / 4, Set: map[string]string{"refund_days": "60"}},
		{At: n / 2, Set: map[string]string{"segment.a.verbosity": "detailed"}},
		{At: 3 * n / 4, Set: map[string]string{"family": "percentage"}},
	}
}
