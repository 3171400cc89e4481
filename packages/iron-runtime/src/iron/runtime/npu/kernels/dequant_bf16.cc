//===- dequant_bf16.cc - IRON kernel dequant_bf16 ---------------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: dequant_bf16
//   operator: Dequant
//   arguments: packed: uint8[n/2] (two int4 a byte, low nibble first, two's complement); scales: bfloat16[n/32]; out: bfloat16[n]; n: int32
//   tile: n a positive multiple of 64 (whole groups of 32, two groups' bf16 scales a 4-byte word); designs pass tile_size
//   computes: out[i] = int4(packed, i) * scales[i / 32], int4(packed, 2j) = low nibble of packed[j], int4(packed, 2j + 1) = its high nibble, 0x8..0xF being -8..-1
//   rounding: the int4 value (exact as a bf16) times the bf16 scale is a bf16 x bf16 product, exact in the fp32 accumulator; one rounding to bf16 (nearest even): Dequant.reference
//   stack: 896 bytes; assumed, not measured (no Peano build here): the 1 KiB stack upstream's aie_api kernels of this shape run with (AIETargetModel getDefaultCoreStackSize, mlir-aie v1.4.1), less the core body's 128 (legality.CORE_BODY_STACK_BYTES); a host build models vectors as arrays in memory and says nothing of AIE register use; every Peano build measures it (-fstack-usage) and refuses a kernel over it
//
// A nibble becomes its bf16 value through a 16-entry table of bit patterns
// (integer work only, no int -> float conversion on the scalar unit); a group
// of 32 values is two 16-lane vectors multiplied by the group's scale.
//
// Built with -DIRON_DEQUANT_HOST (tests/npu/host_dequant.cc) only the
// unpacking below compiles, without aie_api, so the host tests check the
// nibble order and signedness of the very table the core uses.
//
//===----------------------------------------------------------------------===//

#ifdef IRON_DEQUANT_HOST
#include <stdint.h>
#else
#include "iron_kernel.h"
#endif

namespace iron_dequant {

// Elements that share one scale.
constexpr int32_t kGroup = 32;

// The bf16 bit pattern of each nibble's signed value: 0x0..0x7 are 0..7,
// 0x8..0xF are -8..-1 (two's complement int4). Every value is exact in bf16.
constexpr uint16_t kNibbleBits[16] = {
    0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0, // 0..7
    0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80, // -8..-1
};

// One group's 32 values, as bf16 bit patterns copied into `values` (bf16
// elements on the core, uint16 on the host), from its 16 packed bytes:
// element 2j is the low nibble of byte j, element 2j + 1 its high nibble.
template <class T>
inline void unpack_group(const uint8_t *__restrict bytes,
                         T *__restrict values) {
  static_assert(sizeof(T) == sizeof(uint16_t), "a bf16-sized element");
  for (int32_t j = 0; j < kGroup / 2; ++j) {
    const uint8_t b = bytes[j];
    __builtin_memcpy(values + 2 * j, &kNibbleBits[b & 0x0F], sizeof(T));
    __builtin_memcpy(values + 2 * j + 1, &kNibbleBits[b >> 4], sizeof(T));
  }
}

} // namespace iron_dequant

#ifndef IRON_DEQUANT_HOST

extern "C" void dequant_bf16(uint8_t *__restrict packed,
                             bfloat16 *__restrict scales,
                             bfloat16 *__restrict out, int32_t n) {
  using iron_dequant::kGroup;
  iron::round_nearest_even();
  alignas(64) bfloat16 values[kGroup]; // one group, on the stack
  for (int32_t g = 0; g < n / kGroup; ++g) {
    iron_dequant::unpack_group(packed + g * (kGroup / 2), values);
    const bfloat16 scale = scales[g];
    for (int32_t h = 0; h < kGroup; h += iron::kLanes) {
      const iron::accf prod =
          aie::mul(aie::load_v<iron::kLanes>(values + h), scale);
      aie::store_v(out + g * kGroup + h, prod.to_vector<bfloat16>());
    }
  }
}

#endif // IRON_DEQUANT_HOST
