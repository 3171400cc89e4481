"""The benchmark figures, one module each; ``FIGURES`` maps a number to its ``run``.

Each ``run(ctx)`` measures one figure side by side with its peer and returns
a dict: figure, value, target, met, peer, peer_value, unit, command, details.
"""

from __future__ import annotations

from . import (
    arena,
    batched,
    batched_serving,
    compile_cost,
    decode,
    decode_memory,
    emulated_3b,
    gguf_loading,
    host_overhead,
    loading,
    long_context,
    prefill,
    quantized_decode,
    quantized_emulated,
    quantized_gguf,
    roofline,
    serving,
    speculative,
)

FIGURES = {
    1: compile_cost.run,
    2: arena.run,
    3: host_overhead.run,
    # figure 4 runs the emulator as a user does: its default memory budget
    4: decode.run,
    5: roofline.run,
    6: loading.run,
    7: prefill.run,
    8: serving.run,
    9: quantized_decode.run,
    10: quantized_emulated.run,
    11: gguf_loading.run,
    12: decode_memory.run,
    13: speculative.run,
    14: batched.run,
    15: batched_serving.run,
    16: long_context.run,
    17: emulated_3b.run,
    18: quantized_gguf.run,
}

__all__ = ["FIGURES"]
