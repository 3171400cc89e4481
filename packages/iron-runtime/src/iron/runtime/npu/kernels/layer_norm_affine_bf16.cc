//===- layer_norm_affine_bf16.cc - IRON kernel layer_norm_affine_bf16 -*- C++ -*-===//
//
// IRON kernel contract
//   symbol: layer_norm_affine_bf16
//   operator: LayerNorm (weighted=True, biased=True)
//   arguments: x: bfloat16[n]; params: bfloat16[2 * cols] (weight, then bias); out: bfloat16[n]; n: int32; cols: int32; eps: int32 (fp32 bits of eps)
//   tile: n a positive multiple of cols, cols a positive multiple of 16 (the vector width); designs pass rows_per_tile * cols
//   computes: out[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * weight + bias for each of the n / cols rows
//   rounding: as layer_norm_bf16 (the rsqrt's argument scaled by an exact power of four above 2**100, so its Newton steps stay fp32-accurate under an emulated fp32 multiply), then times the weight and plus the bias in fp32, one rounding to bf16 (nearest even): LayerNorm.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace {

using B = iron::Backend;

// 1/sqrt(d) as iron::rsqrt, for any normal d > 0. iron::rsqrt forms
// d * (r * r); for d above 2**100, r * r is below 2**-100 and an fp32
// multiply from three bf16 pieces (AIE2's: aie_api's emulation, or
// iron::Aie2Backend's) loses the pieces under 2**-126 when subnormals flush,
// leaving about 16 correct bits, which a bias cancelling the scaled row
// exposes (tests/npu/test_row_kernels.py). An exact power-of-four scaling
// keeps every intermediate in range.
inline B::F rsqrt_any(float d) {
  if (d > 0x1p100f)
    return B::mul(iron::rsqrt<B>(d * 0x1p-64f), B::splat(0x1p-32f));
  return iron::rsqrt<B>(d);
}

} // namespace

extern "C" void layer_norm_affine_bf16(bfloat16 *__restrict x,
                                       bfloat16 *__restrict params,
                                       bfloat16 *__restrict out, int32_t n,
                                       int32_t cols, int32_t eps) {
  iron::round_nearest_even();
  const float e = iron::f32_from_bits(eps);
  const float count = static_cast<float>(cols);
  const bfloat16 *weight = params;
  const bfloat16 *bias = params + cols;
  for (int32_t r = 0; r < n; r += cols) {
    B::F acc = B::splat(0.0f);
    for (int32_t i = 0; i < cols; i += iron::kLanes)
      acc = B::add(acc, B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)));
    const B::F mean = B::splat(B::lane_sum(acc) / count);
    B::F sq = B::splat(0.0f);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F d =
          B::sub(B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)), mean);
      sq = B::add(sq, B::mul(d, d));
    }
    const B::F scale = rsqrt_any(B::lane_sum(sq) / count + e);
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F d =
          B::sub(B::from_bf16(aie::load_v<iron::kLanes>(x + r + i)), mean);
      const B::F w = B::from_bf16(aie::load_v<iron::kLanes>(weight + i));
      const B::F b = B::from_bf16(aie::load_v<iron::kLanes>(bias + i));
      aie::store_v(out + r + i,
                   B::to_bf16(B::add(B::mul(B::mul(d, scale), w), b)));
    }
  }
}
