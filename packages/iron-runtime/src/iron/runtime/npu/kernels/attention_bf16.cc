//===- attention_bf16.cc - IRON kernels for the attention designs ---*- C++ -*-===//
//
// IRON kernel contract
//   symbol: attention_bf16
//   operator: DecodeAttention, CausalAttention (grouped-query attention over a (kv_heads, max_len, head_dim) cache)
//   arguments: attention_bf16_init(acc: float[rows*head_dim]; stats: float[2*rows]; rows, head_dim: int32); attention_bf16_chunk(q: bfloat16 query rows at q + q_offset, rows x head_dim (the design's q element, bf16 or i32-typed with the scratchpad words after the queries); kv: bfloat16[2*kv_tile*head_dim] = K chunk then V chunk; scores: float[rows*kv_tile]; acc; stats; q_offset, rows, group, head_dim, kv_tile, chunk, word, q_index, causal, scale_bits: int32 (the fp32 bits of 1/sqrt(head_dim))); attention_bf16_store(acc; stats; out: bfloat16[rows*head_dim]; rows, head_dim: int32)
//   tile: head_dim and kv_tile positive multiples of 16 (the vector width); rows = q_tile * group (query row i is token row i / group); designs pass the resolved kv_tile and q_tile
//   computes: per query row i with limit = word (decode) or word + q_index * (rows / group) + i / group + 1 (causal: word = start), positions chunk*kv_tile + j < limit only: s_j = (q . k_j) * (1/sqrt(head_dim)); online softmax m' = max(m, max s_j), a = exp(m - m'), sum = sum * a + sum_j exp(s_j - m'), acc = acc * a + sum_j exp(s_j - m') v_j; store: out = acc * (1 / sum)
//   rounding: bf16 products exact in fp32, fp32 dot products, times the fp32 scale 1/sqrt(head_dim) (rounded once, passed as bits); fp32 exp by Cody-Waite reduction and a degree-7 polynomial (within 4 fp32 ulps, 0 below 2**-126); fp32 sums and running rescales; one correctly rounded fp32 reciprocal of the sum and one fp32 product; one rounding to bf16 (nearest even): DecodeAttention.reference / CausalAttention.reference (iron.operators.attention.attend; the tolerance covers fp32 evaluation in any order, fp32_error_bound)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// Positions at or past a row's limit are skipped (selected away, never
// weighted by zero), so stale or NaN cache entries there never reach a result.
// The designs stream the whole cache every call (a shim descriptor cannot
// depend on the per-call word), so whole chunks past every row's limit cost a
// call each but no arithmetic.
//
// exp_nonpos is written over the iron_vecmath.h backend interface (a template
// on B), so a host test compiles it with IRON_ATTENTION_HOST defined and a
// scalar backend, without aie_api. It lives here, not in iron_vecmath.h,
// whose mexp has a looser error (2**-10) than this operator's model (4 ulps).
//
//
// Batch invariance (docs/guide/numerics.md): a query row's online softmax
// rescales at every kv_tile chunk boundary, so its bits depend on kv_tile;
// CausalAttention and DecodeAttention are profiled at different kv_tiles, so
// on the NPU a prompt row and the decode step at its position may differ in
// the last bits (the kernel model computes each row in one position order
// for both operators). One kv_tile for both would make the device so too.
//===----------------------------------------------------------------------===//

#ifndef IRON_ATTENTION_HOST
#include "iron_kernel.h"
#endif

#include <stdint.h>

namespace iron_attention {

constexpr float kLog2E = 1.4426950408889634f;
// ln 2 split so that n * kLn2Hi is exact for |n| < 2**8 (kLn2Hi has 16
// significant bits) and kLn2Hi + kLn2Lo is ln 2 to about 2**-40.
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.4286068203094172e-06f;
// Below this e**x is under 2**-126: returned as 0 (the model's flush floor).
constexpr float kExpLow = -87.33654475f;

// e**x for x <= 0, every lane (x = -inf gives 0).
template <class B> typename B::F exp_nonpos(typename B::F x) {
  using F = typename B::F;
  const F xc = B::maxf(x, B::splat(kExpLow));
  const auto n = B::nearest(B::mul(xc, B::splat(kLog2E)));
  const F nf = B::to_f(n);
  // r = x - n ln2, |r| <= ln2 / 2 + tiny: the first product is exact.
  const F r = B::sub(B::sub(xc, B::mul(nf, B::splat(kLn2Hi))),
                     B::mul(nf, B::splat(kLn2Lo)));
  // e**r, Taylor to degree 7 (remainder < 6e-9 relative), Horner.
  F p = B::splat(1.0f / 5040.0f);
  p = B::add(B::mul(p, r), B::splat(1.0f / 720.0f));
  p = B::add(B::mul(p, r), B::splat(1.0f / 120.0f));
  p = B::add(B::mul(p, r), B::splat(1.0f / 24.0f));
  p = B::add(B::mul(p, r), B::splat(1.0f / 6.0f));
  p = B::add(B::mul(p, r), B::splat(0.5f));
  p = B::add(B::mul(p, r), B::splat(1.0f));
  p = B::add(B::mul(p, r), B::splat(1.0f));
  // n in [-126, 0]: 2**n is a normal float built from its exponent bits.
  const F e = B::mul(p, B::pow2(B::nearest(B::maxf(nf, B::splat(-126.0f)))));
  return B::select(B::less(x, B::splat(kExpLow)), B::splat(0.0f), e);
}

} // namespace iron_attention

