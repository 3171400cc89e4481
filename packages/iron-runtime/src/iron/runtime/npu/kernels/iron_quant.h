//===- iron_quant.h - dequantizing IRON's packed weight groups --------*- C++ -*-===//
//
// One group of a packed q4, q8 or q8_16 row (iron.operators.quantized) to
// bf16, shared by qmatmul.cc (QGEMV, DequantRows) and qgemm.cc (QGEMM): each
// weight is scale * q + min, made exactly as quantized.dequantize models it.
// The fp16 scale and minimum become fp32 by integer work (subnormals
// normalized, infinities kept), and each is split into a bf16 high piece
// (its top 8 significant bits) and a bf16 low piece (the other 3, exact), so
// the bf16 x bf16 -> fp32 multiplies of the vector unit make scale * q
// exactly; a code becomes its bf16 bit pattern by integer work (no int ->
// float conversion on the scalar unit). The one rounding of scale * q + min
// is the accumulator add's, the one rounding to bf16 the to_vector<bfloat16>
// under conv_even. The code is IRON's own.
//
//===----------------------------------------------------------------------===//

#ifndef IRON_QUANT_H
#define IRON_QUANT_H

#include "iron_kernel.h"

namespace iron_quant {

// A group's fp16 field as the fp32 value it holds (exact), by integer work.
inline float f16_value(const uint8_t *p) {
  const uint32_t h = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1Fu) { // infinity or NaN
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) { // normal: rebias 15 -> 127
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) { // signed zero
    bits = sign;
  } else { // subnormal man * 2**-24: normal in fp32
    const uint32_t top = 31u - static_cast<uint32_t>(__builtin_clz(man));
    bits = sign | ((top + 103u) << 23) | ((man << (23u - top)) & 0x7FFFFFu);
  }
  return iron::f32_from_bits(static_cast<int32_t>(bits));
}

// An fp32 value of at most 11 significant bits as hi + lo, both bf16: hi
// its top 8 significant bits (the value truncated), lo the rest (at most 3
// bits, exact), or a zero of the value's sign when there is no rest (so
// hi * q + lo * q has the sign of scale * q when that is zero). An infinity
// or NaN is all hi (a NaN kept a NaN).
struct Pieces {
  bfloat16 hi;
  bfloat16 lo;
};

inline Pieces pieces(float v) {
  const int32_t bits = iron::bits_of_f32(v);
  int32_t top = static_cast<int32_t>(static_cast<uint32_t>(bits) & 0xFFFF0000u);
  if ((bits & 0x7F800000) == 0x7F800000 && (bits & 0x7FFFFF) != 0)
    top |= 0x00400000; // a NaN stays a NaN in its top half (quiet)
  const int32_t sign = static_cast<int32_t>(static_cast<uint32_t>(bits) & 0x80000000u);
  int32_t rest = sign;
  if ((bits & 0x7F800000) != 0x7F800000 && top != bits) {
    rest = iron::bits_of_f32(v - iron::f32_from_bits(top)); // exact
  }
  return {iron::bf16_from_bits(static_cast<int32_t>(static_cast<uint32_t>(top) >> 16)),
          iron::bf16_from_bits(static_cast<int32_t>(static_cast<uint32_t>(rest) >> 16))};
}

// The bf16 bit pattern of a code q in -128..127 (exact in bf16).
inline uint16_t code_bits(int32_t q) {
  if (q == 0)
    return 0;
  const uint32_t sign = q < 0 ? 0x8000u : 0u;
  const uint32_t a = static_cast<uint32_t>(q < 0 ? -q : q);
  const uint32_t top = 31u - static_cast<uint32_t>(__builtin_clz(a)); // 0..7
  return static_cast<uint16_t>(sign | ((127u + top) << 7) | ((a << (7u - top)) & 0x7Fu));
}

// Bytes a group takes: its fp16 scale (and min, 4-bit) and its codes.
inline int32_t group_bytes(int32_t bits, int32_t group) {
  return (bits == 4 ? 4 : 2) + group * bits / 8;
}

// One group's weights, rounded to bf16, into `values` (group elements).
inline void dequant_group(const uint8_t *__restrict g, int32_t bits,
                          int32_t group, bfloat16 *__restrict values) {
  if (bits == 4) {
    for (int32_t i = 0; i < group / 2; ++i) {
      const uint8_t b = g[4 + i];
      const uint16_t lo = code_bits(b & 0x0F), hi = code_bits(b >> 4);
      __builtin_memcpy(values + 2 * i, &lo, sizeof lo);
      __builtin_memcpy(values + 2 * i + 1, &hi, sizeof hi);
    }
  } else {
    for (int32_t i = 0; i < group; ++i) {
      const uint16_t c = code_bits(static_cast<int8_t>(g[2 + i]));
      __builtin_memcpy(values + i, &c, sizeof c);
    }
  }
  const Pieces s = pieces(f16_value(g));
  iron::accf minimum = aie::zeros<accfloat, iron::kLanes>();
  if (bits == 4) {
    // min = hi + 1 * lo, exact in fp32 (at most 11 significant bits).
    const Pieces m = pieces(f16_value(g + 2));
    minimum.from_vector(aie::broadcast<bfloat16, iron::kLanes>(m.hi));
    minimum = aie::mac(minimum, aie::broadcast<bfloat16, iron::kLanes>(
                                    iron::bf16_from_bits(0x3F80)),
                       m.lo);
  }
  for (int32_t h = 0; h < group; h += iron::kLanes) {
    const iron::vbf16 q = aie::load_v<iron::kLanes>(values + h);
    iron::accf v = aie::mac(aie::mul(q, s.hi), q, s.lo); // scale * q, exact
    if (bits == 4)
      v = aie::add(v, minimum); // the one fp32 rounding
    aie::store_v(values + h, v.to_vector<bfloat16>());
  }
}

// Group elements is at most this (q4 and q8: 32; q8_16: 16).
constexpr int32_t kMaxGroup = 32;

} // namespace iron_quant

#endif // IRON_QUANT_H
