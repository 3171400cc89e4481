"""``CompiledGraph``: one version of a graph built into images, ready to call.

It holds the recording, the plan, the graph's scratch arena and the images
(loaded lazily, so a host with no device can compile). It is built from a
recording and its plan alone (the inputs it takes and the per-call values it
declares are the recording's signature); once its images are built, the
graph's arena takes the plan's layout (commit on success). A looping
version's Emit program, composed by :meth:`CompiledGraph.emit_to`, is an
input of each run (its ``program`` argument), not part of an image. A call checks the
tensors and per-call values before anything is written, uploads weights not
yet loaded, stages inputs, writes the scratchpad words, runs each command
(host steps between them), and returns the outputs as numpy arrays cut to
their bounds, with a ``Carry`` when the graph carries values.

Calls are safe from several threads: every call, load, release, ``read`` and
``push`` of a graph's versions holds the graph's :class:`GraphUse` lock, so a
second call waits and then runs on its own inputs; a call while a
:class:`~iron.runtime.CarriedLoop` holds the graph raises
:class:`InUseError` before it writes anything (see ``iron.runtime.use``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from iron.core.access import read
from iron.core.arena import ArenaPlan
from iron.core.callprogram import Call, CallProgram
from iron.core.carry import Carry, evaluate_carry
from iron.core.emit import EmitSite, program_for
from iron.core.handle import Handle
from iron.core.held import State, Weight
from iron.core.plan import IdleProgram, Plan
from iron.core.recording import Recording
from iron.runtime.arena import ScratchArena
from iron.runtime.driver import BufferObject, DriverDevice, LoadedImage, Run, RunState
from iron.runtime.image import ImageSpec, build_images
from iron.runtime.select import open_device
from iron.runtime.use import GraphUse

__all__ = ["UPLOAD_PIECE", "CompiledGraph", "Loaded"]

logger = logging.getLogger("iron.runtime")

#: Bytes copied per piece when uploading a weight (then ``release`` is called).
UPLOAD_PIECE = 16 << 20


class Loaded:
    """A version's images on the device, each with a run it reuses."""

    def __init__(self, images: Sequence[LoadedImage]) -> None:
        self.images = list(images)
        self.runs = [image.new_run() for image in self.images]

    @property
    def run(self) -> Run:
        """The run of a single-image version (a full ELF)."""
        if len(self.images) != 1:
            raise ValueError(
                f"a version of {len(self.images)} images has no single run; only "
                f"a full ELF without host steps runs as one"
            )
        return self.runs[0]

    def new_run(self) -> Run:
        """Another run of a single-image version (for runs in flight)."""
        return self.images[0].new_run() if len(self.images) == 1 else self.run

    @staticmethod
    def wait(*runs: Run) -> None:
        """Wait for every run given."""
        for run in runs:
            run.wait()

    @staticmethod
    def wait_out(run: Run) -> None:
        """Wait for ``run`` if it is in flight, its failure (if any) dropped.

        What an interrupted or failed call leaves behind: the next use of the
        run finds it idle instead of "already in flight".
        """
        if run.state() in (RunState.QUEUED, RunState.RUNNING):
            with contextlib.suppress(Exception):
                run.wait()

    def release(self) -> None:
        """Unload the images."""
        for image in self.images:
            image.release()


class _HostViews(Mapping[str, np.ndarray]):
    """Typed host views of a version's buffers, synced from the device on access."""

    def __init__(self, version: CompiledGraph) -> None:
        self.version = version
        self.buffers = version.recording.buffers

    def __getitem__(self, name: str) -> np.ndarray:
        bo, offset, nbytes = self.version._where(name)
        bo.from_device(offset, nbytes)
        buffer = self.buffers[name]
        raw = bo.host()[offset : offset + nbytes]
        return raw.view(buffer.dtype).reshape(buffer.shape)

    def __iter__(self):
        return iter(self.buffers)

    def __len__(self) -> int:
        return len(self.buffers)


