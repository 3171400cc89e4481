//===- leaky_relu_bf16.cc - IRON kernel leaky_relu_bf16 ---------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: leaky_relu_bf16
//   operator: LeakyReLU
//   arguments: x, out: bfloat16[n]; n: int32; alpha: int32 (bf16 bits of alpha)
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = x if x >= 0 else alpha * x
//   rounding: alpha * x exact in fp32, one rounding to bf16 (nearest even); x passes unrounded: LeakyReLU.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void leaky_relu_bf16(bfloat16 *__restrict x,
                                bfloat16 *__restrict out, int32_t n,
                                int32_t alpha) {
  iron::round_nearest_even();
  const bfloat16 slope = iron::bf16_from_bits(alpha);
  const iron::vbf16 zero = aie::zeros<bfloat16, iron::kLanes>();
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    const iron::vbf16 v = aie::load_v<iron::kLanes>(x + i);
    const iron::vbf16 scaled = aie::mul(v, slope).to_vector<bfloat16>();
    aie::store_v(out + i, aie::select(v, scaled, aie::lt(v, zero)));
  }
}
