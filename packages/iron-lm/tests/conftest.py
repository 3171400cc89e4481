"""Fixtures for iron-lm's tests: the emulated NPU, poisoned, and tiny checkpoints.

The whole session runs on the emulator with dead memory poisoned (a planning
bug is a wrong answer, not luck). The checkpoints and decoders are made once
a session and shared (see ``lm_support`` for the variants).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lm_support import CONTEXT, ROWS, VARIANTS, variant_seed, write_tiny

import iron.runtime
from iron.lm.generate import Decoder


@pytest.fixture(scope="session", autouse=True)
def _emulated_npu():
    """The emulated NPU with poison on, for the whole session."""
    iron.runtime.set_backend("emu")
    iron.runtime.set_poison(True)
    yield
    iron.runtime.set_backend(None)
    iron.runtime.set_poison(None)


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> Callable[[str], Path]:
    """``checkpoints(variant)``: that variant's checkpoint, written once a session.

    Read only: a test that edits a checkpoint writes its own (``write_tiny``).
    """
    written: dict[str, Path] = {}

    def get(variant: str = "tied") -> Path:
        if variant not in written:
            written[variant] = write_tiny(
                tmp_path_factory.mktemp(variant), variant, seed=variant_seed(variant)
            )
        return written[variant]

    return get


@pytest.fixture(params=list(VARIANTS))
def checkpoint(request, checkpoints) -> Path:
    """Each variant's checkpoint in turn."""
    return checkpoints(request.param)


@pytest.fixture(scope="session")
def decoders(checkpoints) -> Callable[..., Decoder]:
    """``decoders(variant, device, **settings)``: a compiled Decoder, made once.

    Shared by the tests that ask for the same one, so each test starts from
    what a call leaves: generation resets what it reads; scoring starts at
    position 0 and writes the cache as it goes.
    """
    made: dict[tuple, Decoder] = {}

    def get(variant: str = "tied", device: str = "npu2", **settings: Any) -> Decoder:
        key = (variant, device, tuple(sorted(settings.items())))
        if key not in made:
            made[key] = Decoder.from_pretrained(
                checkpoints(variant),
                device=device,
                context=CONTEXT,
                rows=ROWS,
                progress=False,
                **settings,
            ).compile()
        return made[key]

    return get
