"""Figure 6: peak resident memory while loading a Llama checkpoint.

A checkpoint of 4 layers at Llama-3.2-1B's widths (seeded random bf16
weights, sharded at about 500 MB; the tied embedding alone is a 525 MB
shard) is loaded in a fresh subprocess: ``Decoder.from_pretrained`` (the
shards memory-mapped, nothing read) then ``compile`` (both versions planned,
every weight uploaded piecewise, each piece's pages released once on the
device). Resident memory is read from ``/proc/self``: the baseline after
imports, the peak (``VmHWM``, reset at the baseline by writing 5 to
``clear_refs``), and, at every uploaded piece, the resident bytes of the
emulated device's buffers (from ``/proc/self/smaps``).

On the emulator, device memory is host memory: each device buffer is a host
view and a device copy, both resident once written. So two numbers are
reported, each as a multiple of the largest shard: the raw peak above the
baseline, and the peak of what is resident *beyond* the device buffers
(sampled at every piece). The target applies to the second, the issue's
intent: host memory beyond the device copy stays near one shard.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .common import (
    Context,
    command,
    describe,
    llama_1b,
    parameter_count,
    result,
    table,
    tiny_config,
)

NUMBER = 6
TARGET = 1.5
SHARD_BYTES = 500_000_000


# -- the child process ---------------------------------------------------------------


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _resident_in(spans: list[tuple[int, int]]) -> int:
    """Resident bytes of the mappings overlapping the ``[start, end)`` spans.

    A large numpy array can span several mappings (numpy advises huge pages
    on its aligned part, which splits the mapping), so every one it overlaps
    is counted, each once.
    """
    found: dict[tuple[int, int], int] = {}
    current: tuple[int, int] | None = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                overlaps = any(lo < end and start < hi for start, end in spans)
                current = (lo, hi) if overlaps else None
            elif current is not None and head == "Rss:":
                found[current] = int(line.split()[1]) * 1024
    return sum(found.values())


def child(folder: str) -> dict[str, Any]:
    """Load ``folder`` with IRON and report resident memory (run in a subprocess)."""
    import numpy as np  # noqa: F401 - imported before the baseline
    import safetensors  # noqa: F401

    from iron.lm.generate import Decoder
    from iron.runtime import set_backend, set_poison
    from iron.runtime.emu.device import EmuDevice

    set_backend("emu")
    set_poison(False)
    buffers = []
    alloc = EmuDevice.alloc

    def tracked(self, nbytes, name):
        bo = alloc(self, nbytes, name)
        buffers.append(bo)
        return bo

    EmuDevice.alloc = tracked

    def device_resident() -> int:
        big = [b for b in buffers if b.nbytes >= 1 << 20 and not b.freed]
        arrays = [a for b in big for a in (b._host, b.device)]
        return _resident_in([(a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays])

    reset = True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        reset = False
    base = _status("VmRSS")
    decoder = Decoder.from_pretrained(
        folder, device="npu2", context=256, rows=16, progress=False
    )
    after_open = _status("VmRSS")
    samples = []
    release = decoder.checkpoint.release

    def sampled(piece):
        rss = _status("VmRSS")
        dev = device_resident()
        samples.append((rss - base, dev))
        return release(piece)

    decoder.checkpoint.release = sampled
    decoder.compile()
    end = _status("VmRSS")
    dev_end = device_resident()
    samples.append((end - base, dev_end))
    peak = _status("VmHWM")
    weights = sum(h.nbytes for _, h in decoder.decode.recording.weights.values())
    return {
        "baseline": base,
        "after_open": after_open - base,
        "peak": peak - base,
        "peak_reset": reset,
        "end": end - base,
        "device_end": dev_end,
        "beyond_device": max(r - d for r, d in samples),
        "samples": len(samples),
        "weights": weights,
        "arena": decoder.decode.arena.nbytes,
    }


# -- the figure ------------------------------------------------------------------------


def _measure(folder: Path) -> dict[str, Any]:
    """Run :func:`child` on ``folder`` in a fresh process; its figures."""
    here = Path(__file__).resolve()
    env = {**os.environ, "PYTHONPATH": str(here.parents[1])}
    out = subprocess.run(
        [sys.executable, "-m", "figures.loading", str(folder)],
        cwd=here.parents[1],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _float32_checkpoint(folder: Path, config: Any, shard: int) -> Path:
    """The figure's model with float32 weights (the same seed), written once."""
    if not folder.is_dir():
        import numpy as np

        from iron.lm import tiny
        from iron.lm.checkpoint import save_checkpoint

        config = dataclasses.replace(config, dtype="float32")
        state = tiny.random_state_dict(config, seed=0, dtype=np.float32)
        save_checkpoint(folder, config, state, max_shard_bytes=2 * shard)
        del state
    return folder


