"""``Graph``: a subclass whose ``body`` is recorded on handles, once per shape.

``body``'s positional parameters are the inputs (one defaulting to None may be
left out), its keyword-only ones the per-call values (annotated
``iron.Scratchpad[int]`` or ``iron.Carried[int]``), its return the outputs,
with an ``iron.carry(...)`` last when it carries values. What the graph
holds (params, weights, states) is found by attribute path. This module owns
recording, the host reference, weights binding and the versions by shape
(kept in the graph's :class:`~iron.core.graph_state.GraphState`); a device
image comes from the runtime found through the ``iron.backends`` entry point,
which compiles from the recording alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, get_args, get_origin

import numpy as np
from ml_dtypes import bfloat16

from iron.core import context, plugins
from iron.core.carry import Carry
from iron.core.device import Device, require_device, use_device
from iron.core.graph_state import state_of
from iron.core.handle import Handle
from iron.core.held import (
    State,
    Weight,
    _Param,
    _Unbound,
    held_dtype,
    narrowed,
    param,
    walk,
)
from iron.core.percall import Affine, Kind, PerCall, check_values
from iron.core.profile import Profile
from iron.core.recorder import Recorder
from iron.core.recording import Recording, Signature

__all__ = ["Graph"]

logger = logging.getLogger("iron.graph")


def _kind_of(annotation: Any) -> Kind | None:
    if get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            for kind in Kind:
                if meta == kind.value:
                    if get_args(annotation)[0] is not int:
                        return None
                    return kind
    return None


def _shape_and_dtype(spec: Any) -> tuple[tuple[int, ...], Any]:
    if isinstance(spec, int):
        return (spec,), np.dtype(bfloat16)
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], (tuple, list))
    ):
        return tuple(int(s) for s in spec[0]), np.dtype(spec[1])
    return tuple(int(s) for s in spec), np.dtype(bfloat16)


def _kind(dtype: Any) -> str:
    kind = str(np.dtype(dtype).kind)
    if kind == "V" or np.dtype(dtype) == np.dtype(bfloat16):
        return "f"
    return {"u": "i", "c": "f"}.get(kind, kind)


def _narrows_lazily(array: np.ndarray, dtype: Any) -> bool:
    """Whether a read-only float tensor of another float dtype (a mapped
    float32 or float16 checkpoint tensor for a bf16 param) is held as it is
    and narrowed piece by piece when uploaded, rather than copied whole now.
    A writable array is cast now, as torch's ``copy_`` copies."""
    return (
        array.dtype != np.dtype(dtype)
        and _kind(array.dtype) == "f"
        and _kind(dtype) == "f"
        and not array.flags.writeable
    )


def _shown(signature: tuple[Any, ...]) -> str:
    """A version's signature as ``{x: [2048] bfloat16, ...}``."""
    return "{" + ", ".join(f"{n}: {list(s)} {d}" for n, s, d in signature) + "}"


def _results(outputs: Sequence[Any], carry: Carry | None) -> Any:
    items = list(outputs) + ([carry] if carry is not None else [])
    return items[0] if len(items) == 1 else tuple(items)


