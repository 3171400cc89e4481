"""What an image is, backend-neutrally: steps, placement, words and Emit.

A :class:`ImageSpec` is built from a :class:`~iron.core.plan.Plan`: the steps
one dispatch runs, where each buffer lives (the arena at its planned offset,
or an input or output buffer of its own), the scratchpad layout (the plan's
words, then one slot per carried value), and, for a version that loops, the
Emit site. An image does not change once built: the Emit program that
:meth:`CompiledGraph.emit_to` composes is an input of each run (its
``program`` argument). The emulated NPU runs an ImageSpec as it is; the XRT
backend builds one into an xclbin or a full ELF.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from iron.core.arena import Allocation
from iron.core.emit import EmitSite
from iron.core.plan import Plan
from iron.core.recording import Recording, Step
from iron.core.words import Word

__all__ = ["ImageSpec", "Placement", "build_images"]


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a buffer lives: ``arena`` at ``offset``, or its own ``input``/``output``."""

    where: str
    offset: int
    nbytes: int


@dataclasses.dataclass(eq=False)
class ImageSpec:
    """One dispatch's worth of a planned graph version.

    Attributes:
        name: ``<graph> <version>`` and which steps, for errors and logs.
        recording: The version's recording.
        steps: The steps this dispatch runs, in order.
        placement: Every buffer the steps touch, by name.
        words: The plan's per-call words (the scratchpad's first slots).
        carried: The carried values' slots, after the words.
        transients: This version's transients (for poisoning dead ones).
        emit: The Emit site when this image ends in an Emit step (its
            program is the run's ``program`` argument).
        check: Whether each step is judged against its reference as it runs.
    """

    name: str
    recording: Recording
    steps: tuple[Step, ...]
    placement: dict[str, Placement]
    words: list[Word]
    carried: tuple[str, ...]
    transients: tuple[Allocation, ...]
    emit: EmitSite | None = None
    check: bool = False

    def __post_init__(self) -> None:
        self.slot_of_key = {w.expr.key(): i for i, w in enumerate(self.words)}

    @property
    def scratchpad_words(self) -> int:
        """How many int32 words a run's scratchpad holds."""
        return len(self.words) + len(self.carried)

    def carried_slot(self, name: str) -> int:
        """The scratchpad slot of carried value ``name``."""
        return len(self.words) + self.carried.index(name)


def _placement(plan: Plan) -> dict[str, Placement]:
    found = {}
    for name, placed in plan.buffers.items():
        where = "arena" if placed.in_arena else placed.kind
        found[name] = Placement(where, placed.offset, placed.nbytes)
    return found


def build_images(
    plan: Plan,
    recording: Recording,
    *,
    check: bool = False,
    emit: EmitSite | None = None,
) -> list[ImageSpec]:
    """The images of one version: one per command (full ELF) or per step.

    A full ELF with host steps is one image per command between them; the
    Emit step, when there is one, ends the last.
    """
    placement = _placement(plan)
    transients = tuple(p for p in plan.buffers.values() if p.kind == "transient")
    carried = tuple(recording.carry)
    groups: Sequence[tuple[int, ...]]
    if plan.full_elf:
        groups = plan.commands or [()]
    else:
        # A version of no device steps still has one (empty) image.
        groups = [(i,) for command in plan.commands for i in command] or [()]
    images = []
    for k, group in enumerate(groups):
        last = k == len(groups) - 1
        steps = tuple(recording.steps[i] for i in group)
        what = (
            (f"steps {group[0]}..{group[-1]}" if len(group) > 1 else f"step {group[0]}")
            if group
            else "no steps"
        )
        site = emit if (last and emit is not None) else None
        images.append(
            ImageSpec(
                name=f"{plan.version} {what}",
                recording=recording,
                steps=steps,
                placement=placement,
                words=list(plan.words),
                carried=carried,
                transients=transients,
                emit=site,
                check=check,
            )
        )
    return images
