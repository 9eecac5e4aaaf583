package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"citizen/model/safetensors"
)

// Test-only quantizers: straightforward (not ggml's error-minimising search) encoders of each
// block layout, written from the layout descriptions, so that a round trip through Dequantize
// checks that both sides agree on where every bit goes.

func putHalf(b []byte, x float32) { binary.LittleEndian.PutUint16(b, safetensors.Float32ToF16(x)) }

// halfAtLeast is the smallest half ≥ x (x ≥ 0), so a scale rounded to half never shrinks.
func halfAtLeast(x float32) uint16 {
	h := safetensors.Float32ToF16(x)
	if safetensors.F16ToFloat32(h) < x {
		h++
	}
	return h
}

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

func quantize(typ Type, x []float32) []byte {
	bs, ts := typ.BlockSize(), typ.TypeSize()
	out := make([]byte, len(x)/bs*ts)
	le := binary.LittleEndian
	for i := 0; i < len(x)/bs; i++ {
		v, b := x[i*bs:(i+1)*bs], out[i*ts:(i+1)*ts]
		switch typ {
		case F32:
			le.PutUint32(b, math.Float32bits(v[0]))
		case F16:
			putHalf(b, v[0])
		case BF16:
			le.PutUint16(b, safetensors.Float32ToBF16(v[0]))
		case Q8_0:
			amax := float32(0)
			for _, w := range v {
				amax = max(amax, abs(w))
			}
			putHalf(b, amax/127)
			d := half(b)
			for j, w := range v {
				b[2+j] = byte(int8(clamp(roundDiv(w, d), -127, 127)))
			}
		case Q4_0, Q5_0:
			levels, bias, qs := 15, 8, b[2:18]
			if typ == Q5_0 {
				levels, bias, qs = 31, 16, b[6:22]
			}
			amax := float32(0)
			for _, w := range v {
				amax = max(amax, abs(w))
			}
			putHalf(b, amax/float32(levels/2))
			d := half(b)
			var qh uint32
			for j, w := range v {
				q := clamp(roundDiv(w, d)+bias, 0, levels)
				packNibble(qs, j, q)
				qh |= uint32(q>>4&1) << j
			}
			if typ == Q5_0 {
				le.PutUint32(b[2:], qh)
			}
		case Q4_1, Q5_1:
			levels, qs := 15, b[4:20]
			if typ == Q5_1 {
				levels, qs = 31, b[8:24]
			}
			lo, hi := minMax(v)
			putHalf(b, (hi-lo)/float32(levels))
			putHalf(b[2:], lo)
			d, m := half(b), half(b[2:])
			var qh uint32
			for j, w := range v {
				q := clamp(roundDiv(w-m, d), 0, levels)
				packNibble(qs, j, q)
				qh |= uint32(q>>4&1) << j
			}
			if typ == Q5_1 {
				le.PutUint32(b[4:], qh)
			}
		case Q4_K, Q5_K:
			quantizeK45(typ, v, b)
		case Q6_K:
			quantizeQ6K(v, b)
		default:
			panic("no test quantizer for " + typ.String())
		}
	}
	return out
}

func abs(x float32) float32 { return float32(math.Abs(float64(x))) }

func roundDiv(w, d float32) int {
	if d == 0 {
		return 0
	}
	return int(math.Round(float64(w / d)))
}

func minMax(v []float32) (lo, hi float32) {
	lo, hi = v[0], v[0]
	for _, w := range v {
		lo, hi = min(lo, w), max(hi, w)
	}
	return lo, hi
}

// packNibble stores q's low four bits as weight j of a 32-weight block (j < 16 low nibbles).
func packNibble(qs []byte, j, q int) {
	if j < 16 {
		qs[j] |= byte(q & 15)
	} else {
		qs[j-16] |= byte(q&15) << 4
	}
}

// quantizeK45 encodes a Q4_K or Q5_K super-block: per sub-block an offset dmin·m ≥ −min and a
// scale d·sc that covers the range, both rounded up so every weight is representable.
func quantizeK45(typ Type, v []float32, b []byte) {
	levels := 15
	if typ == Q5_K {
		levels = 31
	}
	var mins, scales [8]float32
	var maxMin float32
	for s := 0; s < 8; s++ {
		lo, _ := minMax(v[32*s : 32*s+32])
		mins[s] = max(0, -lo)
		maxMin = max(maxMin, mins[s])
	}
	binary.LittleEndian.PutUint16(b[2:], halfAtLeast(maxMin/63))
	dmin := half(b[2:])
	var mq, sq [8]int
	var maxScale float32
	for s := 0; s < 8; s++ {
		if dmin > 0 {
			mq[s] = clamp(int(math.Ceil(float64(mins[s]/dmin))), 0, 63)
		}
		_, hi := minMax(v[32*s : 32*s+32])
		scales[s] = (hi + dmin*float32(mq[s])) / float32(levels)
		maxScale = max(maxScale, scales[s])
	}
	binary.LittleEndian.PutUint16(b, halfAtLeast(maxScale/63))
	d := half(b)
	for s := 0; s < 8; s++ {
		if d > 0 {
			sq[s] = clamp(int(math.Ceil(float64(scales[s]/d))), 0, 63)
		}
	}
	sc := b[4:16]
	for j := 0; j < 8; j++ { // inverse of scaleMinK4
		if j < 4 {
			sc[j] |= byte(sq[j] & 63)
			sc[j+4] |= byte(mq[j] & 63)
		} else {
			sc[j+4] = byte(sq[j]&15) | byte(mq[j]&15)<<4
			sc[j-4] |= byte(sq[j]>>4) << 6
			sc[j] |= byte(mq[j]>>4) << 6
		}
	}
	qs, qh := b[16:144], []byte(nil)
	if typ == Q5_K {
		qh, qs = b[16:48], b[48:176]
	}
	for s := 0; s < 8; s++ {
		ds, ms := d*float32(sq[s]), dmin*float32(mq[s])
		for l := 0; l < 32; l++ {
			q := clamp(roundDiv(v[32*s+l]+ms, ds), 0, levels)
			c := s / 2
			if s%2 == 0 {
				qs[32*c+l] |= byte(q & 15)
			} else {
				qs[32*c+l] |= byte(q&15) << 4
			}
			if qh != nil {
				qh[l] |= byte(q>>4&1) << s
			}
		}
	}
}

