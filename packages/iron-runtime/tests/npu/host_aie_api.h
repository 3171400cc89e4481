// A scalar host model of the aie_api calls IRON's kernels make, so that the
// kernel sources themselves compile for the host and tests judge their
// algorithm and order of operations against the operators' references,
// without the AIE toolchain. host_rows.cc, host_kernels.cc and the other
// host_*.cc harnesses include it
// ahead of the kernel sources (the build puts an empty aie_api/aie.hpp on the
// include path).
//
// Two builds:
//   - default: every operation the kernels' fp32 backend (iron::AieBackend)
//     uses, fp32 vector arithmetic included, as the AIE2P path compiles;
//   - IRON_HOST_AIE2 defined (with __AIE_ARCH__ 20, as Peano defines it for
//     aie2): only the operations upstream AIE2 kernels use (bf16 vectors,
//     float accumulators, int32 lanes, the fp32 lane reduction). Every
//     fp32-vector arithmetic, compare, select, conversion and estimate is
//     absent, so an AIE2 kernel that uses one does not compile here.
//
// A model is four letters, one per assumption about the AIE (each has the
// choice that tests must pass under all of):
//   1. fp32 vector multiply (aie::mul of float vectors, fp32 backend only):
//      i = IEEE fp32 (round to nearest even); s = AIE2's emulation from bf16
//      pieces, "safe" (each operand cut into three bf16 pieces, truncating;
//      nine exact bf16 products summed in fp32, smallest first), what
//      llvm-aie's aiev2_core.h mul_elem_16 is unless
//      AIE2_FP32_EMULATION_ACCURACY_FAST/LOW is set; f = its "fast" variant
//      (the six largest products).
//   2. aie::reduce_add: t = halving tree (lanes i and i + 8, then + 4, + 2,
//      + 1); q = lane 0, 1, ... in sequence. aie::mmul's sum of a lane's
//      products follows the same letter (below).
//   3. aie::inv / aie::invsqrt estimates (fp32 backend only): 8 = the exact
//      value truncated to 8 significant bits (a bf16-grade estimate); e = the
//      exact value rounded to fp32.
//   4. subnormal fp32 results of vector and accumulator operations:
//      z = flushed to zero (sign kept); k = kept.
// Every accumulator add, subtract and multiply-accumulate is fp32 with round
// to nearest even, and a product of two bf16 values is exact before it (the
// AIE's bf16 x bf16 -> accfloat multiply); scalar float code (the lane sum /
// cols, + eps) is IEEE fp32, as Peano's soft-float routines are. float ->
// bf16 conversions round as the current aie::set_rounding mode says:
// conv_even is round to nearest even; any other mode (the model's start-up
// mode is floor) rounds toward -inf, so a kernel that forgets to set
// conv_even fails the tests.

#ifndef IRON_HOST_AIE_API_H
#define IRON_HOST_AIE_API_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <string>
#include <vector>

#if defined(IRON_HOST_AIE2) && (!defined(__AIE_ARCH__) || __AIE_ARCH__ != 20)
#error "IRON_HOST_AIE2 models aie2: build it with -D__AIE_ARCH__=20"
#endif

