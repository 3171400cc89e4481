//===- gemv.cc - IRON kernels for the GEMV design ---------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: gemv
//   operator: GEMV (effective precision HIGHEST or HIGH; unbatched)
//   arguments: gemv_f32_zero(acc: float[tile_m]; tile_m: int32); gemv_bf16_acc(w: bfloat16[tile_m*tile_k] row-major; x: bfloat16[tile_k]; acc: float[tile_m]; tile_m, tile_k: int32); gemv_bf16_acc_round(same as gemv_bf16_acc); gemv_bf16_store(acc: float[tile_m]; out: bfloat16[tile_m]; tile_m: int32)
//   tile: tile_k a positive multiple of 16 (the vector width the loop uses); tile_m >= 1; designs pass the resolved tile_m and tile_k
//   computes: acc[r] += sum_k w[r, k] * x[k] per K tile (zeroed per row tile); out[r] = acc[r]
//   rounding: HIGHEST (gemv_bf16_acc): bf16 products exact in fp32, fp32 sums, one rounding to bf16 (nearest even) at gemv_bf16_store; HIGH (gemv_bf16_acc_round): the fp32 partial sum is rounded to bf16 (nearest even) after every K tile: GEMV.reference (iron.operators.matmul.model_product)
//
// The design keeps acc in a core-local fp32 buffer between K tiles, so a row
// tile's sum is carried in fp32 across kernel calls; only the store (HIGHEST)
// or each K tile (HIGH) rounds.
//
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

void gemv_bf16_store(float *__restrict acc, bfloat16 *__restrict out,
                     int32_t tile_m) {
  iron::round_nearest_even();
  for (int32_t r = 0; r < tile_m; ++r)
    out[r] = static_cast<bfloat16>(acc[r]);
}

} // extern "C"
