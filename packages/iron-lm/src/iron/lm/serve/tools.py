"""Structured output and tool calls for ``/v1/chat/completions``.

OpenAI's ``response_format`` (``text``, ``json_object``, ``json_schema``)
and ``tools`` / ``tool_choice`` (``auto``, ``none``, ``required``, or a named
function), checked here (a 400 naming the field otherwise) and turned into
an :class:`iron.lm.constrain.Constraint` the generation is masked with:

- ``json_object``: any JSON object; ``json_schema``: JSON valid against
  its ``schema`` (``strict`` true or false: every answer is constrained).
- ``tools`` with ``tool_choice`` ``required``: one call of a listed
  function, as Llama 3.1/3.2 write them, ``{"name": ..., "parameters":
  {...}}`` (the parameters valid against that function's schema); a named
  function: a call of that one; ``auto`` (the default): free text or a
  call; ``none``: free text, unconstrained.

The tools reach the model through its own chat template's ``tools``
variable; a template that never reads ``tools`` gets them in a system
message in Llama 3.1's words instead. Assistant messages with
``tool_calls`` and ``tool`` messages (a function's result) go to the
template as they are, with the call's JSON as the content for templates
that do not read ``tool_calls``.

A reply that is a call comes back as ``tool_calls`` with ``finish_reason:
"tool_calls"``; streamed, a request with tools gets its reply in one delta
at the end (whether it is a call is known only then).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from iron.lm.constrain import (
    Constraint,
    ConstraintError,
    StructuredOutputUnavailableError,
)
from iron.lm.serve.protocol import APIError
from iron.lm.tokenizer import Tokenizer

__all__ = ["Structure", "parse_structure", "render_messages"]

_CHOICES = ("auto", "none", "required")
#: Llama 3.1's own words for tools offered in a user turn (its model card's
#: "JSON based tool calling" prompt), for templates that never read ``tools``.
_LLAMA_TOOLS_PROMPT = (
    "Given the following functions, please respond with a JSON for a function "
    "call with its proper arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary '
    "of argument name and its value}. Do not use variables.\n\n"
)


def _bad(param: str, message: str) -> APIError:
    return APIError(message, param=param, code="invalid_value")


@dataclasses.dataclass
class Structure:
    """What a request asks of the reply's form.

    Attributes:
        response_format: ``"text"``, ``"json_object"`` or ``"json_schema"``.
        schema: The ``json_schema``'s schema (else None).
        tools: The functions offered: ``{"name", "description",
            "parameters"}`` each.
        tool_choice: ``"auto"``, ``"none"``, ``"required"``, or a function's
            name.
    """

    response_format: str = "text"
    schema: dict[str, Any] | None = None
    tools: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tool_choice: str = "auto"
    _constraint: Constraint | None = None

    @property
    def calls_tools(self) -> bool:
        """Whether the reply may be a tool call."""
        return bool(self.tools) and self.tool_choice != "none"

    def constraint(self, tokenizer: Tokenizer, vocab_size: int) -> Constraint | None:
        """The constraint the reply is generated under (None: free text).

        Raises:
            APIError: The schema or a function's parameters are refused by
                the engine (400, naming the field); llguidance is not
                installed (501, naming the ``iron-lm[structured]`` extra).
        """
        try:
            if self.calls_tools:
                return self._tools_constraint(tokenizer, vocab_size)
            if self.response_format == "json_object":
                return Constraint.json_object(tokenizer, vocab_size=vocab_size)
            if self.response_format == "json_schema":
                assert self.schema is not None
                return Constraint.json_schema(
                    self.schema, tokenizer, vocab_size=vocab_size
                )
        except ConstraintError as e:
            field = "tools" if self.calls_tools else "response_format"
            raise _bad(field, f"'{field}': {e}") from None
        except StructuredOutputUnavailableError as e:  # the server's install
            raise APIError(
                f"this server cannot constrain its output: {e}",
                status=501,
                param="tools" if self.calls_tools else "response_format",
                code="structured_output_unavailable",
                kind="server_error",
            ) from None
        return None

    def _tools_constraint(self, tokenizer: Tokenizer, vocab_size: int) -> Constraint:
        chosen = [
            t
            for t in self.tools
            if self.tool_choice in ("auto", "required") or t["name"] == self.tool_choice
        ]
        call = {"anyOf": [_call_schema(t) for t in chosen]}
        if self.tool_choice != "auto":
            return Constraint.json_schema(call, tokenizer, vocab_size=vocab_size)
        # free text (not starting with "{") or a call: llguidance's Lark
        # with an embedded JSON schema (%json), its docs/syntax.md
        grammar = (
            "start: call | text\n"
            f"call: %json {json.dumps(call)}\n"
            "text: /[^{\\s][\\s\\S]*/\n"
        )
        return Constraint.lark(grammar, tokenizer, vocab_size=vocab_size)

    def tool_call(self, text: str) -> dict[str, Any] | None:
        """``text`` as a call of one of the tools (OpenAI's ``tool_calls``
        item), or None when it is not one."""
        if not self.calls_tools:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        names = {t["name"] for t in self.tools}
        if (
            not isinstance(value, dict)
            or value.get("name") not in names
            or not isinstance(value.get("parameters"), dict)
        ):
            return None
        return {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": value["name"],
                "arguments": json.dumps(value["parameters"]),
            },
        }


def _call_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """One function's call, as Llama 3.1/3.2 write it."""
    return {
        "type": "object",
        "properties": {
            "name": {"enum": [tool["name"]]},
            "parameters": tool["parameters"],
        },
        "required": ["name", "parameters"],
        "additionalProperties": False,
    }


