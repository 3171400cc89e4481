// Host harness for kernels/qgemm.cc: the kernel source itself, compiled for
// the host against host_aie_api.h (the scalar model of aie_api, aie::mmul
// included), driven in the QGEMM design's order, so test_qgemm_design.py
// judges the code Peano compiles against QGEMM.reference.
//
// Build (the test does it): -I <dir holding an empty aie_api/aie.hpp>
// -I <kernels>; optionally -DIRON_HOST_AIE2 -D__AIE_ARCH__=20 (npu1's mmul,
// 4 x 8 x 4; else npu2's, 4 x 8 x 8).
//
// Usage:
//   host_qgemm BITS GROUP M K N TILE_M TILE_K TILE_N MODEL < in > out
//     in: a (M * K bf16 bit patterns, uint16, row-major), then w's packed
//     rows (N * row_bytes(K) bytes); out: M * N bf16 bit patterns,
//     row-major. Per output tile: qgemm_f32_zero, then per K tile the a tile
//     re-laid into r x s blocks (as the memory tile's dimensionsToStream
//     does) and the tile's packed rows gathered as the shim walks them
//     (TILE_N rows of row_bytes(TILE_K) bytes, back to back), qgemm_acc;
//     then qgemm_bf16_store, its r x t blocks laid back row-major.
// MODEL: four letters, as host_aie_api.h spells them.

#include "host_aie_api.h"
#include "host_harness.h"

#include "qgemm.cc"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int usage(const char *self) {
  std::fprintf(stderr,
               "usage: %s BITS GROUP M K N TILE_M TILE_K TILE_N MODEL < in\n",
               self);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 10 || !hostmodel::parse_model(argv[9]))
    return usage(argv[0]);
  const int32_t bits = std::atoi(argv[1]), group = std::atoi(argv[2]);
  const long M = std::atol(argv[3]), K = std::atol(argv[4]), N = std::atol(argv[5]);
  const long tm = std::atol(argv[6]), tk = std::atol(argv[7]), tn = std::atol(argv[8]);
  using iron_qgemm::kR, iron_qgemm::kS, iron_qgemm::kT;
  const long gb = iron_qgemm::group_bytes(bits, group);
  const long rb = K / group * gb, rbk = tk / group * gb;
  const std::vector<uint8_t> in = harness::read_stdin();
  if (M <= 0 || K <= 0 || N <= 0 || tm <= 0 || tk <= 0 || tn <= 0 ||
      static_cast<long>(in.size()) != M * K * 2 + N * rb || M % tm || K % tk ||
      N % tn || tm % (2 * kR) || tk % group || tn % (2 * kT))
    return usage(argv[0]);
  std::vector<bfloat16> a(M * K);
  for (long i = 0; i < M * K; ++i)
    std::memcpy(&a[i].bits, in.data() + 2 * i, 2);
  const uint8_t *w = in.data() + M * K * 2;
  std::vector<bfloat16> at(tm * tk), deq(tn * tk), ot(tm * tn), out(M * N);
  std::vector<uint8_t> wt(tn * rbk);
  std::vector<float> acc(tm * tn);
  for (long m0 = 0; m0 < M; m0 += tm)
    for (long n0 = 0; n0 < N; n0 += tn) {
      // A core's rounding mode is whatever ran last; each call sets its own.
      aie::set_rounding(aie::rounding_mode::floor);
      qgemm_f32_zero(acc.data(), tm, tn);
      for (long k0 = 0; k0 < K; k0 += tk) {
        // a's tile in r x s blocks, row blocks outer.
        harness::to_blocks(
            tm, tk, static_cast<long>(kR), static_cast<long>(kS),
            [&](long i, long k) { return a[(m0 + i) * K + k0 + k]; }, at.data());
        for (long n = 0; n < tn; ++n)
          std::memcpy(wt.data() + n * rbk, w + (n0 + n) * rb + k0 / tk * rbk, rbk);
        aie::set_rounding(aie::rounding_mode::floor);
        qgemm_acc(at.data(), wt.data(), acc.data(), deq.data(), tm, tk, tn, bits,
                  group);
      }
      aie::set_rounding(aie::rounding_mode::floor);
      qgemm_bf16_store(acc.data(), ot.data(), tm, tn);
      // r x t blocks, row blocks outer, back to row-major.
      harness::from_blocks(tm, tn, static_cast<long>(kR), static_cast<long>(kT),
                           ot.data(), [&](long i, long n, bfloat16 v) {
                             out[(m0 + i) * N + n0 + n] = v;
                           });
    }
  harness::write_bits(out.data(), out.size());
  return 0;
}
