package workplace

import (
	"errors"
	"testing"
)

func TestParseDrift(t *testing.T) {
	d, err := ParseDrift("500:refund_days=60,shipping_fee=$5.99; 100:segment.b.verbosity=terse;900:family=percentage")
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 3 || d[0].String() != "500:refund_days=60,shipping_fee=$5.99" {
		t.Fatalf("parsed %v", d)
	}
	base := InitialWorld()
	cases := []struct {
		i                int
		refund, version  int
		fee              float64
		bVerbosity       string
		percentageActive bool
	}{
		{0, 30, 1, 4.99, "detailed", false},
		{99, 30, 1, 4.99, "detailed", false},
		{100, 30, 1, 4.99, "terse", false},
		{499, 30, 1, 4.99, "terse", false},
		{500, 60, 2, 5.99, "terse", false},
		{900, 60, 2, 5.99, "terse", true},
	}
	for _, c := range cases {
		w := d.WorldAt(base, c.i)
		if w.Policy.RefundDays != c.refund || w.Policy.Version != c.version || w.Policy.ShippingFee != c.fee ||
			w.Segments["b"].Verbosity != c.bVerbosity || w.Active("percentage") != c.percentageActive {
			t.Errorf("world at %d: %+v", c.i, w)
		}
	}
	if base.Segments["b"].Verbosity != "detailed" || base.Active("percentage") {
		t.Error("WorldAt changed its base")
	}
	for _, bad := range []string{"x:refund_days=1", "10:refund_days", "10:refund_days=abc", "10:support_open=25",
		"10:family=poetry", "10:segment.a.verbosity=loud", "10:segment.a.mood=happy", "10:colour=red"} {
		if _, err := ParseDrift(bad); !errors.Is(err, ErrBadDrift) {
			t.Errorf("ParseDrift(%q) = %v, want ErrBadDrift", bad, err)
		}
	}
}

func TestDefaultDrift(t *testing.T) {
	d := DefaultDrift(1000)
	if err := d.Validate(InitialWorld()); err != nil {
		t.Fatal(err)
	}
	w := d.WorldAt(InitialWorld(), 999)
	if w.Policy.RefundDays != 60 || w.Segments["a"].Verbosity != "detailed" || !w.Active("percentage") {
		t.Errorf("world after default drift: %+v", w)
	}
	if w := d.WorldAt(InitialWorld(), 249); w.Policy.RefundDays != 30 {
		t.Errorf("refund changed before 250")
	}
}
