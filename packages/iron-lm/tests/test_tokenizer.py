"""Tokenizer: encode/decode, bos handling, streaming decode, chat templates."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iron.lm import tiny
from iron.lm.config import LlamaConfig
from iron.lm.tokenizer import (
    ChatTemplateError,
    Detokenizer,
    Tokenizer,
    TokenizerError,
    TokenizerNotFoundError,
)

TEXTS = [
    "Hello, world!",
    "The café on the corner serves crème brûlée.",
    "日本語のテキスト and 한국어, русский, Ελληνικά.",
    "emoji 🙂🚀 in a row, then 👩‍👩‍👧 a family",
    "  leading spaces,\ttabs,\nnew lines\n\n",
    "",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_directory(tiny.tokenizer_dir())


def copy_tiny(tmp_path, **config_changes):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tiny.tokenizer_dir() / name, tmp_path / name)
    if config_changes:
        path = tmp_path / "tokenizer_config.json"
        config = json.loads(path.read_text())
        config.update(config_changes)
        path.write_text(json.dumps(config))
    return tmp_path


def test_tiny_matches_the_tiny_config(tok) -> None:
    config = LlamaConfig.tiny()
    assert tok.vocab_size == config.vocab_size == 512
    assert tok.bos_id == config.bos_token_id
    assert tok.bos_token == "<|begin_of_text|>"
    assert tok.eos_ids == (tok.token_to_id("<|eot_id|>"),)  # no config.json here
    assert set(tok.eos_ids) <= set(config.eos_token_ids)
    assert tok.id_to_token(tok.bos_id) == "<|begin_of_text|>"


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok, text) -> None:
    ids = tok.encode(text)
    assert ids[0] == tok.bos_id and ids.count(tok.bos_id) == 1
    assert tok.decode(ids, skip_special_tokens=True) == text
    plain = tok.encode(text, add_bos=False)
    assert plain == ids[1:]
    assert tok.decode(plain) == text
    assert all(0 <= i < tok.vocab_size for i in ids)


def test_special_tokens_in_text_are_single_ids(tok) -> None:
    ids = tok.encode("<|start_header_id|>user<|end_header_id|>", add_bos=False)
    assert ids[0] == tok.token_to_id("<|start_header_id|>")
    assert ids[-1] == tok.token_to_id("<|end_header_id|>")
    assert tok.decode(ids) == "<|start_header_id|>user<|end_header_id|>"
    assert tok.decode(ids, skip_special_tokens=True) == "user"


def test_text_starting_with_bos_keeps_one(tok) -> None:
    ids = tok.encode("<|begin_of_text|>Hi")
    assert ids[:2] != [tok.bos_id, tok.bos_id] and ids[0] == tok.bos_id
    assert tok.encode("<|begin_of_text|>Hi", add_bos=False)[0] == tok.bos_id


@pytest.mark.parametrize("add_bos_token", [True, False, None])
def test_add_bos_token_when_the_post_processor_does_not(
    tmp_path, add_bos_token
) -> None:
    root = copy_tiny(tmp_path, add_bos_token=add_bos_token)
    data = json.loads((root / "tokenizer.json").read_text())
    data["post_processor"] = None
    (root / "tokenizer.json").write_text(json.dumps(data))
    tok = Tokenizer.from_directory(root)
    assert (tok.encode("Hi")[0] == tok.bos_id) is bool(add_bos_token)
    assert tok.encode("Hi", add_bos=False)[0] != tok.bos_id


def test_eos_ids_gather_config_and_generation_config(tmp_path) -> None:
    root = copy_tiny(tmp_path)
    (root / "config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    (root / "generation_config.json").write_text(json.dumps({"eos_token_id": 7}))
    tok = Tokenizer.from_directory(root)
    assert tok.eos_ids == (2, 1, 7)


def test_added_token_objects_and_bos_from_config(tmp_path) -> None:
    root = copy_tiny(
        tmp_path,
        bos_token=None,
        eos_token={"content": "<|end_of_text|>", "__type": "AddedToken"},
    )
    (root / "config.json").write_text(json.dumps({"bos_token_id": 0}))
    tok = Tokenizer.from_directory(root)
    assert tok.bos_token == "<|begin_of_text|>"
    assert tok.eos_ids[0] == 1


def test_unknown_special_token_is_named(tmp_path) -> None:
    root = copy_tiny(tmp_path, eos_token="</s>")
    with pytest.raises(TokenizerError, match="</s>"):
        Tokenizer.from_directory(root)


def test_missing_files(tmp_path) -> None:
    with pytest.raises(TokenizerNotFoundError, match="does not exist"):
        Tokenizer.from_directory(tmp_path / "nope")
    with pytest.raises(TokenizerNotFoundError, match="tokenizer.json") as info:
        Tokenizer.from_directory(tmp_path)
    assert isinstance(info.value, FileNotFoundError)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        Tokenizer.from_directory(tmp_path)


def test_only_tokenizer_json_is_required(tmp_path) -> None:
    shutil.copyfile(
        tiny.tokenizer_dir() / "tokenizer.json", tmp_path / "tokenizer.json"
    )
    tok = Tokenizer.from_directory(tmp_path)
    assert tok.chat_template is None and tok.bos_id is None
    assert tok.decode(tok.encode("plain text")) == "<|begin_of_text|>plain text"


# -- streaming -------------------------------------------------------------------


def stream(tok: Tokenizer, ids: list[int], **kw) -> list[str]:
    d = tok.detokenizer(**kw)
    pieces = [d.push(i) for i in ids]
    pieces.append(d.flush())
    return pieces


@pytest.mark.parametrize("text", TEXTS)
def test_streaming_equals_full_decode(tok, text) -> None:
    ids = tok.encode(text)
    pieces = stream(tok, ids)
    assert "".join(pieces) == tok.decode(ids)
    assert not any("\ufffd" in p for p in pieces)
    skip = stream(tok, ids, skip_special_tokens=True)
    assert "".join(skip) == text


def test_streaming_holds_back_a_split_character(tok) -> None:
    ids = tok.encode("🚀", add_bos=False)
    assert len(ids) > 1  # the tiny vocabulary splits it into byte tokens
    d = Detokenizer(tok)
    assert [d.push(i) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert d.push(ids[-1]) == "🚀"
    assert d.flush() == ""


def test_flush_emits_an_unfinished_character(tok) -> None:
    ids = tok.encode("🚀", add_bos=False)
    d = tok.detokenizer()
    assert d.extend(ids[:1]) == ""
    assert d.flush() == tok.decode(ids[:1])


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_streaming_property_on_any_text(text) -> None:
    tok = Tokenizer.from_directory(tiny.tokenizer_dir())
    ids = tok.encode(text)
    assert "".join(stream(tok, ids)) == tok.decode(ids)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 511), max_size=30))
def test_streaming_property_on_any_ids(ids) -> None:
    """Even ids that are not valid UTF-8 stream to the full decode."""
    tok = Tokenizer.from_directory(tiny.tokenizer_dir())
    assert "".join(stream(tok, ids)) == tok.decode(ids)


# -- chat templates ------------------------------------------------------------------

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "  Hi there!  "},
]


def test_tiny_chat_template(tok) -> None:
    text = tok.apply_chat_template(MESSAGES)
    assert text == (
        "<|begin_of_text|>"
        "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    no_prompt = tok.apply_chat_template(MESSAGES, add_generation_prompt=False)
    assert no_prompt.endswith("Hi there!<|eot_id|>")
    ids = tok.encode(text)
    assert ids.count(tok.bos_id) == 1
    header = tok.token_to_id("<|start_header_id|>")
    assert ids.count(header) == 3
    assert tok.decode(ids) == text


def test_no_chat_template(tmp_path) -> None:
    shutil.copyfile(
        tiny.tokenizer_dir() / "tokenizer.json", tmp_path / "tokenizer.json"
    )
    with pytest.raises(ChatTemplateError, match="no chat template"):
        Tokenizer.from_directory(tmp_path).apply_chat_template(MESSAGES)


# The features Llama 3.1/3.2 instruct templates use: a date from strftime_now,
# tojson, loop controls, raise_exception, and whitespace control.
LLAMA3_LIKE = """
{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Today Date: " + date_string + "\\n" }}
{%- if tools is not none %}{{- tools | tojson(indent=None) }}{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role not in ['user', 'assistant'] %}
        {{- raise_exception("Unknown role: " + message.role) }}
    {%- endif %}
    {%- if message.content == 'skip me' %}{% continue %}{% endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""


def test_llama3_style_template(tmp_path) -> None:
    tok = Tokenizer.from_directory(copy_tiny(tmp_path, chat_template=LLAMA3_LIKE))
    messages = [*MESSAGES, {"role": "user", "content": "skip me"}]
    text = tok.apply_chat_template(
        messages, date_string="26 Jul 2024", tools=[{"name": "météo"}]
    )
    assert text == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        'Today Date: 26 Jul 2024\n[{"name": "météo"}]You are terse.<|eot_id|>'
        "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    dated = tok.apply_chat_template(MESSAGES)
    assert "Today Date: " in dated and "[{" not in dated
    with pytest.raises(ChatTemplateError, match="Unknown role: tool"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])


def test_named_templates_take_default(tmp_path) -> None:
    templates = [
        {"name": "tool_use", "template": "TOOLS"},
        {"name": "default", "template": "{{ messages[0].content }}!"},
    ]
    tok = Tokenizer.from_directory(copy_tiny(tmp_path, chat_template=templates))
    assert tok.apply_chat_template([{"role": "user", "content": "hey"}]) == "hey!"
    root = copy_tiny(tmp_path, chat_template=templates[:1])
    with pytest.raises(TokenizerError, match="default"):
        Tokenizer.from_directory(root)


def test_chat_template_jinja_file_wins(tmp_path) -> None:
    root = copy_tiny(tmp_path)
    (root / "chat_template.jinja").write_text("{% generation %}G{% endgeneration %}")
    assert Tokenizer.from_directory(root).apply_chat_template(MESSAGES) == "G"


def test_template_is_sandboxed(tmp_path) -> None:
    tok = Tokenizer.from_directory(
        copy_tiny(tmp_path, chat_template="{{ messages.append(1) }}")
    )
    with pytest.raises(ChatTemplateError):
        tok.apply_chat_template(MESSAGES)
    tok.chat_template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ChatTemplateError):
        tok.apply_chat_template(MESSAGES)
    tok.chat_template = "{% if %}"
    with pytest.raises(ChatTemplateError, match="does not parse"):
        tok.apply_chat_template(MESSAGES)