def _object(value: Any, param: str, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _bad(param, f"'{where}' must be an object, got {value!r}")
    return value


def _response_format(value: Any) -> tuple[str, dict[str, Any] | None]:
    fmt = _object(value, "response_format", "response_format")
    kind = fmt.get("type")
    if kind in ("text", "json_object"):
        return kind, None
    if kind != "json_schema":
        raise _bad(
            "response_format",
            f"'response_format.type' must be text, json_object or json_schema, "
            f"got {kind!r}",
        )
    spec = _object(
        fmt.get("json_schema"), "response_format", "response_format.json_schema"
    )
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise _bad(
            "response_format",
            f"'response_format.json_schema.name' must be a non-empty string, got "
            f"{name!r}",
        )
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(
            "response_format",
            f"'response_format.json_schema.strict' must be true or false, got "
            f"{strict!r}",
        )
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise _bad(
            "response_format",
            f"'response_format.json_schema.schema' must be a JSON Schema object, "
            f"got {schema!r}",
        )
    return kind, schema


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad("tools", f"'tools' must be a list of tools, got {value!r}")
    out = []
    for i, tool in enumerate(value):
        where = f"tools[{i}]"
        tool = _object(tool, "tools", where)
        if tool.get("type") != "function":
            raise _bad(
                "tools", f"'{where}.type' must be 'function', got {tool.get('type')!r}"
            )
        function = _object(tool.get("function"), "tools", f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(
                "tools",
                f"'{where}.function.name' must be a non-empty string, got {name!r}",
            )
        parameters = function.get("parameters", {"type": "object"})
        if not isinstance(parameters, dict):
            raise _bad(
                "tools",
                f"'{where}.function.parameters' must be a JSON Schema object, got "
                f"{parameters!r}",
            )
        description = function.get("description", "")
        if not isinstance(description, str):
            raise _bad(
                "tools",
                f"'{where}.function.description' must be text, got {description!r}",
            )
        out.append({"name": name, "description": description, "parameters": parameters})
    names = [t["name"] for t in out]
    if len(set(names)) != len(names):
        raise _bad("tools", f"'tools' names a function twice: {names}")
    return out


def _tool_choice(value: Any, tools: Sequence[Mapping[str, Any]]) -> str:
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in _CHOICES:
            raise _bad(
                "tool_choice",
                f"'tool_choice' must be auto, none, required or "
                f'{{"type": "function", "function": {{"name": ...}}}}, got {value!r}',
            )
        choice = value
    else:
        spec = _object(value, "tool_choice", "tool_choice")
        function = spec.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if spec.get("type") != "function" or not isinstance(name, str):
            raise _bad(
                "tool_choice",
                f'\'tool_choice\' names a function as {{"type": "function", '
                f'"function": {{"name": ...}}}}, got {value!r}',
            )
        choice = name
    names = [t["name"] for t in tools]
    if choice not in ("auto", "none") and not tools:
        raise _bad("tool_choice", f"'tool_choice' = {value!r} needs 'tools'")
    if choice not in _CHOICES and choice not in names:
        raise _bad(
            "tool_choice",
            f"'tool_choice' names the function {choice!r}, which 'tools' does not "
            f"list (it lists {names})",
        )
    return choice


def parse_structure(body: Mapping[str, Any]) -> Structure | None:
    """The form a chat request asks of its reply (None: plain text).

    Raises:
        APIError: ``response_format``, ``tools`` or ``tool_choice`` is
            malformed (400, the field named).
    """
    if not any(body.get(f) is not None for f in ("response_format", "tools")):
        if body.get("tool_choice") not in (None, "none", "auto"):
            raise _bad("tool_choice", "'tool_choice' needs 'tools'")
        return None
    kind, schema = (
        ("text", None)
        if body.get("response_format") is None
        else _response_format(body["response_format"])
    )
    tools = _tools(body.get("tools"))
    choice = _tool_choice(body.get("tool_choice"), tools)
    ptc = body.get("parallel_tool_calls")
    if ptc is not None and not isinstance(ptc, bool):
        raise _bad("parallel_tool_calls", f"must be true or false, got {ptc!r}")
    if tools and choice != "none" and kind != "text":
        raise _bad(
            "response_format",
            "give either tools (a call) or a JSON response_format, not both "
            "(or send tool_choice: none)",
        )
    return Structure(
        response_format=kind, schema=schema, tools=tools, tool_choice=choice
    )


def check_tool_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """Refuse malformed ``tool_calls`` in assistant messages (400)."""
    for i, message in enumerate(messages):
        calls = message.get("tool_calls")
        if calls is None:
            continue
        if message.get("role") != "assistant" or not isinstance(calls, list):
            raise APIError(
                f"messages[{i}].tool_calls must be a list, on an assistant message",
                param="messages",
            )
        for j, call in enumerate(calls):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(
                function.get("name"), str
            ):
                raise APIError(
                    f"messages[{i}].tool_calls[{j}] needs function.name",
                    param="messages",
                )
            arguments = function.get("arguments", "{}")
            try:
                json.loads(arguments) if isinstance(arguments, str) else None
            except ValueError as e:
                raise APIError(
                    f"messages[{i}].tool_calls[{j}].function.arguments is not "
                    f"JSON: {e}",
                    param="messages",
                ) from None


def render_messages(
    messages: Sequence[Mapping[str, Any]],
    structure: Structure | None,
    chat_template: str | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The messages and template variables for the model's chat template.

    ``tools`` goes to the template as Llama 3.1's template reads it (each
    ``{"type": "function", "function": {...}}``). For a template that never
    reads ``tools``, a system message in Llama 3.1's words lists them
    instead; for one that never reads ``tool_calls``, an assistant call's
    content is the call's JSON as the model writes it.
    """
    template = chat_template or ""
    out: list[dict[str, Any]] = []
    for message in messages:
        message = dict(message)
        calls = message.get("tool_calls")
        if calls:
            message["tool_calls"] = [_template_call(c) for c in calls]
            if "tool_calls" not in template and not message.get("content"):
                message["content"] = "".join(
                    json.dumps(
                        {
                            "name": c["function"]["name"],
                            "parameters": c["function"]["arguments"],
                        }
                    )
                    for c in message["tool_calls"]
                )
        out.append(message)
    variables: dict[str, Any] = {}
    if structure is not None and structure.tools:
        listed = [{"type": "function", "function": t} for t in structure.tools]
        if "tools" in template:
            variables["tools"] = listed
        else:
            # compact JSON, one function a line: the prompt is the context's
            text = _LLAMA_TOOLS_PROMPT + "\n".join(json.dumps(t) for t in listed)
            out.insert(0, {"role": "system", "content": text})
    return out, variables


def _template_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call with its arguments as an object (templates
    ``tojson`` them; Llama 3.1's writes ``parameters``)."""
    function = dict(call["function"])
    arguments = function.get("arguments", "{}")
    function["arguments"] = (
        json.loads(arguments) if isinstance(arguments, str) else arguments
    )
    return {**call, "function": function}
