// Host harness for the row kernels (rms_norm*, layer_norm*, softmax) and the
// GEMV kernels: the kernel sources themselves, compiled for the host against
// a small scalar model of the aie_api calls they make, so the tests judge
// the very code Peano compiles (its algorithm and order of operations)
// against the operators' references, without the AIE toolchain.
//
// Build (test_row_kernels.py does it): -I <dir holding an empty
// aie_api/aie.hpp> -I <kernels>; this file defines the model, then includes
// the kernel sources.
//
// Usage:
//   host_rows KERNEL ROWS COLS ROWS_PER_TILE SCALAR MODELS < in > out
//     KERNEL: rms_norm_bf16, rms_norm_weighted_bf16, layer_norm_bf16,
//       layer_norm_affine_bf16, softmax_bf16; SCALAR: eps as fp32 bits, or
//       Softmax's length (passed unclamped); in: x (ROWS * COLS float32, each
//       a bf16 value), then the weight, then the bias (COLS each, if the
//       kernel takes them); out: ROWS * COLS float32, each a bf16 value.
//   host_rows gemv_bf16_acc|gemv_bf16_acc_round M K TILE_M TILE_K MODELS
//     in: w (M * K), x (K); out: M values; the GEMV design's order: per row
//     tile, gemv_f32_zero, a kernel call per K tile, gemv_bf16_store.
//   MODELS is a comma-separated list of models; the outputs of each, in that
//   order, follow one another.
//
// A model is four letters, one per assumption about the AIE (each has the
// choice that tests must pass under all of):
//   1. fp32 vector multiply (aie::mul): i = IEEE fp32 (round to nearest
//      even); s = AIE2's emulation from bf16 pieces, "safe" (each operand
//      cut into three bf16 pieces, truncating; nine exact bf16 products
//      summed in fp32, smallest first), what llvm-aie's aiev2_core.h
//      mul_elem_16 is unless AIE2_FP32_EMULATION_ACCURACY_FAST/LOW is set;
//      f = its "fast" variant (the six largest products).
//   2. aie::reduce_add: t = halving tree (lanes i and i + 8, then + 4, + 2,
//      + 1); q = lane 0, 1, ... in sequence.
//   3. aie::inv / aie::invsqrt estimates: 8 = the exact value truncated to
//      8 significant bits (a bf16-grade estimate); e = the exact value
//      rounded to fp32.
//   4. subnormal fp32 results of vector operations: z = flushed to zero
//      (sign kept); k = kept.
// Every vector add, subtract and multiply-accumulate is fp32 with round to
// nearest even; scalar float code (the lane sum / cols, + eps) is IEEE fp32,
// as Peano's soft-float routines are. float -> bf16 conversions round as
// the current aie::set_rounding mode says: conv_even is round to nearest
// even; any other mode (the model's start-up mode is floor) rounds toward
// -inf, so a kernel that forgets to set conv_even fails the tests.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

} // namespace hostmodel

// -- the aie_api names the kernels use ------------------------------------------

using int32 = int32_t;
struct accfloat {};

struct bfloat16 {
  uint16_t bits;
  bfloat16() = default;
  bfloat16(float v); // rounds as aie::set_rounding says (below)
  operator float() const {
    return hostmodel::from_bits(static_cast<uint32_t>(bits) << 16);
  }
};

namespace aie {

enum class rounding_mode { floor, ceil, conv_even };
inline rounding_mode current_rounding = rounding_mode::floor;
inline void set_rounding(rounding_mode m) { current_rounding = m; }

template <class T, unsigned N> struct vector {
  T v[N];
};

template <unsigned N> struct mask {
  uint32_t bits = 0;
  static mask from_uint32(uint32_t b) {
    mask m;
    m.bits = b;
    return m;
  }
  bool test(unsigned i) const { return (bits >> i) & 1u; }
};

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

template <class Tag, unsigned N> accum<Tag, N> zeros() {
  accum<Tag, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = 0.0f;
  return out;
}

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
vector<int32, N> add(const vector<int32, N> &a, const vector<int32, N> &b) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = a.v[i] + b.v[i];
  return out;
}

