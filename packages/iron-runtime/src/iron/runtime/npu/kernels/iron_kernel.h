//===- iron_kernel.h - shared by IRON's bf16 elementwise kernels --*- C++ -*-===//
//
// Every IRON elementwise kernel has the C signature
//
//   void <op>_bf16(bfloat16 *in..., bfloat16 *out, int32_t n[, int32_t p...])
//
// and handles n elements (n a positive multiple of kLanes; the designs pass
// the operator's tile_size). A scalar parameter p arrives as the bit pattern
// of its bf16 value in the low 16 bits of an int32: the design rounds the
// operator's float to bf16 (as the reference does) and passes the bits, so no
// scalar float crosses the call and none is computed on the core's scalar
// unit. Results are rounded to bf16 to nearest, ties to even: each kernel
// sets aie::rounding_mode::conv_even before it converts.
//
// The fp32 vector backend for iron_vecmath.h maps its operations onto aie_api
// (aie::vector<float, 16> and friends).
//
//===----------------------------------------------------------------------===//

#ifndef IRON_KERNEL_H
#define IRON_KERNEL_H

#include <stdint.h>

#include <aie_api/aie.hpp>

#include "iron_vecmath.h"

namespace iron {

constexpr int kLanes = 16;
using vbf16 = aie::vector<bfloat16, kLanes>;
using vf32 = aie::vector<float, kLanes>;
using vi32 = aie::vector<int32, kLanes>;
using accf = aie::accum<accfloat, kLanes>;

// The bf16 value whose bits are the low 16 of `bits`.
inline bfloat16 bf16_from_bits(int32_t bits) {
  const uint16_t low = static_cast<uint16_t>(bits & 0xffff);
  bfloat16 value;
  __builtin_memcpy(&value, &low, sizeof value);
  return value;
}

// Round to nearest, ties to even, for every later float -> bf16 conversion.
inline void round_nearest_even() {
  ::aie::set_rounding(aie::rounding_mode::conv_even);
}

// bf16 -> fp32 (exact) and fp32 -> bf16 (one rounding) through an accumulator.
inline vf32 widen(vbf16 v) {
  accf a;
  a.from_vector(v);
  return a.to_vector<float>();
}

inline vbf16 narrow(vf32 v) {
  accf a;
  a.from_vector(v);
  return a.to_vector<bfloat16>();
}

// The iron_vecmath.h backend on one core: 16 fp32 lanes.
struct AieBackend {
  using F = vf32;
  using I = vi32;
  using M = aie::mask<kLanes>;
  static F splat(float v) { return aie::broadcast<float, kLanes>(v); }
  static F add(F a, F b) { return aie::add(a, b); }
  static F sub(F a, F b) { return aie::sub(a, b); }
  static F mul(F a, F b) { return aie::mul(a, b).to_vector<float>(); }
  static F maxf(F a, F b) { return aie::max(a, b); }
  static F minf(F a, F b) { return aie::min(a, b); }
  static F absf(F a) { return aie::abs(a); }
  static I nearest(F a) { return aie::to_fixed<int32>(a, 0); }
  static F to_f(I i) { return aie::to_float<float>(i, 0); }
  static F pow2(I n) {
    const I biased = aie::add(n, aie::broadcast<int32, kLanes>(127));
    return aie::vector_cast<float>(aie::upshift(biased, 23));
  }
  static F recip_approx(F d) { return aie::inv(d); }
  static M less(F a, F b) { return aie::lt(a, b); }
  static F select(M m, F if_true, F if_false) {
    return aie::select(if_false, if_true, m);
  }
};

// out[i] = f(in[i]) for an fp32 function of one vector, n elements.
template <class Fn>
inline void map1(const bfloat16 *__restrict in, bfloat16 *__restrict out,
                 int32_t n, Fn fn) {
  round_nearest_even();
  for (int32_t i = 0; i < n; i += kLanes) {
    const vf32 x = widen(aie::load_v<kLanes>(in + i));
    aie::store_v(out + i, narrow(fn(x)));
  }
}

// out[i] = f(a[i], b[i]) for an fp32 function of two vectors, n elements.
template <class Fn>
inline void map2(const bfloat16 *__restrict a, const bfloat16 *__restrict b,
                 bfloat16 *__restrict out, int32_t n, Fn fn) {
  round_nearest_even();
  for (int32_t i = 0; i < n; i += kLanes) {
    const vf32 x = widen(aie::load_v<kLanes>(a + i));
    const vf32 y = widen(aie::load_v<kLanes>(b + i));
    aie::store_v(out + i, narrow(fn(x, y)));
  }
}

// -- row kernels (RMSNorm, LayerNorm, Softmax) ---------------------------------
//
// A row kernel has the C signature
//
//   void <op>_bf16(bfloat16 *x, [bfloat16 *params,] bfloat16 *out,
//                  [float *scratch,] int32_t n, int32_t cols[, int32_t p...])
//
// and handles n / cols rows of cols elements (cols a positive multiple of
// kLanes). An fp32 scalar (eps) arrives as its bit pattern in an int32.

// The fp32 value whose bits are `bits`.
inline float f32_from_bits(int32_t bits) {
  float value;
  __builtin_memcpy(&value, &bits, sizeof value);
  return value;
}

// Sum of the 16 fp32 lanes.
inline float lane_sum(vf32 v) { return aie::reduce_add(v); }

// 1/sqrt(d) for d > 0, every lane: the hardware estimate and two Newton steps
// r <- r (3 - d r r) / 2 (each step doubles the correct bits).
inline vf32 rsqrt(float d) {
  const vf32 dv = aie::broadcast<float, kLanes>(d);
  vf32 r = aie::invsqrt(dv);
  for (int k = 0; k < 2; ++k) {
    const vf32 drr = AieBackend::mul(dv, AieBackend::mul(r, r));
    const vf32 t = AieBackend::sub(AieBackend::splat(3.0f), drr);
    r = AieBackend::mul(AieBackend::mul(r, t), AieBackend::splat(0.5f));
  }
  return r;
}

// 1/d for d > 0, every lane: the hardware estimate and two Newton steps.
inline vf32 recip_row(float d) {
  const vf32 dv = aie::broadcast<float, kLanes>(d);
  vf32 r = aie::inv(dv);
  for (int k = 0; k < 2; ++k)
    r = AieBackend::mul(r, AieBackend::sub(AieBackend::splat(2.0f),
                                           AieBackend::mul(dv, r)));
  return r;
}

} // namespace iron

#endif // IRON_KERNEL_H
