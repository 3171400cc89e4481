"""What every family's design does alike: its arguments and its runtime sequence.

A family module decides its tiles, object FIFOs, cores and shim transfers;
this module turns the operator's ports and their placements into the runtime
sequence's arguments, emits the sequence that moves the transfers and waits
for the outputs, and wraps the result as a :class:`Design`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from iron.core.device import Device
from iron.runtime.image import Placement
from iron.runtime.npu.designs import Design
from iron.runtime.npu.legality import Layout
from iron.runtime.npu.mlir import Builder, memref

__all__: list[str] = []

_ITEM = 2  # bf16: the sequence's arguments are bf16 memrefs


def _sequence_args(
    op: object,
    need: Mapping[str, int],
    placement: Mapping[str, Placement] | None,
    arena_bytes: int | None,
    *,
    unit: int = 1,
) -> tuple[list[tuple[str, int]], dict[str, tuple[str, int]]]:
    """Runtime-sequence arguments ``(name, bytes)`` and each port's ``(arg, offset)``.

    ``need`` gives each port's bytes, in argument order. Ports placed in the
    arena share one ``arena`` argument at their planned offsets (in units of
    ``unit`` bytes, which an arena offset must then be a multiple of); every
    other port is an argument of its own at offset 0.

    Raises:
        ValueError: A placement names no port, is smaller than its port, or
            is not on a ``unit`` boundary.
    """
    ports = list(need)
    placement = dict(placement or {})
    unknown = sorted(set(placement) - set(ports))
    if unknown:
        raise ValueError(
            f"{op!r}: placement names {unknown}, not ports of "
            f"{type(op).__name__} ({', '.join(ports)})"
        )
    for port, p in placement.items():
        if p.nbytes < need[port]:
            raise ValueError(
                f"{op!r}: port {port} is placed in {p.nbytes} bytes "
                f"({p.where} at {p.offset}); it needs {need[port]}"
            )
        if unit > 1 and p.where == "arena" and p.offset % unit:
            raise ValueError(
                f"{op!r}: port {port} is placed at byte {p.offset}, not on a bf16 "
                f"boundary"
            )
    in_arena = [p for p in ports if p in placement and placement[p].where == "arena"]
    args: list[tuple[str, int]] = []
    where: dict[str, tuple[str, int]] = {}
    if in_arena:
        end = max(placement[p].offset + need[p] for p in in_arena)
        args.append(("arena", max(arena_bytes or 0, -(-end // 4) * 4)))
        for p in in_arena:
            where[p] = ("arena", placement[p].offset // unit)
    for p in ports:
        if p not in where:
            args.append((p, need[p]))
            where[p] = (p, 0)
    return args, where


def _runtime_sequence(
    b: Builder,
    args: Sequence[tuple[str, int]],
    transfers: Sequence[Any],
    outs: Sequence[str],
    columns: int,
) -> None:
    """Emit the sequence: every transfer in order, then a wait on each output FIFO.

    Output transfers (FIFOs named ``<port>_<column>`` for a port in ``outs``)
    issue a completion token; the sequence waits on each column's.
    """
    arg_types = [(a, memref(n // _ITEM)) for a, n in args]
    hints = [(a if a == "arena" else f"{a}_buf", t) for a, t in arg_types]
    with b.runtime_sequence(hints, "sequence") as names:
        ssa = dict(zip([a for a, _ in args], names))
        types = dict(arg_types)
        for t in transfers:
            b.dma_memcpy_nd(
                ssa[t.buffer],
                types[t.buffer],
                (0, 0, 0, t.offset),
                t.sizes,
                t.strides,
                metadata=t.fifo,
                bd_id=t.bd_id,
                issue_token=t.fifo.rsplit("_", 1)[0] in outs,
            )
        for c in range(columns):
            for p in outs:
                b.dma_wait(f"{p}_{c}")


def _design(
    b: Builder,
    op: object,
    dev: Device,
    args: Sequence[tuple[str, int]],
    kernels: tuple[str, ...],
    layout: Layout,
) -> Design:
    """The finished :class:`Design` of ``op`` from its builder's text."""
    return Design(
        operator=repr(op),
        device=dev.name,
        text=b.text(),
        args=tuple(a for a, _ in args),
        arg_bytes=tuple(n for _, n in args),
        kernels=kernels,
        layout=layout,
    )
