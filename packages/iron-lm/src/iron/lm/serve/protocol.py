"""OpenAI's request and response bodies: checked in, built out.

A request body becomes a :class:`Request` (what to generate and how) or an
:class:`APIError` that names the field, its value and the fix, with the
status OpenAI uses. Field names and shapes follow OpenAI's API reference
(https://platform.openai.com/docs/api-reference/completions and
.../chat): ``/v1/completions`` answers ``text_completion`` objects,
``/v1/chat/completions`` ``chat.completion`` objects, streamed as
``chat.completion.chunk``; errors are ``{"error": {"message", "type",
"param", "code"}}``.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections.abc import Mapping
from typing import Any

from iron.lm.options import MAX_TEMPERATURE, float32_of
from iron.lm.penalties import LIMITS, Penalties, check_field, describe
from iron.lm.serve.logprobs import MAX_CHAT_TOP, MAX_COMPLETION_TOP
from iron.operators.sample import TEMPERATURE_RANGE

__all__ = ["APIError", "Request", "Sampling", "parse_request"]

#: Fields each endpoint reads.
_COMMON = {
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "stream",
    "stream_options",
    "n",
    "user",
    "speculate",
    # llama.cpp's (and Ollama's) sampling fields; presence/frequency: OpenAI's
    *LIMITS,
}
_READ = {
    "completions": _COMMON | {"prompt", "logprobs"},
    "chat": _COMMON
    | {"messages", "max_completion_tokens", "logprobs", "top_logprobs"}
    # checked by iron.lm.serve.tools
    | {"response_format", "tools", "tool_choice", "parallel_tool_calls"},
}
#: Fields OpenAI defines that this server does not support: accepted only at
#: the value that asks nothing of it (its default), refused by name otherwise.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "top_logprobs": (None, 0),  # a chat field; completions take logprobs: N
    "echo": (None, False),
    "suffix": (None, ""),
    "best_of": (None, 1),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "parallel_tool_calls": (None, True, False),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "response_format": (None, {"type": "text"}),
    "service_tier": (None, "auto", "default"),
    "store": (None, False),
    "metadata": (None, {}),
    "modalities": (None, ["text"]),
    "reasoning_effort": (None,),
    "prediction": (None,),
    "audio": (None,),
    "web_search_options": (None,),
}
_WHY = {
    "top_logprobs": "/v1/completions lists the most likely tokens with "
    "'logprobs': N, N in [0, 5]",
    "echo": "the prompt is not echoed",
    "suffix": "insertion (a suffix) is not supported",
    "best_of": "one completion is generated per request",
    "logit_bias": "logit biases are not applied",
}
_ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP = 4


class APIError(Exception):
    """A request refused: OpenAI's error object and an HTTP status.

    Args:
        message: What is wrong, with the value and the fix.
        status: The HTTP status (4xx; 503 when the queue is full).
        param: The request field at fault, if one.
        code: A short machine-readable code, if one.
        kind: OpenAI's error ``type``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.kind = kind

    def body(self) -> dict[str, Any]:
        """OpenAI's error object."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclasses.dataclass(frozen=True)
class Sampling:
    """The server's sampling: a request's defaults, and its limits.

    A request's ``temperature``, ``top_k``, ``top_p`` and ``seed`` are
    per-call values of the compiled model, so each request may set its own
    without a recompile; these fill in what it leaves out.

    Attributes:
        temperature: 0 is greedy.
        top_k: Candidates a draw is from; None is off (``max_top_k``).
        top_p: The probability mass a draw keeps, in ``(0, 1]``.
        max_top_k: The most candidates the device's sampler holds.
        seed_limit: The largest seed a request may ask.
        speculate: Tokens drafted per pass by prompt lookup when a request
            gives no ``speculate`` (0 is off).
        max_speculate: The most a request may ask (a prompt chunk's rows
            less one).
        penalties: ``min_p`` and the repetition penalties when a request
            gives none of a field (:class:`iron.lm.penalties.Penalties`).
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float = 1.0
    max_top_k: int = 256
    seed_limit: int = 2**30
    speculate: int = 0
    max_speculate: int = 15
    penalties: Penalties = dataclasses.field(default_factory=Penalties)