@pytest.mark.parametrize("text", TEXTS)
def test_token_bytes_join_to_the_texts_bytes(tok, text) -> None:
    ids = tok.encode(text, add_bos=False)
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode("utf-8")
    assert tok.token_bytes(tok.bos_id) == b"<|begin_of_text|>"  # special: its name
    with pytest.raises(ValueError, match="token id 512 is outside"):
        tok.token_bytes(512)


def test_token_bytes_of_sentencepiece_byte_fallback() -> None:
    import tokenizers
    from tokenizers import decoders, models

    vocab = {"<unk>": 0, "<0xE2>": 1, "<0x9C>": 2, "<0x93>": 3, "\u2581a": 4}
    inner = tokenizers.Tokenizer(
        models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True)
    )
    inner.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    sp = Tokenizer(inner)
    assert [sp.token_bytes(i) for i in (1, 2, 3)] == [b"\xe2", b"\x9c", b"\x93"]
    assert sp.decode([1, 2, 3]) == "\u2713" and sp.decode([1]) == "\ufffd"
    assert sp.token_bytes(4) == b" a"  # no byte-level table: its decoded text


@pytest.mark.parametrize(
    "template",
    [
        # time: loops that print nothing, loops that print
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}"
        "{% endfor %}",
        "{% for i in range(99999) %}{% for j in range(99999) %}.{% endfor %}"
        "{% endfor %}",
        # size: one huge value, a doubling string, a big power
        "{{ 'x' * 10**9 }}",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
        "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
        "{{ 2 ** 99999999 }}",
        "{{ 'x'.ljust(10**9) }}",
        "{% for i in range(2000) %}{{ 'y' * 1000 }}{% endfor %}",
    ],
    ids=["silent-loop", "printing-loop", "repeat", "doubling", "power", "pad", "big"],
)
def test_a_hostile_template_is_stopped_within_its_bounds(tmp_path, template) -> None:
    import time

    from iron.lm.tokenizer import TEMPLATE_SECONDS

    tok = Tokenizer.from_directory(copy_tiny(tmp_path, chat_template=template))
    start = time.monotonic()
    with pytest.raises(ChatTemplateError) as caught:
        tok.apply_chat_template(MESSAGES)
    assert time.monotonic() - start < TEMPLATE_SECONDS + 1.0
    assert "stopped" in str(caught.value) or "too large" in str(caught.value)


def test_a_bounded_template_still_renders_ranges(tmp_path) -> None:
    template = (
        "{% for i in range(3)|reverse %}{{ i }}{% endfor %}{{ range(4)|length }}"
        "{{ range(10)[2] }}{{ 'ab' * 2 }}"
    )
    tok = Tokenizer.from_directory(copy_tiny(tmp_path, chat_template=template))
    assert tok.apply_chat_template(MESSAGES) == "21042abab"
