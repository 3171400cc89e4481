//===- rope_bf16.cc - IRON kernel rope_bf16 ---------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: rope_bf16
//   operator: RoPE
//   arguments: x: bfloat16[n]; table: bfloat16[head_dim]; out: bfloat16[n]; n: int32; head_dim: int32; interleaved: int32 (0 for method 'half', 1 for 'interleaved')
//   tile: n a positive multiple of head_dim, head_dim a positive multiple of 32 (each half of the table row whole 16-lane vectors); designs pass heads_per_tile * head_dim and the operator's head_dim
//   computes: each of the n / head_dim head rows of x (all of one position) rotated by the one table row, c its first half and s its second: 'half' out = [x1 c - x2 s, x2 c + x1 s] with x1, x2 the head row's halves; 'interleaved' out[2i] = x[2i] c[i] - x[2i+1] s[i], out[2i+1] = x[2i+1] c[i] + x[2i] s[i]
//   rounding: each bf16 product exact in the fp32 accumulator (mul), the second product subtracted or added with one fp32 rounding (msc / mac), one rounding to bf16 (nearest even): RoPE.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// The table row is the same for every head row of the call: the design
// acquires it once per position and passes it to every call for that
// position's tiles.
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace {

using iron::kLanes;
using iron::vbf16;

// (a c - b s, b c + a s), lane by lane: two exact products per lane in the
// fp32 accumulator, one fp32 rounding for the difference or sum, one to bf16.
inline void rotate(vbf16 a, vbf16 b, vbf16 c, vbf16 s, vbf16 &first,
                   vbf16 &second) {
  iron::accf lo = aie::mul(a, c);
  lo = aie::msc(lo, b, s);
  iron::accf hi = aie::mul(b, c);
  hi = aie::mac(hi, a, s);
  first = lo.to_vector<bfloat16>();
  second = hi.to_vector<bfloat16>();
}

// Hugging Face's rotate_half: pair i is (x[i], x[i + d/2]).
inline void rope_half(const bfloat16 *__restrict x,
                      const bfloat16 *__restrict table,
                      bfloat16 *__restrict out, int32_t n, int32_t d) {
  const int32_t half = d / 2;
  for (int32_t r = 0; r < n; r += d) {
    for (int32_t i = 0; i < half; i += kLanes) {
      const vbf16 c = aie::load_v<kLanes>(table + i);
      const vbf16 s = aie::load_v<kLanes>(table + half + i);
      const vbf16 x1 = aie::load_v<kLanes>(x + r + i);
      const vbf16 x2 = aie::load_v<kLanes>(x + r + half + i);
      vbf16 first, second;
      rotate(x1, x2, c, s, first, second);
      aie::store_v(out + r + i, first);
      aie::store_v(out + r + half + i, second);
    }
  }
}

// Adjacent pairs: pair i is (x[2i], x[2i + 1]). Two vectors hold 16 pairs;
// unzipping them gives the 16 even and the 16 odd elements, zipping the
// rotated halves restores the order.
inline void rope_interleaved(const bfloat16 *__restrict x,
                             const bfloat16 *__restrict table,
                             bfloat16 *__restrict out, int32_t n, int32_t d) {
  const int32_t half = d / 2;
  for (int32_t r = 0; r < n; r += d) {
    for (int32_t j = 0; j < d; j += 2 * kLanes) {
      const vbf16 c = aie::load_v<kLanes>(table + j / 2);
      const vbf16 s = aie::load_v<kLanes>(table + half + j / 2);
      const auto [even, odd] =
          aie::interleave_unzip(aie::load_v<kLanes>(x + r + j),
                                aie::load_v<kLanes>(x + r + j + kLanes), 1);
      vbf16 first, second;
      rotate(even, odd, c, s, first, second);
      const auto [lo, hi] = aie::interleave_zip(first, second, 1);
      aie::store_v(out + r + j, lo);
      aie::store_v(out + r + j + kLanes, hi);
    }
  }
}

} // namespace

extern "C" void rope_bf16(bfloat16 *__restrict x, bfloat16 *__restrict table,
                          bfloat16 *__restrict out, int32_t n, int32_t head_dim,
                          int32_t interleaved) {
  iron::round_nearest_even();
  if (interleaved)
    rope_interleaved(x, table, out, n, head_dim);
  else
    rope_half(x, table, out, n, head_dim);
}