@dataclasses.dataclass
class Request:
    """One checked request.

    Attributes:
        endpoint: ``"completions"`` or ``"chat"``.
        prompt: The prompt text (chat: None, see ``messages``) or token ids.
        messages: The chat messages, contents as text (completions: None).
        max_tokens: At most this many new tokens; None: up to the context.
        seed: The sampling seed.
        temperature: The sampling temperature (0 is greedy).
        top_k: Candidates a draw is from.
        top_p: The probability mass a draw keeps.
        stop: Stop strings.
        stream: Answer with server-sent events.
        include_usage: Stream a last chunk with the usage.
        logprobs: How many of the most likely tokens to list at each
            generated token's position, with its own log-probability
            (completions' ``logprobs``, chat's ``top_logprobs`` once
            ``logprobs`` is true); None: no log-probabilities.
        user: The caller's ``user`` field: the prefix cache is shared only
            between requests with the same key and ``user``.
        speculate: Tokens drafted per pass by prompt lookup and verified
            (``Decoder.generate``'s ``speculate``; 0 is off): the same text,
            faster where the answer repeats its prompt.
    """

    endpoint: str
    prompt: str | list[int] | None
    messages: list[dict[str, Any]] | None
    max_tokens: int | None
    seed: int
    temperature: float
    top_k: int
    top_p: float
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    logprobs: int | None = None
    user: str | None = None
    speculate: int = 0
    #: ``min_p``, ``repeat_penalty``, ``repeat_last_n``, ``presence_penalty``
    #: and ``frequency_penalty`` (llama.cpp's semantics, applied on the host)
    penalties: Penalties = dataclasses.field(default_factory=Penalties)
    #: ``response_format`` / ``tools`` (an iron.lm.serve.tools.Structure,
    #: set by the app; None: plain text)
    structure: Any = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _neutral(value: Any, allowed: tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``allowed`` (False is not 0, True not 1)."""
    return any(
        value == a and isinstance(value, bool) == isinstance(a, bool) for a in allowed
    )


def _bad(param: str, message: str, code: str | None = None) -> APIError:
    return APIError(message, param=param, code=code)


def _int_field(
    body: Mapping[str, Any], name: str, low: int, high: int | None = None
) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise _bad(name, f"'{name}' must be an integer {bound}, got {value!r}")
    return value


def _number_field(body: Mapping[str, Any], name: str, low: float, high: float):
    value = body.get(name)
    if value is None:
        return None
    if not _is_number(value) or not low <= value <= high:
        raise _bad(name, f"'{name}' must be a number in [{low}, {high}], got {value!r}")
    return float(value)


def _penalties(body: Mapping[str, Any], defaults: Penalties) -> Penalties:
    """The request's ``min_p`` and penalties, the server's where it gives none."""
    values = dataclasses.asdict(defaults)
    for name in LIMITS:
        value = body.get(name)
        if value is None:
            continue
        try:
            values[name] = check_field(name, value)
        except (TypeError, ValueError):
            raise _bad(
                name, f"'{name}' must be {describe(name)}, got {value!r}"
            ) from None
    return Penalties(**values)


def _text_of(content: Any, where: str) -> str:
    """A message's content as text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else part
                raise _bad(
                    "messages",
                    f"{where}: only text content parts are supported, got {kind!r}",
                )
            if not isinstance(part.get("text"), str):
                raise _bad("messages", f"{where}: a text part needs a string 'text'")
            parts.append(part["text"])
        return "".join(parts)
    if content is None:
        return ""
    raise _bad(
        "messages", f"{where} must be text or a list of text parts, got {content!r}"
    )


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise _bad("messages", "'messages' must be a non-empty list of messages")
    out = []
    for i, message in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad("messages", f"{where} must be an object, got {message!r}")
        role = message.get("role")
        if role not in _ROLES:
            raise _bad(
                "messages",
                f"{where}.role must be one of {', '.join(_ROLES)}, got {role!r}",
            )
        kept: dict[str, Any] = {
            "role": role,
            "content": _text_of(message.get("content"), where),
        }
        # a tool call and its result (iron.lm.serve.tools checks them)
        for key in ("tool_calls", "tool_call_id", "name"):
            if message.get(key) is not None:
                kept[key] = message[key]
        out.append(kept)
    return out


def _prompt(value: Any) -> str | list[int]:
    if (
        isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], (str, list))
    ):
        value = value[0]  # one prompt in a batch of one
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        return list(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, (str, list)) for v in value)
    ):
        raise _bad(
            "prompt",
            f"'prompt' holds {len(value)} prompts; this server answers one prompt "
            "per request: send them one by one",
        )
    raise _bad("prompt", f"'prompt' must be text or a list of token ids, got {value!r}")


