//===- iron_vecmath.h - fp32 activations over a vector backend ---*- C++ -*-===//
//
// IRON's transcendental kernels evaluate in fp32 and round once to bf16 (the
// "fp32 evaluation, one rounding" contract of iron.operators.activations: each
// function within 2**-10 relative of the exact value wherever that value is at
// least 2**-126). The algorithms below are written once, over a backend B that
// supplies the operations on one fp32 vector:
//
//   B::F                      an fp32 vector (or a float, on the host)
//   B::I                      an int32 vector of the same lanes
//   B::M                      a lane mask
//   splat(float) -> F         add, sub, mul, maxf, minf (F, F) -> F, absf(F)
//   nearest(F) -> I           round to the nearest integer (ties to even)
//   to_f(I) -> F              exact for |i| < 2**24
//   pow2(I n) -> F            2**n for n in [-126, 127], built from the bits
//   recip_approx(F) -> F      1/d to at least 8 bits (refined here)
//   less(F, F) -> M           select(M, F if_true, F if_false) -> F
//
// iron_kernel.h maps them onto aie_api for the cores twice: AieBackend on
// fp32 vectors (AIE2P), Aie2Backend on AIE2's own arithmetic (F is then an
// accfloat accumulator, mul a sum of exact bf16-piece products, less a bf16
// compare of the fp32 difference, nearest/to_f/pow2/select on int32 lanes,
// recip_approx a magic constant and two Newton steps: see there).
// tests/npu/host_vecmath.cc maps them onto scalar floats, so the algorithms
// (and their error against numpy) are checked without the AIE toolchain;
// tests/npu/host_kernels.cc and host_rows.cc run the kernels themselves with
// either backend against a scalar model of aie_api.
//
// Error budget: exp by 2**(t log2 e) with |f| <= 1/2 and a degree-6 Taylor
// polynomial of 2**f (remainder < 1.3e-7), the scaling split in two so every
// intermediate stays normal; one Newton step after the reciprocal estimate
// (8 bits -> 16+); tanh near 0 by its odd series (|x| < 1/4, next term
// < 4e-7 relative). Together well under 2**-10 = 9.8e-4.
//
//===----------------------------------------------------------------------===//

#ifndef IRON_VECMATH_H
#define IRON_VECMATH_H

