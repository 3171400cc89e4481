//===- add_bf16.cc - IRON kernel add_bf16 -----------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: add_bf16
//   operator: ElementwiseAdd
//   arguments: a, b, out: bfloat16[n]; n: int32
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = a + b
//   rounding: a + b in fp32 (nearest even), one rounding to bf16 (nearest even): ElementwiseAdd.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void add_bf16(bfloat16 *__restrict a, bfloat16 *__restrict b,
                         bfloat16 *__restrict out, int32_t n) {
  iron::round_nearest_even();
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    iron::accf sum;
    sum.from_vector(aie::load_v<iron::kLanes>(a + i));
    sum = aie::add(sum, aie::load_v<iron::kLanes>(b + i));
    aie::store_v(out + i, sum.to_vector<bfloat16>());
  }
}
