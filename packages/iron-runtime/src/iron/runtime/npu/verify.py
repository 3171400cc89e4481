"""Upstream's rules, checked on the MLIR text IRON's NPU designs emit.

:mod:`~iron.runtime.npu.legality` checks the *layouts* the designs were
planned from. This module checks what they *emit*: it parses the text of a
design (a single ``aie.device`` or a full ELF of many) and replays the
rules mlir-aie's verifiers and passes enforce when aiecc compiles it, so a
design whose text and layout disagree is caught before a board sees it.
It reads nothing from the planner; only the device facts (memory and buffer
descriptors per tile) come from :mod:`iron.core.device`.

Each rule in :data:`RULES` names the upstream source that enforces it
(paths inside https://github.com/Xilinx/mlir-aie at tag ``v1.4.1`` unless a
PR is named). :func:`check_text` returns every violation;
:func:`verify_text` raises :class:`DesignRuleError` listing them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from iron.core.device import NPU2, Device, as_device

__all__ = [
    "RULES",
    "DesignRuleError",
    "Rule",
    "Violation",
    "check_text",
    "rule_names",
    "verify_text",
]


@dataclass(frozen=True)
class Rule:
    """One upstream rule: a short ``name``, what it says, and who enforces it."""

    name: str
    summary: str
    source: str
    severity: str = "error"


#: Every rule :func:`check_text` applies, in the order it applies them.
RULES: tuple[Rule, ...] = (
    Rule(
        "run-operand-types",
        "every aiex.run operand has its callee runtime_sequence argument's type, "
        "and one argument has one type across the steps",
        "lib/Dialect/AIEX/Transforms/AIEMaterializeRuntimeSequences.cpp "
        '("argument i type mismatch")',
    ),
    Rule(
        "transfer-4-bytes",
        "a dma_memcpy_nd's innermost size and every stride but a unit innermost "
        "one are multiples of 4 bytes, its offset 4-byte aligned, sizes positive",
        "lib/Dialect/AIEX/IR/AIEXDialect.cpp verifyStridesWraps, "
        "NpuDmaMemcpyNdOp::verify",
    ),
    Rule(
        "shim-bd-dims",
        "a shim BD's wraps fit 10 bits (d0 in words, d1), its repeat (d3) at most "
        "64, its strides (in words) at most 2^20",
        "lib/Dialect/AIEX/IR/AIEXDialect.cpp verifyStridesWraps "
        "(wrap_bits = 10, step_bits = 20, iter_bits = 6 for a shim NOC tile)",
    ),
    Rule(
        "task-queue",
        "at most 4 transfers outstanding on one shim channel (object FIFO) "
        "between the waits that retire them",
        "mlir-aie PR #3734 (shim task queue is four deep; a push onto a full "
        "queue is dropped); mlir-air PR #1826",
    ),
    Rule(
        "shim-bd-ids",
        "a shim's BD ids are 0..15 and an id is not reused before a wait retires it; "
        "every issued token is awaited",
        "include/aie/Dialect/AIEX/IR/AIEX.td NpuDmaMemcpyNdOp; "
        "AIETargetModel.h getNumBDs",
    ),
    Rule(
        "fifo-dims",
        "an object FIFO's dimensionsToStream/FromStream size is at most 512 and "
        "there are at most 4 dimensions on a memory tile, 3 on a core",
        "lib/Dialect/AIE/IR/AIEDialect.cpp ObjectFifoCreateOp::verify "
        "(sizes >= 513 refused)",
    ),
    Rule(
        "fifo-ends",
        "an object FIFO has a depth of 1..16 (a lock's range), a producer that is "
        "not among its consumers, and at most one consumer per tile",
        "lib/Dialect/AIE/IR/AIEDialect.cpp ObjectFifoCreateOp::verify; "
        "AIEObjectFifoStatefulTransform.cpp",
    ),
    Rule(
        "tile-bds",
        "the object FIFO ends on a core or memory tile need at most its buffer "
        "descriptors (16 per core, 48 per memory tile)",
        "include/aie/Dialect/AIE/IR/AIETargetModel.h getNumBDs",
    ),
    Rule(
        "tile-memory",
        "a core's buffers, FIFO elements and stack fit its 64 KiB; a memory tile's "
        "fit 512 KiB",
        "lib/Dialect/AIE/Transforms/AIEAssignBuffers.cpp; "
        "AIETargetModel.h getLocalMemorySize / getMemTileSize",
    ),
    Rule(
        "core-bank",
        "no single core buffer or FIFO element exceeds one bank of mlir-aie's "
        "bank-aware allocator (4 banks of 16 KiB); past it aiecc falls back to "
        "basic-sequential allocation (a warning upstream, and here: it still "
        "builds, without bank separation)",
        "lib/Dialect/AIE/Transforms/AIEAssignBuffers.cpp; AIETargetModel.h "
        "getNumBanks (4 on AIE2/AIE2P)",
        "warning",
    ),
    Rule(
        "kernel-symbols",
        'every func.func a design links (link_with = "x.o") is an extern "C" '
        "function of kernels/x.cc with as many parameters",
        "the core ELF link (aiecc links each core against its link_with objects; "
        "an undefined symbol fails the link)",
    ),
)

_RULE = {r.name: r for r in RULES}

#: Bytes of one bank of mlir-aie's bank-aware allocator on AIE2/AIE2P
#: (AIETargetModel.h getNumBanks() = 4 over 64 KiB): the device's
#: ``core_memory_bank_bytes``, which the check reads.
ALLOCATOR_BANK_BYTES = NPU2.core_memory_bank_bytes
_TASK_QUEUE = 4
_FIFO_DIM_MAX = 512
_LOCK_MAX = 16
_ELEM_BYTES = {"bf16": 2, "f16": 2, "f32": 4, "i32": 4, "i16": 2, "i8": 1, "ui8": 1}
_KERNELS = Path(__file__).parent / "kernels"


def rule_names() -> tuple[str, ...]:
    """The names of :data:`RULES`, in order."""
    return tuple(r.name for r in RULES)


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (device block and op), and why, with the limit."""

    rule: str
    device: str
    op: str
    message: str

    def __str__(self) -> str:
        src = _RULE[self.rule].source
        return f"[{self.rule}] @{self.device}: {self.op}: {self.message} ({src})"


