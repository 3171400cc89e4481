//===- qmatmul.cc - IRON kernels for the quantized-weight designs -----*- C++ -*-===//
//
// IRON kernel contract
//   symbol: qmatmul
//   operator: QGEMV and DequantRows (packed q4, q8 or q8_16 rows of iron.operators.quantized; the designs call qgemv_* once per K tile of a row tile, qdequant_rows once per tile of rows)
//   arguments: qmatmul_f32_zero(acc: float[tile_m]; tile_m: int32); qgemv_acc(w: uint8[tile_m*row_bytes(tile_k)] (the tile's packed rows back to back, each its groups in order: fp16 scale, fp16 min for 4-bit, then the codes); x: bfloat16[tile_k]; acc: float[tile_m]; tile_m, tile_k, bits, group: int32); qmatmul_bf16_store(acc: float[tile_m]; out: bfloat16[tile_m]; tile_m: int32); qdequant_rows(w: uint8[rows*row_bytes(k)]; out: bfloat16[rows*k]; rows, k, bits, group: int32)
//   tile: tile_k and k positive multiples of the group (the designs pass multiples of 64: whole groups in whole 4-byte words); group 32 (q4, q8) or 16 (q8_16), a multiple of kLanes (16); tile_m, rows >= 1
//   computes: each weight w[r, k] = scale * q + min (4-bit: unsigned codes 0..15, element 2i in the low nibble of code byte i; 8-bit: signed codes, min 0), then acc[r] += sum_k w[r, k] * x[k] per K tile (zeroed per row tile); out[r] = acc[r]; qdequant_rows writes the weights themselves
//   rounding: a weight is scale * q (exact in fp32: the fp16 scale is split into two bf16 pieces, each product exact, their sum exact) plus min (one fp32 rounding), rounded once to bf16 (nearest even): quantized.dequantize(...).astype(bfloat16), bit for bit (DequantRows.reference); the product then as GEMV at HIGHEST: bf16 products exact in fp32, fp32 sums, one rounding to bf16 at qmatmul_bf16_store (QGEMV.reference)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); the deepest call holds one group of 32 bf16 values (64 bytes) on the stack; a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// A packed row tile never becomes a bf16 tile in core memory: each group is
// dequantized into 32 bf16 values on the stack (iron_quant.h, whose comment
// says how each weight is made exactly) and multiplied into the row's fp32
// lanes at once.
//
//
// Batch invariance (docs/guide/numerics.md): after the exact dequantization,
// an output element is summed as gemv.cc sums it (lanes per K tile), an
// order qgemm.cc's mmul blocks do not share; the kernel models do.
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"
#include "iron_quant.h"

namespace iron_qmatmul {

using namespace iron_quant;

} // namespace iron_qmatmul

extern "C" {

void qmatmul_f32_zero(float *__restrict acc, int32_t tile_m) {
  for (int32_t r = 0; r < tile_m; ++r)
    acc[r] = 0.0f;
}

void qgemv_acc(uint8_t *__restrict w, bfloat16 *__restrict x,
               float *__restrict acc, int32_t tile_m, int32_t tile_k,
               int32_t bits, int32_t group) {
  using namespace iron_qmatmul;
  iron::round_nearest_even();
  alignas(64) bfloat16 values[kMaxGroup]; // one group, on the stack
  const int32_t gb = group_bytes(bits, group);
  const int32_t groups = tile_k / group;
  for (int32_t r = 0; r < tile_m; ++r) {
    const uint8_t *row = w + r * groups * gb;
    iron::accf sum = aie::zeros<accfloat, iron::kLanes>();
    for (int32_t g = 0; g < groups; ++g) {
      dequant_group(row + g * gb, bits, group, values);
      for (int32_t h = 0; h < group; h += iron::kLanes)
        sum = aie::mac(sum, aie::load_v<iron::kLanes>(values + h),
                       aie::load_v<iron::kLanes>(x + g * group + h));
    }
    acc[r] += aie::reduce_add(sum.to_vector<float>());
  }
}

void qmatmul_bf16_store(float *__restrict acc, bfloat16 *__restrict out,
                        int32_t tile_m) {
  iron::round_nearest_even();
  for (int32_t r = 0; r < tile_m; ++r)
    out[r] = static_cast<bfloat16>(acc[r]);
}

void qdequant_rows(uint8_t *__restrict w, bfloat16 *__restrict out,
                   int32_t rows, int32_t k, int32_t bits, int32_t group) {
  using namespace iron_qmatmul;
  iron::round_nearest_even();
  const int32_t gb = group_bytes(bits, group);
  const int32_t groups = k / group;
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t g = 0; g < groups; ++g)
      dequant_group(w + (r * groups + g) * gb, bits, group,
                    out + r * k + g * group);
}

} // extern "C"
