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
// dequantized into 32 bf16 values on the stack and multiplied into the row's
// fp32 lanes at once. The fp16 scale and minimum become fp32 by integer work
// (subnormals normalized, infinities kept), and each is split into a bf16
// high piece (its top 8 significant bits) and a bf16 low piece (the other 3,
// exact), so the bf16 x bf16 -> fp32 multiplies of the vector unit make
// scale * q exactly; a code becomes its bf16 bit pattern by integer work
// (no int -> float conversion on the scalar unit). The one rounding of
// scale * q + min is the accumulator add's, the one rounding to bf16 the
// to_vector<bfloat16> under conv_even: what quantized.dequantize models.
//
//===----------------------------------------------------------------------===//

#include "iron_kernel.h"

namespace iron_qmatmul {

// A group's fp16 field as the fp32 value it holds (exact), by integer work.
inline float f16_value(const uint8_t *p) {
  const uint32_t h = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1Fu) { // infinity or NaN
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) { // normal: rebias 15 -> 127
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) { // signed zero
    bits = sign;
  } else { // subnormal man * 2**-24: normal in fp32
    const uint32_t top = 31u - static_cast<uint32_t>(__builtin_clz(man));
    bits = sign | ((top + 103u) << 23) | ((man << (23u - top)) & 0x7FFFFFu);
  }
  return iron::f32_from_bits(static_cast<int32_t>(bits));
}

// An fp32 value of at most 11 significant bits as hi + lo, both bf16: hi
// its top 8 significant bits (the value truncated), lo the rest (at most 3
// bits, exact), or a zero of the value's sign when there is no rest (so
// hi * q + lo * q has the sign of scale * q when that is zero). An infinity
// or NaN is all hi (a NaN kept a NaN).
struct Pieces {
  bfloat16 hi;
  bfloat16 lo;
};

inline Pieces pieces(float v) {
  const int32_t bits = iron::bits_of_f32(v);
  int32_t top = static_cast<int32_t>(static_cast<uint32_t>(bits) & 0xFFFF0000u);
  if ((bits & 0x7F800000) == 0x7F800000 && (bits & 0x7FFFFF) != 0)
    top |= 0x00400000; // a NaN stays a NaN in its top half (quiet)
  const int32_t sign = static_cast<int32_t>(static_cast<uint32_t>(bits) & 0x80000000u);
  int32_t rest = sign;
  if ((bits & 0x7F800000) != 0x7F800000 && top != bits) {
    rest = iron::bits_of_f32(v - iron::f32_from_bits(top)); // exact
  }
  return {iron::bf16_from_bits(static_cast<int32_t>(static_cast<uint32_t>(top) >> 16)),
          iron::bf16_from_bits(static_cast<int32_t>(static_cast<uint32_t>(rest) >> 16))};
}

// The bf16 bit pattern of a code q in -128..127 (exact in bf16).
inline uint16_t code_bits(int32_t q) {
  if (q == 0)
    return 0;
  const uint32_t sign = q < 0 ? 0x8000u : 0u;
  const uint32_t a = static_cast<uint32_t>(q < 0 ? -q : q);
  const uint32_t top = 31u - static_cast<uint32_t>(__builtin_clz(a)); // 0..7
  return static_cast<uint16_t>(sign | ((127u + top) << 7) | ((a << (7u - top)) & 0x7Fu));
}

// Bytes a group takes: its fp16 scale (and min, 4-bit) and its codes.
inline int32_t group_bytes(int32_t bits, int32_t group) {
  return (bits == 4 ? 4 : 2) + group * bits / 8;
}

// One group's weights, rounded to bf16, into `values` (group elements).
inline void dequant_group(const uint8_t *__restrict g, int32_t bits,
                          int32_t group, bfloat16 *__restrict values) {
  if (bits == 4) {
    for (int32_t i = 0; i < group / 2; ++i) {
      const uint8_t b = g[4 + i];
      const uint16_t lo = code_bits(b & 0x0F), hi = code_bits(b >> 4);
      __builtin_memcpy(values + 2 * i, &lo, sizeof lo);
      __builtin_memcpy(values + 2 * i + 1, &hi, sizeof hi);
    }
  } else {
    for (int32_t i = 0; i < group; ++i) {
      const uint16_t c = code_bits(static_cast<int8_t>(g[2 + i]));
      __builtin_memcpy(values + i, &c, sizeof c);
    }
  }
  const Pieces s = pieces(f16_value(g));
  iron::accf minimum = aie::zeros<accfloat, iron::kLanes>();
  if (bits == 4) {
    // min = hi + 1 * lo, exact in fp32 (at most 11 significant bits).
    const Pieces m = pieces(f16_value(g + 2));
    minimum.from_vector(aie::broadcast<bfloat16, iron::kLanes>(m.hi));
    minimum = aie::mac(minimum, aie::broadcast<bfloat16, iron::kLanes>(
                                    iron::bf16_from_bits(0x3F80)),
                       m.lo);
  }
  for (int32_t h = 0; h < group; h += iron::kLanes) {
    const iron::vbf16 q = aie::load_v<iron::kLanes>(values + h);
    iron::accf v = aie::mac(aie::mul(q, s.hi), q, s.lo); // scale * q, exact
    if (bits == 4)
      v = aie::add(v, minimum); // the one fp32 rounding
    aie::store_v(values + h, v.to_vector<bfloat16>());
  }
}

// Group elements is at most this (q4 and q8: 32; q8_16: 16).
constexpr int32_t kMaxGroup = 32;

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
