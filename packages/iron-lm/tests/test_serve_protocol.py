"""The server's request checks, without a server.

``parse_request`` accepts what OpenAI's clients send for what this server
does (fields at their do-nothing values included) and refuses the rest by
name. (The scheduler that runs the requests: ``test_serve_batching.py``.)
"""

from __future__ import annotations

import pytest

from iron.lm.penalties import Penalties
from iron.lm.serve.protocol import APIError, Sampling, parse_request

GREEDY = Sampling()
SAMPLED = Sampling(temperature=0.8, top_k=8)


def parse(endpoint="completions", sampling=GREEDY, **fields):
    body = {"model": "m", **fields}
    if endpoint == "completions":
        body.setdefault("prompt", "hi")
    else:
        body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return parse_request(endpoint, body, sampling=sampling)


def refused(param: str, **fields) -> APIError:
    with pytest.raises(APIError) as caught:
        parse(**fields)
    assert caught.value.param == param, caught.value.message
    assert caught.value.status == 400
    return caught.value


def test_fields_at_their_do_nothing_values_are_accepted():
    request = parse(
        n=1,
        logprobs=None,
        echo=False,
        presence_penalty=0,
        frequency_penalty=0.0,
        best_of=1,
        logit_bias={},
        user="me",
        suffix=None,
    )
    assert request.max_tokens == 16  # OpenAI's default for completions
    chat = parse("chat", logprobs=False, tools=[], response_format={"type": "text"})
    assert chat.max_tokens is None  # up to the context


def test_true_is_not_one_and_false_is_not_zero():
    error = refused("best_of", best_of=True)
    assert "'best_of' = True is not supported" in error.message
    refused("max_tokens", max_tokens=True)
    refused("n", n=True)
    refused("logprobs", logprobs=True)  # completions: a count, not a switch
    refused("logprobs", endpoint="chat", logprobs=1)  # chat: true, not 1


def test_logprobs_are_read_in_openais_ranges():
    # completions: logprobs N in [0, 5], the N most likely tokens listed
    assert parse().logprobs is None
    assert [parse(logprobs=n).logprobs for n in range(6)] == list(range(6))
    for bad in (6, -1, "2", 2.0):
        error = refused("logprobs", logprobs=bad)
        assert "'logprobs' must be an integer [0, 5]" in error.message
    error = refused("top_logprobs", top_logprobs=2)  # a chat field
    assert "'logprobs': N" in error.message
    # chat: logprobs true or false, top_logprobs in [0, 20] with it
    assert parse("chat").logprobs is None
    assert parse("chat", logprobs=False, top_logprobs=0).logprobs is None
    assert parse("chat", logprobs=True).logprobs == 0
    assert parse("chat", logprobs=True, top_logprobs=20).logprobs == 20
    error = refused("top_logprobs", endpoint="chat", logprobs=True, top_logprobs=21)
    assert "'top_logprobs' must be an integer [0, 20]" in error.message
    error = refused("top_logprobs", endpoint="chat", top_logprobs=3)
    assert "needs 'logprobs': true" in error.message
    refused("top_logprobs", endpoint="chat", logprobs=False, top_logprobs=3)
    error = refused("logprobs", endpoint="chat", logprobs="yes")
    assert "'logprobs' must be true or false" in error.message


def test_an_unknown_field_is_refused_by_name():
    error = refused("mirostat", mirostat=2)
    assert error.code == "unknown_parameter"
    assert "unknown field 'mirostat'" in error.message


def test_each_request_brings_its_own_sampling():
    # what a request leaves out is the server's default
    r = parse()
    assert (r.temperature, r.top_k, r.top_p) == (0.0, 256, 1.0)  # top_k off
    r = parse(sampling=SAMPLED)
    assert (r.temperature, r.top_k, r.top_p) == (0.8, 8, 1.0)
    # what it gives is its own, whatever the server was started with
    r = parse(temperature=0.7, top_k=40, top_p=0.9, seed=3)
    assert (r.temperature, r.top_k, r.top_p, r.seed) == (0.7, 40, 0.9, 3)
    r = parse(sampling=SAMPLED, temperature=0, top_p=0.5)
    assert (r.temperature, r.top_k, r.top_p) == (0.0, 8, 0.5)
    assert parse(top_p=1).top_p == 1.0


@pytest.mark.parametrize(
    ("param", "fields", "words"),
    [
        ("temperature", {"temperature": -0.1}, "[0.0, 2.0]"),
        ("temperature", {"temperature": 2.5}, "[0.0, 2.0]"),
        ("top_p", {"top_p": 0}, "(0, 1]"),
        ("top_p", {"top_p": 1.5}, "[0.0, 1.0]"),
        ("top_k", {"top_k": 0}, "[1, 256]"),
        ("top_k", {"top_k": 257}, "[1, 256]"),
        ("top_k", {"top_k": 2.5}, "[1, 256]"),
    ],
)
def test_a_sampling_setting_out_of_range_is_refused_by_name(param, fields, words):
    assert words in refused(param, **fields).message


def test_top_k_is_limited_by_the_device_sampler_of_this_vocabulary():
    small = Sampling(max_top_k=32)
    assert parse(sampling=small).top_k == 32
    with pytest.raises(APIError, match=r"'top_k' must be an integer \[1, 32\]"):
        parse(sampling=small, top_k=33)


