package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"citizen/model/safetensors"
)

// CanDequantize reports whether Dequantize handles type t.
func CanDequantize(t Type) bool {
	switch t {
	case F32, F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K:
		return true
	}
	return false
}

// Dequantize decodes src, a whole number of blocks of type t, into dst, which must hold exactly
// the weights those blocks encode (len(dst)/BlockSize blocks of TypeSize bytes). The arithmetic
// is ggml's in float32, operation for operation, so results equal ggml's and gguf-py's bit for
// bit (no fused multiply-adds).
//
// Block layouts (little-endian; d, dmin and m are IEEE halves):
//   - Q8_0: d, 32 int8 q; w = d·q.
//   - Q4_0: d, 16 bytes; byte j holds weight j in its low nibble and weight j+16 in its high
//     nibble; w = d·(q−8).
//   - Q4_1: d, m, 16 bytes as Q4_0; w = d·q + m.
//   - Q5_0: d, a uint32 of fifth bits (bit j for weight j), 16 bytes as Q4_0; w = d·(q−16).
//   - Q5_1: d, m, the fifth bits, 16 bytes; w = d·q + m.
//   - Q4_K: 256 weights in 8 sub-blocks of 32: d, dmin, 12 bytes packing eight 6-bit scales and
//     eight 6-bit mins, 128 bytes of nibbles (each 32 bytes hold two sub-blocks, low nibbles
//     first); w = d·scale·q − dmin·min.
//   - Q5_K: as Q4_K with 32 bytes of fifth bits after the scales (bit 2i of byte l for
//     sub-block 2i, weight l; bit 2i+1 for sub-block 2i+1).
//   - Q6_K: 256 weights in 16 sub-blocks of 16: 128 bytes of low nibbles, 64 bytes of high
//     2-bit pairs, 16 int8 scales, d; w = d·scale·(q−32).
func Dequantize(dst []float32, src []byte, t Type) error {
	if !CanDequantize(t) {
		return fmt.Errorf("%w: cannot dequantize %s", ErrUnsupported, t)
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if len(dst)%bs != 0 || len(src) != len(dst)/bs*ts {
		return fmt.Errorf("gguf: %d %s weights need %d bytes, got %d", len(dst), t, len(dst)/bs*ts, len(src))
	}
	nb := len(dst) / bs
	le := binary.LittleEndian
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case F16:
		tab := halfTable()
		for i := range dst {
			dst[i] = tab[le.Uint16(src[2*i:])]
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(le.Uint16(src[2*i:])) << 16)
		}
	case Q8_0:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*32 : (i+1)*32]
			d := half(b)
			for j, q := range b[2:34] {
				y[j] = d * float32(int8(q))
			}
		}
	case Q4_0:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*32 : (i+1)*32]
			d := half(b)
			for j, q := range b[2:18] {
				y[j] = d * float32(int(q&15)-8)
				y[j+16] = d * float32(int(q>>4)-8)
			}
		}
	case Q4_1:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*32 : (i+1)*32]
			d, m := half(b), half(b[2:])
			for j, q := range b[4:20] {
				y[j] = float32(d*float32(q&15)) + m
				y[j+16] = float32(d*float32(q>>4)) + m
			}
		}
	case Q5_0:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*32 : (i+1)*32]
			d := half(b)
			qh := le.Uint32(b[2:])
			for j, q := range b[6:22] {
				lo := int(q&15) | int(qh>>j&1)<<4
				hi := int(q>>4) | int(qh>>(j+16)&1)<<4
				y[j] = d * float32(lo-16)
				y[j+16] = d * float32(hi-16)
			}
		}
	case Q5_1:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*32 : (i+1)*32]
			d, m := half(b), half(b[2:])
			qh := le.Uint32(b[4:])
			for j, q := range b[8:24] {
				lo := int(q&15) | int(qh>>j&1)<<4
				hi := int(q>>4) | int(qh>>(j+16)&1)<<4
				y[j] = float32(d*float32(lo)) + m
				y[j+16] = float32(d*float32(hi)) + m
			}
		}
	case Q4_K:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*qk : (i+1)*qk]
			d, dmin := half(b), half(b[2:])
			scales, qs := b[4:16], b[16:144]
			for c := 0; c < 4; c++ { // 64 weights: sub-blocks 2c (low nibbles) and 2c+1 (high)
				s1, m1 := scaleMinK4(2*c, scales)
				s2, m2 := scaleMinK4(2*c+1, scales)
				d1, dm1 := d*float32(s1), dmin*float32(m1)
				d2, dm2 := d*float32(s2), dmin*float32(m2)
				q := qs[32*c : 32*c+32]
				o := y[64*c : 64*c+64]
				for l, v := range q {
					o[l] = float32(d1*float32(v&15)) - dm1
					o[l+32] = float32(d2*float32(v>>4)) - dm2
				}
			}
		}
	case Q5_K:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*qk : (i+1)*qk]
			d, dmin := half(b), half(b[2:])
			scales, qh, qs := b[4:16], b[16:48], b[48:176]
			for c := 0; c < 4; c++ {
				s1, m1 := scaleMinK4(2*c, scales)
				s2, m2 := scaleMinK4(2*c+1, scales)
				d1, dm1 := d*float32(s1), dmin*float32(m1)
				d2, dm2 := d*float32(s2), dmin*float32(m2)
				q := qs[32*c : 32*c+32]
				o := y[64*c : 64*c+64]
				sh := uint(2 * c)
				for l, v := range q {
					h := qh[l] >> sh
					o[l] = float32(d1*float32(v&15|(h&1)<<4)) - dm1
					o[l+32] = float32(d2*float32(v>>4|(h>>1&1)<<4)) - dm2
				}
			}
		}
	case Q6_K:
		for i := 0; i < nb; i++ {
			b := src[i*ts : (i+1)*ts]
			y := dst[i*qk : (i+1)*qk]
			d := half(b[208:])
			for n := 0; n < 2; n++ { // 128 weights each
				ql := b[64*n : 64*n+64]
				qh := b[128+32*n : 128+32*n+32]
				sc := b[192+8*n : 192+8*n+8]
				o := y[128*n : 128*n+128]
				for l := 0; l < 32; l++ {
					is := l / 16
					h := qh[l]
					q1 := int(ql[l]&15|(h&3)<<4) - 32
					q2 := int(ql[l+32]&15|(h>>2&3)<<4) - 32
					q3 := int(ql[l]>>4|(h>>4&3)<<4) - 32
					q4 := int(ql[l+32]>>4|(h>>6&3)<<4) - 32
					o[l] = d * float32(int8(sc[is])) * float32(q1)
					o[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
					o[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
					o[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
				}
			}
		}
	}
	return nil
}

// halfTable maps every IEEE half bit pattern to its float32 (256 KiB, built on first use).
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = safetensors.F16ToFloat32(uint16(h))
	}
	return &t
})

// half reads the IEEE half at b[0:2].
func half(b []byte) float32 { return safetensors.F16ToFloat32(binary.LittleEndian.Uint16(b)) }

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0–7) from the 12 bytes of a Q4_K or
// Q5_K block: bytes 0–3 hold scales 0–3 in their low six bits, bytes 4–7 mins 0–3; scales and
// mins 4–7 keep their low four bits in bytes 8–11 (scale low, min high) and their top two bits in
// the top bits of bytes 0–3 (scales) and 4–7 (mins).
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}
