//===- transpose_bf16.cc - IRON kernel transpose_bf16 -----------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: transpose_bf16
//   operator: Transpose (one tile_rows x tile_cols block of x)
//   arguments: x: bfloat16[rows * cols]; out: bfloat16[cols * rows]; rows, cols: int32
//   tile: rows and cols positive multiples of 8 (8x8 sub-blocks); designs pass tile_rows, tile_cols
//   computes: out[c * rows + r] = x[r * cols + c] (x row-major rows x cols, out row-major cols x rows)
//   rounding: none, exact: moves bf16 bit patterns (NaN payloads and -0 kept): Transpose.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// The block is swapped 8x8 at a time: eight 8-element rows of x (16 bytes
// each, 16-byte aligned since cols is a multiple of 8) make one 64-element
// vector, aie::transpose(v, 8, 8) reorders it with the vector shuffle unit,
// and its eight 8-element rows are stored as rows of out. Only whole bf16
// values move, so the result is x's bits.
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace {

constexpr int32_t kSub = 8; // sub-block side
using vrow = aie::vector<bfloat16, kSub>;

} // namespace

extern "C" void transpose_bf16(bfloat16 *__restrict x, bfloat16 *__restrict out,
                               int32_t rows, int32_t cols) {
  for (int32_t r = 0; r < rows; r += kSub) {
    for (int32_t c = 0; c < cols; c += kSub) {
      const bfloat16 *src = x + r * cols + c;
      const vrow r0 = aie::load_v<kSub>(src);
      const vrow r1 = aie::load_v<kSub>(src + cols);
      const vrow r2 = aie::load_v<kSub>(src + 2 * cols);
      const vrow r3 = aie::load_v<kSub>(src + 3 * cols);
      const vrow r4 = aie::load_v<kSub>(src + 4 * cols);
      const vrow r5 = aie::load_v<kSub>(src + 5 * cols);
      const vrow r6 = aie::load_v<kSub>(src + 6 * cols);
      const vrow r7 = aie::load_v<kSub>(src + 7 * cols);
      const aie::vector<bfloat16, kSub * kSub> swapped =
          aie::transpose(aie::concat(r0, r1, r2, r3, r4, r5, r6, r7), kSub, kSub);
      bfloat16 *dst = out + c * rows + r;
      for (int32_t k = 0; k < kSub; ++k)
        aie::store_v(dst + k * rows, swapped.extract<kSub>(k));
    }
  }
}
