//===- sample.cc - IRON kernels for the Sample design -----------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: sample
//   operator: Sample
//   arguments: sample_reset(list: int32[2 + 2k]; k: int32); sample_scan_bf16(chunk: bfloat16[n] (read as its bits); list: int32[2 + 2k]; n, k: int32); sample_scan_f32(chunk: float[n] (read as its bits); list: int32[2 + 2k]; n, k: int32); sample_pick(list: int32[2 + 2k]; token: int32[1]; k, greedy: int32; inv_bits: int32 (fp32 bits of 1 / fp32(temperature)); seed: int32 (the draw's counter, modulo 2**32)); sample_pick_call(list: int32[2 + 2k]; token: int32[1]; k: int32; temperature_code: int32 (temperature_code(T): 0 greedy, else fp32 bits of T less 63 << 23); top_p_bits: int32 (fp32 bits of top_p); seed: int32)
//   tile: n any positive count (designs pass tile_size: even, at most 4096); 1 <= k <= 256 (the operator's top_k, or 1 for greedy; a per-call top_k, at most the list the design allocates); list holds count, next index, k keys, k indices
//   computes: the running top-k (value, index) list of the logits streamed so far, ranked largest first, ties by lower index, NaN as -inf; then the token: greedy the first ranked index, else draw()'s pick from the float32 weights exp2_f32((z_j - z_0) * LOG2E), z_j = l_j * inv, cut to the nucleus of mass top_p (sample_pick: 1), and the uniform (hash32(seed) >> 8) * 2**-24; sample_pick_call divides inv = 1 / T itself (IEEE single division, as draw())
//   rounding: exact (an integer token): the ranking compares integer keys of the logits' bits; the draw does draw()'s float32 operations in its order, each one IEEE single rounded to nearest even, never fused (fp contraction off): Sample.reference (iron.operators.sample.draw)
//   stack: 448 bytes; twice the host frames plus 64, rounded up to 32: the host build of this same scalar code (tests/npu/host_sample.cc, g++ -O2 -fstack-usage) measures 184 bytes over every function of this file (tests/npu/test_stack.py recomputes it); the 64 and the doubling cover AIE2's callee-saved registers (lr, r16-r23, p6, p7: 44 bytes), its 32-byte frame alignment and the compiler-rt calls of emulated float; every Peano build measures it
//
// The ranking is integer-only: a logit's fp32 bits (a bf16 logit's bits
// shifted up 16, exact) map to an int32 key whose order is the float order,
// with NaN mapped to -inf's key and -0 to +0's, so ties compare equal exactly
// as the reference's stable sort sees them. The list stays sorted by key,
// descending; a logit enters when the list has room or its key beats the
// last one, after every kept key >= its own (earlier indices first), so the
// list is always the reference's first k ranked (value, index) pairs.
//
// The draw (pick) recomputes the running sums rather than storing them: once
// for the total c_{k-1}, once (top_p < 1) for the nucleus end c_{m-1}, once
// to count the c_j <= t. The same operations give the same sums each time;
// the sums never decrease (weights are >= 0, rounding is monotone), so the
// count of c_j below the nucleus threshold is the index of the first at or
// above it.
//
// Built with -DIRON_SAMPLE_HOST (tests/npu/host_sample.cc) the file compiles
// for the host without aie_api: the whole algorithm is scalar C++, so the
// host tests run exactly this code against Sample.reference.
//
//===----------------------------------------------------------------------===//

