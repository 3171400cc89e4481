//===- clamp_bf16.cc - IRON kernel clamp_bf16 -------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: clamp_bf16
//   operator: Clamp
//   arguments: x, out: bfloat16[n]; n: int32; low, high: int32 (bf16 bits)
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = min(max(x, low), high)
//   rounding: none: selects x, low or high (exact): Clamp.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void clamp_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                           int32_t n, int32_t low, int32_t high) {
  const iron::vbf16 lo =
      aie::broadcast<bfloat16, iron::kLanes>(iron::bf16_from_bits(low));
  const iron::vbf16 hi =
      aie::broadcast<bfloat16, iron::kLanes>(iron::bf16_from_bits(high));
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    const iron::vbf16 v = aie::load_v<iron::kLanes>(x + i);
    aie::store_v(out + i, aie::min(aie::max(v, lo), hi));
  }
}