class DesignRuleError(ValueError):
    """Emitted MLIR text breaks an upstream rule; the message lists each violation."""


# ---------------------------------------------------------------- parsing
_DEVICE = re.compile(r"^\s*aie\.device\((\w+)\)\s*(@\w+)?")
_TILE = re.compile(r"^\s*(%[\w$.]+) = aie\.tile\((\d+), (\d+)\)")
_MEMREF = re.compile(r"memref<([\dx]+)x(\w+)>")
_FIFO = re.compile(
    r"^\s*aie\.objectfifo @(\w+)\((%[\w$.]+)(?: dimensionsToStream \[(.*?)\])?, "
    r"\{(.*?)\}, (\d+) : i32\)(.*?): !aie\.objectfifo<(memref<[^>]*>)>"
)
_CONSUMER = re.compile(r"(%[\w$.]+)(?: dimensionsFromStream \[(.*?)\])?")
_DIMS = re.compile(r"<size = (\d+), stride = (\d+)>")
_BUFFER = re.compile(r"^\s*%[\w$.]+ = aie\.buffer\((%[\w$.]+)\).*: (memref<[^>]*>)")
_CORE = re.compile(r"^\s*%[\w$.]+ = aie\.core\((%[\w$.]+)\)")
_STACK = re.compile(r"^\s*\} \{.*stack_size = (\d+) : i32")
_FUNC = re.compile(
    r"^\s*func\.func private @(\w+)\((.*?)\) attributes \{.*link_with = \"([^\"]+)\""
)
_SEQUENCE = re.compile(r"^\s*aie\.runtime_sequence @(\w+)\((.*)\)\s*\{")
_ARG = re.compile(r"(%[\w$.]+): (memref<[^>]*>)")
_MEMCPY = re.compile(
    r"^\s*aiex\.npu\.dma_memcpy_nd\((%[\w$.]+)\[([^\]]*)\]\[([^\]]*)\]\[([^\]]*)\]\)"
    r"\s*\{(.*?)\}\s*:\s*(memref<[^>]*>)"
)
_WAIT = re.compile(r"^\s*aiex\.npu\.dma_wait \{symbol = @(\w+)\}")
_RUN = re.compile(r"^\s*aiex\.run @(\w+)\((.*?)\) : \((.*)\)")
_CONFIGURE = re.compile(r"^\s*aiex\.configure @(\w+)")
_DEFAULT_STACK = 0x400  # aiecc's getDefaultCoreStackSize() when stack_size is absent


