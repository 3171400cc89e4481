//===- gemm.cc - IRON kernels for the GEMM design ---------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: gemm
//   operator: GEMM (effective precision HIGHEST or HIGH; b (K, N) or, with b_transposed, (N, K))
//   arguments: gemm_f32_zero(acc: float[tile_m*tile_n]; tile_m, tile_n: int32); gemm_bf16_acc(a: bfloat16[tile_m*tile_k] in r x s blocks; b: bfloat16[tile_k*tile_n] in s x t blocks, k blocks outer; acc: float[tile_m*tile_n] in r x t blocks; tile_m, tile_k, tile_n: int32); gemm_bf16_acc_round(same as gemm_bf16_acc); gemm_bf16_acc_bt(as gemm_bf16_acc, but b: bfloat16[tile_n*tile_k] in t x s blocks of the (N, K) layout, n blocks outer); gemm_bf16_acc_round_bt(same as gemm_bf16_acc_bt); gemm_bf16_store(acc: float[tile_m*tile_n]; out: bfloat16[tile_m*tile_n], both in r x t blocks; tile_m, tile_n: int32)
//   tile: (r, s, t) = (4, 8, 4) on AIE2 (npu1), (4, 8, 8) on AIE2P (npu2); tile_m a multiple of 2r, tile_k of s, tile_n of 2t (the 2 x 2 mmul expansion); blocks row-major inside, row blocks outer; designs pass the resolved tiles
//   computes: acc += a @ b per K tile (acc zeroed per output tile by gemm_f32_zero); out = acc
//   rounding: HIGHEST (gemm_bf16_acc, _bt): bf16 products exact in fp32, fp32 sums across every K tile, one rounding to bf16 (nearest even) at gemm_bf16_store; HIGH (gemm_bf16_acc_round, _bt): the fp32 partial sum is rounded to bf16 (nearest even) after every K tile: GEMM.reference (iron.operators.matmul.model_product)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// The mmul geometry and the accumulate loop are iron_mmul.h's (shared with
// qgemm.cc), carried over from mlir-aie's own bf16 matmul kernels there;
// the code is IRON's own.
//
// The design keeps acc in a core-local fp32 buffer between K tiles, so an
// output tile's sum is carried in fp32 across kernel calls; only the store
// (HIGHEST) or every K tile (HIGH) rounds.
//
//
// Batch invariance (docs/guide/numerics.md): an output element is summed in
// mmul blocks across K tiles, an order that differs from gemv.cc's lane
// order for the same row; the kernel models give a GEMM row GEMV's bits, the
// device does not yet (within each operator's tolerance of the model).
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"
#include "iron_mmul.h"

namespace {

using iron_mmul::mac_tile;

// fp32 lanes are rounded to bf16 and widened back through accfloat moves
// only (iron_kernel.h's Aie2Backend, on both targets): no fp32-vector
// arithmetic, which AIE2 has only as aie_api's emulation.
using Moves = iron::Aie2Backend;

// acc[i] = the nearest bf16 (ties to even) of acc[i], as fp32 again.
inline void round_tile(float *__restrict acc, int32_t n) {
  iron::round_nearest_even();
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    const iron::vbf16 rounded = Moves::to_bf16(Moves::load_f32(acc + i));
    Moves::store_f32(acc + i, Moves::from_bf16(rounded));
  }
}

} // namespace

extern "C" {

void gemm_f32_zero(float *__restrict acc, int32_t tile_m, int32_t tile_n) {
  const auto zero = aie::zeros<accfloat, iron::kLanes>().to_vector<float>();
  for (int32_t i = 0; i < tile_m * tile_n; i += iron::kLanes)
    aie::store_v(acc + i, zero);
}

void gemm_bf16_acc(bfloat16 *__restrict a, bfloat16 *__restrict b,
                   float *__restrict acc, int32_t tile_m, int32_t tile_k,
                   int32_t tile_n) {
  mac_tile<false>(a, b, acc, tile_m, tile_k, tile_n);
}

void gemm_bf16_acc_round(bfloat16 *__restrict a, bfloat16 *__restrict b,
                         float *__restrict acc, int32_t tile_m, int32_t tile_k,
                         int32_t tile_n) {
  mac_tile<false>(a, b, acc, tile_m, tile_k, tile_n);
  round_tile(acc, tile_m * tile_n);
}

void gemm_bf16_acc_bt(bfloat16 *__restrict a, bfloat16 *__restrict b,
                      float *__restrict acc, int32_t tile_m, int32_t tile_k,
                      int32_t tile_n) {
  mac_tile<true>(a, b, acc, tile_m, tile_k, tile_n);
}

void gemm_bf16_acc_round_bt(bfloat16 *__restrict a, bfloat16 *__restrict b,
                            float *__restrict acc, int32_t tile_m,
                            int32_t tile_k, int32_t tile_n) {
  mac_tile<true>(a, b, acc, tile_m, tile_k, tile_n);
  round_tile(acc, tile_m * tile_n);
}

void gemm_bf16_store(float *__restrict acc, bfloat16 *__restrict out,
                     int32_t tile_m, int32_t tile_n) {
  iron::round_nearest_even();
  for (int32_t i = 0; i < tile_m * tile_n; i += iron::kLanes)
    aie::store_v(out + i, Moves::to_bf16(Moves::load_f32(acc + i)));
}

} // extern "C"
