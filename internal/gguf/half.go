package gguf

import "math"

// Float16 converts f to IEEE 754 half precision, rounding to nearest even.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff == 0:
		return sign
	case int32(b>>23&0xff) == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// QuantizeQ8_0 packs len(x) (a multiple of 32) floats as Q8_0 blocks: a half
// precision scale then 32 signed bytes.
func QuantizeQ8_0(dst []byte, x []float32) []byte {
	for i := 0; i+32 <= len(x); i += 32 {
		var amax float32
		for _, v := range x[i : i+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		h := Float16(d)
		dst = append(dst, byte(h), byte(h>>8))
		for _, v := range x[i : i+32] {
			dst = append(dst, byte(int8(math.Round(float64(v*id)))))
		}
	}
	return dst
}