namespace hostmodel {

enum class Mul { ieee, safe, fast };
struct Model {
  Mul mul = Mul::safe;
  bool tree = true;
  bool estimate8 = true;
  bool ftz = true;
};
inline Model model;

inline float flush(float v) {
  if (model.ftz && std::fpclassify(v) == FP_SUBNORMAL)
    return std::copysign(0.0f, v);
  return v;
}

inline uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline float from_bits(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// fp32 -> bf16 bits, to nearest even (NaN stays a quiet NaN).
inline uint16_t bf16_nearest(float v) {
  uint32_t b = bits_of(v);
  if (std::isnan(v))
    return static_cast<uint16_t>((b >> 16) | 0x40);
  b += 0x7fff + ((b >> 16) & 1);
  return static_cast<uint16_t>(b >> 16);
}

// fp32 -> bf16 bits, toward -inf.
inline uint16_t bf16_floor(float v) {
  if (std::isnan(v))
    return static_cast<uint16_t>((bits_of(v) >> 16) | 0x40);
  const uint32_t b = bits_of(v);
  const uint16_t t = static_cast<uint16_t>(b >> 16);
  const bool inexact = (b & 0xffff) != 0;
  return (inexact && (b >> 31)) ? static_cast<uint16_t>(t + 1) : t;
}

// The exact value truncated to 8 significant bits.
inline float keep8(float v) { return from_bits(bits_of(v) & 0xffff0000u); }

// a * b as the model's fp32 multiply computes it.
inline float multiply(float x, float y) {
  if (model.mul == Mul::ieee || !std::isfinite(x) || !std::isfinite(y))
    return flush(x * y); // an infinity or NaN operand: the product's class
  // Three bf16 pieces, each cut toward -inf; the remainders are exact.
  auto pieces = [](float v, float p[3]) {
    float r = v;
    for (int k = 0; k < 3; ++k) {
      p[k] = flush(from_bits(static_cast<uint32_t>(bf16_floor(r)) << 16));
      r = r - p[k];
    }
  };
  float a[3], d[3];
  pieces(x, a);
  pieces(y, d);
  // Smallest first, as aiev2_core.h chains its mac_elem_16_2 calls.
  static const int safe[9][2] = {{2, 2}, {2, 1}, {1, 2}, {0, 2}, {1, 1},
                                 {2, 0}, {1, 0}, {0, 1}, {0, 0}};
  static const int fast[6][2] = {{0, 2}, {1, 1}, {2, 0},
                                 {1, 0}, {0, 1}, {0, 0}};
  const int (*terms)[2] = model.mul == Mul::safe ? safe : fast;
  const int count = model.mul == Mul::safe ? 9 : 6;
  float acc = 0.0f;
  for (int t = 0; t < count; ++t)
    acc = flush(acc + a[terms[t][0]] * d[terms[t][1]]);
  return acc;
}

// A model spelled as four letters (above); false if it is not one.
inline bool parse_model(const char *m) {
  if (std::strlen(m) != 4)
    return false;
  const char mul = m[0], red = m[1], est = m[2], ftz = m[3];
  if (mul != 'i' && mul != 's' && mul != 'f')
    return false;
  if ((red != 't' && red != 'q') || (est != '8' && est != 'e') ||
      (ftz != 'z' && ftz != 'k'))
    return false;
  model.mul = mul == 'i' ? Mul::ieee : mul == 's' ? Mul::safe : Mul::fast;
  model.tree = red == 't';
  model.estimate8 = est == '8';
  model.ftz = ftz == 'z';
  return true;
}

} // namespace hostmodel

// -- the aie_api names the kernels use ------------------------------------------

using int32 = int32_t;
struct accfloat {};
struct accauto {}; // aie::mmul's accumulator tag: fp32 for bf16 operands

struct bfloat16 {
  uint16_t bits;
  bfloat16() = default;
  bfloat16(float v); // rounds as aie::set_rounding says (below)
  operator float() const {
    return hostmodel::from_bits(static_cast<uint32_t>(bits) << 16);
  }
};

namespace aie {

#ifdef IRON_HOST_AIE2
inline constexpr bool kAie2Model = true;
#else
inline constexpr bool kAie2Model = false;
#endif

enum class rounding_mode { floor, ceil, conv_even };
inline rounding_mode current_rounding = rounding_mode::floor;
inline void set_rounding(rounding_mode m) { current_rounding = m; }

template <class T, unsigned N> struct vector {
  T v[N];
  T operator[](unsigned i) const { return v[i]; }
};

template <unsigned N> struct mask {
  uint32_t bits = 0;
  static mask from_uint32(uint32_t b) {
    mask m;
    m.bits = b;
    return m;
  }
  bool test(unsigned i) const { return (bits >> i) & 1u; }
  mask operator&(const mask &o) const { return from_uint32(bits & o.bits); }
};

// An accfloat accumulator: fp32 lanes. from_vector of bf16 lanes is exact
// (ups); to_vector<bfloat16> rounds (srs); to_vector<float> and from_vector
// of float lanes move the lanes as they are.
template <class Tag, unsigned N> struct accum {
  float v[N];
  template <class T> void from_vector(const vector<T, N> &x) {
    for (unsigned i = 0; i < N; ++i)
      v[i] = hostmodel::flush(static_cast<float>(x.v[i]));
  }
  template <class T> vector<T, N> to_vector() const {
    vector<T, N> out;
    for (unsigned i = 0; i < N; ++i)
      out.v[i] = T(v[i]);
    return out;
  }
};

template <unsigned N, class T> vector<T, N> load_v(const T *p) {
  vector<T, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = p[i];
  return out;
}

template <class T, unsigned N> void store_v(T *p, const vector<T, N> &x) {
  for (unsigned i = 0; i < N; ++i)
    p[i] = x.v[i];
}

template <class T, unsigned N> vector<T, N> broadcast(T value) {
  vector<T, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = value;
  return out;
}

// aie::zeros<T, N>: an accumulator for an accumulator tag, else a vector
// of T (aie_api's zeros() is typed by its first argument the same way).
template <class T> struct is_acc_tag : std::false_type {};
template <> struct is_acc_tag<accfloat> : std::true_type {};
template <> struct is_acc_tag<accauto> : std::true_type {};

template <class T, unsigned N>
std::conditional_t<is_acc_tag<T>::value, accum<T, N>, vector<T, N>> zeros() {
  std::conditional_t<is_acc_tag<T>::value, accum<T, N>, vector<T, N>> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = {};
  return out;
}

// The lanes' bits, as another 32-bit lane type.
template <class T, class U, unsigned N>
vector<T, N> vector_cast(const vector<U, N> &a) {
  static_assert(sizeof(T) == sizeof(U), "a cast keeps the lane width");
  vector<T, N> out;
  std::memcpy(out.v, a.v, sizeof out.v);
  return out;
}

// -- int32 lanes (exact, wrapping) ------------------------------------------------

template <unsigned N>
vector<int32, N> add(const vector<int32, N> &a, const vector<int32, N> &b) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<int32>(static_cast<uint32_t>(a.v[i]) +
                                  static_cast<uint32_t>(b.v[i]));
  return out;
}

template <unsigned N>
vector<int32, N> sub(const vector<int32, N> &a, const vector<int32, N> &b) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<int32>(static_cast<uint32_t>(a.v[i]) -
                                  static_cast<uint32_t>(b.v[i]));
  return out;
}

