"""The AIE C++ kernels IRON's designs call, shipped as package data.

Each ``<symbol>.cc`` here starts with its contract in one place, a comment
block of ``//   key: value`` lines (symbol, operator, arguments, tile, what it
computes, the rounding its operator's reference models), which
:func:`contract` reads, so Python never restates it. ``iron_kernel.h`` holds
what every kernel shares (the C signature convention, bf16 scalar bits,
round-to-nearest-even, the aie_api fp32 backend) and ``iron_vecmath.h`` the
fp32 activation algorithms, written over a vector backend so that the host
tests can run them on scalars.

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
HEADERS = ("iron_kernel.h", "iron_vecmath.h")

_FIELD = re.compile(
    r"^//\s{3}(symbol|operator|arguments|tile|computes|rounding): (.*)$"
)


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
        path: The source file.
    """

    symbol: str
    operator: str
    arguments: str
    tile: str
    computes: str
    rounding: str
    path: Path

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
    missing = [
        k
        for k in ("symbol", "operator", "arguments", "tile", "computes", "rounding")
        if k not in fields
    ]
    if missing:
        raise ValueError(f"{path}: its contract block lacks {', '.join(missing)}")
    if fields["symbol"] != symbol:
        raise ValueError(
            f"{path}: its contract names symbol {fields['symbol']!r}, not {symbol!r}"
        )
    return KernelContract(path=path, **fields)
