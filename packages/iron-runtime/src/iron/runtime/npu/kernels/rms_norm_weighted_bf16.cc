//===- rms_norm_weighted_bf16.cc - IRON kernel rms_norm_weighted_bf16 -*- C++ -*-===//
//
// IRON kernel contract
//   symbol: rms_norm_weighted_bf16
//   operator: RMSNorm (weighted=True)
//   arguments: x: bfloat16[n]; weight: bfloat16[cols]; out: bfloat16[n]; n: int32; cols: int32; eps: int32 (fp32 bits of eps)
//   tile: n a positive multiple of cols, cols a positive multiple of 16 (the vector width); designs pass rows_per_tile * cols
//   computes: out[r, :] = bf16(x[r, :] * rsqrt(sum(x[r, :]**2) / cols + eps)) * weight for each of the n / cols rows
//   rounding: as rms_norm_bf16, the normalized value rounded to bf16 (nearest even), then times the weight in fp32 (exact) and rounded again to bf16 (nearest even): two roundings, as RMSNorm.reference (AMD IRON's two-kernel weighted rms_norm)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void rms_norm_weighted_bf16(bfloat16 *__restrict x,
                                       bfloat16 *__restrict weight,
                                       bfloat16 *__restrict out, int32_t n,
                                       int32_t cols, int32_t eps) {
  using B = iron::Backend;
  iron::round_nearest_even();
  const float e = iron::f32_from_bits(eps);
  for (int32_t r = 0; r < n; r += cols) {
    B::F acc = B::splat(0.0f);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const iron::vbf16 v = aie::load_v<iron::kLanes>(x + r + i);
      acc = B::mac_bf16(acc, v, v);
    }
    const float mean = B::lane_sum(acc) / static_cast<float>(cols);
    const B::F scale = iron::rsqrt<B>(mean + e);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F v = B::from_bf16(aie::load_v<iron::kLanes>(x + r + i));
      // The normalized row rounds to bf16 first (the first kernel's output).
      const B::F normed = B::from_bf16(B::to_bf16(B::mul(v, scale)));
      const B::F w = B::from_bf16(aie::load_v<iron::kLanes>(weight + i));
      aie::store_v(out + r + i, B::to_bf16(B::mul(normed, w)));
    }
  }
}