class CompiledGraph:
    """A recorded graph built into an image, ready to call.

    Called with the per-call values this version reads
    (``recording.reads``); the graph's others go unused.

    Attributes:
        recording: The version's recording.
        plan: Its plan: packaging, words, arena layout.
        arena: The graph's scratch arena, shared by its versions.
        emit: The Emit site when the version loops, else None.
        words: The scratchpad words it reads each call.
        parameters: The per-call values it reads.
        use: The lock and loop claim shared by the graph's versions: calls
            from several threads are serialized on it.
    """

    def __init__(
        self,
        recording: Recording,
        plan: Plan,
        check: bool = False,
        arena: ScratchArena | None = None,
        emit: EmitSite | None = None,
    ) -> None:
        """Build the version's images from its recording and plan.

        Args:
            recording: The version's recording.
            plan: Its plan (from :func:`iron.core.plan.plan`).
            check: Judge each step against its reference as it runs.
            arena: The graph's scratch arena, shared by its versions; by
                default one of its own, on the device opened from
                ``recording.device``.
            emit: The Emit site; by default the plan's.

        Raises:
            ValueError: The plan does not extend the arena's (the arena
                changed since it was planned): plan again. Nothing changes.
        """
        if arena is None:
            device = open_device(recording.device or plan.device)
            arena = ScratchArena(device, ArenaPlan(plan.arena.align), recording.name)
        self.recording = recording
        self.plan = plan
        self.arena = arena
        self.use = GraphUse.of(arena)
        self.device: DriverDevice = arena.device
        self.emit = emit if emit is not None else plan.emit
        self.check = check
        self.words = plan.words
        self.parameters = recording.reads
        signature = recording.signature
        assert signature is not None  # a Recording fills it in
        self.input_names = list(signature.inputs)
        # every per-call value the graph declares -> its default (None: none)
        self.declared = signature.declared
        self.images: list[ImageSpec] = build_images(
            plan, recording, check=check, emit=self.emit
        )
        # which steps of each image a call's values idle, prepared once
        self._idle = [IdleProgram.of(spec.steps) for spec in self.images]
        # a call's checks, words, carried slots and idle steps, in one pass
        self._program = CallProgram(
            self.name,
            recording,
            self.words,
            carried=self.images[0].carried,
            idle=self._idle,
        )
        # the run arguments outside the arena: their keys and sizes
        self._io_keys = [
            (f"{place.where}:{name}", place.nbytes)
            for name, place in self.images[0].placement.items()
            if place.where != "arena"
        ]
        self._weight_names = frozenset(h.name for _, h in recording.weights.values())
        # the arena generation on which every weight was last seen uploaded
        self._uploaded: int | None = None
        #: The Emit program each run is given (``emit_to`` composes it).
        self.program: np.ndarray | None = None
        self.emits_to: CompiledGraph | None = None
        self._callable: Loaded | None = None
        self._io: dict[str, BufferObject] = {}
        with self.use.lock:
            arena.commit(plan)  # built: the arena takes the plan's layout

    @property
    def name(self) -> str:
        """The version's name: graph and input shapes."""
        return self.plan.version

    # -- device memory ---------------------------------------------------------

    @property
    def callable(self) -> Loaded:
        """The loaded images, made on first use so a host without an NPU can compile."""
        with self.use.lock:
            if self._callable is None:
                self._callable = Loaded(
                    [self.device.load(spec) for spec in self.images]
                )
            return self._callable

    def _io_buffer(self, key: str, nbytes: int) -> BufferObject:
        bo = self._io.get(key)
        if bo is None:
            bo = self._io[key] = self.device.alloc(max(nbytes, 4), f"{self.name} {key}")
        return bo

    def _args(self) -> dict[str, BufferObject]:
        args: dict[str, BufferObject] = {"arena": self.arena.buffer()}
        for key, nbytes in self._io_keys:
            args[key] = self._io_buffer(key, nbytes)
        if self.program is not None:
            args["program"] = self._program_buffer(self.program)
        return args

    def _program_buffer(self, program: np.ndarray) -> BufferObject:
        """The device buffer holding ``program``, written when first made."""
        bo = self._io.get("program")
        if bo is None:
            bo = self._io["program"] = self.device.alloc(
                program.nbytes, f"{self.name} program"
            )
            bo.host()[: program.nbytes] = program.view(np.uint8)
            bo.to_device(0, program.nbytes)
        return bo

    def _where(self, name: str) -> tuple[BufferObject, int, int]:
        place = self.images[0].placement.get(name)
        if place is None:
            raise KeyError(f"{self.name}: no buffer {name!r} in this version")
        if place.where == "arena":
            return self.arena.buffer(), place.offset, place.nbytes
        return self._io_buffer(f"{place.where}:{name}", place.nbytes), 0, place.nbytes

    def _storage(self, x: Any) -> str:
        if isinstance(x, Handle):
            return x.name
        if isinstance(x, str):
            return x
        for tensor, h in (
            *self.recording.states.values(),
            *self.recording.weights.values(),
        ):
            if tensor is x or (isinstance(x, Weight) and x.array is tensor):
                return h.name
        kind = "state" if isinstance(x, State) else type(x).__name__
        raise KeyError(f"{self.name}: this version holds no {kind} {x!r}")

    def read(self, x: Any) -> np.ndarray:
        """``x``'s buffer as the device left it: a view of its host memory.

        ``x`` is a handle, a held state or weight, or a buffer name.
        """
        name = self._storage(x)
        with self.use.lock:
            view = _HostViews(self)[name]
        shape = x.shape if isinstance(x, (Handle, State)) else view.shape
        return view.reshape(-1)[: int(np.prod(shape))].reshape(tuple(shape))

    def push(self, x: Any) -> None:
        """Send to the device what the host wrote into ``read(x)``'s view."""
        name = self._storage(x)
        with self.use.lock:
            bo, offset, nbytes = self._where(name)
            bo.to_device(offset, nbytes)

    def upload(
        self,
        release: Callable[[np.ndarray], None] | None = None,
        piece_bytes: int = UPLOAD_PIECE,
    ) -> None:
        """Copy every held weight into its buffer, once per storage, piecewise.

        ``release(piece)`` is called after each piece is on the device, so a
        memory-mapped checkpoint can drop its pages as it goes. A weight held
        in a wider float dtype than its buffer (``iron.core.held.narrowed``)
        is converted a piece at a time; ``release`` gets the source piece.
        """
        if piece_bytes <= 0:
            raise ValueError(f"piece_bytes is positive, got {piece_bytes}")
        with self.use.lock:
            self._upload(release, piece_bytes)

    def _upload(
        self, release: Callable[[np.ndarray], None] | None, piece_bytes: int
    ) -> None:
        arena = self.arena
        if self._uploaded == arena.generation and arena.nbytes:
            # every weight was on this buffer when last checked, and the
            # arena's record only grows while its buffer lives (a release
            # empties both, and the next buffer is a new generation)
            return
        if self._weight_names <= arena.loaded:
            # every weight is on the device (the arena's record, now)
            if arena.nbytes:
                self._uploaded = arena.generation
            return
        for tensor, h in self.recording.weights.values():
            if h.name in self.arena.loaded:
                continue
            bo, offset, nbytes = self._where(h.name)
            host = bo.host()
            source = np.asarray(tensor)
            if source.dtype != h.dtype:
                # Held in a wider dtype (a float32 checkpoint for a bf16
                # weight): narrowed a piece at a time, never whole.
                elements = np.ascontiguousarray(source).reshape(-1)
                step = max(1, piece_bytes // h.dtype.itemsize)
                for first in range(0, elements.size, step):
                    part = elements[first : first + step]
                    start = offset + first * h.dtype.itemsize
                    narrow = part.astype(h.dtype).view(np.uint8)
                    host[start : start + narrow.size] = narrow
                    bo.to_device(start, narrow.size)
                    bo.release_host(start, narrow.size)  # on the device now
                    if release is not None:
                        release(part)
                self.arena.loaded.add(h.name)
                continue
            flat = np.ascontiguousarray(source).reshape(-1).view(np.uint8)
            for start in range(0, nbytes, piece_bytes):
                end = min(start + piece_bytes, nbytes)
                host[offset + start : offset + end] = flat[start:end]
                bo.to_device(offset + start, end - start)
                bo.release_host(offset + start, end - start)  # on the device now
                if release is not None:
                    release(flat[start:end])
            self.arena.loaded.add(h.name)

    def load(
        self,
        release: Callable[[np.ndarray], None] | None = None,
        piece_bytes: int = UPLOAD_PIECE,
    ) -> CompiledGraph:
        """Load the image and upload its weights now rather than on first call."""
        with self.use.lock:
            self.callable  # noqa: B018 - loads the images
            self.upload(release, piece_bytes)
        return self

    def release(self) -> None:
        """Free this version's runs, images and the buffers it holds outside the arena.

        Raises:
            InUseError: A loop over the graph has not finished (its runs
                are in flight on these images); nothing is freed.
        """
        with self.use.lock:
            self.use.check(f"release of {self.name}")
            if self._callable is not None:
                self._callable.release()
            self._callable = None
            for bo in self._io.values():
                bo.free()
            self._io.clear()

    # -- one call ----------------------------------------------------------------

    def _given(self, tensors: Sequence[Any]) -> dict[str, np.ndarray]:
        if len(tensors) > len(self.input_names):
            raise TypeError(
                f"{self.name} takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(tensors)}"
            )
        given = {
            n: np.asarray(t) for n, t in zip(self.input_names, tensors) if t is not None
        }
        want = {h.name: h for h in self.recording.inputs}
        if set(given) != set(want):
            raise TypeError(
                f"{self.name} takes inputs {sorted(want)}, got {sorted(given)}"
            )
        for name, array in given.items():
            h = want[name]
            if tuple(array.shape) != tuple(h.shape) or array.dtype != np.dtype(h.dtype):
                raise ValueError(
                    f"{self.name}: {name} is {list(array.shape)} {array.dtype.name}, "
                    f"but this version takes {list(h.shape)} {np.dtype(h.dtype).name}; "
                    f"compile a version for it"
                )
        return given

    def _values(self, values: Mapping[str, Any]) -> Call:
        """Check ``values`` (defaults merged in); the words and idle steps they give."""
        return self._program(values)

    def _stage(
        self, tensors: Sequence[Any], values: Mapping[str, Any]
    ) -> tuple[Call, dict[str, BufferObject]]:
        given = self._given(tensors)
        call = self._values(values)
        for run in self.callable.runs:  # loads the images
            Loaded.wait_out(run)
        self.upload()
        args = self._args()
        for name, array in given.items():
            bo = args[f"input:{name}"]
            raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            bo.host()[: raw.size] = raw
            bo.to_device(0, raw.size)
        self.arena.called = True
        return call, args

    def _host_steps_after(self, done: int, values: Mapping[str, int]) -> None:
        views = _HostViews(self)
        for host in self.recording.host:
            if host.after == done:
                Recording.run_host(host, values, views)
                for h in host.writes:
                    self.push(h)

    def __call__(self, *tensors: Any, **values: Any) -> Any:
        """Run the version on ``tensors`` and ``values``; return its outputs.

        Returns:
            The output (or a tuple of outputs), numpy, cut to bounds; with a
            ``Carry`` last when the graph carries values.

        Raises:
            TypeError: An input or per-call value is missing or unknown.
            ValueError: An input's shape or dtype is not this version's.
            IndexError: The values index or bound a view outside it.
            InUseError: A :class:`~iron.runtime.CarriedLoop` over the graph
                has not finished; nothing was written.

        Calls from several threads are serialized on the graph's ``use``
        lock; an interrupted call (Ctrl-C) waits out the run it started
        before it raises, so the next call finds the version idle.
        """
        with self.use.lock:
            self.use.check(f"a call of {self.name}")
            return self._call(tensors, values)

    def _call(self, tensors: Sequence[Any], values: Mapping[str, Any]) -> Any:
        call, args = self._stage(tensors, values)
        checked, pad = call.values, call.scratchpad
        loaded = self.callable
        self._host_steps_after(0, checked)
        for spec, idle, run in zip(self.images, call.idle, loaded.runs):
            run.set_args(args)
            run.bind_feedback(None)
            run.write_scratchpad(pad)
            try:
                run.call(idle)
            except BaseException:
                Loaded.wait_out(run)
                raise
            if spec.steps:
                self._host_steps_after(spec.steps[-1].index + 1, checked)
        views = _HostViews(self)
        outputs = [read(h, checked, views).copy() for h in self.recording.outputs]
        if not self.recording.carry:
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        nxt = evaluate_carry(
            self.recording.carry, checked, lambda h: read(h, checked, views)
        )
        return (*outputs, Carry(**nxt)) if outputs else Carry(**nxt)

    # -- runs in flight (full ELF) -------------------------------------------------

    def start(self, run: Run, /, *tensors: Any, **values: Any) -> None:
        """Start a call of this full ELF on ``run`` without waiting for it.

        Raises:
            ValueError: A host step runs between its commands.
            InUseError: A :class:`~iron.runtime.CarriedLoop` over the graph
                has not finished; nothing was written.
        """
        if self.recording.host:
            raise ValueError(
                f"{self.recording.name}: a host step runs between its commands; "
                f"call it, which waits on each"
            )
        if len(self.images) != 1:
            raise ValueError(
                f"{self.name} is dispatched per step ({'; '.join(self.plan.reasons)}); "
                f"call it, which waits on each"
            )
        with self.use.lock:
            self.use.check(f"a start of {self.name}")
            call, args = self._stage(tensors, values)
            Loaded.wait_out(run)
            run.set_args(args)
            run.write_scratchpad(call.scratchpad)
            run.start(idle=call.idle[0])

    def restart(self, run: Run) -> None:
        """Start ``run`` again on the scratchpad its feeder's Emit wrote."""
        run.set_args(self._args())
        run.start()

    def emit_to(self, target: CompiledGraph) -> None:
        """Program this version's Emit to start a call of ``target``.

        The program is composed now and given to each later run of this
        version (its ``program`` argument); the images are not changed.

        Raises:
            ValueError: This version has no Emit step, or ``target`` gathers
                by ids the device made, whose addresses no carried value holds.
            InUseError: A :class:`~iron.runtime.CarriedLoop` over the graph
                has not finished (its runs read the program).
        """
        if self.emit is None:
            raise ValueError(f"{self.recording.name}: this version has no Emit step")
        program = program_for(
            self.emit,
            self.recording,
            target.recording,
            target.words,
            [p.name for p in target.parameters],
            target.name,
        )
        with self.use.lock:
            self.use.check(f"{self.name}.emit_to({target.name})")
            old = self._io.pop("program", None)
            if old is not None:
                old.free()
            self.program = program
            self.emits_to = target

    def __repr__(self) -> str:
        packaging = "full ELF" if self.plan.full_elf else "xclbin per step"
        return f"<CompiledGraph {self.name} on {self.device.backend} {self.device.name}: {packaging}>"
