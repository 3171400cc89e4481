// Host harness for the row kernels (rms_norm*, layer_norm*, softmax) and the
// GEMV kernels: the kernel sources themselves, compiled for the host against
// a small scalar model of the aie_api calls they make, so the tests judge
// the very code Peano compiles (its algorithm and order of operations)
// against the operators' references, without the AIE toolchain.
//
// Build (test_row_kernels.py does it): -I <dir holding an empty
// aie_api/aie.hpp> -I <kernels>; this file includes the model, then
// the kernel sources.
//
// Usage:
//   host_rows KERNEL ROWS COLS ROWS_PER_TILE SCALAR MODELS < in > out
//     KERNEL: rms_norm_bf16, rms_norm_weighted_bf16, layer_norm_bf16,
//       layer_norm_affine_bf16, softmax_bf16; SCALAR: eps as fp32 bits, or
//       Softmax's length (passed unclamped); in: x (ROWS * COLS float32, each
//       a bf16 value), then the weight, then the bias (COLS each, if the
//       kernel takes them); out: ROWS * COLS float32, each a bf16 value.
//   host_rows gemv_bf16_acc|gemv_bf16_acc_round M K TILE_M TILE_K MODELS
//     in: w (M * K), x (K); out: M values; the GEMV design's order: per row
//     tile, gemv_f32_zero, a kernel call per K tile, gemv_bf16_store.
//   MODELS is a comma-separated list of models; the outputs of each, in that
//   order, follow one another.
//
// MODELS: each is four letters, one per assumption about the AIE (see
// host_aie_api.h, which holds the model of aie_api). Built with
// -DIRON_HOST_AIE2 -D__AIE_ARCH__=20 the kernels compile with AIE2's backend
// against a model without fp32-vector operations.

#include "host_aie_api.h"

// -- the kernels, as shipped ----------------------------------------------------

#include "gemv.cc"
#include "layer_norm_affine_bf16.cc"
#include "layer_norm_bf16.cc"
#include "rms_norm_bf16.cc"
#include "rms_norm_weighted_bf16.cc"
#include "softmax_bf16.cc"

// -- the driver -----------------------------------------------------------------

namespace {

bool parse_model(const char *m) { return hostmodel::parse_model(m); }

std::vector<bfloat16> take(const std::vector<float> &in, size_t &at,
                           size_t n) {
  std::vector<bfloat16> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i].bits = static_cast<uint16_t>(hostmodel::bits_of(in.at(at + i)) >> 16);
  at += n;
  return out;
}

void put(const std::vector<bfloat16> &out) {
  for (bfloat16 v : out) {
    const float f = static_cast<float>(v);
    std::fwrite(&f, sizeof f, 1, stdout);
  }
}

int usage(const char *self) {
  std::fprintf(stderr,
               "usage: %s KERNEL ROWS COLS ROWS_PER_TILE SCALAR MODELS < in\n"
               "       %s gemv_bf16_acc[_round] M K TILE_M TILE_K MODELS < in\n",
               self, self);
  return 2;
}

// The GEMV design's order over one (M, K) product: per row tile, zero the
// fp32 partial sums, one kernel call per K tile, store.
bool run_gemv(const char *kernel, long M, long K, long tm, long tk,
              const std::vector<float> &in, std::vector<bfloat16> &out) {
  size_t at = 0;
  const bool round = !std::strcmp(kernel, "gemv_bf16_acc_round");
  if (!round && std::strcmp(kernel, "gemv_bf16_acc"))
    return false;
  const std::vector<bfloat16> w = take(in, at, M * K), x = take(in, at, K);
  if (at != in.size())
    return false;
  std::vector<bfloat16> wt(tm * tk), xt(tk), ot(tm);
  std::vector<float> acc(tm);
  out.assign(M, bfloat16());
  for (long r0 = 0; r0 < M; r0 += tm) {
    gemv_f32_zero(acc.data(), tm);
    for (long k0 = 0; k0 < K; k0 += tk) {
      for (long r = 0; r < tm; ++r)
        for (long k = 0; k < tk; ++k)
          wt[r * tk + k] = w[(r0 + r) * K + k0 + k];
      for (long k = 0; k < tk; ++k)
        xt[k] = x[k0 + k];
      (round ? gemv_bf16_acc_round : gemv_bf16_acc)(wt.data(), xt.data(),
                                                    acc.data(), tm, tk);
    }
    gemv_bf16_store(acc.data(), ot.data(), tm);
    for (long r = 0; r < tm; ++r)
      out[r0 + r] = ot[r];
  }
  return true;
}

// The row design's order: one kernel call per tile of rows_per_tile rows.
bool run_rows(const char *kernel, long rows, long cols, long per_tile,
              int32_t scalar, const std::vector<float> &in,
              std::vector<bfloat16> &out) {
  size_t at = 0;
  const long tile = per_tile * cols;
  std::vector<bfloat16> x = take(in, at, rows * cols), params;
  std::vector<float> scratch(cols);
  const bool weighted = !std::strcmp(kernel, "rms_norm_weighted_bf16");
  const bool affine = !std::strcmp(kernel, "layer_norm_affine_bf16");
  if (weighted)
    params = take(in, at, cols);
  if (affine)
    params = take(in, at, 2 * cols); // weight, then bias: one FIFO element
  if (at != in.size() || tile <= 0 || (rows * cols) % tile)
    return false;
  out.assign(rows * cols, bfloat16());
  for (long r0 = 0; r0 < rows * cols; r0 += tile) {
    // A core's rounding mode is whatever ran last; each call sets its own.
    aie::set_rounding(aie::rounding_mode::floor);
    bfloat16 *xt = x.data() + r0, *ot = out.data() + r0;
    const int32_t n = static_cast<int32_t>(tile), k = static_cast<int32_t>(cols);
    if (!std::strcmp(kernel, "rms_norm_bf16"))
      rms_norm_bf16(xt, ot, n, k, scalar);
    else if (weighted)
      rms_norm_weighted_bf16(xt, params.data(), ot, n, k, scalar);
    else if (!std::strcmp(kernel, "layer_norm_bf16"))
      layer_norm_bf16(xt, ot, n, k, scalar);
    else if (affine)
      layer_norm_affine_bf16(xt, params.data(), ot, n, k, scalar);
    else if (!std::strcmp(kernel, "softmax_bf16"))
      softmax_bf16(xt, ot, scratch.data(), n, k, scalar);
    else
      return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 7)
    return usage(argv[0]);
  // MODELS: comma-separated; the outputs follow one another in that order.
  std::vector<std::string> models;
  for (const char *m = argv[6];;) {
    const char *end = std::strchr(m, ',');
    models.emplace_back(m, end ? end - m : std::strlen(m));
    if (!parse_model(models.back().c_str()))
      return usage(argv[0]);
    if (!end)
      break;
    m = end + 1;
  }
  const char *kernel = argv[1];
  const long a = std::atol(argv[2]), b = std::atol(argv[3]);
  const long c = std::atol(argv[4]), d = std::atol(argv[5]);
  std::vector<float> in;
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1)
    in.push_back(v);
  for (const std::string &m : models) {
    parse_model(m.c_str());
    std::vector<bfloat16> out;
    const bool ok =
        !std::strncmp(kernel, "gemv_", 5)
            ? run_gemv(kernel, a, b, c, d, in, out)
            : run_rows(kernel, a, b, c, static_cast<int32_t>(d), in, out);
    if (!ok) {
      std::fprintf(stderr, "%s: unknown kernel, or %zu inputs do not fit %s\n",
                   kernel, in.size(), "its arguments");
      return 2;
    }
    put(out);
  }
  return 0;
}