namespace iron {

// The exponent range the scaled exponential handles; below it the result is
// returned as 0 (callers keep |m| <= max(1, |t|), so m e**t < 2**-126 there).
constexpr float kExpLow = -170.0f;
constexpr float kExpHigh = 88.0f;
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// m * e**t, with m folded in before the power of two so that the result is
// accurate wherever it is a normal fp32, though e**t alone would be subnormal.
template <class B> typename B::F mexp(typename B::F t, typename B::F m) {
  using F = typename B::F;
  const F tc = B::minf(B::maxf(t, B::splat(kExpLow)), B::splat(kExpHigh));
  const F y = B::mul(tc, B::splat(kLog2E));
  const auto n = B::nearest(y);
  const F nf = B::to_f(n);
  const F f = B::mul(B::sub(y, nf), B::splat(kLn2)); // |f| <= ln2 / 2
  // e**f, Taylor to degree 6 (Horner).
  F p = B::splat(1.0f / 720.0f);
  p = B::add(B::mul(p, f), B::splat(1.0f / 120.0f));
  p = B::add(B::mul(p, f), B::splat(1.0f / 24.0f));
  p = B::add(B::mul(p, f), B::splat(1.0f / 6.0f));
  p = B::add(B::mul(p, f), B::splat(0.5f));
  p = B::add(B::mul(p, f), B::splat(1.0f));
  p = B::add(B::mul(p, f), B::splat(1.0f));
  // 2**n = 2**n1 * 2**n2, both halves within [-123, 64].
  const auto n1 = B::nearest(B::mul(nf, B::splat(0.5f)));
  const auto n2 = B::nearest(B::sub(nf, B::to_f(n1)));
  const F r = B::mul(B::mul(B::mul(m, p), B::pow2(n1)), B::pow2(n2));
  return B::select(B::less(t, B::splat(kExpLow)), B::splat(0.0f), r);
}

// 1/d for d in [1, 4]: the backend's estimate and one Newton step.
template <class B> typename B::F recip(typename B::F d) {
  const typename B::F r = B::recip_approx(d);
  return B::mul(r, B::sub(B::splat(2.0f), B::mul(d, r)));
}

// m * sigmoid(z) = m / (1 + e**-z), from e**-|z| only (nothing overflows).
template <class B>
typename B::F scaled_sigmoid(typename B::F z, typename B::F m) {
  using F = typename B::F;
  const F neg_abs = B::sub(B::splat(0.0f), B::absf(z));
  const F e = mexp<B>(neg_abs, B::splat(1.0f));
  const F r = recip<B>(B::add(B::splat(1.0f), e));
  const F num = B::select(B::less(z, B::splat(0.0f)), mexp<B>(neg_abs, m), m);
  return B::mul(num, r);
}

template <class B> typename B::F sigmoid(typename B::F z) {
  return scaled_sigmoid<B>(z, B::splat(1.0f));
}

template <class B> typename B::F silu(typename B::F x) {
  return scaled_sigmoid<B>(x, x);
}

// silu(g) * u with the product g * u formed first (exact for bf16 inputs).
template <class B> typename B::F silu_mul(typename B::F g, typename B::F u) {
  return scaled_sigmoid<B>(g, B::mul(g, u));
}

template <class B> typename B::F tanh(typename B::F x) {
  using F = typename B::F;
  const F a = B::absf(x);
  const F e = mexp<B>(B::mul(a, B::splat(-2.0f)), B::splat(1.0f));
  const F big = B::mul(B::sub(B::splat(1.0f), e),
                       recip<B>(B::add(B::splat(1.0f), e)));
  const F a2 = B::mul(a, a);
  F s = B::splat(-17.0f / 315.0f);
  s = B::add(B::mul(s, a2), B::splat(2.0f / 15.0f));
  s = B::add(B::mul(s, a2), B::splat(-1.0f / 3.0f));
  s = B::add(B::mul(s, a2), B::splat(1.0f));
  const F small = B::mul(a, s);
  const F t = B::select(B::less(a, B::splat(0.25f)), small, big);
  return B::select(B::less(x, B::splat(0.0f)), B::sub(B::splat(0.0f), t), t);
}

// GELU, tanh form: x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3).
template <class B> typename B::F gelu_tanh(typename B::F x) {
  using F = typename B::F;
  const F inner = B::add(B::splat(1.0f), B::mul(B::splat(0.044715f), B::mul(x, x)));
  const F z = B::mul(B::mul(B::splat(2.0f * 0.7978845608028654f), x), inner);
  return scaled_sigmoid<B>(z, x);
}

// GELU, erf form: 0.5 x erfc(-x / sqrt 2), erfc by Numerical Recipes' erfcc.
template <class B> typename B::F gelu_erf(typename B::F x) {
  using F = typename B::F;
  const F zz = B::mul(x, B::splat(-0.7071067811865476f)); // erfc's argument
  // |zz| capped at 1e4, where erfc is 0 to fp32 (keeps k and k e**t finite).
  const F a = B::minf(B::absf(zz), B::splat(1.0e4f));
  const F k = recip<B>(B::add(B::splat(1.0f), B::mul(B::splat(0.5f), a)));
  const float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f,
                       -0.18628806f, 0.27886807f, -1.13520398f, 1.48851587f,
                       -0.82215223f, 0.17087277f};
  F poly = B::splat(0.0f);
  for (int j = 9; j >= 1; --j)
    poly = B::mul(k, B::add(B::splat(c[j]), poly));
  const F t = B::add(B::sub(B::splat(c[0]), B::mul(a, a)), poly);
  const F half_x = B::mul(B::splat(0.5f), x);
  // zz >= 0 (x <= 0): 0.5 x * k e**t; else 0.5 x * (2 - k e**t).
  const F small = mexp<B>(t, B::mul(half_x, k));
  const F large = B::sub(x, small);
  return B::select(B::less(zz, B::splat(0.0f)), large, small);
}

} // namespace iron

#endif // IRON_VECMATH_H