#ifdef IRON_SAMPLE_HOST
#include <stdint.h>
#else
#include "iron_kernel.h"
#endif

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace iron_sample {

// The list: [0] entries kept, [1] the vocabulary index of the next logit,
// then k keys (descending), then their k indices.
constexpr int32_t kCount = 0;
constexpr int32_t kNext = 1;
constexpr int32_t kHead = 2;

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kNegInfBits = 0xFF800000u;
constexpr uint32_t kExpMask = 0x7F800000u;

// log2(e) and ln(2)**j / j!, j = 0..7, as float32 (iron.operators.sample).
constexpr float kLog2E = 0x1.715476p+0f;
constexpr float kExp2Coeffs[8] = {
    0x1.000000p+0f,  0x1.62e430p-1f,  0x1.ebfbe0p-3f,  0x1.c6b08ep-5f,
    0x1.3b2ab6p-7f,  0x1.5d87fep-10f, 0x1.430912p-13f, 0x1.ffcbfcp-17f,
};

// The int32 key of fp32 bits: order-preserving, NaN as -inf, -0 as +0.
inline int32_t order_key(uint32_t bits) {
  const uint32_t magnitude = bits & ~kSign;
  if (magnitude > kExpMask)
    bits = kNegInfBits; // NaN ranks as -inf
  else if (magnitude == 0)
    bits = 0; // -0 ties with +0
  const int32_t s = static_cast<int32_t>(bits);
  return s < 0 ? (s ^ 0x7FFFFFFF) : s;
}

// The fp32 value of a key (the inverse of order_key on its image).
inline float key_value(int32_t key) {
  const uint32_t bits = static_cast<uint32_t>(key < 0 ? (key ^ 0x7FFFFFFF) : key);
  float value;
  __builtin_memcpy(&value, &bits, sizeof value);
  return value;
}

inline float from_bits(int32_t bits) {
  float value;
  __builtin_memcpy(&value, &bits, sizeof value);
  return value;
}

inline bool is_finite(float v) {
  uint32_t bits;
  __builtin_memcpy(&bits, &v, sizeof bits);
  return (bits & kExpMask) != kExpMask;
}

// Offer (key, index) to the sorted list of at most k entries.
inline void offer(int32_t *__restrict list, int32_t k, int32_t key,
                  int32_t index) {
  int32_t *keys = list + kHead;
  int32_t *indices = list + kHead + k;
  int32_t count = list[kCount];
  if (count == k) {
    if (key <= keys[k - 1])
      return; // ranks after every kept entry
    --count;  // the last entry drops out
  }
  int32_t j = count;
  while (j > 0 && keys[j - 1] < key) {
    keys[j] = keys[j - 1];
    indices[j] = indices[j - 1];
    --j;
  }
  keys[j] = key;
  indices[j] = index;
  list[kCount] = count + 1;
}

// Offer n logits given as fp32 bits (bits(i) for i < n), indices from next.
template <class Bits>
inline void scan(int32_t *__restrict list, int32_t n, int32_t k, Bits bits) {
  const int32_t base = list[kNext];
  const int32_t *keys = list + kHead;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t key = order_key(bits(i));
    // The common case, a full list and a logit below its last key, is one
    // integer compare.
    if (list[kCount] == k && key <= keys[k - 1])
      continue;
    offer(list, k, key, base + i);
  }
  list[kNext] = base + n;
}

