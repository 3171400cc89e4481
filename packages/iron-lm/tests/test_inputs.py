"""Inputs the API used to coerce silently (issue 14), and non-finite logits.

Each case raises at the call, naming the argument and what it takes, where
it used to be flattened, truncated, rounded or compared as something else.
"""

from __future__ import annotations

import numpy as np
import pytest
from lm_support import CONTEXT, ROWS

from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.generate import Decoder, NonFiniteLogitsError
from iron.lm.model import Llama

# -- generate() and logits() ----------------------------------------------------------


@pytest.mark.parametrize("value", [2.5, 3.0, "3", None, True])
def test_max_new_tokens_takes_an_int(decoders, value) -> None:
    with pytest.raises(TypeError, match=f"max_new_tokens takes an int.*{value!r}"):
        decoders("tied", "npu2").generate([5, 6], max_new_tokens=value)


def test_max_new_tokens_is_not_negative(decoders) -> None:
    with pytest.raises(ValueError, match="max_new_tokens takes an int >= 0, got -1"):
        decoders("tied", "npu2").generate([5, 6], max_new_tokens=-1)
    # numpy ints are ints
    tokens = decoders("tied", "npu2").generate([5, 6], max_new_tokens=np.int64(2))
    assert len(list(tokens)) <= 2


@pytest.mark.parametrize("stop", ["\n", b"\n", 2, [1, 2.0], [True]])
def test_stop_takes_token_ids_not_a_string(decoders, stop) -> None:
    # a str stop was a set of characters: no token id ever equals one
    with pytest.raises(TypeError, match="stop takes"):
        decoders("tied", "npu2").generate([5, 6], stop=stop)


@pytest.mark.parametrize("stop", [[1, 2], (1,), {2}, np.array([1, 2]), []])
def test_stop_takes_any_collection_of_ints(decoders, stop) -> None:
    list(decoders("tied", "npu2").generate([5, 6], max_new_tokens=2, stop=stop))


@pytest.mark.parametrize("method", ["generate", "logits"])
def test_a_2d_prompt_is_refused_not_flattened(decoders, method) -> None:
    call = getattr(decoders("tied", "npu2"), method)
    with pytest.raises(ValueError, match=r"flat sequence of token ids.*\(2, 3\)"):
        call([[5, 6, 7], [8, 9, 10]])


@pytest.mark.parametrize("prompt", [[5.0, 6.7], np.array([5.5]), [5, "6"], [True]])
@pytest.mark.parametrize("method", ["generate", "logits"])
def test_a_float_prompt_is_refused_not_truncated(decoders, method, prompt) -> None:
    call = getattr(decoders("tied", "npu2"), method)
    with pytest.raises(TypeError, match="integer token ids"):
        call(prompt)


def test_a_str_prompt_is_refused(decoders) -> None:
    with pytest.raises(TypeError, match="prompt_ids takes token ids.*tokenizer"):
        decoders("tied", "npu2").generate("hello")


# -- sampling settings ----------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, error, words",
    [
        ({"top_k": 2.5}, TypeError, ["top_k takes an int in [1, ", "2.5"]),
        ({"top_k": "8"}, TypeError, ["top_k", "'8'"]),
        ({"top_k": 0}, ValueError, ["top_k", "got 0"]),
        (
            {"temperature": None},
            TypeError,
            ["temperature takes a finite number", "None"],
        ),
        ({"temperature": "0.8"}, TypeError, ["temperature", "'0.8'"]),
        ({"temperature": float("nan")}, ValueError, ["temperature", "nan"]),
        ({"temperature": -1.0}, ValueError, ["temperature", "-1.0"]),
        ({"rows": 16.0}, TypeError, ["rows takes", "16.0"]),
        ({"context": "64"}, TypeError, ["context takes", "'64'"]),
    ],
)
def test_sampling_settings_of_the_wrong_type_are_named(settings, error, words) -> None:
    with pytest.raises(error) as info:
        Llama(LlamaConfig.tiny(), **settings)
    for word in words:
        assert word in str(info.value)


def test_the_decoder_checks_settings_too(checkpoints) -> None:
    with pytest.raises(TypeError, match="top_k"):
        Decoder.from_pretrained(checkpoints(), device="npu2", top_k=2.5)


def test_numbers_of_numpy_types_are_taken() -> None:
    graph = Llama(LlamaConfig.tiny(), rows=np.int32(16), temperature=np.float32(0.5))
    assert graph.rows == 16


# -- non-finite logits at run time ----------------------------------------------------

LOOPS = [("npu2", True), ("npu2", False), ("npu1", None)]


@pytest.fixture(scope="module")
def nan_decoders():
    """Decoders whose final norm holds NaN, bound directly (from_pretrained
    refuses such weights): every logit they compute is NaN."""
    made = {}
    for device in ("npu1", "npu2"):
        weights = tiny.random_state_dict(seed=2)
        norm = np.array(weights["model.norm.weight"])
        norm[0] = np.nan
        weights["model.norm.weight"] = norm
        graph = Llama(LlamaConfig.tiny(), context=CONTEXT, rows=ROWS)
        graph.load_state_dict(weights)
        made[device] = Decoder(graph, device=device, progress=False).compile()
    return made


@pytest.mark.parametrize("device, loop", LOOPS)
def test_non_finite_logits_end_generation_with_an_error(
    nan_decoders, device, loop
) -> None:
    stream = nan_decoders[device].generate(
        [5, 6, 7], max_new_tokens=4, device_loop=loop
    )
    with pytest.raises(NonFiniteLogitsError, match="non-finite logits for position 3"):
        next(stream)
    assert issubclass(NonFiniteLogitsError, RuntimeError)


def test_finite_logits_generate_as_before(decoders) -> None:
    tokens = list(decoders("tied", "npu2").generate([5, 6, 7], max_new_tokens=3))
    assert 1 <= len(tokens) <= 3
