//===- iron_mmul.h - the bf16 mmul loop of IRON's matrix products -----*- C++ -*-===//
//
// The HIGHEST mmul geometry and the accumulate loop shared by gemm.cc (GEMM)
// and qgemm.cc (QGEMM, whose dequantized tile is a transposed GEMM b):
// acc (r x t blocks) += a (r x s blocks) @ b, b in s x t blocks (k blocks
// outer) or, transposed, in t x s blocks of the (N, K) layout (n blocks
// outer, each block transposed in registers). Two row blocks by two column
// blocks at a time, each 2 x 2 group held in four accumulators over all k.
//
// The geometry is a fact carried over from mlir-aie's own bf16 matmul
// kernels (programming_examples/basic/matrix_multiplication builds them from
// aie_kernels/aie2/mm.cc, matmul_vectorized_4x8x4_bf16_f32, r = 4, s = 8,
// t = 4, and aie_kernels/aie2p/mm.cc, matmul_vectorized_4x8x8_bf16_f32,
// r = 4, s = 8, t = 8) and matches iron.operators.matmul.mmul_shape at
// HIGHEST. The code is IRON's own.
//
//===----------------------------------------------------------------------===//

#ifndef IRON_MMUL_H
#define IRON_MMUL_H

#include "iron_kernel.h"

namespace iron_mmul {

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

// One s x t block of b: stored as such, or as t x s (a transposed b).
template <bool kTransposed> inline VecB load_b(const bfloat16 *__restrict p) {
  if constexpr (kTransposed)
    return aie::transpose(aie::load_v<Mmul::size_B>(p), kT, kS);
  else
    return aie::load_v<Mmul::size_B>(p);
}

// acc += a @ b over one tile: tile_m a multiple of 2r, tile_k of s, tile_n
// of 2t; acc's fp32 sums carried in and out (no rounding here).
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

} // namespace iron_mmul

#endif // IRON_MMUL_H
