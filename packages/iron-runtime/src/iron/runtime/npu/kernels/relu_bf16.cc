//===- relu_bf16.cc - IRON kernel relu_bf16 ---------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: relu_bf16
//   operator: ReLU
//   arguments: x, out: bfloat16[n]; n: int32
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = max(x, 0)
//   rounding: none: selects x or 0 (exact): ReLU.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void relu_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                          int32_t n) {
  const iron::vbf16 zero = aie::zeros<bfloat16, iron::kLanes>();
  for (int32_t i = 0; i < n; i += iron::kLanes)
    aie::store_v(out + i, aie::max(aie::load_v<iron::kLanes>(x + i), zero));
}
