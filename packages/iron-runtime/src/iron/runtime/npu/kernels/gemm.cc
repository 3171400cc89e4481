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
// The mmul geometry is a fact carried over from mlir-aie's own bf16 matmul
// kernels (programming_examples/basic/matrix_multiplication builds them from
// aie_kernels/aie2/mm.cc, matmul_vectorized_4x8x4_bf16_f32, r = 4, s = 8,
// t = 4, and aie_kernels/aie2p/mm.cc, matmul_vectorized_4x8x8_bf16_f32, r = 4,
// s = 8, t = 8; 8 x 8 x 8 there is bf16 emulated with bfp16, IRON's MEDIUM,
// not built here), and matches iron.operators.matmul.mmul_shape. So does the
// layout a transposed b arrives in (t x s blocks, transposed in registers).
// The code below is IRON's own.
//
// The design keeps acc in a core-local fp32 buffer between K tiles, so an
// output tile's sum is carried in fp32 across kernel calls; only the store
// (HIGHEST) or every K tile (HIGH) rounds.
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace {

// The AIE architecture Peano compiles for: __AIE_ARCH__ is 20 on AIE2 and
// 21 on AIE2P (as aie_api's own configuration reads it).
#if defined(__AIE_ARCH__) && __AIE_ARCH__ >= 21
constexpr unsigned kR = 4, kS = 8, kT = 8;
#else
constexpr unsigned kR = 4, kS = 8, kT = 4;
#endif

using Mmul = aie::mmul<kR, kS, kT, bfloat16, bfloat16, accauto>;
using VecA = aie::vector<bfloat16, Mmul::size_A>;
using VecB = aie::vector<bfloat16, Mmul::size_B>;
using VecC = aie::vector<float, Mmul::size_C>;

// One s x t block of b: stored as such, or as t x s (a transposed b).
template <bool kTransposed> inline VecB load_b(const bfloat16 *__restrict p) {
  if constexpr (kTransposed)
    return aie::transpose(aie::load_v<Mmul::size_B>(p), kT, kS);
  else
    return aie::load_v<Mmul::size_B>(p);
}

// acc (r x t blocks) += a (r x s blocks) @ b, two row blocks by two column
// blocks at a time, each 2 x 2 group held in four accumulators over all k.
template <bool kTransposed>
inline void mac_tile(const bfloat16 *__restrict a, const bfloat16 *__restrict b,
                     float *__restrict acc, int32_t tile_m, int32_t tile_k,
                     int32_t tile_n) {
  const unsigned rows = tile_m / kR;  // row blocks of a and acc
  const unsigned inner = tile_k / kS; // k blocks
  const unsigned cols = tile_n / kT;  // column blocks of b and acc
  // Where column block j's first k block is, and the step to the next k.
  const unsigned b_col = kTransposed ? inner * Mmul::size_B : Mmul::size_B;
  const unsigned b_step = kTransposed ? Mmul::size_B : cols * Mmul::size_B;
  for (unsigned z = 0; z < rows; z += 2) {
    float *__restrict c0 = acc + z * cols * Mmul::size_C;
    float *__restrict c1 = c0 + cols * Mmul::size_C;
    for (unsigned j = 0; j < cols; j += 2) {
      const bfloat16 *__restrict a0 = a + z * inner * Mmul::size_A;
      const bfloat16 *__restrict a1 = a0 + inner * Mmul::size_A;
      const bfloat16 *__restrict b0 = b + j * b_col;
      const bfloat16 *__restrict b1 = b0 + b_col;
      Mmul m00(aie::load_v<Mmul::size_C>(c0));
      Mmul m01(aie::load_v<Mmul::size_C>(c0 + Mmul::size_C));
      Mmul m10(aie::load_v<Mmul::size_C>(c1));
      Mmul m11(aie::load_v<Mmul::size_C>(c1 + Mmul::size_C));
      for (unsigned i = 0; i < inner; ++i) {
        const VecA x0 = aie::load_v<Mmul::size_A>(a0);
        const VecA x1 = aie::load_v<Mmul::size_A>(a1);
        const VecB y0 = load_b<kTransposed>(b0);
        const VecB y1 = load_b<kTransposed>(b1);
        a0 += Mmul::size_A;
        a1 += Mmul::size_A;
        b0 += b_step;
        b1 += b_step;
        m00.mac(x0, y0);
        m01.mac(x0, y1);
        m10.mac(x1, y0);
        m11.mac(x1, y1);
      }
      aie::store_v(c0, m00.template to_vector<float>());
      aie::store_v(c0 + Mmul::size_C, m01.template to_vector<float>());
      aie::store_v(c1, m10.template to_vector<float>());
      aie::store_v(c1 + Mmul::size_C, m11.template to_vector<float>());
      c0 += 2 * Mmul::size_C;
      c1 += 2 * Mmul::size_C;
    }
  }
}

// acc[i] = the nearest bf16 (ties to even) of acc[i], as fp32 again.
inline void round_tile(float *__restrict acc, int32_t n) {
  iron::round_nearest_even();
  for (int32_t i = 0; i < n; i += iron::kLanes) {
    const iron::vf32 v = aie::load_v<iron::kLanes>(acc + i);
    aie::store_v(acc + i, iron::widen(iron::narrow(v)));
  }
}

} // namespace

extern "C" {

void gemm_f32_zero(float *__restrict acc, int32_t tile_m, int32_t tile_n) {
  const iron::vf32 zero = aie::zeros<float, iron::kLanes>();
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
    aie::store_v(out + i, iron::narrow(aie::load_v<iron::kLanes>(acc + i)));
}

} // extern "C"
