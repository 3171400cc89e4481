"""The bring-up ladder's Llama rungs judge a decode step by the operators' contracts.

``iron.runtime.npu.bringup.judge_decode`` runs here on the emulated NPU: it
passes on the tiny Llama, and a kernel off its model is named by the step
that breaks its tolerance (no ad-hoc bound on the logits).
"""

from __future__ import annotations

import numpy as np
import pytest

from iron.core.device import DEVICES, NPU2
from iron.core.recording import Recording
from iron.lm.config import LlamaConfig
from iron.lm.model import Llama
from iron.lm.tiny import random_state_dict
from iron.operators import RMSNorm
from iron.runtime import StepCheckError
from iron.runtime.npu.bringup import judge_decode


def _tiny() -> Llama:
    config = LlamaConfig.tiny()
    model = Llama(config)
    model.load_state_dict(random_state_dict(config))
    return model


@pytest.mark.parametrize("device", ["npu1", "npu2"])
def test_the_tiny_llama_decode_passes_the_judge(device) -> None:
    judge_decode(_tiny(), DEVICES[device])


def test_a_kernel_off_its_tolerance_is_named_by_its_step(monkeypatch) -> None:
    model = _tiny()
    run_step = Recording.run_step

    def faulty(step, values, buffers):  # every RMSNorm 5% high, as a bad kernel
        run_step(step, values, buffers)
        if isinstance(step.op, RMSNorm):
            out = buffers[step.outputs[0].name]
            out[...] = (np.asarray(out, np.float32) * 1.05).astype(out.dtype)

    monkeypatch.setattr(Recording, "run_step", staticmethod(faulty))
    with pytest.raises(StepCheckError, match="RMSNorm"):
        judge_decode(model, NPU2)
