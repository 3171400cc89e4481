//===- qgemm.cc - IRON kernels for the QGEMM design -------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: qgemm
//   operator: QGEMM (packed q4, q8 or q8_16 rows of iron.operators.quantized as the right operand, a (N, K) weight's rows; the design calls qgemm_acc once per K tile of an output tile)
//   arguments: qgemm_f32_zero(acc: float[tile_m*tile_n]; tile_m, tile_n: int32); qgemm_acc(a: bfloat16[tile_m*tile_k] in r x s blocks; w: uint8[tile_n*row_bytes(tile_k)] (the tile's packed rows back to back, each its groups in order: fp16 scale, fp16 min for 4-bit, then the codes); acc: float[tile_m*tile_n] in r x t blocks; deq: bfloat16[tile_n*tile_k] (the core's dequantized tile, written here); tile_m, tile_k, tile_n, bits, group: int32); qgemm_bf16_store(acc: float[tile_m*tile_n]; out: bfloat16[tile_m*tile_n], both in r x t blocks; tile_m, tile_n: int32)
//   tile: (r, s, t) = (4, 8, 4) on AIE2 (npu1), (4, 8, 8) on AIE2P (npu2), GEMM's HIGHEST mmul; tile_m a multiple of 2r, tile_n of 2t, tile_k a positive multiple of 64 (whole groups in whole 4-byte words); group 32 (q4, q8) or 16 (q8_16), a multiple of s
//   computes: each weight w[n, k] = scale * q + min (4-bit: unsigned codes 0..15, element 2i in the low nibble of code byte i; 8-bit: signed codes, min 0) into deq, then acc += a @ deq.T per K tile (acc zeroed per output tile by qgemm_f32_zero); out = acc
//   rounding: a weight is scale * q (exact in fp32: the fp16 scale split into two bf16 pieces, each product exact, their sum exact) plus min (one fp32 rounding), rounded once to bf16 (nearest even): quantized.dequantize(...).astype(bfloat16), bit for bit; the product then as GEMM at HIGHEST: bf16 products exact in fp32, fp32 sums across every K tile, one rounding to bf16 (nearest even) at qgemm_bf16_store (QGEMM.reference)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); the deepest call holds one group of 32 bf16 values (64 bytes) on the stack; a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// The packed tile never leaves the core as bf16: qgemm_acc dequantizes it
// into deq, the core-local bf16 tile the design allocates (QGEMM.core_bytes
// counts it), in the t x s blocks of a transposed GEMM b ((N, K) layout, n
// blocks outer, t rows of s elements inside), then multiplies a by it with
// GEMM's mmul loop (iron_mmul.h's mac_tile for a transposed b: each t x s
// block transposed in registers). deq is rewritten every K tile.
//
// A group's dequantization is qmatmul.cc's (the QGEMV kernel's), the same
// arithmetic: the fp16 scale and minimum become fp32 by integer work, each
// split into a bf16 high piece (its top 8 significant bits) and a bf16 low
// piece (the other 3, exact), so bf16 x bf16 -> fp32 multiplies make scale *
// q exactly; a code becomes its bf16 bit pattern by integer work; the one
// rounding of scale * q + min is the accumulator add's, the one rounding to
// bf16 the to_vector<bfloat16> under conv_even.
//
// The mmul geometry is iron_mmul.h's, GEMM's (mlir-aie's
// aie_kernels/aie2/mm.cc matmul_vectorized_4x8x4_bf16_f32 and
// aie_kernels/aie2p/mm.cc matmul_vectorized_4x8x8_bf16_f32),
// iron.operators.matmul.mmul_shape at HIGHEST. The code below is IRON's own.
//
//
// Batch invariance (docs/guide/numerics.md): after the exact dequantization,
// an output element is summed as gemm.cc sums it (mmul blocks), not in
// qmatmul.cc's lane order; the kernel models give both QGEMV's bits.
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"
#include "iron_mmul.h"
#include "iron_quant.h"

namespace iron_qgemm {

using namespace iron_mmul;

// -- dequantizing a group: iron_quant.h (qmatmul.cc's arithmetic) ---------------

using namespace iron_quant;

// The packed tile (tile_n rows of tile_k) into deq: row n's elements k in
// the t x s block (n / t, k / s), n blocks outer, row n % t, column k % s.
inline void dequant_tile(const uint8_t *__restrict w, bfloat16 *__restrict deq,
                         int32_t tile_k, int32_t tile_n, int32_t bits,
                         int32_t group) {
  alignas(64) bfloat16 values[kMaxGroup]; // one group, on the stack
  const int32_t gb = group_bytes(bits, group);
  const int32_t groups = tile_k / group;
  const int32_t k_blocks = tile_k / static_cast<int32_t>(kS);
  for (int32_t n = 0; n < tile_n; ++n) {
    const int32_t nb = n / static_cast<int32_t>(kT), nr = n % static_cast<int32_t>(kT);
    bfloat16 *row = deq + (nb * k_blocks * kT + nr) * kS; // block (nb, 0), row nr
    for (int32_t g = 0; g < groups; ++g) {
      dequant_group(w + (n * groups + g) * gb, bits, group, values);
      for (int32_t j = 0; j < group; j += static_cast<int32_t>(kS)) {
        const int32_t kb = (g * group + j) / static_cast<int32_t>(kS);
        __builtin_memcpy(row + kb * Mmul::size_B, values + j, kS * sizeof(bfloat16));
      }
    }
  }
}

} // namespace iron_qgemm

extern "C" {

void qgemm_f32_zero(float *__restrict acc, int32_t tile_m, int32_t tile_n) {
  for (int32_t i = 0; i < tile_m * tile_n; ++i)
    acc[i] = 0.0f;
}

void qgemm_acc(bfloat16 *__restrict a, uint8_t *__restrict w,
               float *__restrict acc, bfloat16 *__restrict deq, int32_t tile_m,
               int32_t tile_k, int32_t tile_n, int32_t bits, int32_t group) {
  using namespace iron_qgemm;
  iron::round_nearest_even();
  dequant_tile(w, deq, tile_k, tile_n, bits, group);
  mac_tile<true>(a, deq, acc, tile_m, tile_k, tile_n);
}

void qgemm_bf16_store(float *__restrict acc, bfloat16 *__restrict out,
                      int32_t tile_m, int32_t tile_n) {
  iron::round_nearest_even();
  using Moves = iron::Aie2Backend; // accfloat moves only, on both targets
  for (int32_t i = 0; i < tile_m * tile_n; i += iron::kLanes) // one rounding, even
    aie::store_v(out + i, Moves::to_bf16(Moves::load_f32(acc + i)));
}

} // extern "C"
