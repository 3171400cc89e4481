//===- gemv.cc - IRON kernels for the GEMV design ---------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: gemv
//   operator: GEMV (effective precision HIGHEST, HIGH, or MEDIUM on AIE2P; batched or not: the design calls the kernels once per product's tiles)
//   arguments: gemv_f32_zero(acc: float[tile_m]; tile_m: int32); gemv_bf16_acc(w: bfloat16[tile_m*tile_k] row-major; x: bfloat16[tile_k]; acc: float[tile_m]; tile_m, tile_k: int32); gemv_bf16_acc_round(same as gemv_bf16_acc); gemv_bfp16_acc_round(same as gemv_bf16_acc; AIE2P only); gemv_bf16_store(acc: float[tile_m]; out: bfloat16[tile_m]; tile_m: int32)
//   tile: tile_k a positive multiple of 16 (the vector width the bf16 loop uses; bfp16 blocks of 8 divide it); tile_m >= 1 (the bfp16 path takes rows 8 at a time, padding the last group with zero rows); designs pass the resolved tile_m and tile_k
//   computes: acc[r] += sum_k w[r, k] * x[k] per K tile (zeroed per row tile); out[r] = acc[r]
//   rounding: HIGHEST (gemv_bf16_acc): bf16 products exact in fp32, fp32 sums, one rounding to bf16 (nearest even) at gemv_bf16_store; HIGH (gemv_bf16_acc_round): the fp32 partial sum is rounded to bf16 (nearest even) after every K tile; MEDIUM (gemv_bfp16_acc_round): w and x converted to bfp16ebs8 blocks of 8 along K (shared exponent the block's largest, mantissas rounded to nearest even under conv_even, iron.operators.bfp16.quantize), products summed in fp32 accumulators, then rounded as HIGH: GEMV.reference (iron.operators.matmul.model_product)
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// The design keeps acc in a core-local fp32 buffer between K tiles, so a row
// tile's sum is carried in fp32 across kernel calls; only the store (HIGHEST)
// or each K tile (HIGH, MEDIUM) rounds.
//
// The bfp16 path (AIE2P, where aie_api defines bfp16ebs8: its types are
// declared under __AIE_ARCH__ == 21) follows the spelling of mlir-aie's own
// AIE2P block-datatype kernels: a bf16 vector widened into
// aie::accum<accfloat, 64> and converted with to_vector<bfp16ebs8>() into an
// aie::block_vector<bfp16ebs8, 64> (programming_examples/basic/
// block_datatypes/bfp_conversion/kernel.cc, bf16_to_bfp_conversion), and the
// 8x8x8 block multiply-accumulate mac_8x8_8x8T(A, B^T, acc) with B given
// transposed so its blocks run along K (aie_kernels/aie2p/mm_bfp.cc,
// matmul_vectorized_2x2_bfp16; aie_api detail/aie2p/mmul_bfp16_bfp16.hpp
// wraps the same intrinsic as aie::mmul<8, 8, 8, bfp16ebs8, bfp16ebs8>).
//
//
// Batch invariance (docs/guide/numerics.md): one output element's order is
// kLanes fp32 lanes over each K tile, reduced at the tile's end and added to
// acc, tile after tile: it depends on tile_k, not on other rows. The prompt
// version's GEMM (gemm.cc) sums the same row in mmul blocks, another order:
// on the NPU a position's logits are not yet the same bits in a prompt chunk
// and a decode step (the kernel models are; a batched GEMV for the prompt's
// rows would make the device so too).
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace {

// One row's dot product over n elements (n a multiple of kLanes): lane-wise
// fp32 multiply-accumulates of exact bf16 products, then a lane reduction.
inline float dot_row(const bfloat16 *__restrict w, const bfloat16 *__restrict x,
                     int32_t n) {
  iron::accf sum = aie::zeros<accfloat, iron::kLanes>();
  for (int32_t k = 0; k < n; k += iron::kLanes) {
    sum = aie::mac(sum, aie::load_v<iron::kLanes>(w + k),
                   aie::load_v<iron::kLanes>(x + k));
  }
  return aie::reduce_add(sum.to_vector<float>());
}

// fp32 -> the nearest bf16 (ties to even), as fp32 again.
inline float round_bf16(float v) {
  return static_cast<float>(static_cast<bfloat16>(v));
}

#if __AIE_ARCH__ == 21

constexpr int kBlock = 8;             // bfp16ebs8: 8 values share an exponent
constexpr int kTile = kBlock * kBlock; // one 8 x 8 operand of the block mac
using vblock = aie::vector<bfloat16, kBlock>;
using vtile = aie::vector<bfloat16, kTile>;
using bfp_tile = aie::block_vector<bfp16ebs8, kTile>;
using acc_tile = aie::accum<accfloat, kTile>;

// 64 bf16 (8 rows of 8 along K) -> 8 bfp16ebs8 blocks, one per row: the
// exact widening into an fp32 accumulator, then the block conversion, which
// rounds under the rounding mode the caller set.
inline bfp_tile to_blocks(vtile v) {
  const acc_tile wide(v);
  return wide.to_vector<bfp16ebs8>();
}

#endif

} // namespace

