//===- emit.cc - IRON's Emit interpreter for the device ------------*- C++ -*-===//
//
// IRON kernel contract
//   symbol: emit
//   operator: Emit (the step ending a looping full-ELF version; not a catalog operator)
//   arguments: iron_emit(program: int32[capacity] (an iron.core.emit program, header then instructions); slots: int32[n_slots] (iron.core.emit.slots_of order); next: int32[n_words + n_carried] (the next run's scratchpad: words, then carried values); regs: int32[max_regs] (scratch); capacity: int32 (words of program); max_regs: int32)
//   tile: one call per run; a program longer than capacity, with more registers than max_regs, or without the MAGIC/VERSION header writes nothing
//   computes: runs the program's instructions in order (LOAD, CONST, ADD, SUB, ADDI, MULI, SHR, MAXI, MINI, STORE_WORD, STORE_CARRY) and stores the next scratchpad
//   rounding: exact: int32 arithmetic that wraps, as iron.core.emit.run(program, slots, check=False) (compose proves no register leaves int32 for slots in range)
//   stack: 160 bytes; twice the host frames plus 64, rounded up to 32: the host build of this same scalar code (tests/npu/host_emit.cc, g++ -O2 -fstack-usage) measures 48 bytes over every function of this file (tests/npu/test_stack.py recomputes it); the 64 and the doubling cover AIE2's callee-saved registers (lr, r16-r23, p6, p7: 44 bytes), its 32-byte frame alignment and the compiler-rt calls of emulated float; every Peano build measures it
//
// Plain scalar C++ (no aie_api): the same file compiles for the host, where
// tests/npu/test_emit_kernel.py runs it against the reference interpreter.
//
//===----------------------------------------------------------------------===//

#include <stdint.h>

namespace {

// The encoding of iron.core.emit (its MAGIC, VERSION, HEADER, WIDTH, Op).
constexpr int32_t kMagic = 0x49524F4E;
constexpr int32_t kVersion = 1;
constexpr int32_t kHeader = 8;
constexpr int32_t kWidth = 5;
enum Op : int32_t {
  kLoad = 1,
  kConst = 2,
  kAdd = 3,
  kSub = 4,
  kAddI = 5,
  kMulI = 6,
  kShr = 7,
  kMaxI = 8,
  kMinI = 9,
  kStoreWord = 10,
  kStoreCarry = 11,
};

// Two's-complement wrapping without signed overflow (undefined in C++).
inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t wrap_sub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}
inline int32_t wrap_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
// An arithmetic shift; by 31 or more it is the sign (as numpy's int64 >>).
inline int32_t shift_right(int32_t a, int32_t by) {
  if (by < 0)
    by = 0;
  return a >> (by > 31 ? 31 : by);
}

} // namespace

extern "C" {

void iron_emit(const int32_t *__restrict program, const int32_t *__restrict slots,
               int32_t *__restrict next, int32_t *__restrict regs,
               int32_t capacity, int32_t max_regs) {
  if (capacity < kHeader || program[0] != kMagic || program[1] != kVersion)
    return;
  const int32_t n_slots = program[2];
  const int32_t n_words = program[3];
  const int32_t n_regs = program[5];
  const int32_t n_instr = program[6];
  if (n_instr < 0 || n_regs > max_regs || kHeader + kWidth * n_instr > capacity)
    return;
  for (int32_t k = 0; k < n_instr; ++k) {
    const int32_t *ins = program + kHeader + kWidth * k;
    const int32_t op = ins[0], dst = ins[1], a = ins[2], b = ins[3], imm = ins[4];
    switch (op) {
    case kLoad:
      regs[dst] = a < n_slots ? slots[a] : 0;
      break;
    case kConst:
      regs[dst] = imm;
      break;
    case kAdd:
      regs[dst] = wrap_add(regs[a], regs[b]);
      break;
    case kSub:
      regs[dst] = wrap_sub(regs[a], regs[b]);
      break;
    case kAddI:
      regs[dst] = wrap_add(regs[a], imm);
      break;
    case kMulI:
      regs[dst] = wrap_mul(regs[a], imm);
      break;
    case kShr:
      regs[dst] = shift_right(regs[a], imm);
      break;
    case kMaxI:
      regs[dst] = regs[a] > imm ? regs[a] : imm;
      break;
    case kMinI:
      regs[dst] = regs[a] < imm ? regs[a] : imm;
      break;
    case kStoreWord:
      next[dst] = regs[a];
      break;
    case kStoreCarry:
      next[n_words + dst] = regs[a];
      break;
    default:
      return; // not an instruction: stop (compose never emits one)
    }
  }
}

} // extern "C"