// 2**y for float32 y <= 0 (exp2_f32): 0 below -126, else a degree-7 Horner
// polynomial of the fraction times an exact power of two.
inline float exp2_f32(float y) {
  if (!(y >= -126.0f))
    return 0.0f;
  int32_t whole = static_cast<int32_t>(y); // toward zero; y in [-126, 0]
  if (static_cast<float>(whole) > y)
    --whole; // floor
  const float f = y - static_cast<float>(whole);
  float p = kExp2Coeffs[7];
  for (int32_t j = 6; j >= 0; --j) {
    const float product = p * f;
    p = product + kExp2Coeffs[j];
  }
  const uint32_t scale_bits = static_cast<uint32_t>(whole + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale; // exact: p in [1, 2), scale normal
}

// hash32: lowbias32(seed * 0x9E3779B9 + 0x7F4A7C15), uint32 arithmetic.
inline uint32_t hash32(uint32_t seed) {
  uint32_t x = seed * 0x9E3779B9u + 0x7F4A7C15u;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The weight of ranked entry j: exp2_f32(fp32(fp32(z_j - z_0) * LOG2E)).
inline float weight(int32_t key, float z0, float inv) {
  const float z = key_value(key) * inv;
  const float d = z - z0;
  return exp2_f32(d * kLog2E);
}

// A per-call temperature's code is its fp32 bits less this
// (iron.operators.sample.temperature_code).
constexpr uint32_t kTemperatureBias = 63u << 23;

// draw() steps 2-7 on the ranked list: the token.
inline int32_t pick(const int32_t *__restrict list, int32_t k, bool greedy,
                    float inv, float top_p, int32_t seed) {
  const int32_t count = list[kCount];
  const int32_t *keys = list + kHead;
  const int32_t *indices = list + kHead + k;
  if (count == 0) // no logits streamed (a design never does this)
    return 0;
  if (greedy)
    return indices[0];
  const float z0 = key_value(keys[0]) * inv;
  if (!is_finite(z0))
    return indices[0];
  float total = 0.0f;
  for (int32_t j = 0; j < count; ++j)
    total = total + weight(keys[j], z0, inv);
  int32_t m = count;
  float end = total; // c_{m-1}
  if (top_p < 1.0f) {
    const float threshold = top_p * total;
    float running = 0.0f;
    for (int32_t j = 0; j < count; ++j) {
      running = running + weight(keys[j], z0, inv);
      if (!(running < threshold)) {
        m = j + 1;
        end = running;
        break;
      }
    }
  }
  const uint32_t h = hash32(static_cast<uint32_t>(seed));
  const float u = static_cast<float>(h >> 8) * 0x1p-24f; // exact
  const float target = u * end;
  int32_t rank = 0;
  float running = 0.0f;
  for (int32_t j = 0; j < m; ++j) {
    running = running + weight(keys[j], z0, inv);
    if (running <= target)
      ++rank;
  }
  if (rank > m - 1)
    rank = m - 1;
  return indices[rank];
}

} // namespace iron_sample

extern "C" {

void sample_reset(int32_t *__restrict list, int32_t k) {
  list[iron_sample::kCount] = 0;
  list[iron_sample::kNext] = 0;
  for (int32_t j = 0; j < 2 * k; ++j)
    list[iron_sample::kHead + j] = 0;
}

// A chunk of bf16 logits, as their 16-bit patterns.
void sample_scan_bf16(const uint16_t *__restrict chunk, int32_t *__restrict list,
                      int32_t n, int32_t k) {
  iron_sample::scan(list, n, k, [chunk](int32_t i) {
    return static_cast<uint32_t>(chunk[i]) << 16;
  });
}

// A chunk of float32 logits, as their 32-bit patterns.
void sample_scan_f32(const uint32_t *__restrict chunk, int32_t *__restrict list,
                     int32_t n, int32_t k) {
  iron_sample::scan(list, n, k, [chunk](int32_t i) { return chunk[i]; });
}

void sample_pick(int32_t *__restrict list, int32_t *__restrict token, int32_t k,
                 int32_t greedy, int32_t inv_bits, int32_t seed) {
  token[0] = iron_sample::pick(list, k, greedy != 0,
                               iron_sample::from_bits(inv_bits), 1.0f, seed);
}

// Per-call settings: the temperature as its code (0 greedy), top_p as its
// fp32 bits; the reciprocal 1 / fp32(T) is an IEEE single division, as
// draw() computes it on the host.
void sample_pick_call(int32_t *__restrict list, int32_t *__restrict token,
                      int32_t k, int32_t temperature_code, int32_t top_p_bits,
                      int32_t seed) {
  using namespace iron_sample;
  const bool greedy = temperature_code == 0;
  float inv = 0.0f;
  if (!greedy) {
    const uint32_t bits =
        static_cast<uint32_t>(temperature_code) + kTemperatureBias;
    inv = 1.0f / from_bits(static_cast<int32_t>(bits));
  }
  token[0] = pick(list, k, greedy, inv, from_bits(top_p_bits), seed);
}

} // extern "C"
