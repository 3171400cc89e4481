"""Constrained decoding (iron.lm.constrain) through Decoder.generate.

The tiny model's random weights write garbage: what it writes under a
constraint is valid only because the mask made it so.
"""

from __future__ import annotations

import json
import re
import sys

import jsonschema
import pytest

from iron.lm.constrain import (
    Constraint,
    ConstraintError,
    StructuredOutputUnavailableError,
)

#: Schemas with nesting, enums, arrays and optional fields; each bounded so
#: the tiny model's answer fits in its small context.
SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 6},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "tags": {
                "type": "array",
                "items": {"enum": ["a", "b", "c"]},
                "minItems": 1,
                "maxItems": 3,
            },
        },
        "required": ["color", "tags"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "point": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "minimum": -9, "maximum": 9},
                    "y": {"type": "integer", "minimum": -9, "maximum": 9},
                },
                "required": ["x", "y"],
                "additionalProperties": False,
            },
            "label": {"type": "string", "maxLength": 4},  # optional
            "ok": {"type": "boolean"},
        },
        "required": ["point", "ok"],
        "additionalProperties": False,
    },
    {
        "type": "array",
        "items": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        "maxItems": 4,
    },
]

#: (temperature, seed): greedy, and sampled with top-k and top-p after the mask
DRAWS = [(0.0, 0), (1.0, 1), (1.5, 7)]


@pytest.fixture(scope="module")
def decoder(decoders):
    return decoders("tied")


def _text(decoder, schema, temperature, seed, max_new_tokens=50):
    tokenizer = decoder.tokenizer
    ids = tokenizer.encode("Answer in JSON:")
    tokens = list(
        decoder.generate(
            ids,
            max_new_tokens=max_new_tokens,
            json_schema=schema,
            temperature=temperature,
            seed=seed,
            top_p=0.9,
        )
    )
    return tokens, tokenizer


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@pytest.mark.parametrize("temperature,seed", DRAWS)
def test_every_answer_is_valid_against_its_schema(decoder, schema, temperature, seed):
    tokens, tokenizer = _text(decoder, schema, temperature, seed)
    assert tokens[-1] in tokenizer.eos_ids, "the bounded schema completes"
    value = json.loads(tokenizer.decode(tokens[:-1]))
    jsonschema.validate(value, schema)


def test_unconstrained_text_is_not_json(decoder):
    """Without the mask the tiny model's text is garbage: the mask is the test."""
    ids = decoder.tokenizer.encode("Answer in JSON:")
    text = decoder.tokenizer.decode(list(decoder.generate(ids, max_new_tokens=20)))
    with pytest.raises(ValueError):
        json.loads(text)


def test_a_constrained_generation_loops_from_the_host_an_unconstrained_on_the_device(
    decoder,
):
    ids = decoder.tokenizer.encode("x")
    list(decoder.generate(ids, max_new_tokens=3))
    assert decoder.stats.loop == "device"
    list(decoder.generate(ids, max_new_tokens=3, json_schema={"type": "object"}))
    assert decoder.stats.loop == "host"


def test_regex_and_lark_grammars(decoder):
    ids = decoder.tokenizer.encode("x")
    for seed in range(3):
        tokens = list(
            decoder.generate(
                ids,
                max_new_tokens=20,
                regex=r"[0-9]{3}-[a-z]{1,4}",
                temperature=1.0,
                seed=seed,
            )
        )
        assert tokens[-1] in decoder.tokenizer.eos_ids
        assert re.fullmatch(
            r"[0-9]{3}-[a-z]{1,4}", decoder.tokenizer.decode(tokens[:-1])
        )
    grammar = 'start: answer " " answer\nanswer: "yes" | "no" | "maybe"\n'
    tokens = list(decoder.generate(ids, max_new_tokens=20, grammar=grammar))
    assert decoder.tokenizer.decode(tokens[:-1]) in {
        f"{a} {b}" for a in ("yes", "no", "maybe") for b in ("yes", "no", "maybe")
    }


def test_running_out_of_tokens_is_length_never_json_claimed_complete(decoder):
    # an unbounded integer: the tiny model repeats digits past max_tokens
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    stream_tokens, tokenizer = _text(decoder, schema, 0.0, 0, max_new_tokens=6)
    assert len(stream_tokens) == 6
    assert stream_tokens[-1] not in tokenizer.eos_ids
    with pytest.raises(ValueError):
        json.loads(tokenizer.decode(stream_tokens))


def test_the_text_stream_says_length_when_the_json_is_cut(decoder):
    from iron.lm.text import TextStream

    schema = {"type": "array", "items": {"type": "integer"}}
    tokenizer = decoder.tokenizer
    tokens = decoder.generate(
        tokenizer.encode("x"), max_new_tokens=5, json_schema=schema
    )
    stream = TextStream(tokens, tokenizer, eos_ids=set(tokenizer.eos_ids))
    text = stream.read()
    assert stream.finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(text)


@pytest.mark.parametrize(
    "kind,bad,words",
    [
        ("json_schema", {"type": "nonsense"}, "nonsense"),
        ("json_schema", "{not json", "not JSON"),
        ("json_schema", [1, 2], "object"),
        ("regex", "([a-z", "regex"),
        ("grammar", "start: missing_rule\n", "missing_rule"),
    ],
)
def test_a_bad_schema_or_grammar_is_a_value_error_naming_it(decoder, kind, bad, words):
    ids = decoder.tokenizer.encode("x")
    with pytest.raises(ConstraintError, match=re.escape(words)) as info:
        decoder.generate(ids, max_new_tokens=2, **{kind: bad})
    assert isinstance(info.value, ValueError)


def test_at_most_one_constraint_and_not_with_the_device_loop_or_speculate(decoder):
    ids = decoder.tokenizer.encode("x")
    with pytest.raises(ValueError, match="at most one"):
        decoder.generate(ids, json_schema={"type": "object"}, regex="a")
    with pytest.raises(ValueError, match="device_loop"):
        decoder.generate(ids, json_schema={"type": "object"}, device_loop=True)
    with pytest.raises(ValueError, match="speculate"):
        decoder.generate(ids, json_schema={"type": "object"}, speculate=2)


def test_a_constraint_is_reusable_and_the_draws_are_seeded(decoder):
    tokenizer = decoder.tokenizer
    constraint = Constraint.json_schema(SCHEMAS[1], tokenizer)
    ids = tokenizer.encode("x")

    def run(seed):
        return list(
            decoder.generate(
                ids,
                max_new_tokens=30,
                constraint=constraint,
                temperature=1.0,
                seed=seed,
            )
        )

    assert run(3) == run(3)
    answers = {tuple(run(seed)) for seed in range(6)}
    assert len(answers) > 1  # sampled, not one forced answer


def test_missing_llguidance_names_the_extra(decoder, monkeypatch):
    monkeypatch.setitem(sys.modules, "llguidance", None)
    with pytest.raises(
        StructuredOutputUnavailableError, match=r"iron-lm\[structured\]"
    ) as info:
        Constraint.regex("a", decoder.tokenizer)
    assert isinstance(info.value, ImportError)