def _memref(text: str) -> tuple[int, str]:
    """(elements, element type) of ``memref<AxBxT>``."""
    m = _MEMREF.fullmatch(text.strip())
    if not m:
        raise DesignRuleError(f"cannot read memref type {text!r}")
    n = 1
    for d in m.group(1).split("x"):
        n *= int(d)
    return n, m.group(2)


def _bytes(text: str) -> int:
    n, t = _memref(text)
    if t not in _ELEM_BYTES:
        raise DesignRuleError(
            f"memref type {text!r} has element type {t}, which the checker does "
            f"not size; add it to verify._ELEM_BYTES"
        )
    return n * _ELEM_BYTES[t]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


@dataclass
class _Fifo:
    name: str
    producer: str
    consumers: list[str]
    depth: int
    elem: str
    dims: list[list[tuple[int, int]]]  # one list per end that declares dims


@dataclass
class _Block:
    name: str
    kind: str
    lines: list[str]


def _blocks(text: str) -> list[_Block]:
    """Each ``aie.device`` block's lines (a full ELF has many)."""
    blocks: list[_Block] = []
    cur: _Block | None = None
    depth = 0
    for line in text.splitlines():
        m = _DEVICE.match(line)
        if m and cur is None:
            cur = _Block((m.group(2) or "@main")[1:], m.group(1), [])
            depth = line.count("{") - line.count("}")
            continue
        if cur is not None:
            depth += line.count("{") - line.count("}")
            if depth <= 0:
                blocks.append(cur)
                cur = None
                continue
            cur.lines.append(line)
    return blocks


# ---------------------------------------------------------------- checking
def check_text(
    text: str,
    dev: Device | str,
    *,
    kernel_dir: Path | None = None,
    warnings: bool = False,
) -> list[Violation]:
    """Every violation of :data:`RULES` in the design text ``text`` for ``dev``.

    ``kernel_dir`` holds the kernel sources (``x.cc`` for ``link_with =
    "x.o"``); the shipped ``npu/kernels`` by default. Rules of severity
    ``"warning"`` (what upstream only warns about) are reported only with
    ``warnings=True``.
    """
    device = as_device(dev)
    out: list[Violation] = []
    sequences: dict[str, dict[str, list[str]]] = {}  # device -> sequence -> types
    blocks = _blocks(text)
    if not blocks:
        raise DesignRuleError(
            "the text has no aie.device block; give the emitted design text "
            "(Design.text)"
        )
    for block in blocks:
        sequences[block.name] = _check_block(block, device, kernel_dir or _KERNELS, out)
    for block in blocks:
        _check_runs(block, sequences, out)
    if not warnings:
        out = [v for v in out if _RULE[v.rule].severity == "error"]
    return out


def verify_text(
    text: str, dev: Device | str, *, subject: str = "", kernel_dir: Path | None = None
) -> None:
    """Raise :class:`DesignRuleError` if ``text`` breaks any rule of :data:`RULES`."""
    found = check_text(text, dev, kernel_dir=kernel_dir)
    if found:
        head = f"{subject or 'design'} on {as_device(dev).name} breaks "
        head += f"{len(found)} upstream rule check(s):\n  "
        raise DesignRuleError(head + "\n  ".join(map(str, found)))