extern "C" {

void gemv_f32_zero(float *__restrict acc, int32_t tile_m) {
  for (int32_t r = 0; r < tile_m; ++r)
    acc[r] = 0.0f;
}

void gemv_bf16_acc(bfloat16 *__restrict w, bfloat16 *__restrict x,
                   float *__restrict acc, int32_t tile_m, int32_t tile_k) {
  for (int32_t r = 0; r < tile_m; ++r)
    acc[r] += dot_row(w + r * tile_k, x, tile_k);
}

void gemv_bf16_acc_round(bfloat16 *__restrict w, bfloat16 *__restrict x,
                         float *__restrict acc, int32_t tile_m,
                         int32_t tile_k) {
  iron::round_nearest_even();
  for (int32_t r = 0; r < tile_m; ++r)
    acc[r] = round_bf16(acc[r] + dot_row(w + r * tile_k, x, tile_k));
}

#if __AIE_ARCH__ == 21

// Rows in groups of 8: A holds the group's rows of w (8 values of K each,
// zero rows past tile_m), B^T holds x's block of the same K in all 8 of its
// rows, so every column of C = A B is the group's 8 dot products; column 0
// is read. Per K tile the fp32 block sums then add onto acc, rounded to bf16.
void gemv_bfp16_acc_round(bfloat16 *__restrict w, bfloat16 *__restrict x,
                          float *__restrict acc, int32_t tile_m,
                          int32_t tile_k) {
  iron::round_nearest_even();
  for (int32_t r0 = 0; r0 < tile_m; r0 += kBlock) {
    const int32_t rows = tile_m - r0 < kBlock ? tile_m - r0 : kBlock;
    acc_tile sum = aie::zeros<accfloat, kTile>();
    for (int32_t k = 0; k < tile_k; k += kBlock) {
      vtile a = aie::zeros<bfloat16, kTile>();
      for (int32_t i = 0; i < rows; ++i)
        a.insert(i, aie::load_v<kBlock>(w + (r0 + i) * tile_k + k));
      const vblock xb = aie::load_v<kBlock>(x + k);
      vtile bt;
      for (int32_t n = 0; n < kBlock; ++n)
        bt.insert(n, xb);
      sum = mac_8x8_8x8T(to_blocks(a), to_blocks(bt), sum);
    }
    const aie::vector<float, kTile> c = sum.to_vector<float>();
    for (int32_t i = 0; i < rows; ++i)
      acc[r0 + i] = round_bf16(acc[r0 + i] + c.get(i * kBlock));
  }
}

#endif

void gemv_bf16_store(float *__restrict acc, bfloat16 *__restrict out,
                     int32_t tile_m) {
  iron::round_nearest_even();
  for (int32_t r = 0; r < tile_m; ++r)
    out[r] = static_cast<bfloat16>(acc[r]);
}

} // extern "C"
