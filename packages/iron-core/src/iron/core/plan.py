"""Planning: the pure, deterministic half of ``compile``.

Given a device and a :class:`~iron.core.recording.Recording`, :func:`plan`
decides how the graph is packaged (one full ELF, or one xclbin per step), how
its steps split into commands around host steps, which per-call words the
image reads, where every buffer lives in device memory, and the Emit site of a
version that loops. No runtime, no toolchain: a :class:`Plan` is data a
runtime builds from, and :meth:`Plan.report` explains every choice in words.

Planning is pure. The buffers are placed on a snapshot of the graph's
:class:`~iron.core.arena.ArenaPlan` (:meth:`~iron.core.arena.ArenaPlan.copy`)
that the plan keeps: the arena given is left as it was, and a runtime commits
the snapshot (:meth:`~iron.core.arena.ArenaPlan.commit`) only once the
version is built. So a compile that fails changes nothing, and a plan's
report never changes after a later one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from iron.core.arena import Allocation, ArenaPlan, version_key
from iron.core.device import Device, as_device
from iron.core.emit import EmitSite, emit_site
from iron.core.percall import Affine, PerCall
from iron.core.recording import Recording, Step
from iron.core.words import Word, words_of

__all__ = ["IdleProgram", "Packaging", "Plan", "packaging", "plan"]


@dataclasses.dataclass(frozen=True)
class IdleProgram:
    """Which of some steps a call idles, prepared once from their bounds.

    A step does no work when one of its handles' bounds (``x[:n]``) is zero
    rows or fewer this call. Rather than walk every step's handles each call,
    the program holds each distinct per-call bound once, with the steps it
    idles, so a call evaluates each bound once (see :meth:`Plan.idle`).

    Attributes:
        always: Steps with a fixed bound of zero rows or fewer: idle every call.
        bounds: Each distinct per-call bound, with the steps (those not in
            ``always``) idle when it is zero or less.
    """

    always: frozenset[int]
    bounds: tuple[tuple[Affine, frozenset[int]], ...]

    @classmethod
    def of(cls, steps: Iterable[Step]) -> IdleProgram:
        """Prepare the program of ``steps`` (walking their handles once)."""
        always: set[int] = set()
        found: dict[object, tuple[Affine, set[int]]] = {}
        for step in steps:
            for h in (*step.inputs, *step.outputs):
                if h is None:
                    continue
                for b in h.valid.values():
                    if isinstance(b, (Affine, PerCall)):
                        expr = b.affine()
                        found.setdefault(expr.key(), (expr, set()))[1].add(step.index)
                    elif int(b) <= 0:
                        always.add(step.index)
        bounds = tuple(
            (expr, frozenset(idled - always))
            for expr, idled in found.values()
            if idled - always
        )
        return cls(frozenset(always), bounds)

    def __call__(self, values: Mapping[str, int]) -> frozenset[int]:
        """The steps idle for one call's ``values``.

        Raises:
            KeyError: A bound reads a value ``values`` does not give.
        """
        idle = self.always
        for expr, steps in self.bounds:
            if expr.evaluate(values) <= 0:
                idle = idle | steps
        return idle


@dataclasses.dataclass(frozen=True)
class Packaging:
    """How a version is packaged: what :func:`packaging` decides before placing.

    Attributes:
        full_elf: One full ELF for the whole version, else an xclbin per step.
        reasons: Why the version is dispatched per step (empty for a full ELF).
        commands: The device steps between host steps, as runs of step indices.
    """

    full_elf: bool
    reasons: tuple[str, ...]
    commands: list[tuple[int, ...]]

    @property
    def loops(self) -> bool:
        """Whether the version can run asynchronously and loop on the device.

        Only a full ELF with no host step between its commands can.
        """
        return self.full_elf and len(self.commands) <= 1


@dataclasses.dataclass(eq=False)
class Plan:
    """How one version of a graph is packaged, laid out and fed per call.

    Attributes:
        device: The device planned for.
        name: The recording's (graph's) name.
        version: This version's key in the arena.
        full_elf: One full ELF for the whole version, else an xclbin per step.
        reasons: Why the version is dispatched per step (empty for a full ELF).
        commands: The device steps between host steps, as runs of step indices.
        words: The scratchpad words the image reads each call.
        arena: A snapshot of the graph's arena plan with this version
            placed; what a runtime commits to the graph's arena once the
            version is built. Later plans never change it.
        buffers: This version's buffers: offset, size, liveness and kind.
        emit: The Emit site when the version ends in an Emit step (it loops
            on the device), else None.
    """

    device: Device
    name: str
    version: str
    full_elf: bool
    reasons: tuple[str, ...]
    commands: list[tuple[int, ...]]
    words: list[Word]
    arena: ArenaPlan
    buffers: dict[str, Allocation]
    emit: EmitSite | None = None

    @property
    def loops(self) -> bool:
        """Whether the version can run asynchronously and loop on the device.

        Only a full ELF with no host step between its commands can.
        """
        return self.full_elf and len(self.commands) <= 1

    def idle(self, steps: Iterable[Step], values: Mapping[str, int]) -> frozenset[int]:
        """The steps that do no work this call: a per-call bound of zero rows.

        A runtime skips them. A runtime calling often prepares
        :meth:`IdleProgram.of` its steps once and calls that instead.
        """
        return IdleProgram.of(steps)(values)

    @property
    def images(self) -> int:
        """Images the version runs: one full ELF, else one xclbin per device step."""
        return 1 if self.full_elf else sum(len(c) for c in self.commands)

    @property
    def words_per_image(self) -> int:
        """The most per-call words one image reads (``Device.scratchpad_words`` caps it).

        A full ELF's one image reads every word; with an xclbin per step each
        step's image reads only its own (words not tied to a step count with
        every image); an image reads each distinct expression once, as
        :func:`~iron.core.words.words_of` counts them against the limit.
        """
        if self.full_elf:
            return len(self.words)
        # as words_of counts them: an image reads each distinct expression once
        shared = {w.expr.key() for w in self.words if w.step is None}
        own: dict[int, set[object]] = {}
        for w in self.words:
            if w.step is not None:
                own.setdefault(w.step, set()).add(w.expr.key())
        return len(shared) + max(map(len, own.values()), default=0)

    def _words_in_words(self) -> str:
        limit = self.device.scratchpad_words
        if self.full_elf:
            return (
                f"{len(self.words)} in its one image, of the {limit} an image can read"
            )
        return (
            f"{len(self.words)} in all across {self.images} step images, at most "
            f"{self.words_per_image} in one image, of the {limit} an image can read"
        )

    def summary(self, name: str | None = None) -> str:
        """A few lines a person reads (``iron-lm -v``); :meth:`report` has every choice."""
        title = name or self.name
        dev = self.device
        steps = sum(len(c) for c in self.commands)
        packaging = (
            "one full ELF" if self.full_elf else f"{self.images} xclbins, one per step"
        )
        runs = (
            f"{len(self.commands)} runs split by host steps"
            if len(self.commands) > 1
            else "one run"
        )
        words = (
            f"per-call words: {self._words_in_words()}"
            if self.words
            else "no per-call words"
        )
        return "\n".join(
            [
                f"{title} on {dev.name}, version {self.version}: {steps} device "
                f"steps in {runs}, {packaging}",
                f"  arena {self.arena.size} bytes ({self.arena.resident_bytes} of "
                f"residents); {words}",
            ]
        )

    def report(self, name: str | None = None) -> str:
        """Explain every choice of this plan in words."""
        title = name or self.name
        dev = self.device
        lines = [f"{title} on {dev.name}: version {self.version}"]
        if self.full_elf:
            lines.append(
                f"  packaging: one full ELF ({dev.name} runs a whole version as one "
                f"image, so intermediates never leave the device between steps)"
            )
        else:
            lines.append(
                "  packaging: one xclbin per step, because " + "; ".join(self.reasons)
            )
        steps = sum(len(c) for c in self.commands)
        if len(self.commands) > 1:
            lines.append(
                f"  commands: {len(self.commands)} runs of device steps split by "
                f"host steps ({', '.join(_span(c) for c in self.commands)}); the "
                f"version cannot loop on the device"
            )
        else:
            lines.append(f"  commands: one run of {steps} device steps")
        if self.words:
            lines.append(f"  per-call words: {self._words_in_words()}")
            for w in self.words:
                lines.append(f"    {w.symbol} = {w.expr}  ({'; '.join(w.uses)})")
        else:
            lines.append("  per-call words: none (nothing varies per call)")
        transient = self.arena.transient_bytes(self.version)
        bound = self.arena.lower_bound_of(self.version)
        ratio = transient / bound if bound else 1.0
        lines.append(
            f"  arena: {self.arena.size} bytes shared by the graph's versions; "
            f"{self.arena.resident_bytes} bytes of residents placed once; this "
            f"version's transients span {transient} bytes against a lower bound of "
            f"{bound} ({ratio:.3f}x; {self.arena.no_reuse_bytes(self.version)} "
            f"bytes without reuse)"
        )
        width = max((len(n) for n in self.buffers), default=4)
        for placed in sorted(
            self.buffers.values(), key=lambda p: (_KIND_ORDER[p.kind], p.offset, p.name)
        ):
            where = f"@{placed.offset:>10}" if placed.in_arena else "  own buffer"
            lines.append(
                f"    {placed.name.ljust(width)}  {placed.kind:<9} {where}  "
                f"{placed.nbytes:>10} B  steps {placed.first}..{placed.last}"
            )
        return "\n".join(lines)


_KIND_ORDER = {"input": 0, "output": 1, "resident": 2, "transient": 3}


def _span(command: tuple[int, ...]) -> str:
    if not command:
        return "none"
    return (
        f"steps {command[0]}..{command[-1]}"
        if len(command) > 1
        else f"step {command[0]}"
    )


def _commands(recording: Recording) -> list[tuple[int, ...]]:
    """Runs of device step indices, split where a host step runs."""
    cuts = sorted({h.after for h in recording.host})
    commands: list[tuple[int, ...]] = []
    start = 0
    for cut in [*cuts, len(recording.steps)]:
        run = tuple(range(start, min(cut, len(recording.steps))))
        if run:
            commands.append(run)
        start = max(start, cut)
    return commands


def packaging(
    dev: Device | str,
    recording: Recording,
    full_elf: bool | None = None,
    check: bool = False,
) -> Packaging:
    """Decide how one version is packaged for ``dev``, before anything is placed.

    Args:
        dev: The device (or its name).
        recording: The version's recording.
        full_elf: One full ELF (True), one xclbin per step (False), or
            derived from the device and ``check`` (None).
        check: Dispatch each step alone, so each can be judged on its own.

    Raises:
        ValueError: ``full_elf=True`` where something forces per-step
            images (listing every reason).
    """
    device = as_device(dev)
    reasons = []
    if not device.full_elf:
        reasons.append(f"{device.name} has no full ELF")
    if check:
        reasons.append("check=True dispatches each step on its own")
    if full_elf is True and reasons:
        raise ValueError(
            f"{recording.name}: full_elf=True cannot be planned on {device.name}: "
            + "; ".join(reasons)
        )
    if full_elf is False and not reasons:
        reasons.append("full_elf=False was asked")
    return Packaging(not reasons, tuple(reasons), _commands(recording))


def plan(
    dev: Device | str,
    recording: Recording,
    full_elf: bool | None = None,
    check: bool = False,
    *,
    arena: ArenaPlan | None = None,
    emit: bool = False,
) -> Plan:
    """Plan one version of a graph for ``dev``; ``arena`` is left as it was.

    The version is placed on a snapshot of ``arena`` (see the module
    docstring), which the plan keeps as :attr:`Plan.arena`; plan the next
    version with ``arena=plan.arena`` to share one arena among versions.

    Args:
        dev: The device (or its name).
        recording: The version's recording.
        full_elf: One full ELF (True), one xclbin per step (False), or
            derived from the device and ``check`` (None).
        check: Dispatch each step alone, so each can be judged on its own.
        arena: The graph's arena plan from an earlier version, to share.
        emit: End the version in an Emit step (it loops on the device).

    Raises:
        ValueError: ``full_elf=True`` where something forces per-step
            images (listing every reason), ``emit=True`` for a version
            that cannot loop, or the version does not fit the arena (a
            resident at another size).
    """
    device = as_device(dev)
    packed = packaging(device, recording, full_elf, check)
    site = None
    if emit:
        if not packed.loops or not recording.carry:
            why = (
                "it carries no values"
                if not recording.carry
                else "it is not one full ELF: "
                + "; ".join(packed.reasons or ("host steps",))
            )
            raise ValueError(
                f"{recording.name}: an Emit step needs a version that loops on "
                f"the device, but {why}"
            )
        site = emit_site(recording)
    words = words_of(recording, device, share=packed.full_elf)
    snapshot = arena.copy() if arena is not None else ArenaPlan()
    version = version_key(recording)
    buffers = snapshot.add(recording, version)
    return Plan(
        device=device,
        name=recording.name,
        version=version,
        full_elf=packed.full_elf,
        reasons=packed.reasons,
        commands=packed.commands,
        words=words,
        arena=snapshot,
        buffers=buffers,
        emit=site,
    )
