// Host harness for kernels/gemm.cc: the kernel source itself, compiled for
// the host against host_aie_api.h (the scalar model of aie_api, aie::mmul
// included), driven in the GEMM design's order, so test_gemm_design.py
// judges the code Peano compiles against GEMM.reference.
//
// Build (the test does it): -I <dir holding an empty aie_api/aie.hpp>
// -I <kernels>; optionally -DIRON_HOST_AIE2 -D__AIE_ARCH__=20 (npu1's mmul,
// 4 x 8 x 4; else npu2's, 4 x 8 x 8).
//
// Usage:
//   host_gemm M K N TILE_M TILE_K TILE_N BT ROUND MODEL < in > out
//     in: a (M * K bf16 bit patterns, uint16, row-major), then b (K * N,
//     row-major, or with BT = 1 the (N, K) matrix row-major); out: M * N bf16
//     bit patterns, row-major. Per output tile: gemm_f32_zero, then per K
//     tile the a tile in r x s blocks (row blocks outer) and the b tile in
//     s x t blocks (k blocks outer), or with BT in t x s blocks of the (N, K)
//     layout (n blocks outer), as the memory tiles' dimensionsToStream lay
//     them; gemm_bf16_acc (ROUND = 1: gemm_bf16_acc_round; BT: the _bt
//     entries); then gemm_bf16_store, its r x t blocks laid back row-major.
// MODEL: four letters, as host_aie_api.h spells them.

#include "host_aie_api.h"
#include "host_harness.h"

#include "gemm.cc"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int usage(const char *self) {
  std::fprintf(stderr,
               "usage: %s M K N TILE_M TILE_K TILE_N BT ROUND MODEL < in\n", self);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 10 || !hostmodel::parse_model(argv[9]))
    return usage(argv[0]);
  const long M = std::atol(argv[1]), K = std::atol(argv[2]), N = std::atol(argv[3]);
  const long tm = std::atol(argv[4]), tk = std::atol(argv[5]), tn = std::atol(argv[6]);
  const bool bt = std::atoi(argv[7]) != 0, round = std::atoi(argv[8]) != 0;
  using iron_mmul::kR, iron_mmul::kS, iron_mmul::kT;
  const std::vector<uint8_t> in = harness::read_stdin();
  if (M <= 0 || K <= 0 || N <= 0 || tm <= 0 || tk <= 0 || tn <= 0 ||
      static_cast<long>(in.size()) != (M * K + K * N) * 2 || M % tm || K % tk ||
      N % tn || tm % (2 * kR) || tk % kS || tn % (2 * kT))
    return usage(argv[0]);
  std::vector<bfloat16> a(M * K), b(K * N);
  for (long i = 0; i < M * K; ++i)
    std::memcpy(&a[i].bits, in.data() + 2 * i, 2);
  for (long i = 0; i < K * N; ++i)
    std::memcpy(&b[i].bits, in.data() + 2 * (M * K + i), 2);
  // b[k, n] wherever it is stored
  auto b_at = [&](long k, long n) { return bt ? b[n * K + k] : b[k * N + n]; };
  std::vector<bfloat16> at(tm * tk), btile(tk * tn), ot(tm * tn), out(M * N);
  std::vector<float> acc(tm * tn);
  for (long m0 = 0; m0 < M; m0 += tm)
    for (long n0 = 0; n0 < N; n0 += tn) {
      // A core's rounding mode is whatever ran last; each call sets its own.
      aie::set_rounding(aie::rounding_mode::floor);
      gemm_f32_zero(acc.data(), tm, tn);
      for (long k0 = 0; k0 < K; k0 += tk) {
        const long R = kR, S = kS, T = kT;
        harness::to_blocks(
            tm, tk, R, S, [&](long i, long k) { return a[(m0 + i) * K + k0 + k]; },
            at.data());
        if (bt) // t x s blocks, n blocks outer
          harness::to_blocks(
              tn, tk, T, S, [&](long n, long k) { return b_at(k0 + k, n0 + n); },
              btile.data());
        else // s x t blocks, k blocks outer
          harness::to_blocks(
              tk, tn, S, T, [&](long k, long n) { return b_at(k0 + k, n0 + n); },
              btile.data());
        aie::set_rounding(aie::rounding_mode::floor);
        if (bt && round)
          gemm_bf16_acc_round_bt(at.data(), btile.data(), acc.data(), tm, tk, tn);
        else if (bt)
          gemm_bf16_acc_bt(at.data(), btile.data(), acc.data(), tm, tk, tn);
        else if (round)
          gemm_bf16_acc_round(at.data(), btile.data(), acc.data(), tm, tk, tn);
        else
          gemm_bf16_acc(at.data(), btile.data(), acc.data(), tm, tk, tn);
      }
      aie::set_rounding(aie::rounding_mode::floor);
      gemm_bf16_store(acc.data(), ot.data(), tm, tn);
      // r x t blocks, row blocks outer, back to row-major.
      harness::from_blocks(tm, tn, static_cast<long>(kR), static_cast<long>(kT),
                           ot.data(), [&](long i, long n, bfloat16 v) {
                             out[(m0 + i) * N + n0 + n] = v;
                           });
    }
  harness::write_bits(out.data(), out.size());
  return 0;
}
