// Host harness for iron_vecmath.h: the kernels' fp32 algorithms over scalar
// floats, so tests can compare them with the operators' references without
// the AIE toolchain. Usage: host_vecmath FUNCTION < float32s > float32s
// (silu_mul reads pairs: gate, up).
//
// The backend mirrors the AIE one's semantics: nearest() rounds to nearest
// even, pow2() builds the float from its exponent bits, and recip_approx()
// keeps only 8 significant bits of 1/d, so the Newton step is exercised.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "iron_vecmath.h"

struct HostBackend {
  using F = float;
  using I = int32_t;
  using M = bool;
  static F splat(float v) { return v; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F maxf(F a, F b) { return a > b ? a : b; }
  static F minf(F a, F b) { return a < b ? a : b; }
  static F absf(F a) { return std::fabs(a); }
  static I nearest(F a) { return static_cast<I>(std::nearbyint(a)); }
  static F to_f(I i) { return static_cast<F>(i); }
  static F pow2(I n) {
    const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
    F f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static F recip_approx(F d) {
    F r = 1.0f / d;
    uint32_t bits;
    std::memcpy(&bits, &r, sizeof bits);
    bits &= 0xFFFF0000u; // 8 significant bits, like a bf16 estimate
    std::memcpy(&r, &bits, sizeof r);
    return r;
  }
  static M less(F a, F b) { return a < b; }
  static F select(M m, F if_true, F if_false) { return m ? if_true : if_false; }
};

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FUNCTION < float32s\n", argv[0]);
    return 2;
  }
  std::vector<float> in;
  float v;
  while (std::fread(&v, sizeof v, 1, stdin) == 1)
    in.push_back(v);
  const char *fn = argv[1];
  std::vector<float> out;
  using B = HostBackend;
  if (!std::strcmp(fn, "silu_mul")) {
    for (size_t i = 0; i + 1 < in.size(); i += 2)
      out.push_back(iron::silu_mul<B>(in[i], in[i + 1]));
  } else {
    for (float x : in) {
      if (!std::strcmp(fn, "silu"))
        out.push_back(iron::silu<B>(x));
      else if (!std::strcmp(fn, "sigmoid"))
        out.push_back(iron::sigmoid<B>(x));
      else if (!std::strcmp(fn, "tanh"))
        out.push_back(iron::tanh<B>(x));
      else if (!std::strcmp(fn, "gelu_tanh"))
        out.push_back(iron::gelu_tanh<B>(x));
      else if (!std::strcmp(fn, "gelu_erf"))
        out.push_back(iron::gelu_erf<B>(x));
      else {
        std::fprintf(stderr, "unknown function %s\n", fn);
        return 2;
      }
    }
  }
  std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}
