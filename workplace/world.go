package workplace

import (
	"fmt"
	"maps"
	"slices"
)

// Policy is the versioned company policy that the policy family asks about. Its answers change
// over time through the drift schedule.
type Policy struct {
	Version          int     `json:"version"`
	RefundDays       int     `json:"refund_days"`
	ShippingFee      float64 `json:"shipping_fee"`
	FreeShippingOver float64 `json:"free_shipping_over"`
	SupportOpen      int     `json:"support_open"`  // hour of day, 0..23
	SupportClose     int     `json:"support_close"` // hour of day, 0..23
}

// DefaultPolicy is the policy at time zero, the one the corpus teaches.
func DefaultPolicy() Policy {
	return Policy{Version: 1, RefundDays: 30, ShippingFee: 4.99, FreeShippingOver: 50, SupportOpen: 9, SupportClose: 17}
}

// World is everything the right answers and the users' judgements depend on at one moment.
// A World is a value; Clone it before changing it.
type World struct {
	Policy   Policy                 `json:"policy"`
	Segments map[string]Preferences `json:"segments"`
	Families []string               `json:"families"` // active task families
}

// InitialWorld is the world at time zero: the default policy, the default segments, and every
// family except the late ones (those that first appear through drift).
func InitialWorld() World {
	return World{Policy: DefaultPolicy(), Segments: DefaultSegments(), Families: InitialFamilies()}
}

// Clone returns a deep copy.
func (w World) Clone() World {
	return World{Policy: w.Policy, Segments: maps.Clone(w.Segments), Families: slices.Clone(w.Families)}
}

// Active reports whether family name is active.
func (w World) Active(name string) bool { return slices.Contains(w.Families, name) }

func (p Policy) String() string {
	return fmt.Sprintf("v%d refund=%dd shipping=%s free-over=%s support=%s-%s", p.Version, p.RefundDays,
		fmtMoney(p.ShippingFee), fmtMoney(p.FreeShippingOver), fmtHour(p.SupportOpen), fmtHour(p.SupportClose))
}
