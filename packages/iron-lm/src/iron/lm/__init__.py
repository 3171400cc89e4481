"""IRON's Llama decoders: Hugging Face checkpoints on the NPU (or its emulator).

``Decoder.from_pretrained(directory)`` loads a checkpoint and its tokenizer
(``Llama`` is its graph, ``LlamaConfig`` its configuration); the decoder
generates text (``complete``, ``stream``, ``chat``) or token ids
(``generate``). ``iron-lm generate`` and ``iron-lm serve`` are the command
line. The names below are imported on first use, so ``import iron.lm`` stays
light: it loads neither the runtime nor a tokenizer.

Example:
    >>> from iron.lm import Decoder
    >>> decoder = Decoder.from_pretrained(
    ...     directory, device="npu2", context=64, progress=False
    ... )
    >>> text = decoder.complete("The NPU", max_new_tokens=8)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iron.core.lazy import lazy_names
from iron.lm.__about__ import __version__

# name -> (module, attribute); the module is imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "Decoder": ("iron.lm.generate", "Decoder"),
    "Llama": ("iron.lm.model", "Llama"),
    "LlamaConfig": ("iron.lm.config", "LlamaConfig"),
    "Stats": ("iron.lm.generate", "Stats"),
    "TextStream": ("iron.lm.text", "TextStream"),
    "Tokenizer": ("iron.lm.tokenizer", "Tokenizer"),
}

# Written out (not computed) so linters see the TYPE_CHECKING imports below
# are exports; a test checks it matches _LAZY.
__all__ = [
    "Decoder",
    "Llama",
    "LlamaConfig",
    "Stats",
    "TextStream",
    "Tokenizer",
    "__version__",
]


# The one mechanism iron itself uses (iron.core.lazy).
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


if TYPE_CHECKING:
    from iron.lm.config import LlamaConfig
    from iron.lm.generate import Decoder, Stats
    from iron.lm.model import Llama
    from iron.lm.text import TextStream
    from iron.lm.tokenizer import Tokenizer
