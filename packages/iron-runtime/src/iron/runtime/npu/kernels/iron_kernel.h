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
// Two backends map iron_vecmath.h's operations onto aie_api, both with the
// fp32 lanes the algorithms' error budgets assume:
//
//   AieBackend   fp32 vectors (aie::vector<float, 16>, aie::mul/add/max/lt/
//                inv/invsqrt/to_fixed of them). Native on AIE2P; on AIE2
//                aie_api emulates them (__AIE_API_FP32_EMULATION__), a path
//                no upstream AIE2 kernel takes with Peano.
//   Aie2Backend  AIE2's own arithmetic, as upstream's AIE2 kernels use it:
//                values in bf16 vectors and accfloat accumulators (below).
//
// iron::Backend is the one the activation, norm and softmax kernels use:
// Aie2Backend where Peano compiles for aie2 (__AIE_ARCH__ == 20, defined in
// Xilinx/llvm-aie clang/lib/Headers/aiev2/aiev2_defines.h; its
// aiev2/aiev2_aie_api_compat.h sets __AIE_MODEL_VERSION__ 10500), AieBackend
// elsewhere (aie2p: __AIE_ARCH__ 21, __AIE_MODEL_VERSION__ 11500 in
// aie2p/aie2p_version.h). aie_api itself dispatches on the same macro
// (aie_api/detail/config.hpp). The attention kernel keeps AieBackend on
// both (its exp has a tighter error model than iron_vecmath.h's).
//
// The host tests compile these headers against a scalar model of aie_api
// (tests/npu/host_aie_api.h); with IRON_HOST_AIE2 defined the model has no
// fp32-vector arithmetic, AieBackend is left out here, and any AIE2 kernel
// that uses either fails to compile.
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
using vi32 = aie::vector<int32, kLanes>;
using accf = aie::accum<accfloat, kLanes>;
using mask16 = aie::mask<kLanes>;
#ifndef IRON_HOST_AIE2
using vf32 = aie::vector<float, kLanes>;
#endif

// The bf16 value whose bits are the low 16 of `bits`.
inline bfloat16 bf16_from_bits(int32_t bits) {
  const uint16_t low = static_cast<uint16_t>(bits & 0xffff);
  bfloat16 value;
  __builtin_memcpy(&value, &low, sizeof value);
  return value;
}

// The fp32 value whose bits are `bits`, and the bits of an fp32 value.
inline float f32_from_bits(int32_t bits) {
  float value;
  __builtin_memcpy(&value, &bits, sizeof value);
  return value;
}

inline int32_t bits_of_f32(float value) {
  int32_t bits;
  __builtin_memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Round to nearest, ties to even, for every later float -> bf16 conversion.
inline void round_nearest_even() {
  ::aie::set_rounding(aie::rounding_mode::conv_even);
}

#ifndef IRON_HOST_AIE2

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
  using M = mask16;
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
  static F rsqrt_approx(F d) { return aie::invsqrt(d); }
  static M less(F a, F b) { return aie::lt(a, b); }
  static F select(M m, F if_true, F if_false) {
    return aie::select(if_false, if_true, m);
  }
  // Moving values in and out, and the kernels' row steps.
  static F from_bf16(vbf16 v) { return widen(v); }
  static vbf16 to_bf16(F a) { return narrow(a); }
  static F load_f32(const float *p) { return aie::load_v<kLanes>(p); }
  static void store_f32(float *p, F a) { aie::store_v(p, a); }
  static float lane_sum(F a) { return aie::reduce_add(a); }
  // acc + a * b for bf16 a and b (the product exact, one fp32 rounding).
  static F mac_bf16(F acc, vbf16 a, vbf16 b) {
    return add(acc, mul(widen(a), widen(b)));
  }
};

#endif // IRON_HOST_AIE2

