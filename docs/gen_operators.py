"""Generate docs/reference/operators.md from the operator declarations.

Run: ``python docs/gen_operators.py``. A test (tests/test_docs.py)
checks the committed page is what this writes, so a change to an operator's
declaration, docstring or tolerance shows up as a stale page.

For each operator in ``iron.operators.CATALOG`` the page gives what its
class declares: its operands, its params (with defaults and whether a call
may give one per call), its open tunables and their domains, its tolerance
with the note saying where the figure comes from, and the devices it runs
on. Tolerances and devices need an instance, so ``EXAMPLES`` below names a
typical construction of each operator (several where a param changes the
tolerance); an operator missing from it is an error here.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from iron.core.declare import MISSING, domain_text
from iron.core.device import NPU1, NPU2
from iron.core.precision import Precision
from iron.operators import CATALOG

PAGE = Path(__file__).resolve().parent / "reference" / "operators.md"
DEVICES = (NPU1, NPU2)

#: A typical construction of each operator: what the tolerance and device
#: columns are computed for. Several where a param changes the tolerance.
EXAMPLES: dict[str, list[dict[str, Any]]] = {
    "ElementwiseAdd": [dict(size=2048)],
    "ElementwiseMul": [dict(size=2048)],
    "AXPY": [dict(size=2048, scalar_factor=2.0)],
    "ReLU": [dict(size=2048)],
    "SiLU": [dict(size=2048)],
    "GELU": [dict(size=2048), dict(size=2048, form="erf")],
    "Sigmoid": [dict(size=2048)],
    "Tanh": [dict(size=2048)],
    "LeakyReLU": [dict(size=2048, alpha=0.01)],
    "Clamp": [dict(size=2048, low=-1.0, high=1.0)],
    "SiLUMul": [dict(size=2048)],
    "RMSNorm": [dict(rows=16, cols=2048), dict(rows=16, cols=2048, weighted=True)],
    "LayerNorm": [dict(rows=16, cols=2048, weighted=True, biased=True)],
    "Softmax": [dict(rows=16, cols=2048)],
    "RoPE": [dict(rows=16, heads=32, head_dim=64)],
    "GEMV": [
        dict(M=2048, K=2048),
        dict(M=2048, K=2048, precision=Precision.HIGH),
        dict(M=2048, K=2048, precision=Precision.MEDIUM),
    ],
    "GEMM": [dict(M=64, K=2048, N=2048)],
    "DecodeAttention": [
        dict(heads=32, kv_heads=8, head_dim=64, max_len=2048, length=512)
    ],
    "CausalAttention": [dict(heads=32, kv_heads=8, head_dim=64, max_len=2048, rows=16)],
    "Copy": [dict(shape=(16, 2048))],
    "Transpose": [dict(rows=64, cols=128)],
    "Repeat": [dict(rows=8, row_shape=(64,), repeat=4)],
    "Dequant": [dict(N=4096)],
    "QGEMV": [dict(M=2048, K=2048, bits=4, group=32)],
    "QGEMM": [dict(M=16, K=2048, N=2048, bits=4, group=32)],
    "DequantRows": [dict(rows=16, K=2048, bits=4, group=32)],
    "Sample": [dict(vocab=32768), dict(vocab=32768, temperature=0.8, top_k=40)],
}


def _cell(text: Any) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: Any) -> str:
    if isinstance(value, Enum):
        value = value.value
    return f"`{value!r}`"


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return _cell(doc.split("\n\n")[0])


def _dims(dims: tuple) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ")" if dims else "any shape"


def _dtype(dtype: Any) -> str:
    return "any dtype" if dtype is None else np.dtype(dtype).name


def _call(name: str, fields: dict[str, Any]) -> str:
    inner = ", ".join(
        f"{k}={v.value!r}" if isinstance(v, Enum) else f"{k}={v!r}"
        for k, v in fields.items()
    )
    return f"{name}({inner})"


def _default(spec: Any) -> str:
    if spec.derive is not None or callable(spec.default):
        return "derived"
    if spec.default is MISSING:
        return "required"
    return _code(spec.default)


def _operands(cls: type) -> list[str]:
    declaration = cls.declaration
    lines = ["| operand | shape | dtype |", "|---|---|---|"]
    for spec in declaration.inputs:
        optional = " (optional)" if spec.optional else ""
        lines.append(
            f"| in `{spec.name}`{optional} | {_dims(spec.dims)} | {_dtype(spec.dtype)} |"
        )
    for spec in declaration.outputs:
        dtype = "the first input's" if spec.dtype is None else _dtype(spec.dtype)
        lines.append(f"| out `{spec.name}` | {_dims(spec.dims)} | {dtype} |")
    return lines


def _params(cls: type) -> list[str]:
    declaration = cls.declaration
    rows = [
        (name, spec)
        for name, spec in declaration.params.items()
        if name not in declaration.tunables
    ]
    if not rows:
        return ["No params."]
    lines = ["| param | default | meaning |", "|---|---|---|"]
    for name, spec in rows:
        meaning = _cell(spec.doc) or "-"
        if spec.per_call:
            meaning += " (may be a per-call value)"
        if spec.tunable:
            meaning += f" (a tunable this class fixes to {_code(spec.default)})"
            default = "fixed"
        else:
            default = _default(spec)
        lines.append(f"| `{name}` | {default} | {meaning} |")
    return lines


def _tunables(cls: type) -> list[str]:
    declaration = cls.declaration
    if not declaration.tunables:
        return ["No tunables: nothing about how it runs is left open."]
    lines = ["| tunable | domain | meaning |", "|---|---|---|"]
    for name in declaration.tunables:
        spec = declaration.params[name]
        lines.append(
            f"| `{name}` | {_cell(domain_text(spec.domain))} | {_cell(spec.doc) or '-'} |"
        )
    return lines


def _tolerances(name: str, cls: type) -> list[str]:
    lines = []
    seen: dict[tuple[str, str], list[str]] = {}
    for fields in EXAMPLES[name]:
        tolerance = cls(**fields).tolerance()
        key = (str(tolerance), tolerance.note)
        seen.setdefault(key, []).append(_call(name, fields))
    for (figure, note), calls in seen.items():
        where = ", ".join(f"`{c}`" for c in calls)
        lines.append(f"- {where}: **{_cell(figure)}**. {_cell(note)}")
    return lines


def _on(dev: Any, op: Any) -> str:
    try:
        resolved = op.resolved(dev)
    except ValueError as error:  # RefusedShapeError
        return f"refused: {_cell(error)}"
    tunables = {n: getattr(resolved, n) for n in type(op).declaration.tunables}
    if not tunables:
        return "runs"
    return "runs; resolves " + ", ".join(
        f"`{n}={v.value if isinstance(v, Enum) else v!r}`" for n, v in tunables.items()
    )


def _devices(name: str, cls: type) -> list[str]:
    lines = [
        "| device | " + " | ".join(f"`{_call(name, f)}`" for f in EXAMPLES[name]) + " |"
    ]
    lines.append("|---" * (len(EXAMPLES[name]) + 1) + "|")
    for dev in DEVICES:
        cells = [_on(dev, cls(**fields)) for fields in EXAMPLES[name]]
        lines.append(f"| {dev.name} | " + " | ".join(cells) + " |")
    return lines


def _section(name: str, cls: type) -> list[str]:
    path = f"{cls.__module__}.{cls.__qualname__}"
    parts: list[Callable[[], list[str]]] = [
        lambda: _operands(cls),
        lambda: ["**Params** (what a profile entry matches):", "", *_params(cls)],
        lambda: ["**Tunables** (how it runs):", "", *_tunables(cls)],
        lambda: ["**Tolerance**:", "", *_tolerances(name, cls)],
        lambda: [
            "**Devices** (the examples above, resolved for each):",
            "",
            *_devices(name, cls),
        ],
    ]
    lines = [f"## {name}", "", _summary(cls), "", f"API: [`{path}`][{path}]", ""]
    for part in parts:
        lines += [*part(), ""]
    return lines


def page() -> str:
    """The whole page, as Markdown."""
    missing = sorted(set(CATALOG) - set(EXAMPLES))
    if missing:
        raise KeyError(
            f"docs/gen_operators.py: no example construction for {missing}; add "
            f"one to EXAMPLES"
        )
    lines = [
        "# Operator reference",
        "",
        "<!-- Generated by docs/gen_operators.py from iron.operators.CATALOG; "
        "do not edit by hand. -->",
        "",
        "Every operator in `iron.operators.CATALOG`, from its declaration: its",
        "operands, its *params* (what it computes, and what a profile entry",
        "matches), its open *tunables* and their domains (how it runs: a call's",
        "keyword, else the profile, else `resolve(dev)`), its tolerance with the",
        "note that says where the figure comes from, and the devices it runs on.",
        "Tolerances and devices are shown for a typical construction of each",
        "operator; a matmul's, attention's and LayerNorm's `tolerance(*inputs)`",
        "also gives a per-element bound computed from the step's inputs.",
        "",
        "| operator | what it computes | module |",
        "|---|---|---|",
    ]
    for name, cls in CATALOG.items():
        lines.append(
            f"| [`{name}`](#{name.lower()}) | {_summary(cls)} | `{cls.__module__}` |"
        )
    lines.append("")
    for name, cls in CATALOG.items():
        lines += _section(name, cls)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    PAGE.write_text(page())
    print(f"wrote {PAGE}", file=sys.stderr)
