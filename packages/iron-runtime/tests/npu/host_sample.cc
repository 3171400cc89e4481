// Host harness for kernels/sample.cc: the Sample kernels compiled for the
// host (-DIRON_SAMPLE_HOST, no aie_api) and driven the way the design's core
// drives them, so tests compare exactly the kernel's algorithm with
// Sample.reference. Usage: host_sample < cases > tokens.
//
// Each case on stdin: eight int32 (itemsize, vocab, tile, k, pick, a, b,
// seed), then vocab logits of itemsize bytes (bf16 or float32 bits). Per
// case, one int32 token on stdout: sample_reset, sample_scan_* on every tile
// of the logits in order, then, as the core loop does, sample_pick(greedy =
// a, inv_bits = b) when pick is 0, or sample_pick_call(temperature_code = a,
// top_p_bits = b) when it is 1.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define IRON_SAMPLE_HOST 1
#include "sample.cc"

int main() {
  int32_t head[8];
  while (std::fread(head, sizeof head[0], 8, stdin) == 8) {
    const int32_t itemsize = head[0], vocab = head[1], tile = head[2];
    const int32_t k = head[3], mode = head[4], a = head[5], b = head[6];
    const int32_t seed = head[7];
    if ((itemsize != 2 && itemsize != 4) || vocab < 1 || tile < 1 ||
        vocab % tile || k < 1 || k > 256 || (mode != 0 && mode != 1)) {
      std::fprintf(stderr, "bad case header\n");
      return 2;
    }
    std::vector<uint8_t> logits(static_cast<size_t>(vocab) * itemsize);
    if (std::fread(logits.data(), 1, logits.size(), stdin) != logits.size()) {
      std::fprintf(stderr, "short logits\n");
      return 2;
    }
    std::vector<int32_t> list(2 + 2 * k, -1);
    sample_reset(list.data(), k);
    for (int32_t at = 0; at < vocab; at += tile) {
      const uint8_t *chunk = logits.data() + static_cast<size_t>(at) * itemsize;
      if (itemsize == 2) {
        std::vector<uint16_t> bits(tile);
        std::memcpy(bits.data(), chunk, bits.size() * 2);
        sample_scan_bf16(bits.data(), list.data(), tile, k);
      } else {
        std::vector<uint32_t> bits(tile);
        std::memcpy(bits.data(), chunk, bits.size() * 4);
        sample_scan_f32(bits.data(), list.data(), tile, k);
      }
    }
    int32_t token = -1;
    if (mode == 0)
      sample_pick(list.data(), &token, k, a, b, seed);
    else
      sample_pick_call(list.data(), &token, k, a, b, seed);
    std::fwrite(&token, sizeof token, 1, stdout);
  }
  return 0;
}
