//===- axpy_bf16.cc - IRON kernel axpy_bf16 ---------------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: axpy_bf16
//   operator: AXPY
//   arguments: x, y, out: bfloat16[n]; n: int32; a: int32 (bf16 bits of scalar_factor)
//   tile: n a positive multiple of 16 (the vector width); designs pass tile_size
//   computes: out = a * x + y
//   rounding: a * x exact in fp32 (a bf16 product), + y in fp32 to nearest even, one rounding to bf16 (nearest even): AXPY.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

extern "C" void axpy_bf16(bfloat16 *__restrict x, bfloat16 *__restrict y,
                          bfloat16 *__restrict out, int32_t n, int32_t a) {
  iron::round_nearest_even();
  const bfloat16 scale = iron::bf16_from_bits(a);
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    iron::accf sum;
    sum.from_vector(aie::load_v<iron::kLanes>(y + i));
    sum = aie::mac(sum, aie::load_v<iron::kLanes>(x + i), scale);
    aie::store_v(out + i, sum.to_vector<bfloat16>());
  }
}
