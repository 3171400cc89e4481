//===- softmax_bf16.cc - IRON kernel softmax_bf16 ---------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: softmax_bf16
//   operator: Softmax
//   arguments: x, out: bfloat16[n]; scratch: float[cols]; n: int32; cols: int32; length: int32 (columns normalized over, any int32: clamped here to 0..cols)
//   tile: n a positive multiple of cols, cols a positive multiple of 16 (the vector width); designs pass rows_per_tile * cols, and as length a compile-time constant or the per-call scratchpad word unclamped
//   computes: out[r, :length] = exp(x - max) / sum(exp(x - max)) over the row's first length columns, out[r, length:] = 0, for each of the n / cols rows
//   rounding: exact max, fp32 exp of x - max (iron_vecmath.h mexp, within 2**-10 relative) kept in the fp32 scratch row, fp32 sum of those, each times the fp32 reciprocal of the sum (estimate and two Newton steps), one rounding to bf16 (nearest even): Softmax.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

#include <limits>

namespace {

using B = iron::Backend;

// The lanes of the vector at column i that lie before `length`.
inline B::M valid_lanes(int32_t i, int32_t length) {
  const int32_t left = length - i;
  if (left >= iron::kLanes)
    return B::M::from_uint32(0xffffu);
  if (left <= 0)
    return B::M::from_uint32(0u);
  return B::M::from_uint32((1u << left) - 1u);
}

} // namespace

extern "C" void softmax_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                             float *__restrict scratch, int32_t n, int32_t cols,
                             int32_t length) {
  iron::round_nearest_even();
  // The clamp of Softmax.reference: a per-call length arrives unclamped.
  const int32_t len = length < 0 ? 0 : (length > cols ? cols : length);
  // The row's max is one of its bf16 values: found exactly in bf16 lanes
  // (aie::max and reduce_max, as upstream's aie_kernels/aie2/reduce_max.cc).
  const iron::vbf16 lowest =
      aie::broadcast<bfloat16, iron::kLanes>(iron::bf16_from_bits(0xff80));
  const B::F zero = B::splat(0.0f);
  for (int32_t r = 0; r < n; r += cols) {
    if (len == 0) {
      for (int32_t i = 0; i < cols; i += iron::kLanes)
        aie::store_v(out + r + i, B::to_bf16(zero));
      continue;
    }
    iron::vbf16 m = lowest;
    for (int32_t i = 0; i < len; i += iron::kLanes) {
      const iron::vbf16 v = aie::load_v<iron::kLanes>(x + r + i);
      m = aie::max(m, aie::select(lowest, v, valid_lanes(i, len)));
    }
    const B::F top = B::splat(static_cast<float>(aie::reduce_max(m)));
    B::F acc = zero;
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F v = B::from_bf16(aie::load_v<iron::kLanes>(x + r + i));
      const B::F ex = iron::mexp<B>(B::sub(v, top), B::splat(1.0f));
      const B::F kept = B::select(valid_lanes(i, len), ex, zero);
      B::store_f32(scratch + i, kept);
      acc = B::add(acc, kept);
    }
    const B::F inv = iron::recip_row<B>(B::lane_sum(acc));
    // Past the length the output is exactly 0 even when the sum is 0 (a row
    // of -inf): inv is then NaN, and 0 * NaN would leak into those columns.
    for (int32_t i = 0; i < cols; i += iron::kLanes) {
      const B::F q = B::mul(B::load_f32(scratch + i), inv);
      aie::store_v(out + r + i,
                   B::to_bf16(B::select(valid_lanes(i, len), q, zero)));
    }
  }
}
