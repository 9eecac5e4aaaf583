package hotpath

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is one target's medians over the rounds. Added latencies are
// the target's minus direct-to-mock's of the same round; NaN-free: -1
// where not measured (no direct target, or no process to read).
type Summary struct {
	Target string `json:"target"`
	Rounds int    `json:"rounds"`
	// Concurrency 1, non-streaming latency and streaming time to first
	// chunk, in ms, and the same added to direct's.
	P50          float64 `json:"c1_p50_ms"`
	P99          float64 `json:"c1_p99_ms"`
	AddedP50     float64 `json:"c1_added_p50_ms"`
	AddedP99     float64 `json:"c1_added_p99_ms"`
	TTFCP50      float64 `json:"ttfc_p50_ms"`
	TTFCP99      float64 `json:"ttfc_p99_ms"`
	AddedTTFCP50 float64 `json:"ttfc_added_p50_ms"`
	AddedTTFCP99 float64 `json:"ttfc_added_p99_ms"`
	// ReqPerSec at the concurrent load and its ratio to direct's.
	ReqPerSec   float64 `json:"req_per_s"`
	VsDirect    float64 `json:"vs_direct"`
	CPUSerial   float64 `json:"cpu_us_c1"`
	CPUConc     float64 `json:"cpu_us_concurrent"`
	MockCPUConc float64 `json:"mock_cpu_us_concurrent"`
	// Totals over the rounds: acknowledged, recorded (store), evaluated
	// (store); -1 where the target has none.
	Acknowledged int `json:"acknowledged"`
	Shed         int `json:"shed"`
	Recorded     int `json:"recorded"`
	Evaluated    int `json:"evaluated"`
	// EvalAtStop is the median fraction of recorded interactions evaluated
	// when the concurrent load stopped; DrainS the median drain time, the
	// worst round's in MaxDrainS (-1: some round never drained).
	EvalAtStop float64 `json:"evaluated_at_stop_fraction"`
	DrainS     float64 `json:"drain_s"`
	MaxDrainS  float64 `json:"max_drain_s"`
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if x >= 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 || len(v) < len(xs) {
		return -1
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// signedMedian is median for values that may be negative (an added
// latency can be below direct's by noise).
func signedMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func summarise(runs []TargetRun, names []string) []Summary {
	direct := map[int]TargetRun{}
	for _, r := range runs {
		if r.Target == TargetDirect {
			direct[r.Round] = r
		}
	}
	var out []Summary
	for _, name := range names {
		s := Summary{Target: name, AddedP50: -1, AddedP99: -1, AddedTTFCP50: -1, AddedTTFCP99: -1, VsDirect: -1, EvalAtStop: -1, DrainS: -1, MaxDrainS: -1}
		var p50, p99, t50, t99, a50, a99, at50, at99, rps, vs, cpu1, cpuc, mcpu, evs, drain []float64
		first := true
		for _, r := range runs {
			if r.Target != name {
				continue
			}
			s.Rounds++
			p50, p99 = append(p50, r.Serial.Latency.P50), append(p99, r.Serial.Latency.P99)
			t50, t99 = append(t50, r.SerialSSE.TTFC.P50), append(t99, r.SerialSSE.TTFC.P99)
			rps = append(rps, r.Concurrent.ReqPerSec)
			cpu1, cpuc, mcpu = append(cpu1, r.CPUSerial), append(cpuc, r.CPUConcurrent), append(mcpu, r.MockCPUConcurr)
			if d, ok := direct[r.Round]; ok {
				a50, a99 = append(a50, r.Serial.Latency.P50-d.Serial.Latency.P50), append(a99, r.Serial.Latency.P99-d.Serial.Latency.P99)
				at50, at99 = append(at50, r.SerialSSE.TTFC.P50-d.SerialSSE.TTFC.P50), append(at99, r.SerialSSE.TTFC.P99-d.SerialSSE.TTFC.P99)
				if d.Concurrent.ReqPerSec > 0 {
					vs = append(vs, r.Concurrent.ReqPerSec/d.Concurrent.ReqPerSec)
				}
			}
			if first {
				s.Recorded, s.Evaluated = r.Recorded, r.Evaluated
				first = false
			} else {
				s.Recorded = addKnown(s.Recorded, r.Recorded)
				s.Evaluated = addKnown(s.Evaluated, r.Evaluated)
			}
			s.Acknowledged += r.Acknowledged
			s.Shed += r.Shed
			if r.RecordedAtStop > 0 && r.EvaluatedAtStop >= 0 {
				evs = append(evs, float64(r.EvaluatedAtStop)/float64(r.RecordedAtStop))
			}
			if r.EvaluatedAtStop >= 0 {
				drain = append(drain, r.DrainS)
			}
		}
		s.P50, s.P99, s.TTFCP50, s.TTFCP99 = median(p50), median(p99), median(t50), median(t99)
		if len(a50) > 0 {
			s.AddedP50, s.AddedP99 = signedMedian(a50), signedMedian(a99)
			s.AddedTTFCP50, s.AddedTTFCP99 = signedMedian(at50), signedMedian(at99)
		}
		s.ReqPerSec = median(rps)
		if len(vs) > 0 {
			s.VsDirect = median(vs)
		}
		s.CPUSerial, s.CPUConc, s.MockCPUConc = median(cpu1), median(cpuc), median(mcpu)
		if len(evs) > 0 {
			s.EvalAtStop = median(evs)
		}
		if len(drain) > 0 {
			s.DrainS = median(drain)
			if !slices.Contains(drain, -1) {
				s.MaxDrainS = slices.Max(drain)
			}
		}
		out = append(out, s)
	}
	return out
}

func addKnown(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return a + b
}

func num(v float64, format string) string {
	if v < 0 && v == -1 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func signed(v float64) string {
	return fmt.Sprintf("%+.2f", v)
}

// Markdown is the report as a markdown table (medians over the rounds)
// with the machine and the settings above it.
func (r *Report) Markdown() string {
	var b strings.Builder
	m := r.Machine
	loads := make([]string, len(m.Load))
	for i, l := range m.Load {
		loads[i] = fmt.Sprintf("%.2f", l)
	}
	lo, hi := -1.0, -1.0
	if len(m.Load) > 0 {
		lo, hi = slices.Min(m.Load), slices.Max(m.Load)
	}
	fmt.Fprintf(&b, "Machine: nproc %d, %s, %s; 1-minute load average %.2f–%.2f during the run.\n\n", m.NProc, m.CPUModel, m.Go, lo, hi)
	c := r.Config
	fmt.Fprintf(&b, "Medians of %d interleaved rounds. Concurrency 1: %d non-streaming and %d streaming requests per target and round; then %d connections for %.0f s. The mock answers %d tokens at once.\n\n",
		c.Rounds, c.Serial, c.Serial, c.Conns, c.DurationS, c.MockTokens)
	fmt.Fprintf(&b, "| target | c=1 p50 / p99 ms | added p50 / p99 ms | TTFC added p50 / p99 ms | req/s at %d conns | × direct | CPU µs/req c=1 | CPU µs/req c=%d | recorded / acknowledged | shed (503) | evaluated at load stop | drain s (median / max) |\n", c.Conns, c.Conns)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Summary {
		added, ttfc, vs := "–", "–", "–"
		if s.AddedP50 != -1 && s.Target != TargetDirect {
			added = signed(s.AddedP50) + " / " + signed(s.AddedP99)
			ttfc = signed(s.AddedTTFCP50) + " / " + signed(s.AddedTTFCP99)
			vs = fmt.Sprintf("%.2f", s.VsDirect)
		}
		rec := "–"
		if s.Recorded >= 0 {
			rec = fmt.Sprintf("%d / %d", s.Recorded, s.Acknowledged)
		}
		ev, drain := "–", "–"
		if s.EvalAtStop >= 0 {
			ev = fmt.Sprintf("%.0f%%", 100*s.EvalAtStop)
			drain = num(s.DrainS, "%.2f") + " / " + num(s.MaxDrainS, "%.2f")
			if s.DrainS == -1 {
				drain = "not drained"
			}
		}
		fmt.Fprintf(&b, "| %s | %.3f / %.3f | %s | %s | %.0f | %s | %s | %s | %s | %d | %s | %s |\n", s.Target, s.P50, s.P99, added, ttfc,
			s.ReqPerSec, vs, num(s.CPUSerial, "%.0f"), num(s.CPUConc, "%.0f"), rec, s.Shed, ev, drain)
	}
	return b.String()
}
