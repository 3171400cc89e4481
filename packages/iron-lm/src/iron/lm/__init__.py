"""IRON's Llama decoders: Hugging Face checkpoints on the NPU (or its emulator).

``iron.lm.generate.Decoder.from_pretrained(directory)`` loads a checkpoint
(``iron.lm.model.Llama`` is its graph); ``Decoder.generate`` streams token
ids; ``python -m iron.lm generate`` is the command line.
"""

from iron.lm.__about__ import __version__

__all__ = ["__version__"]