def run(ctx: Context) -> dict[str, Any]:
    """Measure figure 6."""
    quick = ctx.quick
    if quick:
        config, name, shard = tiny_config(2), "tiny-2", 60_000
    else:
        config, name, shard = llama_1b(4), "llama1b-widths-4", SHARD_BYTES
    folder, made_s = ctx.checkpoint(name, config, shard)
    files = sorted(Path(folder).glob("*.safetensors"))
    largest = max(f.stat().st_size for f in files)
    m = _measure(folder)
    # The same model stored as float32: narrowed to bf16 a piece at a time
    # while it is uploaded (issue 14), so the same bound applies.
    wide_folder = _float32_checkpoint(ctx.scratch / f"{name}-float32", config, shard)
    wide_files = sorted(wide_folder.glob("*.safetensors"))
    wide_largest = max(f.stat().st_size for f in wide_files)
    wide = _measure(wide_folder)
    wide_beyond = wide["beyond_device"] / wide_largest
    raw = m["peak"] / largest
    beyond = m["beyond_device"] / largest
    met = beyond <= TARGET and wide_beyond <= TARGET
    mb = 1 / 1e6
    notes = [
        f"Checkpoint: {describe(config)}; {parameter_count(config) / 1e6:.0f} M "
        f"bf16 parameters in {len(files)} shards, the largest "
        f"{largest * mb:.1f} MB.",
        f"Loading (from_pretrained + compile, weights uploaded in pieces, each "
        f"piece's pages released) in a fresh process: baseline after imports "
        f"{m['baseline'] * mb:.0f} MB; after opening the checkpoint "
        f"+{m['after_open'] * mb:.1f} MB; peak +{m['peak'] * mb:.0f} MB"
        + ("" if m["peak_reset"] else " (VmHWM could not be reset: includes imports)")
        + f"; at the end +{m['end'] * mb:.0f} MB.",
        f"The emulated device's buffers: {m['weights'] * mb:.0f} MB of weights "
        f"uploaded into an arena of {m['arena'] * mb:.0f} MB, resident "
        f"{m['device_end'] * mb:.0f} MB at the end (the device copy's "
        f"pages, and the host view's still held: an uploaded weight's are "
        f"given back).",
        f"Raw peak above baseline: {raw:.2f}x the largest shard (the device copy "
        f"lives in host memory on the emulator). Beyond the device buffers, at "
        f"most {m['beyond_device'] * mb:.1f} MB = {beyond:.3f}x the largest shard "
        f"(sampled at each of {m['samples']} uploaded pieces); the target applies "
        f"to this.",
    ]
    notes.append(
        f"The same model stored as float32 ({len(wide_files)} shards, the "
        f"largest {wide_largest * mb:.1f} MB), narrowed to bf16 a piece at a "
        f"time as it is uploaded: beyond the device buffers at most "
        f"{wide['beyond_device'] * mb:.1f} MB = {wide_beyond:.3f}x its largest "
        f"shard; raw peak +{wide['peak'] * mb:.0f} MB."
    )
    if not met:
        notes.append(
            f"Missed: {max(beyond, wide_beyond):.2f}x the largest shard stays "
            f"resident beyond the device buffers while loading."
        )
    return result(
        figure="Loading: peak resident memory beyond the device copy / largest shard"
        + (" (quick: tiny)" if quick else ""),
        value=beyond,
        target=f"<= {TARGET} (host memory beyond the device copy)",
        met=met,
        peer="raw peak above baseline (device copy included), same units",
        peer_value=raw,
        unit="x largest shard",
        peer_unit="x largest shard",
        command=command(NUMBER, quick),
        notes=notes,
        tables=[
            table(
                "Resident memory while loading (MB above the baseline)",
                ["measure", "MB", "x largest shard"],
                [
                    [
                        "after opening the checkpoint",
                        f"{m['after_open'] * mb:.1f}",
                        f"{m['after_open'] / largest:.3f}",
                    ],
                    ["raw peak (VmHWM)", f"{m['peak'] * mb:.1f}", f"{raw:.3f}"],
                    [
                        "device buffers resident at the end",
                        f"{m['device_end'] * mb:.1f}",
                        f"{m['device_end'] / largest:.3f}",
                    ],
                    [
                        "peak beyond the device buffers",
                        f"{m['beyond_device'] * mb:.1f}",
                        f"{beyond:.3f}",
                    ],
                    [
                        "float32 checkpoint: peak beyond the device buffers",
                        f"{wide['beyond_device'] * mb:.1f}",
                        f"{wide_beyond:.3f}",
                    ],
                ],
            )
        ],
        data={
            **m,
            "largest_shard": largest,
            "shards": len(files),
            "raw_multiple": raw,
            "beyond_multiple": beyond,
            "float32": {
                **wide,
                "largest_shard": wide_largest,
                "shards": len(wide_files),
                "beyond_multiple": wide_beyond,
            },
        },
    )


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1])))