def _logprobs(endpoint: str, body: Mapping[str, Any]) -> int | None:
    """How many alternatives a request lists per token; None: no logprobs."""
    if endpoint == "completions":
        return _int_field(body, "logprobs", 0, MAX_COMPLETION_TOP)
    asked = body.get("logprobs")
    if asked is not None and not isinstance(asked, bool):
        raise _bad(
            "logprobs",
            f"'logprobs' must be true or false, got {asked!r}; the number of "
            "alternatives is 'top_logprobs'",
        )
    top = _int_field(body, "top_logprobs", 0, MAX_CHAT_TOP)
    if not asked:
        if top:
            raise _bad(
                "top_logprobs",
                f"'top_logprobs' = {top} needs 'logprobs': true; send both",
            )
        return None
    return top or 0


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
        raise _bad(
            "stop",
            f"'stop' must be a non-empty string or a list of them, got {value!r}",
        )
    if len(items) > MAX_STOP:
        raise _bad("stop", f"'stop' holds {len(items)} strings; at most {MAX_STOP}")
    return tuple(items)


def parse_request(endpoint: str, body: Any, *, sampling: Sampling) -> Request:
    """Check a request body for ``endpoint`` (``"completions"`` or ``"chat"``).

    Raises:
        APIError: The first thing wrong with it, by field name (400).
    """
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object")
    read = _READ[endpoint]
    for name in body:
        if name in read:
            continue
        if name in _NEUTRAL:
            if _neutral(body[name], _NEUTRAL[name]):
                continue
            why = _WHY.get(name, "it is not supported")
            raise _bad(
                name,
                f"'{name}' = {body[name]!r} is not supported by this server ({why}); "
                "leave it out",
                "unsupported_parameter",
            )
        raise _bad(
            name,
            f"unknown field '{name}' for /v1/{'chat/' if endpoint == 'chat' else ''}"
            "completions; leave it out",
            "unknown_parameter",
        )
    # One model per server: any name asks for it (as llama-server answers),
    # and the response's 'model' says which it is.
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise _bad("model", f"'model' must be text, got {body['model']!r}")
    n = body.get("n")
    if n is not None and not (_is_int(n) and n == 1):
        raise _bad(
            "n", f"'n' = {n!r}: this server generates one choice (n=1) per request"
        )
    if endpoint == "chat":
        if "messages" not in body:
            raise _bad("messages", "'messages' is required")
        messages, prompt = _messages(body["messages"]), None
        max_tokens = _int_field(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = _int_field(body, "max_tokens", 1)
    else:
        if "prompt" not in body:
            raise _bad("prompt", "'prompt' is required")
        messages, prompt = None, _prompt(body["prompt"])
        max_tokens = _int_field(body, "max_tokens", 1)
        if max_tokens is None:
            max_tokens = 16  # OpenAI's default for completions
    temperature = _number_field(body, "temperature", 0.0, MAX_TEMPERATURE)
    top_p = _number_field(body, "top_p", 0.0, 1.0)
    if top_p == 0:
        raise _bad(
            "top_p",
            "'top_p' must be a number in (0, 1], got 0 (the probability mass a "
            "draw keeps; for the likeliest token alone send temperature 0)",
        )
    if temperature:
        low, high = TEMPERATURE_RANGE
        if not low <= temperature < high:
            raise _bad(
                "temperature",
                f"'temperature' = {temperature!r} is too small for the device's "
                f"sampler, which holds 0 (greedy) or [2**-63, {MAX_TEMPERATURE:g}]",
            )
    if top_p is not None and float32_of(top_p) == 0:
        raise _bad(
            "top_p",
            f"'top_p' = {top_p!r} is 0 as the device's float32; send at least 1e-38, "
            "or temperature 0 for the likeliest token alone",
        )
    top_k = _int_field(body, "top_k", 1, sampling.max_top_k)
    k = sampling.top_k if top_k is None else top_k
    seed = _int_field(body, "seed", 0, sampling.seed_limit)
    logprobs = _logprobs(endpoint, body)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("stream", f"'stream' must be true or false, got {stream!r}")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise _bad("stream_options", "'stream_options' is only for stream: true")
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise _bad(
                "stream_options",
                f"'stream_options' may hold only include_usage, got {options!r}",
            )
        include_usage = bool(options.get("include_usage"))
    speculate = _int_field(body, "speculate", 0, sampling.max_speculate)
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise _bad("user", f"'user' must be text, got {user!r}")
    if seed is None:  # OpenAI's default: a fresh draw each request
        seed = uuid.uuid4().int % (sampling.seed_limit + 1)
    return Request(
        endpoint=endpoint,
        prompt=prompt,
        messages=messages,
        max_tokens=max_tokens,
        seed=seed,
        temperature=sampling.temperature if temperature is None else temperature,
        top_k=sampling.max_top_k if k is None else k,
        top_p=sampling.top_p if top_p is None else top_p,
        stop=_stop(body.get("stop")),
        stream=bool(stream),
        include_usage=include_usage,
        logprobs=logprobs,
        user=user,
        speculate=sampling.speculate if speculate is None else speculate,
        penalties=_penalties(body, sampling.penalties),
    )


# -- responses -----------------------------------------------------------------


def new_id(endpoint: str) -> str:
    """A fresh response id (``cmpl-...`` or ``chatcmpl-...``)."""
    prefix = "chatcmpl" if endpoint == "chat" else "cmpl"
    return f"{prefix}-{uuid.uuid4().hex}"


def usage(
    prompt_tokens: int,
    completion_tokens: int,
    cached: int,
    drafted: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """OpenAI's usage object; ``cached`` prompt tokens came from the KV cache.

    ``drafted`` is (tokens drafted, tokens kept) of a request that
    speculated: OpenAI's ``completion_tokens_details`` then says how many
    drafted tokens were accepted and rejected (its fields for predicted
    tokens).
    """
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    if drafted is not None:
        made, kept = drafted
        out["completion_tokens_details"] = {
            "accepted_prediction_tokens": kept,
            "rejected_prediction_tokens": made - kept,
        }
    return out


def envelope(endpoint: str, rid: str, created: int, model: str, *, chunk: bool):
    """The fields every response object and chunk shares."""
    if endpoint == "chat":
        kind = "chat.completion.chunk" if chunk else "chat.completion"
    else:
        kind = "text_completion"
    return {"id": rid, "object": kind, "created": created, "model": model}


def choice(
    endpoint: str,
    text: str | None,
    finish: str | None,
    *,
    chunk: bool,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One choice: the text (or a chat delta/message), its tokens' log-
    probabilities when asked (:mod:`iron.lm.serve.logprobs`' shapes) and its
    finish reason."""
    out: dict[str, Any] = {"index": 0}
    if endpoint == "chat":
        if chunk:
            out["delta"] = {} if text is None else {"content": text}
        else:
            out["message"] = {"role": "assistant", "content": text or ""}
    else:
        out["text"] = text or ""
    out["logprobs"] = logprobs
    out["finish_reason"] = finish
    return out


def now() -> int:
    """The Unix time in seconds, for ``created``."""
    return int(time.time())