class Graph:
    """A graph: a subclass whose ``body`` is recorded on handles.

    ``body``'s positional parameters are the inputs (one defaulting to None
    may be left out), its keyword-only ones the per-call values, its return
    the outputs; :meth:`signature` may name them instead. Weights and states
    are what it holds, by attribute path (``self.layers[3].q`` is
    ``layers.3.q``); ``profile`` is a :class:`~iron.core.profile.Profile` or
    a directory of ``<device>.json`` ones. Called in another graph's body,
    it records there.

    Subclasses need not call ``Graph.__init__``.
    """

    def body(self, *args: Any, **values: Any) -> Any:
        """The computation: ``Op.step`` calls on the handles it is given."""
        raise NotImplementedError(f"{type(self).__name__} defines no body()")

    # -- naming and parameters ----------------------------------------------------

    @property
    def name(self) -> str:
        """The graph's name: its class name."""
        return type(self).__name__

    @property
    def profile(self) -> Profile | str | os.PathLike[str] | None:
        """The profile steps are made under: a Profile, a directory, or None."""
        return state_of(self).profile

    @profile.setter
    def profile(self, value: Profile | str | os.PathLike[str] | None) -> None:
        if value is not None and not isinstance(value, (Profile, str, os.PathLike)):
            raise TypeError(
                f"{self.name}.profile is a Profile or a directory of "
                f"<device>.json profiles, got {value!r}"
            )
        state = state_of(self)
        state.profile = value
        state.references.clear()

    def _profile(self) -> Profile | None:
        value = self.profile
        if value is None or isinstance(value, Profile):
            return value
        return Profile.for_device(os.fspath(value), require_device())

    def signature(self) -> inspect.Signature:
        """Return the inputs and per-call values ``body`` takes, ``self`` left out.

        ``body``'s own parameters, unless a subclass names them here.

        Raises:
            NotImplementedError: The subclass defines no ``body``.
        """
        if type(self).body is Graph.body:
            raise NotImplementedError(f"{self.name} defines no body()")
        signature = inspect.signature(type(self).body, eval_str=True)
        return signature.replace(parameters=list(signature.parameters.values())[1:])

    @property
    def _parameters(self) -> Signature:
        state = state_of(self)
        if state.signature is not None:
            return state.signature
        inputs: list[str] = []
        optional: set[str] = set()
        values: dict[str, tuple[Kind, Any]] = {}
        defaults: dict[str, int] = {}
        for p in self.signature().parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                stars = "*" if p.kind == p.VAR_POSITIONAL else "**"
                raise TypeError(
                    f"{self.name}.body: {stars}{p.name} is not allowed; name each "
                    f"input and per-call value"
                )
            if p.kind == p.KEYWORD_ONLY:
                kind = _kind_of(p.annotation)
                if kind is None:
                    raise TypeError(
                        f"{self.name}.body: keyword-only {p.name} is a per-call "
                        f"value and must be annotated iron.Scratchpad[int] or "
                        f"iron.Carried[int], got {p.annotation!r}"
                    )
                values[p.name] = (kind, np.int32)
                if p.default is not p.empty:
                    default = p.default
                    if isinstance(default, bool) or not isinstance(
                        default, (int, np.integer)
                    ):
                        raise TypeError(
                            f"{self.name}.body: per-call {p.name} defaults to "
                            f"{default!r}; a per-call value's default is an int"
                        )
                    defaults[p.name] = int(default)
                continue
            inputs.append(p.name)
            if p.default is not p.empty:
                if p.default is not None:
                    raise TypeError(
                        f"{self.name}.body: input {p.name} defaults to "
                        f"{p.default!r}; an input may only default to None "
                        f"(optional)"
                    )
                optional.add(p.name)
        parameters = Signature(tuple(inputs), frozenset(optional), values, defaults)
        state.signature = parameters
        return parameters

    # -- what it holds -----------------------------------------------------------------

    def held(self) -> dict[int, tuple[str, Any]]:
        """Each ``param``, ``weight`` and state held, by ``id``, with its path.

        Raises:
            TypeError: A ``param`` was never loaded, or a held array is no ``param``.
        """
        held: dict[int, tuple[str, Any]] = {}
        for path, x, _, _ in walk(self):
            if isinstance(x, _Unbound):
                raise TypeError(
                    f"{self.name}: {path} was never loaded; bind it with "
                    f"load_state_dict"
                )
            if isinstance(x, np.ndarray) and not isinstance(x, _Param):
                raise TypeError(
                    f"{self.name}: {path} is an array, not a weight: "
                    f"wrap it in iron.param"
                )
            if isinstance(x, (_Param, Weight, State)):
                held.setdefault(id(x), (path, x))
        return held

    def load_state_dict(self, tree: Any, *, path: str = "") -> None:
        """Bind each ``param`` held, at any depth, to its tensor in ``tree``.

        The tensor is found at ``path`` (this graph's prefix, ``"model."``)
        plus its dotted path in ``tree``, cast as torch's ``copy_``; a param
        held at several paths binds once. A read-only float tensor of another
        float dtype (a memory-mapped float32 checkpoint tensor for a bf16
        param) is not copied: it is held as it is, resident as the param's
        dtype, and narrowed a piece at a time when a version uploads it.

        Raises:
            ValueError: ``path`` lacks its trailing dot, the graph is already
                loaded, or a tensor is missing, extra, or of another shape or
                kind, one error naming every such path.
            TypeError: A param is in a tuple or a frozen dataclass.
        """
        if path and not path.endswith("."):
            raise ValueError(
                f"{self.name}: load_state_dict's path {path!r} must end in a dot"
            )
        if state_of(self).bound:
            raise ValueError(f"{self.name}: already loaded")
        tensors = {n: t for n, t, _, _ in walk(tree) if n.startswith(path)}
        tied: dict[int, list[str]] = {}
        params: dict[str, np.ndarray] = {}
        shared: list[str] = []
        for n, p, parent, _ in walk(self, shared=shared):
            if not isinstance(p, _Unbound):
                continue
            frozen = (
                dataclasses.is_dataclass(parent)
                # typeshed's DataclassInstance lacks dataclasses' own parameters.
                and parent.__dataclass_params__.frozen  # type: ignore[union-attr]
            )
            if isinstance(parent, tuple) or frozen:
                raise TypeError(
                    f"{self.name}: {path}{n} is in a tuple or a frozen dataclass, "
                    f"which load_state_dict cannot rebind; hold it in a list"
                )
            tied.setdefault(id(p), []).append(path + n)
            params.setdefault(tied[id(p)][0], p)
        held = {n for paths in tied.values() for n in paths}
        # A param held at several paths binds from the first of them given.
        source = {
            paths[0]: next((n for n in paths if n in tensors), None)
            for paths in tied.values()
        }
        missing = sorted(first for first, n in source.items() if n is None)
        extra = sorted(
            n
            for n in tensors.keys() - held
            if not any(n.startswith(f"{path}{s}.") for s in shared)
        )
        given = [
            (n, params[paths[0]], tensors[n])
            for paths in tied.values()
            for n in paths
            if n in tensors
        ]
        shapes = [
            f"{n} {tuple(t.shape)}, not {p.shape}"
            for n, p, t in given
            if tuple(t.shape) != p.shape
        ]
        kinds = [
            f"{n} {t.dtype}, not {p.dtype}"
            for n, p, t in given
            if _kind(np.asarray(t).dtype) != _kind(p.dtype)
        ]
        if missing or extra or shapes or kinds:
            found = {
                "missing": missing,
                "extra": extra,
                "wrong shape": shapes,
                "wrong kind": kinds,
            }
            raise ValueError(
                f"{self.name}: cannot load: "
                + "; ".join(f"{k} {', '.join(v)}" for k, v in found.items() if v)
            )
        bound: dict[str, np.ndarray] = {}
        for first, *others in tied.values():
            # asanyarray keeps a param bound above (a nested graph's tied
            # param) the same object, so it binds once.
            name = source[first]
            assert name is not None  # a missing one raised above
            array = np.asanyarray(tensors[name])
            dtype = params[first].dtype
            if isinstance(array, _Param) and held_dtype(array) == np.dtype(dtype):
                bound[first] = array  # bound above, narrowed or not: the same object
            elif _narrows_lazily(array, dtype):
                bound[first] = narrowed(array, dtype)
            else:
                bound[first] = param(array.astype(dtype, copy=False))
            bound.update(dict.fromkeys(others, bound[first]))
        for n, x, parent, key in walk(self, graphs=False):
            if isinstance(x, Graph):
                if not state_of(x).bound:
                    x.load_state_dict({**tensors, **bound}, path=f"{path}{n}.")
                continue
            if not isinstance(x, _Unbound):
                continue
            if isinstance(parent, (list, dict)):
                parent[key] = bound[path + n]
            else:
                setattr(parent, key, bound[path + n])
        state_of(self).bound = True

    # -- recording ---------------------------------------------------------------------

    def record(self, **shapes: Any) -> Recording:
        """Run ``body`` on handles of the given shapes.

        Each shape is a tuple (bf16) or ``(shape, dtype)``. An optional input
        given none is None.

        Raises:
            TypeError: A shape is missing or names no input.
            RuntimeError: No device is bound.
        """
        shapes = {k: v for k, v in shapes.items() if v is not None}
        params = self._parameters
        missing = [
            p for p in params.inputs if p not in shapes and p not in params.optional
        ]
        unknown = [k for k in shapes if k not in params.inputs]
        if missing or unknown:
            raise TypeError(
                f"{self.name}: shapes for {missing} missing"
                + (f"; {unknown} are not inputs" if unknown else "")
            )
        inputs: list[Handle] = []
        args: list[Handle | None] = []
        for name in params.inputs:
            if name not in shapes:
                args.append(None)
                continue
            shape, dtype = _shape_and_dtype(shapes[name])
            inputs.append(Handle.whole(shape, dtype, name, "input"))
            args.append(inputs[-1])
        values = [PerCall(n, kind, dtype) for n, (kind, dtype) in params.values.items()]
        with Recorder(self.name, self._profile(), self.held(), params.inputs) as rec:
            result = self.body(*args, **{v.name: v for v in values})
            items, carry = self._split_carry(result)
            outputs = self._outputs(items)
            recorded = self._recorded_carry(carry, values, rec)
        recording = rec.finish(inputs, outputs, values, recorded, params.defaults)
        return dataclasses.replace(recording, signature=params)

    def _split_carry(self, result: Any) -> tuple[list[Any], Carry | None]:
        if isinstance(result, Carry):
            return [], result
        if isinstance(result, tuple):
            items = list(result)
            if items and isinstance(items[-1], Carry):
                return items[:-1], items[-1]
            if any(isinstance(i, Carry) for i in items):
                raise TypeError(
                    f"{self.name}.body returns iron.carry(...) last, after its outputs"
                )
            return items, None
        if result is None:
            return [], None
        return [result], None

    def _outputs(self, items: Sequence[Any]) -> list[Handle]:
        outputs = []
        for i, item in enumerate(items):
            if not isinstance(item, Handle):
                raise TypeError(
                    f"{self.name}.body returned {item!r} as output {i}; a body "
                    f"returns handles (what steps give back), then iron.carry(...)"
                )
            outputs.append(item)
        return outputs

    def _recorded_carry(
        self, carry: Carry | None, values: Sequence[PerCall], recorder: Recorder
    ) -> dict[str, Handle | Affine | int]:
        carried = [v.name for v in values if v.kind is Kind.CARRIED]
        if carry is None:
            if carried:
                raise TypeError(
                    f"{self.name}.body takes carried values {carried} and must "
                    f"return their next values last: iron.carry({carried[0]}=...)"
                )
            return {}
        unknown = sorted(set(carry) - set(carried))
        missing = sorted(set(carried) - set(carry))
        if unknown or missing:
            raise TypeError(
                f"{self.name}: iron.carry gives {sorted(carry)}, but body carries "
                f"{carried}"
                + (f"; {unknown} are not iron.Carried values" if unknown else "")
                + (f"; {missing} have no next value" if missing else "")
            )
        recorded: dict[str, Handle | Affine | int] = {}
        for name, nxt in carry.items():
            if isinstance(nxt, Handle):
                if nxt.elements != 1 or np.dtype(nxt.dtype) != np.dtype(np.int32):
                    raise TypeError(
                        f"{self.name}: carry {name}={nxt!r}; a carried handle is one "
                        f"int32 element (a sampled token)"
                    )
                recorded[name] = nxt
            elif isinstance(nxt, PerCall):
                recorded[name] = nxt.affine()
            elif isinstance(nxt, (Affine, int)) and not isinstance(nxt, bool):
                recorded[name] = nxt
            else:
                raise TypeError(
                    f"{self.name}: carry {name}={nxt!r}; a next value is an "
                    f"expression of per-call values, an int, or a one-element handle"
                )
        return recorded

    def inline(self, method: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Record ``method``, one of this graph's, into the graph being recorded.

        Recorded under this graph's profile; that graph names its values.

        Raises:
            TypeError: No graph's body is being recorded.
        """
        recorder = context.graph_recorder.get()
        if recorder is None:
            raise TypeError(f"{self.name}: inline() records into a graph's body")
        for key, held in self.held().items():
            recorder.held.setdefault(key, (f"{self.name}.{held[0]}", held[1]))
        own = self._profile()
        if own is None:
            return method(*args, **kwargs)
        previous, recorder.profile = recorder.profile, own
        try:
            return method(*args, **kwargs)
        finally:
            recorder.profile = previous

    # -- the host reference --------------------------------------------------------------

    def _given(self, tensors: Sequence[Any]) -> dict[str, Any]:
        params = self._parameters
        if len(tensors) > len(params.inputs):
            raise TypeError(
                f"{self.name} takes {len(params.inputs)} inputs "
                f"({', '.join(params.inputs)}), got {len(tensors)}"
            )
        given = dict(zip(params.inputs, tensors))
        missing = [
            n
            for n in params.inputs
            if given.get(n) is None and n not in params.optional
        ]
        if missing:
            raise TypeError(f"{self.name}: inputs {missing} missing")
        return {n: t for n, t in given.items() if t is not None}

    def _check_values(self, values: Mapping[str, Any]) -> dict[str, int]:
        return check_values(self.name, self._parameters.values, values)

    @staticmethod
    def _signature(shapes: Mapping[str, tuple[Sequence[int], Any]]) -> tuple[Any, ...]:
        return tuple(
            (n, tuple(int(s) for s in shape), np.dtype(dtype).name)
            for n, (shape, dtype) in sorted(shapes.items())
        )

    # The public API snapshot spells this signature, without a return type.
    def reference(self, *tensors: Any, dev: Device | str | None = None, **values: Any):  # type: ignore[no-untyped-def]
        """Run the body on the host, each step through its operator's ``reference()``.

        Tiled for ``dev`` (else the current device) without needing an NPU;
        outputs are numpy arrays of their shape, cut to bounds. States are
        read and written in their host copies.

        Raises:
            RuntimeError: No device is given or bound.
            TypeError: An input or per-call value is missing or unknown.
            IndexError: The values index or bound a view outside it.
        """
        given = {n: np.asarray(t) for n, t in self._given(tensors).items()}
        values = self._check_values({**self._parameters.defaults, **values})
        shapes = {n: (t.shape, t.dtype) for n, t in given.items()}
        with use_device(dev) if dev is not None else contextlib.nullcontext():
            device = require_device()
            references = state_of(self).references
            key = (device.name, self._signature(shapes))
            recording = references.get(key)
            if recording is None:
                token = context.device_fit.set(False)
                try:
                    recording = references[key] = self.record(**shapes)
                finally:
                    context.device_fit.reset(token)
            outputs, carry = recording.reference(given, values)
        return _results(outputs, Carry(**carry) if recording.carry else None)

    # -- device versions (built by the runtime) ----------------------------------------------

    @property
    def versions(self) -> dict[tuple[Any, ...], Any]:
        """The versions compiled for the current device, by input signature.

        Each device has its own: a version built for npu1 is never called
        while npu2 is bound.

        Raises:
            RuntimeError: No device is bound.
        """
        return self._versions_on(require_device().name)

    def _versions_on(self, device: str) -> dict[tuple[Any, ...], Any]:
        return state_of(self).versions_on(device)

    def compile(
        self,
        *,
        dev: Device | str | None = None,
        full_elf: bool | None = None,
        check: bool = False,
        feeds: Any = None,
        **shapes: Any,
    ) -> Any:
        """Compile and return the version for these input shapes.

        Compile all before the first call, as a later one grows (copies) the
        arena.

        Args:
            dev: The device, for this compile alone; else the current one.
            full_elf: One full ELF, else an xclbin per step; ``None`` derives it.
            check: Run each step on its own dispatch, raising at the first
                outside its ``tolerance()``.
            feeds: The version a full ELF's Emit starts; by default itself
                when it takes no tensor.
            **shapes: Each input's shape, or ``(shape, dtype)``.

        Raises:
            ImportError: iron-runtime is not installed.
        """
        return self._compile(
            shapes, dev=dev, full_elf=full_elf, check=check, feeds=feeds
        )

    def _compile(
        self,
        shapes: Mapping[str, Any],
        *,
        dev: Device | str | None = None,
        full_elf: bool | None = None,
        check: bool = False,
        feeds: Any = None,
    ) -> Any:
        """:meth:`compile`, with the shapes apart from its options.

        An input may have the name of an option (``dev``, ``check``...): a
        call compiles its shapes through here, so each stays an input's.
        """
        with use_device(dev) if dev is not None else contextlib.nullcontext():
            recording = self.record(**shapes)
            runtime = plugins.backend()
            version = runtime.compile(
                self, recording, full_elf=full_elf, check=check, feeds=feeds
            )
        key = self._signature({h.name: (h.shape, h.dtype) for h in recording.inputs})
        assert recording.device is not None  # record() records for a device
        self._versions_on(recording.device.name)[key] = version
        return version

    def __call__(self, *tensors: Any, **values: Any) -> Any:
        """Call the version matching ``tensors`` (or record into an enclosing body).

        When no version is loaded yet, an uncompiled shape is compiled on the
        spot (and logged); once one is, it raises ValueError.
        """
        recorder = context.graph_recorder.get()
        if recorder is not None:
            return self.inline(self.body, *tensors, **values)
        given = {n: np.asarray(t) for n, t in self._given(tensors).items()}
        key = self._signature({n: (t.shape, t.dtype) for n, t in given.items()})
        version = self.versions.get(key)
        if version is None:
            if self.versions:
                have = "; ".join(_shown(k) for k in self.versions)
                raise ValueError(
                    f"{self.name}: no version for shapes {_shown(key)}; compiled: "
                    f"{have}. Compile every shape before the first call (they "
                    f"share an arena a later compile grows)"
                )
            logger.info("%s: compiling shapes %s on first call", self.name, _shown(key))
            version = self._compile({n: (t.shape, t.dtype) for n, t in given.items()})
        return version(*tensors, **values)

    def release(self) -> None:
        """Free the device memory this graph's versions and arena hold.

        A call after it loads them again (weights upload again; states start
        from zeros).
        """
        state_of(self).release()
