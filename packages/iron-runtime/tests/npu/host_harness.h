// What the host harnesses of the kernels share (host_gemm.cc, host_qgemm.cc,
// host_qmatmul.cc): their input, read whole from standard input, their
// output's bit patterns, and the block layouts of the matmul tiles.

#ifndef IRON_HOST_HARNESS_H
#define IRON_HOST_HARNESS_H

#include <cstdint>
#include <cstdio>
#include <vector>

namespace harness {

// Every byte on standard input, in order.
inline std::vector<uint8_t> read_stdin() {
  std::vector<uint8_t> in;
  uint8_t buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0)
    in.insert(in.end(), buf, buf + n);
  return in;
}

// n values' bit patterns (their .bits: bf16 as uint16) to standard output.
template <class T> void write_bits(const T *v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    std::fwrite(&v[i].bits, sizeof v[i].bits, 1, stdout);
}

// A rows x cols tile laid out in bh x bw blocks, row blocks outer, each block
// row-major (out[j++] = at(i, k)): a's and acc's tiles in r x s and r x t
// blocks, a b tile in s x t, a transposed b in t x s, as the memory tiles'
// dimensionsToStream lay them for the kernels.
template <class At, class T>
void to_blocks(long rows, long cols, long bh, long bw, At at, T *out) {
  long j = 0;
  for (long rb = 0; rb < rows; rb += bh)
    for (long cb = 0; cb < cols; cb += bw)
      for (long r = 0; r < bh; ++r)
        for (long c = 0; c < bw; ++c)
          out[j++] = at(rb + r, cb + c);
}

// The inverse: put(i, k, in[j++]) for a tile laid out as to_blocks lays it.
template <class Put, class T>
void from_blocks(long rows, long cols, long bh, long bw, const T *in, Put put) {
  long j = 0;
  for (long rb = 0; rb < rows; rb += bh)
    for (long cb = 0; cb < cols; cb += bw)
      for (long r = 0; r < bh; ++r)
        for (long c = 0; c < bw; ++c)
          put(rb + r, cb + c, in[j++]);
}

} // namespace harness

#endif // IRON_HOST_HARNESS_H
