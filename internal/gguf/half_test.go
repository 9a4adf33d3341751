package gguf

import (
	"math"
	"testing"
)

// half2float decodes an IEEE 754 half precision value.
func half2float(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * float32(math.Ldexp(mant, -24))
	case 0x1f:
		if mant != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+mant/1024, exp-15))
}

func TestFloat16(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},                       // largest half
		{65519, 0x7bff},                       // rounds down
		{65520, 0x7c00},                       // rounds up to +Inf
		{1e6, 0x7c00},                         // overflow
		{-1e6, 0xfc00},                        // overflow
		{1e-8, 0x0000},                        // underflow
		{float32(math.Ldexp(1, -14)), 0x0400}, // smallest normal
		{float32(math.Ldexp(1, -24)), 0x0001}, // smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000}, // tie rounds to even (0)
		{float32(math.Ldexp(3, -25)), 0x0002}, // tie rounds to even (2)
		{float32(math.Ldexp(1.5, -24)) * 1.0001, 0x0002}, // above the tie
		{float32(math.Ldexp(1023, -24)), 0x03ff},         // largest subnormal
		{1 + 1.0/2048, 0x3c00},                           // tie rounds to even
		{1 + 3.0/2048, 0x3c02},                           // tie rounds to even
		{0.1, 0x2e66},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
	}
	for _, tt := range tests {
		if got := Float16(tt.in); got != tt.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
}

func TestFloat16NaN(t *testing.T) {
	for _, bits := range []uint32{0x7fc00000, 0x7f800001, 0xffc00000, 0x7f802000} {
		h := Float16(math.Float32frombits(bits))
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
			t.Errorf("Float16(NaN %#08x) = %#04x, not a NaN", bits, h)
		}
		if (h&0x8000 != 0) != (bits&0x80000000 != 0) {
			t.Errorf("Float16(NaN %#08x) = %#04x lost the sign", bits, h)
		}
	}
}

// Every half value converts back to itself.
func TestFloat16RoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := half2float(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := Float16(f); got != uint16(h) {
			t.Fatalf("Float16(half2float(%#04x) = %g) = %#04x", h, f, got)
		}
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i-16) / 4 // -4 .. 3.75
	}
	b := QuantizeQ8_0(nil, x)
	if len(b) != 34 {
		t.Fatalf("32 values quantized to %d bytes, want 34", len(b))
	}
	scale := half2float(uint16(b[0]) | uint16(b[1])<<8)
	want := float32(4.0 / 127)
	if math.Abs(float64(scale-want)) > float64(want)/1000 {
		t.Errorf("scale = %g, want about %g", scale, want)
	}
	for i, v := range x {
		q := int8(b[2+i])
		if got := float32(q) * scale; math.Abs(float64(got-v)) > float64(scale) {
			t.Errorf("x[%d] = %g dequantizes to %g (q=%d)", i, v, got, q)
		}
	}
	if q := int8(b[2]); q != -127 {
		t.Errorf("the largest magnitude quantizes to %d, want -127", q)
	}

	// Appends to dst, block after block.
	prefix := []byte{0xaa}
	b = QuantizeQ8_0(prefix, append(x, x...))
	if len(b) != 1+68 || b[0] != 0xaa {
		t.Errorf("two blocks after a prefix: %d bytes", len(b))
	}

	// A zero block has scale 0 and zero values.
	b = QuantizeQ8_0(nil, make([]float32, 32))
	for i, c := range b {
		if c != 0 {
			t.Fatalf("zero block byte %d = %#x", i, c)
		}
	}

	// A partial trailing block is dropped.
	if b := QuantizeQ8_0(nil, make([]float32, 40)); len(b) != 34 {
		t.Errorf("40 values: %d bytes, want 34", len(b))
	}
}
