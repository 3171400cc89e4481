"""The AIE C++ kernels IRON's designs call, shipped as package data.

Each ``<symbol>.cc`` here starts with its contract in one place, a comment
block of ``//   key: value`` lines (symbol, operator, arguments, tile, what it
computes, the rounding its operator's reference models, the stack its entry
points need and how that figure was found), which :func:`contract` reads, so
Python never restates it. ``iron_kernel.h`` holds
what every kernel shares (the C signature convention, bf16 scalar bits,
round-to-nearest-even, the aie_api fp32 backend), ``iron_vecmath.h`` the
fp32 activation algorithms, written over a vector backend so that the host
tests can run them on scalars, ``iron_quant.h`` the dequantization of a
packed weight group the quantized-weight kernels share, and ``iron_mmul.h``
the bf16 mmul loop of GEMM and QGEMM.

The kernels are written for the pinned mlir-aie release's aie_api headers and
compiled by Peano (:mod:`iron.runtime.npu.build`); nothing here has been
compiled for an AIE on this project's machines.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

__all__ = ["KERNEL_DIR", "HEADERS", "KernelContract", "contract", "source", "symbols"]

#: Where the kernel sources live (inside the installed package).
KERNEL_DIR = Path(__file__).resolve().parent

#: The headers every kernel includes (they take part in the build cache key).
HEADERS = ("iron_kernel.h", "iron_vecmath.h", "iron_quant.h", "iron_mmul.h")

_FIELDS = ("symbol", "operator", "arguments", "tile", "computes", "rounding", "stack")
_FIELD = re.compile(r"^//\s{3}(" + "|".join(_FIELDS) + r"): (.*)$")
#: The figure a ``stack`` field starts with: ``<bytes> bytes``.
_STACK = re.compile(r"(\d+) bytes\b")


@dataclasses.dataclass(frozen=True)
class KernelContract:
    """A kernel's contract as its source states it.

    Attributes:
        symbol: The C symbol designs call (``<op>_bf16``).
        operator: The catalog operator it implements.
        arguments: Its arguments, in order.
        tile: What it requires of ``n``.
        computes: What it computes.
        rounding: The rounding its operator's reference models.
        stack: The stack its deepest call from a core needs, in bytes, then
            how that figure was found (``<bytes> bytes; <basis>``).
        path: The source file.
    """

    symbol: str
    operator: str
    arguments: str
    tile: str
    computes: str
    rounding: str
    stack: str
    path: Path

    @property
    def stack_bytes(self) -> int:
        """The stack bytes the ``stack`` field declares (its leading figure).

        What a core linking this kernel reserves for it
        (:func:`iron.runtime.npu.legality.core_stack`), and what the build
        holds Peano's measured frames to (:mod:`iron.runtime.npu.build`).

        Raises:
            ValueError: The field does not start with ``<bytes> bytes``.
        """
        m = _STACK.match(self.stack)
        if m is None:
            raise ValueError(
                f"{self.path}: its contract's stack field {self.stack!r} does not "
                f"start with '<bytes> bytes'"
            )
        return int(m.group(1))

    def _groups(self) -> list[tuple[list[str], str]]:
        """``arguments`` as ``(names, type)`` groups, in order."""
        found = []
        for group in self.arguments.split(";"):
            names, _, type_ = group.partition(":")
            found.append(([n.strip() for n in names.split(",")], type_.strip()))
        return found

    @property
    def scalar_count(self) -> int:
        """How many int32 arguments follow ``n`` (bf16 bits of scalars)."""
        groups = self._groups()
        at = next(i for i, (names, _) in enumerate(groups) if names == ["n"])
        return sum(len(names) for names, _ in groups[at + 1 :])

    @property
    def buffer_count(self) -> int:
        """How many bfloat16 buffers it takes (inputs and the output)."""
        return sum(len(n) for n, t in self._groups() if t.startswith("bfloat16["))


def source(symbol: str) -> Path:
    """The source file of kernel ``symbol``.

    Raises:
        KeyError: No kernel of that symbol ships here; the message lists them.
    """
    path = KERNEL_DIR / f"{symbol}.cc"
    if not path.is_file():
        raise KeyError(
            f"no IRON kernel {symbol!r} ships in {KERNEL_DIR}; the kernels are "
            f"{', '.join(symbols())}"
        )
    return path


def symbols() -> tuple[str, ...]:
    """Every kernel symbol that ships, sorted."""
    return tuple(sorted(p.stem for p in KERNEL_DIR.glob("*.cc")))


@functools.cache
def contract(symbol: str) -> KernelContract:
    """Read kernel ``symbol``'s contract from its source.

    Raises:
        KeyError: No such kernel.
        ValueError: Its contract block lacks a field or names another symbol.
    """
    path = source(symbol)
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _FIELD.match(line)
        if m:
            fields[m.group(1)] = m.group(2).strip()
    missing = [k for k in _FIELDS if k not in fields]
    if missing:
        raise ValueError(f"{path}: its contract block lacks {', '.join(missing)}")
    stack = _STACK.match(fields["stack"])
    if stack is None or int(stack.group(1)) <= 0:
        raise ValueError(
            f"{path}: its contract's stack field {fields['stack']!r} does not start "
            f"with a positive '<bytes> bytes' figure; state the bytes its deepest "
            f"call needs, then how that figure was found"
        )
    if fields["symbol"] != symbol:
        raise ValueError(
            f"{path}: its contract names symbol {fields['symbol']!r}, not {symbol!r}"
        )
    return KernelContract(path=path, **fields)