// quantizeQ6K encodes a Q6_K super-block: 16 sub-blocks of 16 with int8 scales.
func quantizeQ6K(v []float32, b []byte) {
	var scales [16]float32
	var maxScale float32
	for s := 0; s < 16; s++ {
		amax := float32(0)
		for _, w := range v[16*s : 16*s+16] {
			amax = max(amax, abs(w))
		}
		scales[s] = amax / 31
		maxScale = max(maxScale, scales[s])
	}
	binary.LittleEndian.PutUint16(b[208:], halfAtLeast(maxScale/127))
	d := half(b[208:])
	var sq [16]int
	for s := range sq {
		if d > 0 {
			sq[s] = clamp(int(math.Ceil(float64(scales[s]/d))), 0, 127)
		}
		b[192+s] = byte(int8(sq[s]))
	}
	ql, qh := b[0:128], b[128:192]
	for k, w := range v {
		s := k / 16
		q := clamp(roundDiv(w, d*float32(sq[s])), -32, 31) + 32
		n, r := k/128, k%128 // half of the super-block, position within it
		quarter, l := r/32, r%32
		// quarters 0,1 use low nibbles of ql[l], ql[l+32]; 2,3 the high nibbles.
		idx := 64*n + l + 32*(quarter%2)
		if quarter < 2 {
			ql[idx] |= byte(q & 15)
		} else {
			ql[idx] |= byte(q&15) << 4
		}
		qh[32*n+l] |= byte(q>>4&3) << (2 * quarter)
	}
}

// TestQuantRoundTrip quantizes random weights with the test quantizers and checks that
// Dequantize reconstructs every weight within the format's resolution: exactly for the float
// types, within one quantization step of the block's range for the others. A bit stored in the
// wrong place shows up as an error of the order of the whole range.
func TestQuantRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 4 * qk
	for _, typ := range referenceTypes {
		t.Run(typ.String(), func(t *testing.T) {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * 0.05
				if i%97 == 0 {
					x[i] = float32(r.NormFloat64()) // outliers
				}
			}
			if typ == Q4_K || typ == Q5_K {
				for i := 0; i < 32; i++ {
					x[i] = 0.3 + float32(i)*0.01 // a sub-block with no negative weight
				}
			}
			q := quantize(typ, x)
			y := make([]float32, n)
			if err := Dequantize(y, q, typ); err != nil {
				t.Fatal(err)
			}
			bs := max(typ.BlockSize(), 32)
			bits := map[Type]int{Q8_0: 8, Q4_0: 4, Q4_1: 4, Q5_0: 5, Q5_1: 5, Q4_K: 4, Q5_K: 5, Q6_K: 6}[typ]
			var worst, rms float64
			for blk := 0; blk < n/bs; blk++ {
				v, w := x[blk*bs:(blk+1)*bs], y[blk*bs:(blk+1)*bs]
				lo, hi := minMax(v)
				step := float64(hi-lo) / float64(int(1)<<bits-1)
				for i := range v {
					e := math.Abs(float64(v[i] - w[i]))
					rms += e * e
					switch {
					case typ == F32 && v[i] != w[i]:
						t.Fatalf("weight %d: %g became %g", blk*bs+i, v[i], w[i])
					case typ == F16 && w[i] != safetensors.F16ToFloat32(safetensors.Float32ToF16(v[i])):
						t.Fatalf("weight %d: %g became %g", blk*bs+i, v[i], w[i])
					case typ == BF16 && w[i] != safetensors.BF16ToFloat32(safetensors.Float32ToBF16(v[i])):
						t.Fatalf("weight %d: %g became %g", blk*bs+i, v[i], w[i])
					case bits > 0 && e > step:
						t.Fatalf("weight %d: %g became %g, error %g above one step %g", blk*bs+i, v[i], w[i], e, step)
					}
					worst = max(worst, e)
				}
			}
			t.Logf("max error %.3g, rms %.3g", worst, math.Sqrt(rms/n))
		})
	}
}

func TestDequantizeRejects(t *testing.T) {
	if err := Dequantize(make([]float32, 32), make([]byte, 10), Q4_0); err == nil {
		t.Error("short source accepted")
	}
	if err := Dequantize(make([]float32, 31), make([]byte, 18), Q4_0); err == nil {
		t.Error("partial block accepted")
	}
	if err := Dequantize(make([]float32, 256), make([]byte, 84), Q2_K); err == nil {
		t.Error("Q2_K accepted")
	}
}

// BenchmarkDequantize measures dequantization throughput per type; bytes/s count the source
// (quantized) bytes, and the weights/s metric the float32 outputs.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]float32, n)
	for _, typ := range referenceTypes {
		q := quantize(typ, x)
		b.Run(fmt.Sprintf("type=%s", typ), func(b *testing.B) {
			b.SetBytes(int64(len(q)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Dequantize(y, q, typ); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mweights/s")
		})
	}
}