def test_the_seed_is_given_or_drawn_within_its_limit():
    assert parse(seed=7).seed == 7
    limit = Sampling(seed_limit=100)
    assert all(0 <= parse(sampling=limit).seed <= 100 for _ in range(20))
    refused("seed", sampling=limit, seed=101)
    refused("seed", seed=1.5)


def test_any_model_name_asks_for_the_served_one():
    # one model per server: llama-server's answer; the response names it
    assert parse(model="gpt-4o").prompt == "hi"
    assert parse_request("completions", {"prompt": "hi"}, sampling=GREEDY).prompt
    refused("model", model=3)


def test_llama_cpp_sampling_fields_are_read():
    neutral = {"min_p": 0, "repeat_penalty": 1.0, "presence_penalty": 0}
    request = parse(**neutral, frequency_penalty=0, stop="x")
    assert request.stop == ("x",) and request.penalties.neutral
    request = parse(
        min_p=0.05,
        repeat_penalty=1.1,
        repeat_last_n=-1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
    )
    assert request.penalties == Penalties(0.05, 1.1, -1, 0.5, -0.5)
    assert not request.penalties.neutral
    # both endpoints read them
    assert parse("chat", min_p=0.1).penalties.min_p == 0.1


def test_the_servers_penalties_fill_in_what_a_request_leaves_out():
    sampling = Sampling(penalties=Penalties(repeat_penalty=1.3, repeat_last_n=8))
    request = parse(sampling=sampling, presence_penalty=0.25)
    assert request.penalties == Penalties(
        repeat_penalty=1.3, repeat_last_n=8, presence_penalty=0.25
    )
    assert parse(sampling=sampling, repeat_penalty=1).penalties.repeat_penalty == 1


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("min_p", 1.5, "in [0, 1]"),
        ("min_p", -0.1, "in [0, 1]"),
        ("repeat_penalty", 0, "> 0"),
        ("repeat_penalty", -1.1, "> 0"),
        ("repeat_penalty", "1.1", "> 0"),
        ("repeat_last_n", -2, ">= -1"),
        ("repeat_last_n", 6.5, ">= -1"),
        ("repeat_last_n", True, ">= -1"),
        ("presence_penalty", 2.5, "in [-2, 2]"),
        ("frequency_penalty", -3, "in [-2, 2]"),
        ("frequency_penalty", float("nan"), "in [-2, 2]"),
    ],
)
def test_a_sampling_field_out_of_range_is_refused_with_its_range(field, value, words):
    error = refused(field, **{field: value})
    assert field in error.message and words in error.message, error.message
    assert repr(value) in error.message


def test_values_the_device_cannot_hold_are_the_requests_mistake():
    # they reached the device's sampler and came back as 500s
    assert "too small" in refused("temperature", temperature=1e-300).message
    assert "float32" in refused("top_p", top_p=1e-300).message
    assert parse(temperature=2.0**-63, top_p=1e-38).top_p == 1e-38


def test_the_temperature_bound_is_the_clis():
    from iron.lm.options import MAX_TEMPERATURE

    assert parse(temperature=MAX_TEMPERATURE).temperature == MAX_TEMPERATURE
    refused("temperature", temperature=MAX_TEMPERATURE + 0.01)


def test_prompts_one_at_a_time():
    assert parse(prompt=["one"]).prompt == "one"
    assert parse(prompt=[[1, 2, 3]]).prompt == [1, 2, 3]
    assert parse(prompt=[1, 2]).prompt == [1, 2]
    error = refused("prompt", prompt=["one", "two"])
    assert "one by one" in error.message
    refused("prompt", prompt=3)


def test_messages_as_text_parts():
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    request = parse("chat", messages=[{"role": "user", "content": parts}])
    assert request.messages == [{"role": "user", "content": "ab"}]
    image = [{"type": "image_url", "image_url": {"url": "x"}}]
    error = refused(
        "messages", endpoint="chat", messages=[{"role": "user", "content": image}]
    )
    assert "only text content parts" in error.message
    refused("messages", endpoint="chat", messages=[{"content": "no role"}])


def test_max_completion_tokens_is_read_for_chat():
    assert parse("chat", max_completion_tokens=5, max_tokens=9).max_tokens == 5
    assert parse("chat", max_tokens=9).max_tokens == 9


def test_stream_options_only_with_stream():
    refused("stream_options", stream_options={"include_usage": True})
    request = parse(stream=True, stream_options={"include_usage": True})
    assert request.stream and request.include_usage
    refused("stream", stream="yes")
    refused("stream_options", stream=True, stream_options={"include_usage": 1, "x": 2})


def test_stop_strings():
    assert parse(stop="x").stop == ("x",)
    assert parse(stop=["x", "yz"]).stop == ("x", "yz")
    refused("stop", stop=[""])
    refused("stop", stop=["a", "b", "c", "d", "e"])


def test_the_error_object_is_openais():
    body = APIError("bad", param="p", code="c").body()
    assert body == {
        "error": {
            "message": "bad",
            "type": "invalid_request_error",
            "param": "p",
            "code": "c",
        }
    }
