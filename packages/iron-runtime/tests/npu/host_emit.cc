// Host harness for kernels/emit.cc: the device's Emit interpreter, compiled
// for the host. Usage: host_emit < (capacity, n_slots, n_next, program[capacity],
// slots[n_slots]) as int32 > next[n_next] as int32.

#include <cstdint>
#include <cstdio>
#include <vector>

#include "emit.cc"

int main() {
  int32_t head[3];
  if (std::fread(head, sizeof(int32_t), 3, stdin) != 3)
    return 2;
  const int32_t capacity = head[0], n_slots = head[1], n_next = head[2];
  std::vector<int32_t> program(capacity), slots(n_slots), next(n_next, 0),
      regs(4096, 0);
  if (std::fread(program.data(), sizeof(int32_t), capacity, stdin) !=
          static_cast<size_t>(capacity) ||
      std::fread(slots.data(), sizeof(int32_t), n_slots, stdin) !=
          static_cast<size_t>(n_slots))
    return 2;
  iron_emit(program.data(), slots.data(), next.data(), regs.data(), capacity,
            static_cast<int32_t>(regs.size()));
  std::fwrite(next.data(), sizeof(int32_t), n_next, stdout);
  return 0;
}