#ifndef IRON_ATTENTION_HOST

namespace {

using B = iron::AieBackend;
constexpr int kL = iron::kLanes;

inline float neg_inf() { return -__builtin_inff(); }

// q . k over head_dim (a multiple of 16): exact bf16 products, fp32 sums.
inline float dot(const bfloat16 *__restrict q, const bfloat16 *__restrict k,
                 int32_t head_dim) {
  iron::accf sum = aie::zeros<accfloat, kL>();
  for (int32_t d = 0; d < head_dim; d += kL)
    sum = aie::mac(sum, aie::load_v<kL>(q + d), aie::load_v<kL>(k + d));
  return aie::reduce_add(sum.to_vector<float>());
}

} // namespace

extern "C" {

void attention_bf16_init(float *__restrict acc, float *__restrict stats,
                         int32_t rows, int32_t head_dim) {
  const iron::vf32 zero = B::splat(0.0f);
  for (int32_t i = 0; i < rows * head_dim; i += kL)
    aie::store_v(acc + i, zero);
  for (int32_t i = 0; i < rows; ++i) {
    stats[i] = neg_inf(); // running max
    stats[rows + i] = 0.0f; // running sum of weights
  }
}

void attention_bf16_chunk(const bfloat16 *__restrict qbase,
                          const bfloat16 *__restrict kv,
                          float *__restrict scores, float *__restrict acc,
                          float *__restrict stats, int32_t q_offset,
                          int32_t rows, int32_t group, int32_t head_dim,
                          int32_t kv_tile, int32_t chunk, int32_t word,
                          int32_t q_index, int32_t causal, int32_t scale_bits) {
  iron::round_nearest_even();
  const bfloat16 *q = qbase + q_offset;
  const bfloat16 *keys = kv;
  const bfloat16 *vals = kv + kv_tile * head_dim;
  const int32_t first = chunk * kv_tile;
  const int32_t tokens = rows / group;
  // 1/sqrt(head_dim) rounded once to fp32 by the design, as the reference's.
  const float scale = iron::f32_from_bits(scale_bits);
  for (int32_t i = 0; i < rows; ++i) {
    const int32_t token = i / group;
    const int32_t limit =
        causal ? word + q_index * tokens + token + 1 : word;
    int32_t valid = limit - first;
    if (valid <= 0)
      continue; // nothing of this chunk is attended: selected away
    if (valid > kv_tile)
      valid = kv_tile;
    float *s = scores + i * kv_tile;
    const bfloat16 *qi = q + i * head_dim;
    float top = stats[i];
    for (int32_t j = 0; j < valid; ++j) {
      s[j] = dot(qi, keys + j * head_dim, head_dim) * scale;
      top = s[j] > top ? s[j] : top;
    }
    // Rescale the running sum and accumulator by e**(m - m').
    const float old = stats[i];
    const float alpha =
        old == neg_inf()
            ? 0.0f
            : iron_attention::exp_nonpos<B>(B::splat(old - top))[0];
    float *a = acc + i * head_dim;
    const iron::vf32 av = B::splat(alpha);
    for (int32_t d = 0; d < head_dim; d += kL)
      aie::store_v(a + d, B::mul(aie::load_v<kL>(a + d), av));
    float total = stats[rows + i] * alpha;
    // Weights e**(s_j - m'), kL at a time; lanes past `valid` are never used.
    for (int32_t j = 0; j < valid; j += kL) {
      const iron::vf32 sv = aie::load_v<kL>(s + j);
      aie::store_v(s + j, iron_attention::exp_nonpos<B>(B::sub(sv, B::splat(top))));
    }
    for (int32_t j = 0; j < valid; ++j) {
      const float w = s[j];
      total += w;
      const iron::vf32 wv = B::splat(w);
      const bfloat16 *v = vals + j * head_dim;
      for (int32_t d = 0; d < head_dim; d += kL) {
        const iron::vf32 term = B::mul(iron::widen(aie::load_v<kL>(v + d)), wv);
        aie::store_v(a + d, B::add(aie::load_v<kL>(a + d), term));
      }
    }
    stats[i] = top;
    stats[rows + i] = total;
  }
}

void attention_bf16_store(float *__restrict acc, float *__restrict stats,
                          bfloat16 *__restrict out, int32_t rows,
                          int32_t head_dim) {
  iron::round_nearest_even();
  for (int32_t i = 0; i < rows; ++i) {
    // One correctly rounded fp32 reciprocal (a software division on the
    // scalar unit), then one fp32 product per element.
    const iron::vf32 inv = B::splat(1.0f / stats[rows + i]);
    for (int32_t d = 0; d < head_dim; d += kL) {
      const iron::vf32 a = aie::load_v<kL>(acc + i * head_dim + d);
      aie::store_v(out + i * head_dim + d, iron::narrow(B::mul(a, inv)));
    }
  }
}

} // extern "C"

#endif // IRON_ATTENTION_HOST
