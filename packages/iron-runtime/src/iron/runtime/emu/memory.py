"""The emulated NPU's memory budget: ``IRON_EMU_MEMORY`` or :func:`set_emu_memory`.

The emulator's device memory is host memory. Beyond it, the emulator may
keep copies of weights in the form their kernel models read fastest:

- a packed 4- or 8-bit weight decoded to the bf16 values its kernel
  computes with (``Operator.decoded``), so a quantized product runs as fast
  as a bf16 one instead of dequantizing every weight on every call: 3.2
  times a 4-bit weight's packed bytes, 1.9 times an 8-bit one's;
- a bf16 weight widened to float32, for a kernel model that computes on
  float32 values (``Operator.reads_float32`` says which inputs; a GEMV or
  GEMM compiled by ``iron.operators.matvec`` reads bf16 itself and is
  given none): twice the weight's bytes.

The budget is the host memory the emulator may hold as a multiple of its
device memory (every live buffer's bytes). ``4``, the default, keeps a
4-bit model's weights decoded alongside their packed bytes; copies are
made in the order the weights are first read, and a weight beyond the
budget is read as stored (decoded or widened on every call: the same
values, so the same results, bit for bit). ``1`` keeps none (least
memory), ``inf`` keeps every one. Every copy of a weight's bytes is
dropped when they are sent to the device again.
"""

from __future__ import annotations

import math
import os

__all__ = ["DEFAULT_EMU_MEMORY", "emu_memory", "set_emu_memory"]

#: The default budget: the device memory and three times it in copies, room
#: for a 4-bit model's weights decoded (3.2 times their packed bytes, which
#: are most of such a model's device memory).
DEFAULT_EMU_MEMORY = 4.0

_ENV = "IRON_EMU_MEMORY"
_chosen: float | None = None
# the last value of IRON_EMU_MEMORY read, and its budget (read on every
# weight read: parsed again only when it changes)
_parsed: tuple[str, float] = ("", DEFAULT_EMU_MEMORY)


def _checked(value: object, where: str) -> float:
    """``value`` as a budget, or a ValueError naming ``where`` it came from."""
    fix = (
        "give a number >= 1: the emulator's host memory as a multiple of its "
        "device memory (1 keeps no copies of weights, inf keeps all)"
    )
    if isinstance(value, bool):
        raise TypeError(f"{where}={value!r} is a bool; {fix}")
    try:
        budget = float(value)  # type: ignore[arg-type]  # any number or str
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r} is not a number; {fix}") from None
    if math.isnan(budget) or budget < 1:
        raise ValueError(f"{where}={value!r} is below 1; {fix}")
    return budget


def set_emu_memory(budget: float | None) -> None:
    """Set the emulator's memory budget (None: back to ``IRON_EMU_MEMORY``).

    Args:
        budget: The host memory the emulated NPU may hold, as a multiple of
            its device memory (>= 1; ``float("inf")`` for no limit). Copies
            of weights (decoded 4-/8-bit weights, float32 bf16 ones; see
            the module) fill what is above 1, in the order the weights are
            first read; the rest are read as stored, slower and to the same
            results. Copies beyond a lowered budget are dropped when their
            weight is next read.

    Raises:
        ValueError: ``budget`` is not a number, or is below 1 or NaN.
        TypeError: ``budget`` is a bool.
    """
    global _chosen
    _chosen = None if budget is None else _checked(budget, "budget")


def emu_memory() -> float:
    """The budget in force: :func:`set_emu_memory`'s, else ``IRON_EMU_MEMORY``'s.

    Raises:
        ValueError: ``IRON_EMU_MEMORY`` is not a number >= 1.
    """
    global _parsed
    if _chosen is not None:
        return _chosen
    given = os.environ.get(_ENV, "")
    if given == _parsed[0]:
        return _parsed[1]
    stripped = given.strip()
    budget = _checked(stripped, _ENV) if stripped else DEFAULT_EMU_MEMORY
    _parsed = (given, budget)
    return budget
