"""IRON's Llama decoders: Hugging Face checkpoints on the NPU (or its emulator).

``Llama.from_pretrained(directory)`` loads a checkpoint; ``generate`` streams
tokens; ``python -m iron.lm generate`` is the command line.
"""

from iron.lm.__about__ import __version__

__all__ = ["__version__"]
