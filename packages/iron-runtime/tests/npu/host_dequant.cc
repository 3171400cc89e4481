// Host harness for kernels/dequant_bf16.cc: its nibble unpacking compiled
// for the host (-DIRON_DEQUANT_HOST, no aie_api), so tests check the nibble
// order, the signedness and the bf16 table the core multiplies by the scale.
// Usage: host_dequant < packed bytes (a multiple of 16) > bf16 bits (uint16).

#include <cstdint>
#include <cstdio>

#define IRON_DEQUANT_HOST 1
#include "dequant_bf16.cc"

int main() {
  uint8_t bytes[iron_dequant::kGroup / 2];
  uint16_t values[iron_dequant::kGroup];
  while (std::fread(bytes, 1, sizeof bytes, stdin) == sizeof bytes) {
    iron_dequant::unpack_group(bytes, values);
    std::fwrite(values, sizeof values[0], iron_dequant::kGroup, stdout);
  }
  return 0;
}