template <unsigned N>
accum<accfloat, N> mul(const vector<float, N> &a, const vector<float, N> &b) {
  accum<accfloat, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = hostmodel::multiply(a.v[i], b.v[i]);
  return out;
}

// acc + a * b for bf16 a and b: the product is exact in fp32.
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

template <unsigned N>
vector<int32, N> upshift(const vector<int32, N> &a, int shift) {
  vector<int32, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = static_cast<int32>(static_cast<uint32_t>(a.v[i]) << shift);
  return out;
}

template <class T, unsigned N>
vector<T, N> vector_cast(const vector<int32, N> &a) {
  vector<T, N> out;
  std::memcpy(out.v, a.v, sizeof out.v);
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

// aie::select(a, b, m): b where m is set, else a.
template <unsigned N>
vector<float, N> select(const vector<float, N> &a, const vector<float, N> &b,
                        const mask<N> &m) {
  vector<float, N> out;
  for (unsigned i = 0; i < N; ++i)
    out.v[i] = m.test(i) ? b.v[i] : a.v[i];
  return out;
}

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

template <unsigned N> float reduce_max(const vector<float, N> &a) {
  float lane[N];
  for (unsigned i = 0; i < N; ++i)
    lane[i] = a.v[i];
  for (unsigned half = N / 2; half >= 1; half /= 2)
    for (unsigned i = 0; i < half; ++i)
      lane[i] = lane[i] > lane[i + half] ? lane[i] : lane[i + half];
  return lane[0];
}

} // namespace aie

inline bfloat16::bfloat16(float v)
    : bits(aie::current_rounding == aie::rounding_mode::conv_even
               ? hostmodel::bf16_nearest(hostmodel::flush(v))
               : hostmodel::bf16_floor(hostmodel::flush(v))) {}

// -- the kernels, as shipped ----------------------------------------------------

#include "gemv.cc"
#include "layer_norm_affine_bf16.cc"
#include "layer_norm_bf16.cc"
#include "rms_norm_bf16.cc"
#include "rms_norm_weighted_bf16.cc"
#include "softmax_bf16.cc"

// -- the driver -----------------------------------------------------------------

namespace {

bool parse_model(const char *m) {
  using hostmodel::Mul;
  if (std::strlen(m) != 4)
    return false;
  auto &md = hostmodel::model;
  const char mul = m[0], red = m[1], est = m[2], ftz = m[3];
  if (mul != 'i' && mul != 's' && mul != 'f')
    return false;
  md.mul = mul == 'i' ? Mul::ieee : mul == 's' ? Mul::safe : Mul::fast;
  if ((red != 't' && red != 'q') || (est != '8' && est != 'e') ||
      (ftz != 'z' && ftz != 'k'))
    return false;
  md.tree = red == 't';
  md.estimate8 = est == '8';
  md.ftz = ftz == 'z';
  return true;
}

std::vector<bfloat16> take(const std::vector<float> &in, size_t &at,
                           size_t n) {
  std::vector<bfloat16> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i].bits = static_cast<uint16_t>(hostmodel::bits_of(in.at(at + i)) >> 16);
  at += n;
  return out;
}

void put(const std::vector<bfloat16> &out) {
  for (bfloat16 v : out) {
    const float f = static_cast<float>(v);
    std::fwrite(&f, sizeof f, 1, stdout);
  }
}

int usage(const char *self) {
  std::fprintf(stderr,
               "usage: %s KERNEL ROWS COLS ROWS_PER_TILE SCALAR MODELS < in\n"
               "       %s gemv_bf16_acc[_round] M K TILE_M TILE_K MODELS < in\n",
               self, self);
  return 2;
}

