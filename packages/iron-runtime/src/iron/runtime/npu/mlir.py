"""A tiny MLIR text builder for the aie dialect, pinned to one mlir-aie release.

IRON emits its NPU designs as MLIR text with its own code; it never imports
the mlir-aie Python API (whose interface changed three times in 2026). This
module holds the whole of that: a :class:`Builder` of indented lines with
regions and unique SSA names, stable formatting helpers (types, attribute
dictionaries with sorted keys, integer lists), and one emitter per aie / aiex
operation IRON uses. Each emitter's syntax is taken from the pinned release's
own tests, cited next to it, so a release bump is one place to re-check.

The release is :data:`MLIR_AIE_RELEASE`. Why that one: it is the first release
with both the ``--get-*`` aiecc output flags (PR #3364, 2026-07-21) and Peano as
the default core compiler (its release notes: "Peano is now the default core
backend in aiecc"), and the syntax facts below were read from upstream main
of 2026-08-14 (commit ``3ca0193``), three days after it.

Sources, by label (paths inside Xilinx/mlir-aie):
    [npu_xclbin]  test/aiecc/cpp_npu_and_xclbin.mlir (2026): aie.device,
        aie.tile, aie.objectfifo, acquire/subview.access/release, aie.core,
        aie.runtime_sequence, aiex.npu.dma_memcpy_nd with SSA i64 constants,
        aiex.npu.dma_wait {symbol = @...}.
    [link_func]   test/aiecc/cpp_link_with_func_level.mlir (2026): "Canonical
        new style: link_with is on func.func, not on aie.core":
        ``func.func private @f(...) attributes {link_with = "f.o"}``.
    [bd_paths]    include/aie/Dialect/AIEX/IR/AIEX.td ``NpuDmaMemcpyNdOp``
        (v1.4.1; its ``DynamicIndexList`` operands take literal
        offsets/sizes/strides) inside ``aie.runtime_sequence @name(...)``
        (``lib/Dialect/AIE/IR/AIEDialect.cpp`` ``RuntimeSequenceOp::parse``).
        The test first cited here, ``test/Conversion/DmaToNpu/
        dma_to_npu_bd_paths.mlir``, is newer than v1.4.1.
    [passthrough] programming_examples/basic/passthrough_dmas (IRON output):
        the endless core loop ``scf.for ... to 9223372036854775807``.
    [rtp_buffer]  aie.buffer next to object FIFOs and a core on an npu device,
        e.g. ``%rtp = aie.buffer(%tile_0_2) {sym_name = "rtp"} : memref<16xi32>``
        (the runtime-parameter tests of the same era).
    [stack_size]  include/aie/Dialect/AIE/IR/AIEOps.td ``AIE_CoreOp`` at tag
        v1.4.1: ``OptionalAttr<ConfinedAttr<AIEI32Attr, [IntMinValue<1>]>>:
        $stack_size``, assembly format ``(`` $tile ``)`` regions attr-dict, so
        the attribute follows the body; test/dialect/AIE/bad_stack_size.mlir
        (v1.4.1): ``%core = aie.core(%t) { aie.end } {stack_size = 65536 :
        i32}``. Absent, aiecc reserves ``getDefaultCoreStackSize()`` (0x400)
        and the linker puts the buffers right above it, so a deeper frame
        overwrites them silently (the op's own documentation).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

__all__ = [
    "INDEX_MAX",
    "MLIR_AIE_RELEASE",
    "Builder",
    "attr_dict",
    "memref",
    "objectfifo_type",
    "subview_type",
]

#: The one mlir-aie release IRON's designs, aiecc flags and Peano flags target.
MLIR_AIE_RELEASE = "v1.4.1"

#: The largest ``index`` constant: IRON's "loop forever" bound [passthrough].
INDEX_MAX = 9223372036854775807

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_DTYPES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float32": "f32",
    "f32": "f32",
    "int32": "i32",
    "i32": "i32",
    "uint8": "i8",
    "int8": "i8",
    "i8": "i8",
}


def _dtype(dtype: str) -> str:
    return _DTYPES.get(dtype, dtype)


def memref(shape: int | Sequence[int], dtype: str = "bf16") -> str:
    """``memref<1024xbf16>`` for ``shape`` (an int or a sequence) and ``dtype``."""
    dims = [shape] if isinstance(shape, int) else list(shape)
    return "memref<" + "x".join(str(int(d)) for d in dims) + f"x{_dtype(dtype)}>"


def objectfifo_type(elem: str) -> str:
    """``!aie.objectfifo<memref<...>>`` for an element memref type [npu_xclbin]."""
    return f"!aie.objectfifo<{elem}>"


def subview_type(elem: str) -> str:
    """``!aie.objectfifosubview<memref<...>>``, what acquire returns [npu_xclbin]."""
    return f"!aie.objectfifosubview<{elem}>"


def _attr(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value  # already formatted: "@sym", '"text"', "3 : i32"
    raise TypeError(
        f"attribute value {value!r} is a {type(value).__name__}; give a bool or "
        f"a formatted string such as '0 : i64' or '@fifo'"
    )


def attr_dict(attrs: Mapping[str, object]) -> str:
    """``{a = 1 : i64, b = @x}`` with keys sorted, as mlir-opt prints them."""
    return "{" + ", ".join(f"{k} = {_attr(attrs[k])}" for k in sorted(attrs)) + "}"


def _ints(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


class Builder:
    """Lines of MLIR text with regions, indentation and unique SSA names.

    Example:
        >>> b = Builder()
        >>> with b.region("module"):
        ...     t = b.tile(0, 2)
        >>> print(b.text(), end="")
        module {
          %tile_0_2 = aie.tile(0, 2)
        }
    """

    def __init__(self, indent: str = "  ") -> None:
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent
        self._names: set[str] = set()
        self._consts: list[dict[tuple[object, str], str]] = [{}]

    # -- plumbing -------------------------------------------------------------

    def line(self, text: str) -> None:
        """Append one line at the current depth."""
        self._lines.append(self._indent * self._depth + text)

    def comment(self, text: str) -> None:
        """Append a ``// text`` line."""
        self.line(f"// {text}")

    def fresh(self, hint: str) -> str:
        """A new SSA name ``%hint`` (``%hint_1``, ... when taken).

        Raises:
            ValueError: ``hint`` is not an MLIR identifier.
        """
        if not _NAME.fullmatch(hint):
            raise ValueError(f"SSA name hint {hint!r} is not an MLIR identifier")
        name, k = hint, 0
        while name in self._names:
            k += 1
            name = f"{hint}_{k}"
        self._names.add(name)
        return "%" + name

    @contextlib.contextmanager
    def region(self, header: str, trailer: str = "") -> Iterator[None]:
        """``header {`` ... ``}`` + ``trailer``; constants are scoped to it."""
        self.line(header + " {")
        self._depth += 1
        self._consts.append({})
        try:
            yield
        finally:
            self._consts.pop()
            self._depth -= 1
            self.line("}" + trailer)

    def text(self) -> str:
        """The text so far, newline-terminated."""
        return "\n".join(self._lines) + "\n"

    # -- builtin / arith / scf / func -------------------------------------------

    def constant(self, value: int, type_: str) -> str:
        """``%cN = arith.constant N : type``, once per value and type per region."""
        key = (int(value), type_)
        for scope in reversed(self._consts):
            if key in scope:
                return scope[key]
        suffix = "" if type_ == "index" else f"_{type_}"
        hint = f"c{value}{suffix}" if value >= 0 else f"cm{-value}{suffix}"
        name = self.fresh(hint)
        self.line(f"{name} = arith.constant {int(value)} : {type_}")
        self._consts[-1][key] = name
        return name

    @contextlib.contextmanager
    def for_(self, lower: str, upper: str, step: str, hint: str = "i") -> Iterator[str]:
        """``scf.for %i = lower to upper step step { ... }`` (index bounds)."""
        var = self.fresh(hint)
        with self.region(f"scf.for {var} = {lower} to {upper} step {step}"):
            yield var

    def func_decl(self, name: str, arg_types: Sequence[str], link_with: str) -> None:
        """``func.func private @name(types) attributes {link_with = "obj"}`` [link_func]."""
        args = ", ".join(arg_types)
        attrs = attr_dict({"link_with": '"' + link_with + '"'})
        self.line(f"func.func private @{name}({args}) attributes {attrs}")

    def call(self, name: str, args: Sequence[str], arg_types: Sequence[str]) -> None:
        """``func.call @name(args) : (types) -> ()`` [link_func]."""
        self.line(
            f"func.call @{name}({', '.join(args)}) : ({', '.join(arg_types)}) -> ()"
        )

    def load(self, buf: str, index: str, buf_type: str, hint: str = "v") -> str:
        """``%v = memref.load %buf[%index] : memref<...>``; returns ``%v``.

        The value has the memref's element type (an ``i32`` for a word).
        """
        name = self.fresh(hint)
        self.line(f"{name} = memref.load {buf}[{index}] : {buf_type}")
        return name

    # -- aie -----------------------------------------------------------------------

    def device(
        self, name: str, sym: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """``aie.device(npu2) [@sym] { ... }`` [npu_xclbin], [bd_paths].

        The symbol names the device for aiecc's ``--device-name`` and the full
        ELF's ``<device>:<sequence>`` kernel name (``main`` when absent).
        """
        return self.region(f"aie.device({name})" + (f" @{sym}" if sym else ""))

    def tile(self, col: int, row: int, hint: str = "tile") -> str:
        """``%tile_C_R = aie.tile(C, R)`` [npu_xclbin]."""
        name = self.fresh(f"{hint}_{col}_{row}")
        self.line(f"{name} = aie.tile({col}, {row})")
        return name

    def objectfifo(
        self, name: str, producer: str, consumers: Sequence[str], depth: int, elem: str
    ) -> None:
        """``aie.objectfifo @name(%prod, {%cons}, depth : i32) : !aie.objectfifo<...>``.

        [npu_xclbin], [link_func].
        """
        self.line(
            f"aie.objectfifo @{name}({producer}, {{{', '.join(consumers)}}}, "
            f"{int(depth)} : i32) : {objectfifo_type(elem)}"
        )

    def acquire(self, fifo: str, port: str, elem: str, hint: str = "buf") -> str:
        """Acquire one element of ``fifo`` and return its memref [npu_xclbin].

        ``port`` is ``Consume`` or ``Produce``; emits ``aie.objectfifo.acquire``
        then ``aie.objectfifo.subview.access %sv[0]``.
        """
        if port not in ("Consume", "Produce"):
            raise ValueError(f"object FIFO port {port!r} is not Consume or Produce")
        view = self.fresh(f"{hint}_view")
        self.line(
            f"{view} = aie.objectfifo.acquire @{fifo}({port}, 1) : {subview_type(elem)}"
        )
        buf = self.fresh(hint)
        self.line(
            f"{buf} = aie.objectfifo.subview.access {view}[0] : "
            f"{subview_type(elem)} -> {elem}"
        )
        return buf

    def release(self, fifo: str, port: str) -> None:
        """``aie.objectfifo.release @fifo(Port, 1)`` [npu_xclbin]."""
        self.line(f"aie.objectfifo.release @{fifo}({port}, 1)")

    def buffer(self, tile: str, name: str, type_: str) -> str:
        """``%name = aie.buffer(%tile) {sym_name = "name"} : memref<...>`` [rtp_buffer].

        A core-local buffer (not an object FIFO's): its memory is the tile's.
        """
        ssa = self.fresh(name)
        attrs = attr_dict({"sym_name": '"' + ssa[1:] + '"'})
        self.line(f"{ssa} = aie.buffer({tile}) {attrs} : {type_}")
        return ssa

    def core(
        self, tile: str, *, stack_size: int | None
    ) -> contextlib.AbstractContextManager[None]:
        """``%core_C_R = aie.core(%tile_C_R) { ... aie.end } {stack_size = N : i32}``.

        Call :meth:`end` inside. ``stack_size`` is the core's stack in bytes
        (:func:`iron.runtime.npu.legality.core_stack`), always stated: the
        toolchain's default is never relied on [stack_size].

        Raises:
            ValueError: ``stack_size`` is None (a layout that states no stack)
                or not a positive int.
        """
        if isinstance(stack_size, bool) or not isinstance(stack_size, int):
            raise ValueError(
                f"aie.core stack_size={stack_size!r} on {tile}: give the stack "
                f"bytes as an int (legality.core_stack of the core's kernels, the "
                f"layout's stack_bytes); the toolchain's default is never assumed"
            )
        if stack_size < 1:
            raise ValueError(
                f"aie.core stack_size={stack_size} on {tile}: the stack must be at "
                f"least one byte (mlir-aie v1.4.1 AIEOps.td: IntMinValue<1>)"
            )
        name = self.fresh("core" + tile.removeprefix("%tile"))
        trailer = " " + attr_dict({"stack_size": f"{stack_size} : i32"})
        return self.region(f"{name} = aie.core({tile})", trailer)

    def end(self) -> None:
        """``aie.end``, the terminator of a core body [npu_xclbin]."""
        self.line("aie.end")

    @contextlib.contextmanager
    def runtime_sequence(
        self, args: Sequence[tuple[str, str]], name: str | None = None
    ) -> Iterator[list[str]]:
        """``aie.runtime_sequence [@name](%a: memref<...>, ...) { ... }``.

        ``args`` are ``(hint, type)`` pairs, in the host's argument order; the
        block yields their SSA names. [npu_xclbin], [bd_paths].
        """
        # An argument named for a window or a graph buffer ("arena@0",
        # "input:x") keeps its name: "@" as "_at_", other characters as "_".
        names = [
            self.fresh(re.sub(r"[^A-Za-z0-9_$.]", "_", hint.replace("@", "_at_")))
            for hint, _ in args
        ]
        params = ", ".join(f"{n}: {type_}" for n, (_, type_) in zip(names, args))
        sym = f" @{name}" if name else ""
        with self.region(f"aie.runtime_sequence{sym}({params})"):
            yield names

    # -- aiex (runtime sequence body) ---------------------------------------------

    def dma_memcpy_nd(
        self,
        buffer: str,
        buffer_type: str,
        offsets: Sequence[int],
        sizes: Sequence[int],
        strides: Sequence[int],
        *,
        metadata: str,
        bd_id: int,
        issue_token: bool = False,
    ) -> None:
        """``aiex.npu.dma_memcpy_nd(%buf[offsets][sizes][strides]) {...} : memref``.

        Four offsets, sizes and strides, outermost first, in elements of the
        buffer's type; the literal form of [bd_paths] (the SSA-constant form
        of [npu_xclbin] prints the same values).
        """
        for what, values in (
            ("offsets", offsets),
            ("sizes", sizes),
            ("strides", strides),
        ):
            if len(values) != 4:
                raise ValueError(
                    f"dma_memcpy_nd {what}={list(values)} for @{metadata}: give four "
                    f"values, outermost first"
                )
        attrs: dict[str, object] = {
            "id": f"{int(bd_id)} : i64",
            "metadata": f"@{metadata}",
        }
        if issue_token:
            attrs["issue_token"] = True
        self.line(
            f"aiex.npu.dma_memcpy_nd({buffer}{_ints(offsets)}{_ints(sizes)}"
            f"{_ints(strides)}) {attr_dict(attrs)} : {buffer_type}"
        )

    def dma_wait(self, fifo: str) -> None:
        """``aiex.npu.dma_wait {symbol = @fifo}`` [npu_xclbin]."""
        self.line("aiex.npu.dma_wait " + attr_dict({"symbol": "@" + fifo}))
