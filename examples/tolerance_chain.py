"""Section 6, "Tolerance Along a Chain": three steps that each round, checked two ways.

``Chain`` computes ``1.5 * ((0.5 * x + b) * w) + b`` in three steps, each
rounding once to bf16, so no one step's tolerance is the chain's. It is
checked two ways:

1. Step by step, each step judged on its own inputs under its own
   ``tolerance()``: ``compile(check=True)`` makes the runtime do it on every
   call (raising ``StepCheckError`` at the first step outside), and the
   example does it again by hand, printing each step's verdict.
2. End to end, against the float64 math, under a bound derived from the
   steps' contracts (see ``chain_bound``): for positive inputs each step
   adds at most a relative ``u`` to the error, so three steps stay within
   ``(1 + u)**3 - 1``.

Runs on npu2 unless IRON_DEVICE names another (the emulated NPU where no NPU
is present); prints PASS! when every check holds.
"""

from __future__ import annotations

import os

import numpy as np
from ml_dtypes import bfloat16

import iron
from iron.operators import AXPY, ElementwiseMul

SIZE = 4096


class Chain(iron.Graph):
    """``1.5 * ((0.5 * x + b) * w) + b``: three steps, each rounding once.

    With ``every_step`` it also returns the two intermediates, so each step
    can be judged on the inputs the device gave it.
    """

    def __init__(self, every_step: bool = False) -> None:
        self.every_step = every_step

    def body(self, x, w, b):
        s = AXPY.step(x, b, scalar_factor=0.5)
        p = ElementwiseMul.step(s, w)
        out = AXPY.step(p, b, scalar_factor=1.5)
        return (s, p, out) if self.every_step else out


def chain_bound(steps: int) -> iron.Tolerance:
    """The end-to-end tolerance of ``steps`` steps like Chain's, derived.

    Each step's contract is ``bf16_ulps(1)`` from its reference, which is
    the exact result on the step's inputs rounded once to nearest. So a
    step's output is within ``2**-8`` (the rounding) plus ``2**-7 * (1 +
    2**-8)`` (one ulp of the rounded value) of the exact result on its
    inputs, relatively: ``u = 2**-8 + 2**-7 + 2**-15``. With every input
    positive, sums and products never cancel, so the relative errors
    compound: the chain's output is within ``eps = (1 + u)**steps - 1`` of
    the exact math. ``compare``'s relative kind measures ``|a - b|`` against
    ``rtol * (|a| + |b|)``, and ``|a - b| <= eps * |b|`` implies that with
    ``rtol = eps / (2 - eps)``.
    """
    u = 2.0**-8 + 2.0**-7 + 2.0**-15
    eps = (1 + u) ** steps - 1
    return iron.Tolerance.relative(
        eps / (2 - eps),
        note=f"derived: {steps} steps each within 1 bf16 ulp of a once-rounded "
        f"reference, positive inputs (no cancellation): relative "
        f"(1 + u)**{steps} - 1 = {eps:.4g} with u = 2**-8 + 2**-7 + 2**-15",
    )


def step_verdicts(recording, arrays: dict) -> list:
    """Judge each step on its own inputs under its own tolerance.

    ``arrays`` holds every buffer the device gave (inputs and outputs) by
    name; each step's reference runs on the device's values of its inputs.
    """
    verdicts = []
    for step in recording.steps:
        inputs = [arrays[h.name] for h in step.inputs]
        want = step.op.reference(*inputs)
        got = arrays[step.outputs[0].name]
        verdicts.append(iron.compare(got, want, step.op.tolerance(*inputs)))
    return verdicts


def main(seed: int = 0) -> bool:
    """Check the chain per step and end to end; True on PASS."""
    iron.set_current_device(os.environ.get("IRON_DEVICE") or "npu2")
    rng = np.random.default_rng(seed)
    # Positive inputs: the end-to-end bound assumes no cancellation.
    x, w, b = (rng.uniform(0.5, 2.0, SIZE).astype(bfloat16) for _ in range(3))
    shapes = dict(x=(SIZE,), w=(SIZE,), b=(SIZE,))
    ok = True

    # 1a. check=True: each step dispatched alone and judged by the runtime.
    checked = Chain()
    version = checked.compile(**shapes, check=True)
    print(f"{version}: {'; '.join(version.plan.reasons)}")
    out = checked(x, w, b)  # raises StepCheckError if a step is outside

    # 1b. The same judgement by hand, one verdict per step.
    steps = Chain(every_step=True)
    recorded = steps.compile(**shapes).recording
    s, p, final = steps(x, w, b)
    arrays = {"x": x, "w": w, "b": b}
    arrays.update(zip((h.name for h in recorded.outputs), (s, p, final)))
    for step, verdict in zip(recorded.steps, step_verdicts(recorded, arrays)):
        print(f"step {step.index} {type(step.op).__name__}: {verdict}")
        ok &= bool(verdict)

    # 2. End to end: the float64 math, under the derived bound.
    f64 = [a.astype(np.float64) for a in (x, w, b)]
    exact = 1.5 * ((0.5 * f64[0] + f64[2]) * f64[1]) + f64[2]
    bound = chain_bound(len(recorded.steps))
    for name, result in (("check=True", out), ("every_step", final)):
        verdict = iron.compare(result, exact, bound)
        print(f"end to end ({name}): {verdict}")
        ok &= bool(verdict)
    print(f"bound: {bound} ({bound.note})")

    print("PASS!" if ok else "FAIL!")
    return bool(ok)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
