//===- silu_bf16.cc - IRON kernel silu_bf16 ---------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: silu_bf16
//   operator: SiLU
//   arguments: x, out: bfloat16[n]; n: int32
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = x * sigmoid(x)
//   rounding: fp32 evaluation to within 2**-10 relative (iron_vecmath.h), one rounding to bf16 (nearest even): SiLU.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void silu_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                          int32_t n) {
  iron::map1(x, out, n, [](iron::Lanes v) {
    return iron::silu<iron::Backend>(v);
  });
}
