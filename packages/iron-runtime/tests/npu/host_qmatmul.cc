// Host harness for kernels/qmatmul.cc: the kernel source itself, compiled for
// the host against host_aie_api.h (the scalar model of aie_api), driven in
// the QGEMV and DequantRows designs' order, so test_qmatmul_design.py judges
// the code Peano compiles against QGEMV.reference and DequantRows.reference.
//
// Build (the test does it): -I <dir holding an empty aie_api/aie.hpp>
// -I <kernels>; optionally -DIRON_HOST_AIE2 -D__AIE_ARCH__=20.
//
// Usage:
//   host_qmatmul qgemv BITS GROUP M K TILE_M TILE_K MODEL < in > out
//     in: w's packed rows (M * row_bytes(K) bytes), then x (K bf16 bit
//     patterns, uint16); out: M bf16 bit patterns. Per row tile:
//     qmatmul_f32_zero, then per K tile the tile's packed rows gathered as
//     the shim walks them (TILE_M rows of row_bytes(TILE_K) bytes, back to
//     back) and x's chunk, qgemv_acc; then qmatmul_bf16_store.
//   host_qmatmul dequant BITS GROUP ROWS K MODEL < packed rows > bf16 bits
//     qdequant_rows over every row at once.
// MODEL: four letters, as host_aie_api.h spells them.

#include "host_aie_api.h"
#include "host_harness.h"

#include "qmatmul.cc"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int usage(const char *self) {
  std::fprintf(stderr,
               "usage: %s qgemv BITS GROUP M K TILE_M TILE_K MODEL < in\n"
               "       %s dequant BITS GROUP ROWS K MODEL < in\n",
               self, self);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(argv[0]);
  const bool gemv = !std::strcmp(argv[1], "qgemv");
  if ((gemv && argc != 9) || (!gemv && (argc != 7 || std::strcmp(argv[1], "dequant"))))
    return usage(argv[0]);
  if (!hostmodel::parse_model(argv[argc - 1]))
    return usage(argv[0]);
  const int32_t bits = std::atoi(argv[2]), group = std::atoi(argv[3]);
  const long rows = std::atol(argv[4]), k = std::atol(argv[5]);
  const long gb = iron_qmatmul::group_bytes(bits, group);
  const long rb = k / group * gb;
  const std::vector<uint8_t> in = harness::read_stdin();
  if (!gemv) {
    if (static_cast<long>(in.size()) != rows * rb)
      return usage(argv[0]);
    std::vector<uint8_t> w(in);
    std::vector<bfloat16> out(rows * k);
    qdequant_rows(w.data(), out.data(), rows, k, bits, group);
    harness::write_bits(out.data(), out.size());
    return 0;
  }
  const long tm = std::atol(argv[6]), tk = std::atol(argv[7]);
  if (static_cast<long>(in.size()) != rows * rb + 2 * k || rows % tm || k % tk)
    return usage(argv[0]);
  std::vector<bfloat16> x(k);
  for (long i = 0; i < k; ++i)
    std::memcpy(&x[i].bits, in.data() + rows * rb + 2 * i, 2);
  const long rbk = tk / group * gb; // a row's bytes of one K tile
  std::vector<uint8_t> wt(tm * rbk);
  std::vector<bfloat16> xt(tk), ot(tm), out(rows);
  std::vector<float> acc(tm);
  for (long r0 = 0; r0 < rows; r0 += tm) {
    // A core's rounding mode is whatever ran last; each call sets its own.
    aie::set_rounding(aie::rounding_mode::floor);
    qmatmul_f32_zero(acc.data(), tm);
    for (long k0 = 0; k0 < k; k0 += tk) {
      for (long r = 0; r < tm; ++r)
        std::memcpy(wt.data() + r * rbk, in.data() + (r0 + r) * rb + k0 / tk * rbk,
                    rbk);
      std::copy(x.begin() + k0, x.begin() + k0 + tk, xt.begin());
      aie::set_rounding(aie::rounding_mode::floor);
      qgemv_acc(wt.data(), xt.data(), acc.data(), tm, tk, bits, group);
    }
    aie::set_rounding(aie::rounding_mode::floor);
    qmatmul_bf16_store(acc.data(), ot.data(), tm);
    std::copy(ot.begin(), ot.end(), out.begin() + r0);
  }
  harness::write_bits(out.data(), out.size());
  return 0;
}