template <unsigned N>
vector<int32, N> upshift(const vector<int32, N> &a, int shift) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<int32>(static_cast<uint32_t>(a.v[i]) << shift);
  return out;
}

// Arithmetic shift right (the lanes are signed).
template <unsigned N>
vector<int32, N> downshift(const vector<int32, N> &a, int shift) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = a.v[i] >> shift;
  return out;
}

template <unsigned N>
vector<int32, N> bit_and(const vector<int32, N> &a, const vector<int32, N> &b) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = a.v[i] & b.v[i];
  return out;
}

// aie::select(a, b, m): b where m is set, else a (int32 or bf16 lanes; fp32
// lanes too, except in the AIE2 model).
template <class T, unsigned N>
  requires(sizeof(T) == 2 || (sizeof(T) == 4 && !(std::is_same_v<T, float> &&
                                                  kAie2Model)))
vector<T, N> select(const vector<T, N> &a, const vector<T, N> &b,
                    const mask<N> &m) {
  vector<T, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = m.test(i) ? b.v[i] : a.v[i];
  return out;
}

// -- bf16 lanes -------------------------------------------------------------------

// a * b for bf16 a and b (vectors, or a vector and a scalar): exact in fp32.
template <unsigned N>
accum<accfloat, N> mul(const vector<bfloat16, N> &a,
                       const vector<bfloat16, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] =
        hostmodel::flush(static_cast<float>(a.v[i]) * static_cast<float>(b.v[i]));
  return out;
}