// The GEMV design's order over one (M, K) product: per row tile, zero the
// fp32 partial sums, one kernel call per K tile, store.
bool run_gemv(const char *kernel, long M, long K, long tm, long tk,
              const std::vector<float> &in, std::vector<bfloat16> &out) {
  size_t at = 0;
  const bool round = !std::strcmp(kernel, "gemv_bf16_acc_round");
  if (!round && std::strcmp(kernel, "gemv_bf16_acc"))
    return false;
  const std::vector<bfloat16> w = take(in, at, M * K), x = take(in, at, K);
  if (at != in.size())
    return false;
  std::vector<bfloat16> wt(tm * tk), xt(tk), ot(tm);
  std::vector<float> acc(tm);
  out.assign(M, bfloat16());
  for (long r0 = 0; r0 < M; r0 += tm) {
    gemv_f32_zero(acc.data(), tm);
    for (long k0 = 0; k0 < K; k0 += tk) {
      for (long r = 0; r < tm; ++r)
        for (long k = 0; k < tk; ++k)
          wt[r * tk + k] = w[(r0 + r) * K + k0 + k];
      for (long k = 0; k < tk; ++k)
        xt[k] = x[k0 + k];
      (round ? gemv_bf16_acc_round : gemv_bf16_acc)(wt.data(), xt.data(),
                                                    acc.data(), tm, tk);
    }
    gemv_bf16_store(acc.data(), ot.data(), tm);
    for (long r = 0; r < tm; ++r)
      out[r0 + r] = ot[r];
  }
  return true;
}

// The row design's order: one kernel call per tile of rows_per_tile rows.
bool run_rows(const char *kernel, long rows, long cols, long per_tile,
              int32_t scalar, const std::vector<float> &in,
              std::vector<bfloat16> &out) {
  size_t at = 0;
  const long tile = per_tile * cols;
  std::vector<bfloat16> x = take(in, at, rows * cols), params;
  std::vector<float> scratch(cols);
  const bool weighted = !std::strcmp(kernel, "rms_norm_weighted_bf16");
  const bool affine = !std::strcmp(kernel, "layer_norm_affine_bf16");
  if (weighted)
    params = take(in, at, cols);
  if (affine)
    params = take(in, at, 2 * cols); // weight, then bias: one FIFO element
  if (at != in.size() || tile <= 0 || (rows * cols) % tile)
    return false;
  out.assign(rows * cols, bfloat16());
  for (long r0 = 0; r0 < rows * cols; r0 += tile) {
    // A core's rounding mode is whatever ran last; each call sets its own.
    aie::set_rounding(aie::rounding_mode::floor);
    bfloat16 *xt = x.data() + r0, *ot = out.data() + r0;
    const int32_t n = static_cast<int32_t>(tile), k = static_cast<int32_t>(cols);
    if (!std::strcmp(kernel, "rms_norm_bf16"))
      rms_norm_bf16(xt, ot, n, k, scalar);
    else if (weighted)
      rms_norm_weighted_bf16(xt, params.data(), ot, n, k, scalar);
    else if (!std::strcmp(kernel, "layer_norm_bf16"))
      layer_norm_bf16(xt, ot, n, k, scalar);
    else if (affine)
      layer_norm_affine_bf16(xt, params.data(), ot, n, k, scalar);
    else if (!std::strcmp(kernel, "softmax_bf16"))
      softmax_bf16(xt, ot, scratch.data(), n, k, scalar);
    else
      return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 7)
    return usage(argv[0]);
  // MODELS: comma-separated; the outputs follow one another in that order.
  std::vector<std::string> models;
  for (const char *m = argv[6];;) {
    const char *end = std::strchr(m, ',');
    models.emplace_back(m, end ? end - m : std::strlen(m));
    if (!parse_model(models.back().c_str()))
      return usage(argv[0]);
    if (!end)
      break;
    m = end + 1;
  }
  const char *kernel = argv[1];
  const long a = std::atol(argv[2]), b = std::atol(argv[3]);
  const long c = std::atol(argv[4]), d = std::atol(argv[5]);
  std::vector<float> in;
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1)
    in.push_back(v);
  for (const std::string &m : models) {
    parse_model(m.c_str());
    std::vector<bfloat16> out;
    const bool ok =
        !std::strncmp(kernel, "gemv_", 5)
            ? run_gemv(kernel, a, b, c, d, in, out)
            : run_rows(kernel, a, b, c, static_cast<int32_t>(d), in, out);
    if (!ok) {
      std::fprintf(stderr, "%s: unknown kernel, or %zu inputs do not fit %s\n",
                   kernel, in.size(), "its arguments");
      return 2;
    }
    put(out);
  }
  return 0;
}