// The iron_vecmath.h backend on an AIE2 core, in the operations upstream's
// AIE2 kernels use (Xilinx/mlir-aie at tag v1.4.1, read for this):
//
//   - bf16 x bf16 products into accfloat, exact: aie::mul / aie::mac
//     (aie_kernels/aie2/mul.cc, gelu.cc, silu.cc, mm.cc; mac of a vector
//     and a scalar in aie_runtime_lib/AIE2/vec_math.h getErfBf16);
//   - accumulator adds and subtracts in fp32: aie::add of an accumulator and
//     a bf16 vector (aie_kernels/aie2/softmax.cc,
//     programming_examples/getting_started/01_SAXPY/saxpy.cc), add and sub of
//     two v16accfloat (programming_examples/ml/magika/kernels/group2.cc);
//   - accumulator <-> bf16: from_vector (vec_math.h getSigmoidBf16),
//     to_vector<bfloat16> (every kernel); accumulator -> fp32 lanes:
//     to_vector<float> and aie::reduce_add of them (softmax.cc);
//   - fp32 lanes moved as bits: v16float -> v16accfloat and a lane select of
//     v16float (vec_math.h getFloorBf16 / getCeilBf16), integer lanes added
//     (reduce_add.cc), compared and selected (threshold.cc, rgba2hue.cc),
//     shifted and subtracted as a value's bits (vec_math.h getRsqrtBf16's
//     magic constant);
//   - bf16 lanes: aie::max / reduce_max (reduce_max.cc), min and max against
//     a bound and aie::abs (vec_math.h getErfBf16, getAbs), and aie::lt,
//     Peano's native vltbf16 (Xilinx/llvm-aie
//     clang/lib/Headers/aiev2/aiev2_vadd.h lt(v32bfloat16, v32bfloat16)).
//
// A value needing fp32 precision stays in an accumulator (F below: the 16
// fp32 lanes of an accfloat accumulator). Its adds and subtracts are the
// accumulator's own. A product of two such values splits each into three
// bf16 pieces, a = a0 + a1 + a2 exactly (a0 = bf16(a), a1 = bf16(a - a0),
// a2 = a - a0 - a1, each remainder exact in the accumulator; |a1| <= 2**-8
// |a|, |a2| <= 2**-16 |a|), and sums the six largest piece products, each
// exact in accfloat (the three dropped are together under 2**-23 relative:
// the product is within about two fp32 ulps). A compare rounds the fp32
// difference to bf16 and compares that with 0, which keeps its sign: Peano's
// own lt(v16float, v16float) does the same (Xilinx/llvm-aie
// clang/lib/Headers/aiev2/aiev2_vadd.h). No fp32-vector multiply, compare,
// conversion or estimate is used.
struct Aie2Backend {
  using F = accf;
  using I = vi32;
  using M = mask16;

  // An accumulator's fp32 lanes as int32 bits, and back.
  static I bits(F a) { return aie::vector_cast<int32>(a.to_vector<float>()); }
  static F from_bits(I b) {
    F a;
    a.from_vector(aie::vector_cast<float>(b));
    return a;
  }
  static I ibroadcast(int32_t v) { return aie::broadcast<int32, kLanes>(v); }
  static vbf16 bf16_zero() {
    return aie::broadcast<bfloat16, kLanes>(bf16_from_bits(0));
  }

  static F splat(float v) { return from_bits(ibroadcast(bits_of_f32(v))); }
  static F add(F a, F b) { return aie::add(a, b); }
  static F sub(F a, F b) { return aie::sub(a, b); }

  static F mul(F a, F b) {
    const vbf16 a0 = a.to_vector<bfloat16>();
    const F ar = aie::sub(a, a0);
    const vbf16 a1 = ar.to_vector<bfloat16>();
    const vbf16 a2 = aie::sub(ar, a1).to_vector<bfloat16>();
    const vbf16 b0 = b.to_vector<bfloat16>();
    const F br = aie::sub(b, b0);
    const vbf16 b1 = br.to_vector<bfloat16>();
    const vbf16 b2 = aie::sub(br, b1).to_vector<bfloat16>();
    // Smallest first, the leading product last.
    F acc = aie::mul(a1, b1);
    acc = aie::mac(acc, a0, b2);
    acc = aie::mac(acc, a2, b0);
    acc = aie::mac(acc, a0, b1);
    acc = aie::mac(acc, a1, b0);
    acc = aie::mac(acc, a0, b0);
    // Where a0 * b0 is infinite or NaN (an infinite or NaN operand) the
    // remainders are NaN, and where it is zero (a zero operand) the sum of
    // zeros loses the product's sign: the product is then a0 * b0, as IEEE's.
    const F lead = aie::mul(a0, b0);
    return select(finite_nonzero(lead), acc, lead);
  }

  // Lanes whose value is finite and not zero.
  static M finite_nonzero(F a) {
    const vbf16 inf = aie::broadcast<bfloat16, kLanes>(bf16_from_bits(0x7f80));
    const vbf16 mag = aie::abs(a.to_vector<bfloat16>());
    return aie::lt(bf16_zero(), mag) & aie::lt(mag, inf);
  }

  static M less(F a, F b) {
    return aie::lt(sub(a, b).to_vector<bfloat16>(), bf16_zero());
  }
  static F select(M m, F if_true, F if_false) {
    return from_bits(aie::select(bits(if_false), bits(if_true), m));
  }
  // `a > b ? a : b` and `a < b ? a : b`, as the other backends.
  static F maxf(F a, F b) { return select(less(b, a), a, b); }
  static F minf(F a, F b) { return select(less(a, b), a, b); }
  static F absf(F a) {
    return from_bits(aie::bit_and(bits(a), ibroadcast(0x7fffffff)));
  }