template <unsigned N>
accum<accfloat, N> mul(const vector<bfloat16, N> &a, bfloat16 b) {
  return mul(a, broadcast<bfloat16, N>(b));
}

// acc + a * b and acc - a * b for bf16 a and b: the product is exact in fp32,
// the sum rounds once.
template <unsigned N>
accum<accfloat, N> mac(const accum<accfloat, N> &acc,
                       const vector<bfloat16, N> &a,
                       const vector<bfloat16, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i) {
    const float p = static_cast<float>(a.v[i]) * static_cast<float>(b.v[i]);
    out.v[i] = hostmodel::flush(acc.v[i] + hostmodel::flush(p));
  }
  return out;
}

template <unsigned N>
accum<accfloat, N> mac(const accum<accfloat, N> &acc,
                       const vector<bfloat16, N> &a, bfloat16 b) {
  return mac(acc, a, broadcast<bfloat16, N>(b));
}

template <unsigned N>
accum<accfloat, N> msc(const accum<accfloat, N> &acc,
                       const vector<bfloat16, N> &a,
                       const vector<bfloat16, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i) {
    const float p = static_cast<float>(a.v[i]) * static_cast<float>(b.v[i]);
    out.v[i] = hostmodel::flush(acc.v[i] - hostmodel::flush(p));
  }
  return out;
}

// Accumulator adds and subtracts: fp32, to nearest even.
template <unsigned N>
accum<accfloat, N> add(const accum<accfloat, N> &a,
                       const accum<accfloat, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::flush(a.v[i] + b.v[i]);
  return out;
}

template <unsigned N>
accum<accfloat, N> sub(const accum<accfloat, N> &a,
                       const accum<accfloat, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::flush(a.v[i] - b.v[i]);
  return out;
}

template <unsigned N>
accum<accfloat, N> add(const accum<accfloat, N> &a,
                       const vector<bfloat16, N> &b) {
  accum<accfloat, N> w;
  w.from_vector(b);
  return add(a, w);
}

template <unsigned N>
accum<accfloat, N> sub(const accum<accfloat, N> &a,
                       const vector<bfloat16, N> &b) {
  accum<accfloat, N> w;
  w.from_vector(b);
  return sub(a, w);
}

// max, min and lt as the activation harness has them: `a > b ? a : b`.
template <unsigned N>
vector<bfloat16, N> max(const vector<bfloat16, N> &a,
                        const vector<bfloat16, N> &b) {
  vector<bfloat16, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<float>(a.v[i]) > static_cast<float>(b.v[i]) ? a.v[i]
                                                                       : b.v[i];
  return out;
}

template <unsigned N>
vector<bfloat16, N> min(const vector<bfloat16, N> &a,
                        const vector<bfloat16, N> &b) {
  vector<bfloat16, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<float>(a.v[i]) < static_cast<float>(b.v[i]) ? a.v[i]
                                                                       : b.v[i];
  return out;
}

// The sign bit cleared (Peano's abs of v32bfloat16 is an and with 0x7fff).
template <unsigned N> vector<bfloat16, N> abs(const vector<bfloat16, N> &a) {
  vector<bfloat16, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i].bits = static_cast<uint16_t>(a.v[i].bits & 0x7fffu);
  return out;
}

template <unsigned N>
mask<N> lt(const vector<bfloat16, N> &a, const vector<bfloat16, N> &b) {
  mask<N> m;
  for (unsigned i = 0; i < N; ++i)
    m.bits |= static_cast<uint32_t>(static_cast<float>(a.v[i]) <
                                    static_cast<float>(b.v[i]))
              << i;
  return m;
}

template <unsigned N> bfloat16 reduce_max(const vector<bfloat16, N> &a) {
  vector<bfloat16, N> lane = a;
  for (unsigned half = N / 2; half >= 1; half /= 2)
    for (unsigned i = 0; i < half; ++i)
      lane.v[i] = static_cast<float>(lane.v[i]) > static_cast<float>(lane.v[i + half])
                      ? lane.v[i]
                      : lane.v[i + half];
  return lane.v[0];
}

