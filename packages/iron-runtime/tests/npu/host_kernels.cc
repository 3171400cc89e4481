// Host harness for the activation kernels (silu, sigmoid, tanh, gelu_tanh,
// gelu_erf, silu_mul): the kernel sources themselves, with iron_kernel.h's
// backend, compiled for the host against host_aie_api.h's model of aie_api.
// test_kernels.py builds it with AIE2_FLAGS (-DIRON_HOST_AIE2
// -D__AIE_ARCH__=20), so what runs is each kernel's AIE2 form: its values in
// bf16 vectors and fp32 accumulators, with no fp32-vector operation (the
// model has none to call).
//
// Usage: host_kernels KERNEL MODEL < float32s > float32s
//   KERNEL: silu_bf16, sigmoid_bf16, tanh_bf16, gelu_tanh_bf16,
//   gelu_erf_bf16, silu_mul_bf16 (which reads pairs: gate, up); each input a
//   bf16 value written as fp32; MODEL: four letters (host_aie_api.h). Out:
//   one bf16 value, written as fp32, per element.
// host_kernels aie2_ops MODEL < pairs of float32s > float32s
//   iron::Aie2Backend's operations on fp32 pairs (a, b), seven results each:
//   mul(a, b), less(a, b) (1 or 0), maxf(a, b), minf(a, b),
//   to_f(nearest(a)), recip_approx(|a|), rsqrt_approx(|a|).

#include "host_aie_api.h"

#include "gelu_erf_bf16.cc"
#include "gelu_tanh_bf16.cc"
#include "sigmoid_bf16.cc"
#include "silu_bf16.cc"
#include "silu_mul_bf16.cc"
#include "tanh_bf16.cc"

namespace {

using Unary = void (*)(bfloat16 *, bfloat16 *, int32_t);

Unary unary(const char *name) {
  const struct {
    const char *name;
    Unary fn;
  } table[] = {{"silu_bf16", silu_bf16},           {"sigmoid_bf16", sigmoid_bf16},
               {"tanh_bf16", tanh_bf16},           {"gelu_tanh_bf16", gelu_tanh_bf16},
               {"gelu_erf_bf16", gelu_erf_bf16}};
  for (const auto &entry : table)
    if (!std::strcmp(name, entry.name))
      return entry.fn;
  return nullptr;
}

// The values, as bf16 (each input is one exactly), padded with zeros to
// whole 16-lane vectors.
std::vector<bfloat16> as_bf16(const std::vector<float> &in, size_t from,
                              size_t step) {
  std::vector<bfloat16> out;
  for (size_t i = from; i < in.size(); i += step) {
    bfloat16 v;
    v.bits = static_cast<uint16_t>(hostmodel::bits_of(in[i]) >> 16);
    out.push_back(v);
  }
  bfloat16 zero;
  zero.bits = 0;
  while (out.size() % iron::kLanes)
    out.push_back(zero);
  return out;
}

// iron::Aie2Backend's operations, 16 pairs at a time (see the usage).
void aie2_ops(const std::vector<float> &in) {
  using B = iron::Aie2Backend;
  const size_t pairs = in.size() / 2;
  std::vector<float> a(pairs + iron::kLanes), b(pairs + iron::kLanes), r(7 * iron::kLanes);
  for (size_t i = 0; i < pairs; ++i) {
    a[i] = in[2 * i];
    b[i] = in[2 * i + 1];
  }
  for (size_t i = 0; i < pairs; i += iron::kLanes) {
    const B::F x = B::load_f32(a.data() + i), y = B::load_f32(b.data() + i);
    const B::F ax = B::absf(x);
    const B::M lt = B::less(x, y);
    B::store_f32(r.data(), B::mul(x, y));
    B::store_f32(r.data() + 2 * iron::kLanes, B::maxf(x, y));
    B::store_f32(r.data() + 3 * iron::kLanes, B::minf(x, y));
    B::store_f32(r.data() + 4 * iron::kLanes, B::to_f(B::nearest(x)));
    B::store_f32(r.data() + 5 * iron::kLanes, B::recip_approx(ax));
    B::store_f32(r.data() + 6 * iron::kLanes, B::rsqrt_approx(ax));
    for (int l = 0; l < iron::kLanes && i + l < pairs; ++l) {
      r[iron::kLanes + l] = lt.test(l) ? 1.0f : 0.0f;
      for (int k = 0; k < 7; ++k)
        std::fwrite(&r[k * iron::kLanes + l], sizeof(float), 1, stdout);
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3 || !hostmodel::parse_model(argv[2])) {
    std::fprintf(stderr, "usage: %s KERNEL MODEL < float32s\n", argv[0]);
    return 2;
  }
  std::vector<float> in;
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1)
    in.push_back(v);
  const char *kernel = argv[1];
  if (!std::strcmp(kernel, "aie2_ops")) {
    aie::set_rounding(aie::rounding_mode::conv_even);
    aie2_ops(in);
    return 0;
  }
  const bool pairs = !std::strcmp(kernel, "silu_mul_bf16");
  const Unary fn = pairs ? nullptr : unary(kernel);
  if (!pairs && !fn) {
    std::fprintf(stderr, "unknown kernel %s\n", kernel);
    return 2;
  }
  const size_t count = pairs ? in.size() / 2 : in.size();
  std::vector<bfloat16> x = as_bf16(in, 0, pairs ? 2 : 1);
  std::vector<bfloat16> out(x.size());
  // A core's rounding mode is whatever ran last; each kernel sets its own.
  aie::set_rounding(aie::rounding_mode::floor);
  const int32_t n = static_cast<int32_t>(x.size());
  if (pairs) {
    std::vector<bfloat16> up = as_bf16(in, 1, 2);
    silu_mul_bf16(x.data(), up.data(), out.data(), n);
  } else {
    fn(x.data(), out.data(), n);
  }
  for (size_t i = 0; i < count; ++i) {
    const float f = static_cast<float>(out[i]);
    std::fwrite(&f, sizeof f, 1, stdout);
  }
  return 0;
}