def _check_block(
    block: _Block, dev: Device, kernel_dir: Path, out: list[Violation]
) -> dict[str, list[str]]:
    def bad(rule: str, op: str, message: str) -> None:
        out.append(Violation(rule, block.name, op, message))

    def bank(op: str, tile: str, what: str, nbytes: int) -> None:
        size = dev.core_memory_bank_bytes
        if _kind(tiles.get(tile)) == "core" and nbytes > size:
            bad(
                "core-bank",
                op,
                f"{what} on core {tile} is more than one {size}-byte "
                f"bank; split it or keep it within a bank",
            )

    tiles: dict[str, tuple[int, int]] = {}
    fifos: dict[str, _Fifo] = {}
    mem: Counter[str] = Counter()
    bds: Counter[str] = Counter()
    sequences: dict[str, list[str]] = {}
    core_tiles: list[str] = []
    lines = block.lines
    for i, line in enumerate(lines):
        if m := _TILE.match(line):
            tiles[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif m := _FIFO.match(line):
            name, prod, dims_to, cons, depth, rest, elem = m.groups()
            dims = [[(int(s), int(t)) for s, t in _DIMS.findall(dims_to or "")]]
            consumers = []
            for c, from_dims in _CONSUMER.findall(cons):
                consumers.append(c)
                if from_dims:
                    dims.append([(int(s), int(t)) for s, t in _DIMS.findall(from_dims)])
            fifos[name] = _Fifo(name, prod, consumers, int(depth), elem, dims)
        elif m := _BUFFER.match(line):
            nbytes = _bytes(m.group(2))
            mem[m.group(1)] += nbytes
            op = line.strip().split(" = ")[0] + " = aie.buffer"
            bank(op, m.group(1), f"{m.group(2)} ({nbytes} bytes)", nbytes)
        elif m := _CORE.match(line):
            tile = m.group(1)
            core_tiles.append(tile)
            depth = 0
            stack = _DEFAULT_STACK
            for j in range(i, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0 and j > i:
                    if s := _STACK.match(lines[j]):
                        stack = int(s.group(1))
                    break
            mem[tile] += stack
        elif m := _FUNC.match(line):
            _check_kernel(m.group(1), m.group(2), m.group(3), kernel_dir, bad)
        elif m := _SEQUENCE.match(line):
            args = _ARG.findall(m.group(2))
            if m.group(1) in sequences:
                bad(
                    "run-operand-types",
                    f"aie.runtime_sequence @{m.group(1)}",
                    "a second sequence of that name in one device; name each "
                    "step's sequence apart",
                )
            sequences[m.group(1)] = [t for _, t in args]
            _check_sequence(block, dev, lines[i + 1 :], dict(args), fifos, tiles, bad)
    for f in fifos.values():
        op = f"aie.objectfifo @{f.name}"
        if not 1 <= f.depth <= _LOCK_MAX:
            bad("fifo-ends", op, f"depth {f.depth} is outside 1..{_LOCK_MAX}")
        if f.producer in f.consumers:
            bad("fifo-ends", op, f"producer {f.producer} is also a consumer")
        dup = [c for c, k in Counter(f.consumers).items() if k > 1]
        if dup:
            bad("fifo-ends", op, f"consumer tile(s) {', '.join(dup)} listed twice")
        for dims in f.dims:
            for size, _ in dims:
                if size > _FIFO_DIM_MAX:
                    bad(
                        "fifo-dims",
                        op,
                        f"dimension size {size} exceeds the upstream limit "
                        f"{_FIFO_DIM_MAX}; split the dimension",
                    )
        ends_dims = [(f.producer, f.dims[0])] if f.dims and f.dims[0] else []
        for end, dims in ends_dims:
            limit = 4 if _kind(tiles.get(end)) == "mem" else 3
            if len(dims) > limit:
                bad(
                    "fifo-dims",
                    op,
                    f"{len(dims)} dimensions on a {_kind(tiles.get(end))} tile; "
                    f"at most {limit}",
                )
        nbytes = _bytes(f.elem)
        for end in (f.producer, *f.consumers):
            kind = _kind(tiles.get(end))
            if kind == "shim":
                continue
            mem[end] += f.depth * nbytes
            bds[end] += f.depth
            bank(op, end, f"element {f.elem} ({nbytes} bytes)", nbytes)
    limits = {
        "core": (dev.core_memory_bytes, dev.core_bds),
        "mem": (dev.mem_tile_bytes, dev.mem_tile_bds),
    }
    for tile in sorted(set(mem) | set(bds)):
        kind = _kind(tiles.get(tile))
        if kind not in limits:
            continue
        size, bd_max = limits[kind]
        if mem[tile] > size:
            bad(
                "tile-memory",
                f"aie.tile {tile}",
                f"buffers, FIFO elements and stack need {mem[tile]} bytes; a "
                f"{kind} tile has {size}",
            )
        if bds[tile] > bd_max:
            bad(
                "tile-bds",
                f"aie.tile {tile}",
                f"object FIFO buffers need {bds[tile]} buffer descriptors; a "
                f"{kind} tile has {bd_max}",
            )
    return sequences


def _kind(rc: tuple[int, int] | None) -> str:
    if rc is None:
        return "?"
    return "shim" if rc[1] == 0 else "mem" if rc[1] == 1 else "core"


def _shim_of(fifo: _Fifo | None, tiles: dict[str, tuple[int, int]]) -> str:
    if fifo is None:
        return "?"
    for end in (fifo.producer, *fifo.consumers):
        if _kind(tiles.get(end)) == "shim":
            return end
    return fifo.producer


def _check_sequence(block, dev, lines, args, fifos, tiles, bad) -> None:
    """Replay one runtime_sequence's transfers and waits.

    The wait model is the planner's own statement (legality._sequence_peaks),
    applied here to the text: a wait on ``@f`` consumes ``f``'s oldest token
    and retires, on that token's shim, every transfer issued up to it.
    """
    issued: list[tuple[str, str, int]] = []  # (fifo, shim, bd id)
    busy: defaultdict[str, dict[int, int]] = defaultdict(dict)
    queued: defaultdict[str, list[int]] = defaultdict(list)
    tokens: defaultdict[str, list[int]] = defaultdict(list)
    depth = 1
    for line in lines:
        depth += line.count("{") - line.count("}")
        if depth <= 0:
            break
        if m := _WAIT.match(line):
            fifo = m.group(1)
            op = f"aiex.npu.dma_wait @{fifo}"
            if not tokens[fifo]:
                bad(
                    "shim-bd-ids",
                    op,
                    "waits for no token (no issue_token transfer before it)",
                )
                continue
            k = tokens[fifo].pop(0)
            shim = issued[k][1]
            busy[shim] = {b: e for b, e in busy[shim].items() if e > k}
            for f in queued:
                queued[f] = [e for e in queued[f] if e > k or issued[e][1] != shim]
            continue
        m = _MEMCPY.match(line)
        if not m:
            continue
        arg, offs, sizes, strides, attrs, mtype = m.groups()
        fm = re.search(r"metadata = @(\w+)", attrs)
        fifo = fm.group(1) if fm else "?"
        op = f"aiex.npu.dma_memcpy_nd #{len(issued)} on @{fifo}"
        _check_dims(op, mtype, _ints(offs), _ints(sizes), _ints(strides), bad)
        if arg in args and args[arg] != mtype:
            bad(
                "run-operand-types",
                op,
                f"{arg} is typed {mtype} here but {args[arg]} in the sequence",
            )
        idm = re.search(r"id = (\d+)", attrs)
        bd = int(idm.group(1)) if idm else 0
        shim = _shim_of(fifos.get(fifo), tiles)
        j = len(issued)
        issued.append((fifo, shim, bd))
        if not 0 <= bd < dev.shim_bds:
            bad("shim-bd-ids", op, f"BD id {bd} is outside 0..{dev.shim_bds - 1}")
        elif bd in busy[shim]:
            bad(
                "shim-bd-ids",
                op,
                f"BD id {bd} on {shim} is reused while transfer #{busy[shim][bd]} "
                f"may still run; wait on a token first",
            )
        busy[shim][bd] = j
        queued[fifo].append(j)
        if len(queued[fifo]) == _TASK_QUEUE + 1:
            bad(
                "task-queue",
                op,
                f"{len(queued[fifo])} transfers outstanding on @{fifo}; the shim "
                f"channel's task queue holds {_TASK_QUEUE}: wait before pushing more",
            )
        if "issue_token = true" in attrs:
            tokens[fifo].append(j)
    for fifo, left in tokens.items():
        if left:
            bad(
                "shim-bd-ids",
                f"aiex.npu.dma_memcpy_nd #{left[0]} on @{fifo}",
                "its token is never awaited",
            )


def _check_dims(op, mtype, offs, sizes, strides, bad) -> None:
    if len(sizes) != 4 or len(strides) != 4 or len(offs) != 4:
        bad("shim-bd-dims", op, "needs 4 offsets, sizes and strides")
        return
    _, elem = _memref(mtype)
    w = _ELEM_BYTES.get(elem, 4)
    # the text lists dimensions outermost first; upstream reverses them
    s = list(reversed(sizes))
    st = list(reversed(strides))
    if any(v <= 0 for v in s):
        bad("transfer-4-bytes", op, f"sizes {sizes} must be positive")
        return
    if s[0] * w % 4:
        bad(
            "transfer-4-bytes",
            op,
            f"innermost size {s[0]} x {w} bytes = {s[0] * w} bytes is not a "
            f"multiple of 4",
        )
    for i in range(4):
        if i == 0 and st[0] == 1:
            continue
        if (i < 3 or s[3] > 1) and st[i] * w % 4:
            bad(
                "transfer-4-bytes",
                op,
                f"stride {i} = {st[i]} x {w} bytes is not a multiple of 4",
            )
    offset = sum(o * t for o, t in zip(offs, strides)) * w
    if offset % 4:
        bad("transfer-4-bytes", op, f"offset {offset} bytes is not 4-byte aligned")
    linear = s[1] == 1 and s[2] == 1 and st[0] == 1
    if not linear and s[0] * w // 4 > 1023:
        bad("shim-bd-dims", op, f"size 0 = {s[0] * w // 4} words exceeds 1023")
    if s[1] > 1023:
        bad("shim-bd-dims", op, f"size 1 = {s[1]} exceeds 1023")
    if s[3] - 1 > 64:
        bad("shim-bd-dims", op, f"size 3 (repeat) = {s[3]} exceeds 64")
    for i in range(4):
        hw = st[i] * w // 4 - 1 if st[i] * w >= 4 else 0
        if i and s[i] <= 1:
            continue
        if hw > 1 << 20:
            bad(
                "shim-bd-dims",
                op,
                f"stride {i} = {st[i]} elements ({hw + 1} words) exceeds 2^20 words",
            )


def _check_runs(block: _Block, sequences: dict[str, dict[str, list[str]]], out) -> None:
    """Each ``aiex.run`` against its callee, looked up in the configured device.

    Upstream resolves the callee by name inside the device its enclosing
    ``aiex.configure`` names (``RunOp::getCalleeRuntimeSequenceOp``,
    ``lib/Dialect/AIEX/IR/AIEXDialect.cpp``), so a sequence of another device
    does not answer.
    """
    configured = ""
    for line in block.lines:
        if m := _CONFIGURE.match(line):
            configured = m.group(1)
            continue
        m = _RUN.match(line)
        if not m:
            continue
        callee, _, sig = m.groups()
        types = _MEMREF_LIST.findall(sig)
        op = f"aiex.run @{callee}"
        want = sequences.get(configured, {}).get(callee)
        if want is None:
            problems = [f"@{configured or '?'} has no sequence of that name"]
        elif len(want) != len(types):
            problems = [f"passes {len(types)} operands; the sequence takes {len(want)}"]
        else:
            problems = [
                f"argument {k} type mismatch: expected {exp} but got {got}"
                for k, (got, exp) in enumerate(zip(types, want))
                if got != exp
            ]
        out += [Violation("run-operand-types", block.name, op, p) for p in problems]


_MEMREF_LIST = re.compile(r"memref<[^>]*>")


def _check_kernel(name: str, types: str, obj: str, kernel_dir: Path, bad) -> None:
    op = f"func.func @{name}"
    arity = len([t for t in re.split(r",\s*(?![^<]*>)", types) if t.strip()])
    src = kernel_dir / (Path(obj).stem + ".cc")
    if not src.is_file():
        bad(
            "kernel-symbols",
            op,
            f"links {obj}, but there is no kernel source {src.name}",
        )
        return
    code = _strip_comments(src.read_text(encoding="utf-8"))
    if 'extern "C"' not in code:
        bad("kernel-symbols", op, f'{src.name} has no extern "C" functions')
        return
    m = re.search(rf"\b{re.escape(name)}\s*\(([^)]*)\)\s*\{{", code)
    if not m:
        bad("kernel-symbols", op, f"{src.name} defines no function {name}")
        return
    params = m.group(1).strip()
    n = 0 if params in ("", "void") else params.count(",") + 1
    if n != arity:
        bad(
            "kernel-symbols",
            op,
            f"is declared with {arity} arguments but {src.name} defines {name} "
            f"with {n}",
        )


def _strip_comments(code: str) -> str:
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)