// -- fp32 lanes -------------------------------------------------------------------

// The sum of the fp32 lanes (upstream's AIE2 softmax.cc reduces an accfloat
// accumulator's to_vector<float>() so): the one fp32-vector operation the
// AIE2 model keeps.
template <unsigned N> float reduce_add(const vector<float, N> &a) {
  float lane[N];
  for (unsigned i = 0; i < N; ++i)
    lane[i] = a.v[i];
  if (!hostmodel::model.tree) {
    float s = lane[0];
    for (unsigned i = 1; i < N; ++i)
      s = hostmodel::flush(s + lane[i]);
    return s;
  }
  for (unsigned half = N / 2; half >= 1; half /= 2)
    for (unsigned i = 0; i < half; ++i)
      lane[i] = hostmodel::flush(lane[i] + lane[i + half]);
  return lane[0];
}

#ifndef IRON_HOST_AIE2

// fp32 vector arithmetic: the fp32 backend's (aie_api's FP32 emulation on
// AIE2, native on AIE2P). Absent from the AIE2 model.

template <unsigned N>
vector<float, N> add(const vector<float, N> &a, const vector<float, N> &b) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::flush(a.v[i] + b.v[i]);
  return out;
}

template <unsigned N>
vector<float, N> sub(const vector<float, N> &a, const vector<float, N> &b) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::flush(a.v[i] - b.v[i]);
  return out;
}

template <unsigned N>
accum<accfloat, N> mul(const vector<float, N> &a, const vector<float, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::multiply(a.v[i], b.v[i]);
  return out;
}

// max and min as the activation harness has them: `a > b ? a : b`.
template <unsigned N>
vector<float, N> max(const vector<float, N> &a, const vector<float, N> &b) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
  return out;
}

template <unsigned N>
vector<float, N> min(const vector<float, N> &a, const vector<float, N> &b) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
  return out;
}

template <unsigned N> vector<float, N> abs(const vector<float, N> &a) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = std::fabs(a.v[i]);
  return out;
}

// float -> int32 at the current rounding mode (nearest even under conv_even).
template <class T, unsigned N>
vector<T, N> to_fixed(const vector<float, N> &a, int shift) {
  vector<T, N> out;
  for (unsigned i = 0; i < N; ++i) {
    const float s = std::ldexp(a.v[i], shift);
    out.v[i] = static_cast<T>(current_rounding == rounding_mode::conv_even
                                  ? std::nearbyint(s)
                                  : std::floor(s));
  }
  return out;
}

template <class T, unsigned N>
vector<T, N> to_float(const vector<int32, N> &a, int shift) {
  vector<T, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = std::ldexp(static_cast<T>(a.v[i]), -shift);
  return out;
}

template <unsigned N> vector<float, N> inv(const vector<float, N> &d) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i) {
    const float r = static_cast<float>(1.0 / static_cast<double>(d.v[i]));
    out.v[i] = hostmodel::model.estimate8 ? hostmodel::keep8(r) : r;
  }
  return out;
}

template <unsigned N> vector<float, N> invsqrt(const vector<float, N> &d) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i) {
    const float r =
        static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.v[i])));
    out.v[i] = hostmodel::model.estimate8 ? hostmodel::keep8(r) : r;
  }
  return out;
}

template <unsigned N>
mask<N> lt(const vector<float, N> &a, const vector<float, N> &b) {
  mask<N> m;
  for (unsigned i = 0; i < N; ++i)
    m.bits |= static_cast<uint32_t>(a.v[i] < b.v[i]) << i;
  return m;
}

template <unsigned N> float reduce_max(const vector<float, N> &a) {
  float lane[N];
  for (unsigned i = 0; i < N; ++i)
    lane[i] = a.v[i];
  for (unsigned half = N / 2; half >= 1; half /= 2)
    for (unsigned i = 0; i < half; ++i)
      lane[i] = lane[i] > lane[i + half] ? lane[i] : lane[i + half];
  return lane[0];
}

#else // IRON_HOST_AIE2