  // Round to an integer by adding 1.5 * 2**23 in the accumulator (fp32, to
  // nearest even): the integer is then the low bits of the sum. For |a| <
  // 2**22, which the algorithms keep (|y| <= 255).
  static constexpr int32_t kMagicBits = 0x4B400000; // 1.5 * 2**23
  static I nearest(F a) {
    const F s = add(a, from_bits(ibroadcast(kMagicBits)));
    return aie::sub(bits(s), ibroadcast(kMagicBits));
  }
  // The reverse, exact for |i| < 2**22.
  static F to_f(I i) {
    const F s = from_bits(aie::add(i, ibroadcast(kMagicBits)));
    return sub(s, from_bits(ibroadcast(kMagicBits)));
  }
  static F pow2(I n) {
    return from_bits(aie::upshift(aie::add(n, ibroadcast(127)), 23));
  }
  // 1/d for normal d > 0: the reciprocal's magic constant (relative error
  // under 1/8), then two Newton steps r <- r (2 - d r): under 2**-12.
  static F recip_approx(F d) {
    F r = from_bits(aie::sub(ibroadcast(0x7EF311C3), bits(d)));
    for (int k = 0; k < 2; ++k)
      r = mul(r, sub(splat(2.0f), mul(d, r)));
    return r;
  }
  // 1/sqrt(d) for normal d > 0: the magic constant of vec_math.h's
  // getRsqrtBf16, in fp32 (relative error under 2**-4.8), then one Newton
  // step r <- r (3/2 - (d/2) r r): under 2**-9.
  static F rsqrt_approx(F d) {
    const F r = from_bits(
        aie::sub(ibroadcast(0x5F3759DF), aie::downshift(bits(d), 1)));
    const F half_d = mul(d, splat(0.5f));
    return mul(r, sub(splat(1.5f), mul(half_d, mul(r, r))));
  }

  // Moving values in and out, and the kernels' row steps.
  static F from_bf16(vbf16 v) {
    F a;
    a.from_vector(v);
    return a;
  }
  static vbf16 to_bf16(F a) { return a.to_vector<bfloat16>(); }
  static F load_f32(const float *p) {
    F a;
    a.from_vector(aie::load_v<kLanes>(p));
    return a;
  }
  static void store_f32(float *p, F a) { aie::store_v(p, a.to_vector<float>()); }
  static float lane_sum(F a) { return aie::reduce_add(a.to_vector<float>()); }
  static F mac_bf16(F acc, vbf16 a, vbf16 b) { return aie::mac(acc, a, b); }
};

// The backend of the activation, norm and softmax kernels on this target.
#if __AIE_ARCH__ == 20
using Backend = Aie2Backend;
#else
using Backend = AieBackend;
#endif
using Lanes = Backend::F;

// out[i] = f(in[i]) for an fp32 function of one vector, n elements.
template <class Fn>
inline void map1(const bfloat16 *__restrict in, bfloat16 *__restrict out,
                 int32_t n, Fn fn) {
  round_nearest_even();
  for (int32_t i = 0; i < n; i += kLanes) {
    const Lanes x = Backend::from_bf16(aie::load_v<kLanes>(in + i));
    aie::store_v(out + i, Backend::to_bf16(fn(x)));
  }
}

// out[i] = f(a[i], b[i]) for an fp32 function of two vectors, n elements.
template <class Fn>
inline void map2(const bfloat16 *__restrict a, const bfloat16 *__restrict b,
                 bfloat16 *__restrict out, int32_t n, Fn fn) {
  round_nearest_even();
  for (int32_t i = 0; i < n; i += kLanes) {
    const Lanes x = Backend::from_bf16(aie::load_v<kLanes>(a + i));
    const Lanes y = Backend::from_bf16(aie::load_v<kLanes>(b + i));
    aie::store_v(out + i, Backend::to_bf16(fn(x, y)));
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

// 1/sqrt(d) for d > 0, every lane: the backend's estimate (at least 8 bits)
// and two Newton steps r <- r (3 - d r r) / 2 (each step doubles the correct
// bits).
template <class B = Backend> typename B::F rsqrt(float d) {
  const typename B::F dv = B::splat(d);
  typename B::F r = B::rsqrt_approx(dv);
  for (int k = 0; k < 2; ++k) {
    const typename B::F drr = B::mul(dv, B::mul(r, r));
    const typename B::F t = B::sub(B::splat(3.0f), drr);
    r = B::mul(B::mul(r, t), B::splat(0.5f));
  }
  return r;
}

// 1/d for d > 0, every lane: the backend's estimate and two Newton steps.
template <class B = Backend> typename B::F recip_row(float d) {
  const typename B::F dv = B::splat(d);
  typename B::F r = B::recip_approx(dv);
  for (int k = 0; k < 2; ++k)
    r = B::mul(r, B::sub(B::splat(2.0f), B::mul(dv, r)));
  return r;
}

} // namespace iron

#endif // IRON_KERNEL_H
