"""Structured output and tool calls: OpenAI's client against ``iron-lm serve``.

The tiny random model writes garbage, so every reply that parses and
validates does so because of the mask (iron.lm.constrain).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import httpx
import jsonschema
import openai
import pydantic
import pytest
from test_constrain import SCHEMAS
from test_serve import Server, serving

from iron.lm import tiny
from iron.lm.serve.protocol import APIError
from iron.lm.serve.tools import parse_structure, render_messages
from iron.lm.tokenizer import Tokenizer

#: The tools' prompts are long for the tiny tokenizer: a larger context.
CONTEXT = "256"

#: Short tools: the tiny tokenizer spends about a token a character, and the
#: tiny model's context is 256 positions.
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Oslo", "Lima"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "integer", "minimum": -9, "maximum": 9}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "Weather?"}]


#: A Llama 3.1-style chat template, short enough for the tiny model's
#: context: it reads ``tools``, writes an assistant's ``tool_calls`` as
#: ``{"name": ..., "parameters": ...}`` and a tool's result as an
#: ``ipython`` turn, as Llama 3.1's does.
TOOLS_TEMPLATE = (
    "{{ bos_token }}{% if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    "{% for t in tools %}{{ t.function.name }}: "
    "{{ t.function.parameters.properties | tojson }}\n{% endfor %}<|eot_id|>"
    "{% endif %}{% for m in messages %}{% if m.role == 'tool' %}"
    "<|start_header_id|>ipython<|end_header_id|>\n\n{{ m.content }}<|eot_id|>"
    "{% elif m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    '{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", '
    '"parameters": {{ c.function.arguments | tojson }}}{% endfor %}<|eot_id|>'
    "{% else %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content | trim }}<|eot_id|>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>"
    "\n\n{% endif %}"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """The tiny model, its chat template one that reads ``tools``."""
    directory = tiny.write_checkpoint(tmp_path_factory.mktemp("tools"))
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = TOOLS_TEMPLATE
    config_path.write_text(json.dumps(config))
    with serving("--context", CONTEXT, "--checkpoint", str(directory)) as s:
        yield s


def _schema_format(schema, strict=True):
    return {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": strict},
    }


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (1.0, 5)])
def test_json_schema_replies_validate(server, schema, temperature, seed):
    answer = server.client().chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Reply in JSON."}],
        response_format=_schema_format(schema),
        temperature=temperature,
        seed=seed,
        max_tokens=60,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), schema)


def test_json_object_and_a_streamed_schema(server):
    client = server.client()
    answer = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_object"},
        max_tokens=60,
        temperature=1.0,
        seed=2,
    )
    if answer.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(answer.choices[0].message.content), dict)
    else:  # cut: never complete JSON
        assert answer.choices[0].finish_reason == "length"
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "JSON please"}],
            response_format=_schema_format(SCHEMAS[1], strict=False),
            max_tokens=60,
            stream=True,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(text), SCHEMAS[1])


class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog"]
    legs: int = pydantic.Field(ge=0, le=8)
    nick: str | None = pydantic.Field(default=None, max_length=5)


def test_the_clients_parse_with_a_pydantic_model(server):
    client = server.client()
    completions = getattr(client.chat.completions, "parse", None)
    parse = completions or client.beta.chat.completions.parse
    answer = parse(
        model="tiny",
        messages=[{"role": "user", "content": "A pet"}],
        response_format=Pet,
        max_tokens=60,
    )
    pet = answer.choices[0].message.parsed
    assert isinstance(pet, Pet)
    Pet.model_validate_json(answer.choices[0].message.content)


def _call_args(call, tool):
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, tool["function"]["parameters"])
    return args


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "choice,name",
    [
        ("required", None),
        ({"type": "function", "function": {"name": "time"}}, "time"),
    ],
)
def test_a_required_or_named_tool_call(server, stream, choice, name):
    kwargs = dict(
        model="tiny",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice=choice,
        max_tokens=60,
        temperature=1.0,
        seed=3,
    )
    client = server.client()
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kwargs))
        calls = [
            call
            for c in chunks
            if c.choices
            for call in (c.choices[0].delta.tool_calls or [])
        ]
        finish = chunks[-1].choices[0].finish_reason
        assert calls[0].index == 0 and calls[0].id.startswith("call_")
    else:
        answer = client.chat.completions.create(**kwargs)
        message = answer.choices[0].message
        calls, finish = message.tool_calls, answer.choices[0].finish_reason
        assert message.content is None
    assert finish == "tool_calls"
    assert len(calls) == 1 and calls[0].type == "function"
    tool = {"weather": WEATHER, "time": TIME}[calls[0].function.name]
    if name is not None:
        assert calls[0].function.name == name
    _call_args(calls[0], tool)


def test_tool_choice_auto_is_text_or_a_valid_call(server):
    for seed in range(4):
        answer = server.client().chat.completions.create(
            model="tiny",
            messages=ASK,
            tools=[WEATHER, TIME],
            max_tokens=60,
            temperature=1.0,
            seed=seed,
        )
        choice = answer.choices[0]
        if choice.finish_reason == "tool_calls":
            call = choice.message.tool_calls[0]
            _call_args(call, {"weather": WEATHER, "time": TIME}[call.function.name])
        else:
            assert choice.message.tool_calls is None
            assert not (choice.message.content or "").startswith("{")


def test_tool_choice_none_is_plain_text(server):
    answer = server.client().chat.completions.create(
        model="tiny", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=8
    )
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert answer.choices[0].message.tool_calls is None


def test_a_tool_result_continues_the_chat(server):
    client = server.client()
    first = client.chat.completions.create(
        model="tiny",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=60,
    )
    call = first.choices[0].message.tool_calls[0]
    messages = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call.model_dump()],
        },
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'},
    ]
    answer = client.chat.completions.create(
        model="tiny",
        messages=messages,
        tools=[WEATHER],
        tool_choice="none",
        max_tokens=4,
    )
    # the result went through the template: a longer prompt than the first
    assert answer.usage.prompt_tokens > first.usage.prompt_tokens


def test_the_tools_reach_the_template(server):
    plain = server.client().chat.completions.create(
        model="tiny", messages=ASK, max_tokens=1
    )
    offered = server.client().chat.completions.create(
        model="tiny", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=1
    )
    # "weather: {...}" and the system turn's header
    assert offered.usage.prompt_tokens > plain.usage.prompt_tokens + 20


def test_a_template_without_tools_gets_them_in_a_system_message():
    tokenizer = Tokenizer.from_directory(tiny.tokenizer_dir())
    assert "tools" not in tokenizer.chat_template
    structure = parse_structure({"tools": [WEATHER, TIME]})
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }
    messages = [*ASK, {"role": "assistant", "content": "", "tool_calls": [call]}]
    rendered, variables = render_messages(messages, structure, tokenizer.chat_template)
    assert variables == {}
    system = rendered[0]
    assert (
        system["role"] == "system"
        and "Given the following functions" in system["content"]
    )
    assert '"name": "weather"' in system["content"]
    assert json.dumps(WEATHER["function"]["parameters"]) in system["content"]
    # the call as the model writes it, for a template that shows only content
    assert json.loads(rendered[-1]["content"]) == {
        "name": "weather",
        "parameters": {"city": "Oslo"},
    }
    text = tokenizer.apply_chat_template(rendered, **variables)
    assert '"name": "weather"' in text


def test_running_out_of_tokens_is_length(server):
    answer = server.client().chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "count"}],
        response_format=_schema_format(
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            }
        ),
        max_tokens=5,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(choice.message.content)


@pytest.mark.parametrize(
    "extra,param,words",
    [
        (
            {"response_format": _schema_format({"type": "nonsense"})},
            "response_format",
            "nonsense",
        ),
        ({"response_format": {"type": "xml"}}, "response_format", "json_schema"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
            "response_format",
            "name",
        ),
        ({"tools": [{"type": "function"}]}, "tools", "function"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice", "sometimes"),
        (
            {
                "tools": [WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
            "tool_choice",
            "nope",
        ),
        ({"tool_choice": "required"}, "tool_choice", "tools"),
    ],
)
def test_bad_structure_is_a_400_naming_it(server, extra, param, words):
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "tiny", "messages": ASK, "max_tokens": 4, **extra},
        timeout=60,
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert words in error["message"]


def test_the_client_raises_bad_request_for_a_bad_schema(server):
    with pytest.raises(openai.BadRequestError, match="nonsense"):
        server.client().chat.completions.create(
            model="tiny",
            messages=ASK,
            response_format=_schema_format({"type": "nonsense"}),
        )


def test_a_malformed_tool_call_message_is_a_400(server):
    call = {"id": "c1", "type": "function", "function": {"name": "weather"}}
    bad = {**call, "function": {"name": "weather", "arguments": "{oops"}}
    for message, words in (
        ({"role": "assistant", "content": None, "tool_calls": [bad]}, "not JSON"),
        ({"role": "user", "content": "x", "tool_calls": [call]}, "assistant"),
        ({"role": "assistant", "tool_calls": [{"id": "c2"}]}, "function.name"),
    ):
        response = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"model": "tiny", "messages": [*ASK, message], "max_tokens": 2},
            timeout=60,
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == "messages"
        assert words in response.json()["error"]["message"]


def _walk(constraint, tokenizer, text):
    """Whether the grammar allows ``text`` token by token, and ends complete."""
    matcher = constraint.matcher()
    for token in tokenizer.encode(text, add_bos=False):
        if not matcher.allowed()[token]:
            return False
        matcher.consume(token)
    return matcher.accepting


def test_tool_choice_auto_allows_text_or_a_call_and_nothing_else():
    """The tiny model seldom starts with "{": the grammar itself is checked."""
    tokenizer = Tokenizer.from_directory(tiny.tokenizer_dir())
    auto = parse_structure({"tools": [WEATHER, TIME]})
    constraint = auto.constraint(tokenizer, 512)
    assert _walk(constraint, tokenizer, "It is sunny.")
    assert _walk(
        constraint, tokenizer, '{"name":"weather","parameters":{"city":"Oslo"}}'
    )
    assert _walk(constraint, tokenizer, '{"name":"time","parameters":{"zone":-3}}')
    assert not _walk(constraint, tokenizer, '{"name":"nope","parameters":{}}')
    assert not _walk(constraint, tokenizer, '{"name":"time","parameters":{"zone":99}}')
    assert not _walk(constraint, tokenizer, " leading blank")
    required = parse_structure({"tools": [WEATHER], "tool_choice": "required"})
    assert not _walk(required.constraint(tokenizer, 512), tokenizer, "It is sunny.")


def test_a_server_without_llguidance_says_which_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "llguidance", None)
    tokenizer = Tokenizer.from_directory(tiny.tokenizer_dir())
    structure = parse_structure({"response_format": {"type": "json_object"}})
    with pytest.raises(APIError, match=r"iron-lm\[structured\]") as info:
        structure.constraint(tokenizer, 512)
    assert info.value.status == 501 and info.value.param == "response_format"