// The AIE2 model: each fp32-vector operation is declared deleted, so a
// kernel calling one fails to compile (and a test can ask for it by name).
template <unsigned N>
vector<float, N> add(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N>
vector<float, N> sub(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N>
accum<accfloat, N> mul(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N>
vector<float, N> max(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N>
vector<float, N> min(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N> vector<float, N> abs(const vector<float, N> &) = delete;
template <class T, unsigned N>
vector<T, N> to_fixed(const vector<float, N> &, int) = delete;
template <class T, unsigned N>
vector<T, N> to_float(const vector<int32, N> &, int) = delete;
template <unsigned N> vector<float, N> inv(const vector<float, N> &) = delete;
template <unsigned N> vector<float, N> invsqrt(const vector<float, N> &) = delete;
template <unsigned N>
mask<N> lt(const vector<float, N> &, const vector<float, N> &) = delete;
template <unsigned N> float reduce_max(const vector<float, N> &) = delete;

#endif // IRON_HOST_AIE2

// -- matrix multiply (bf16 x bf16 -> fp32) -------------------------------------

// aie::transpose(v, rows, cols): v holds a rows x cols block row-major; the
// result holds its cols x rows transpose row-major (a lane move, exact).
template <class T, unsigned N>
vector<T, N> transpose(const vector<T, N> &a, unsigned rows, unsigned cols) {
  vector<T, N> out;
  for (unsigned i = 0; i < rows; ++i)
    for (unsigned j = 0; j < cols; ++j)
      out.v[j * rows + i] = a.v[i * cols + j];
  return out;
}

// aie::mmul<M, K, N, bfloat16, bfloat16, accauto>: C (M x N, fp32 lanes) +=
// A (M x K) @ B (K x N), each block row-major. Every bf16 product is exact in
// fp32 (the AIE's bf16 multiply); how the hardware sums a lane's K products
// into the lane is not documented, so the model's reduction letter says: t =
// the K products summed as a halving tree, then added to the lane; q = added
// to the lane one by one, k ascending. Every add rounds to nearest even.
template <unsigned M, unsigned K, unsigned N, class TA, class TB, class Acc>
struct mmul {
  static constexpr unsigned size_A = M * K;
  static constexpr unsigned size_B = K * N;
  static constexpr unsigned size_C = M * N;
  float c[size_C];
  explicit mmul(const vector<float, size_C> &v) {
    for (unsigned i = 0; i < size_C; ++i)
      c[i] = hostmodel::flush(v.v[i]);
  }
  void mac(const vector<TA, size_A> &a, const vector<TB, size_B> &b) {
    for (unsigned i = 0; i < M; ++i)
      for (unsigned j = 0; j < N; ++j) {
        float p[K];
        for (unsigned k = 0; k < K; ++k)
          p[k] = hostmodel::flush(static_cast<float>(a.v[i * K + k]) *
                                  static_cast<float>(b.v[k * N + j]));
        float &lane = c[i * N + j];
        if (!hostmodel::model.tree) {
          for (unsigned k = 0; k < K; ++k)
            lane = hostmodel::flush(lane + p[k]);
          continue;
        }
        for (unsigned half = K / 2; half >= 1; half /= 2)
          for (unsigned k = 0; k < half; ++k)
            p[k] = hostmodel::flush(p[k] + p[k + half]);
        lane = hostmodel::flush(lane + p[0]);
      }
  }
  template <class T> vector<T, size_C> to_vector() const {
    static_assert(std::is_same_v<T, float>, "the model keeps fp32 lanes");
    vector<T, size_C> out;
    for (unsigned i = 0; i < size_C; ++i)
      out.v[i] = c[i];
    return out;
  }
};

} // namespace aie

inline bfloat16::bfloat16(float v)
    : bits(aie::current_rounding == aie::rounding_mode::conv_even
               ? hostmodel::bf16_nearest(hostmodel::flush(v))
               : hostmodel::bf16_floor(hostmodel::flush(v))) {}

#endif // IRON_HOST_AIE_API_H
