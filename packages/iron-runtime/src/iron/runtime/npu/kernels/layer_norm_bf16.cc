//===- layer_norm_bf16.cc - IRON kernel layer_norm_bf16 ---------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: layer_norm_bf16
//   operator: LayerNorm (weighted=False, biased=False)
//   arguments: x, out: bfloat16[n]; n: int32; cols: int32; eps: int32 (fp32 bits of eps)
//   tile: n a positive multiple of cols, cols a positive multiple of 16 (the vector width); designs pass rows_per_tile * cols
//   computes: out[r, :] = (x[r, :] - mean) * rsqrt(var + eps) for each of the n / cols rows, var the mean of squared deviations
//   rounding: three fp32 passes (fp32 sum / cols; fp32 sum of squared fp32 deviations / cols; deviation times the fp32 rsqrt of var + eps), one rounding to bf16 (nearest even): LayerNorm.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void layer_norm_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                                int32_t n, int32_t cols, int32_t eps) {
  using B = iron::Backend;
  iron::round_nearest_even();
  const float e = iron::f32_from_bits(eps);
  const float count = static_cast<float>(cols);
  for (int32_t r = 0; r < n; r += cols) {
    B::F acc = B::splat(0.0f);
    for (int32_t i = 0; i < cols; i += iron::kLanes)
      acc = B::add(acc, B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)));
    const B::F mean = B::splat(B::lane_sum(acc) / count);
    // The deviations and their squares stay in fp32 lanes (accumulators on
    // AIE2); nothing between here and the output rounds to bf16.
    B::F sq = B::splat(0.0f);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F d =
          B::sub(B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)), mean);
      sq = B::add(sq, B::mul(d, d));
    }
    const B::F scale = iron::rsqrt<B>(B::lane_sum(sq) / count + e);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F d =
          B::sub(B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)), mean);
      aie::store_v(out + r + i, B::to_bf16(B::mul(d, scale)));
    }
  }
}
