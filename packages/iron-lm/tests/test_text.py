"""Text-level generation: TextStream's stops, and the Decoder's text calls.

``TextStream`` is checked on ids the tiny tokenizer makes from known text
(no device), including a property test: for any text and stop strings, the
pieces join to the text up to the first stop, and never show more. The
Decoder's ``complete``/``stream``/``chat`` are checked against ``generate``
and the tokenizer, and their docstring examples run here.
"""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import iron.lm
from iron.lm import tiny
from iron.lm.generate import Decoder
from iron.lm.text import TextStream, stop_strings
from iron.lm.tokenizer import Tokenizer

TOKENIZER = Tokenizer.from_directory(tiny.tokenizer_dir())
EOS = TOKENIZER.eos_ids[0]


def ids_of(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_bos=False)


class Ids:
    """Token ids that record how many were taken and whether they were closed."""

    def __init__(self, ids: list[int]) -> None:
        self._ids = iter(ids)
        self.taken = 0
        self.closed = False

    def __iter__(self):
        return self

    def __next__(self) -> int:
        token = next(self._ids)
        self.taken += 1
        return token

    def close(self) -> None:
        self.closed = True


# -- TextStream ------------------------------------------------------------------


def test_a_stop_string_across_tokens_ends_the_text_before_it():
    text = "hello world, the NPU runs"
    ids = ids_of(text)
    # "o w" spans the tokens 'o' and ' wor'
    assert [TOKENIZER.decode([i]) for i in ids[:4]] == ["he", "ll", "o", " wor"]
    tokens = Ids(ids)
    stream = TextStream(tokens, TOKENIZER, stop="o w")
    pieces = list(stream)
    assert "".join(pieces) == "hell"
    assert stream.text == "hell"
    assert stream.finish_reason == "stop"
    # stopped at the token that completed the match, and closed the ids
    assert tokens.taken == 4 and tokens.closed
    assert stream.token_ids == ids[:4]


def test_text_that_only_began_a_stop_string_is_released():
    text = "hello world"
    stream = TextStream(iter(ids_of(text)), TOKENIZER, stop=["o wx", "zz"])
    assert stream.read() == text
    assert stream.finish_reason == "length"


def test_an_eos_id_stops_and_is_not_shown():
    ids = [*ids_of("hello"), EOS, *ids_of(" world")]
    tokens = Ids(ids)
    stream = TextStream(tokens, TOKENIZER, eos_ids=[EOS])
    assert stream.read() == "hello"
    assert stream.finish_reason == "stop"
    assert stream.token_ids == ids[: ids.index(EOS) + 1]
    assert tokens.taken == len(stream.token_ids)


def test_a_multibyte_character_is_never_split():
    text = "héllo wörld ✓ done"
    pieces = list(TextStream(iter(ids_of(text)), TOKENIZER))
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def test_close_stops_the_ids():
    tokens = Ids(ids_of("hello world, the NPU runs"))
    stream = TextStream(tokens, TOKENIZER)
    first = next(stream)
    stream.close()
    assert first and tokens.closed
    assert list(stream) == []


@pytest.mark.parametrize(
    ("stop", "error"),
    [("", ValueError), ([""], ValueError), ([3], TypeError), (b"x", TypeError)],
)
def test_bad_stop_strings_are_refused(stop, error):
    with pytest.raises(error, match="stop string"):
        stop_strings(stop)


ALPHABET = "ab ,é✓"


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=ALPHABET, min_size=1, max_size=30),
    stops=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), max_size=3),
)
def test_pieces_are_the_text_up_to_the_stop_that_ends_first(text, stops):
    ids = ids_of(text)
    full = TOKENIZER.decode(ids)
    # the stop seen first is the one that ends first
    found = [(i + len(s), i) for s in stops if (i := full.find(s)) >= 0]
    expected = full[: min(found)[1]] if found else full
    stream = TextStream(iter(ids), TOKENIZER, stop=stops)
    shown = ""
    for piece in stream:
        assert piece
        shown += piece
        assert expected.startswith(shown)  # never past a stop
    assert shown == expected
    assert stream.finish_reason == ("stop" if found else "length")


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=ALPHABET, min_size=1, max_size=30),
    stops=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=4), max_size=3),
    eos_at=st.one_of(st.none(), st.integers(0, 30)),
)
def test_pushing_ids_shows_what_iterating_them_shows(text, stops, eos_at):
    """The push form (the server's event loop) and iteration are one text."""
    ids = ids_of(text)
    if eos_at is not None:
        ids.insert(min(eos_at, len(ids)), EOS)
    pulled = TextStream(iter(ids), TOKENIZER, stop=stops, eos_ids=[EOS])
    pieces = list(pulled)
    pushed = TextStream((), TOKENIZER, stop=stops, eos_ids=[EOS])
    shown = [pushed.push(i) for i in ids]
    shown.append(pushed.finish())
    assert "".join(shown) == "".join(pieces) == pushed.text == pulled.text
    assert pushed.finish_reason == pulled.finish_reason
    assert pushed.token_ids == pulled.token_ids  # ids past the end not taken
    assert pushed.push(ids[0]) == "" and pushed.finish() == ""  # ended: inert
    assert pushed.token_ids == pulled.token_ids


def test_pushing_holds_a_possible_stop_until_the_next_id_decides():
    ids = ids_of("hello world")  # 'he' 'll' 'o' ' wor' 'ld'
    stream = TextStream((), TOKENIZER, stop=["o w"])
    assert [stream.push(i) for i in ids[:3]] == ["he", "ll", ""]  # 'o' held
    assert stream.finish_reason is None
    assert stream.push(ids[3]) == ""  # 'o w' completes: nothing past it
    assert stream.finish_reason == "stop" and stream.text == "hell"
    assert stream.finish() == ""


# -- the Decoder's text calls -------------------------------------------------------


def test_complete_is_the_text_of_generate(decoders):
    decoder = decoders()
    ids = decoder.tokenizer.encode("The NPU")
    tokens = list(decoder.generate(ids, max_new_tokens=10))
    text = decoder.complete("The NPU", max_new_tokens=10)
    assert text == decoder.tokenizer.decode(tokens, skip_special_tokens=True)
    stream = decoder.stream(ids, max_new_tokens=10)
    assert "".join(stream) == text
    assert stream.token_ids == tokens
    assert stream.finish_reason == "length"
    assert stream.prompt_tokens == len(ids)


def test_complete_stops_at_a_stop_string(decoders):
    decoder = decoders()
    text = decoder.complete("Hello there", max_new_tokens=12)
    stop = text[3:5]
    assert len(stop) == 2
    stream = decoder.stream("Hello there", max_new_tokens=12, stop=stop)
    assert stream.read() == text[: text.find(stop)]
    assert stream.finish_reason == "stop"


def test_chat_continues_the_messages_with_the_template(decoders):
    decoder = decoders()
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello!"},
    ]
    prompt = decoder.tokenizer.apply_chat_template(messages)
    assert decoder.chat(messages, max_new_tokens=8) == decoder.complete(
        prompt, max_new_tokens=8
    )


def test_text_calls_without_a_tokenizer_say_how_to_give_one(decoders):
    bare = Decoder(decoders().graph, device="npu2", progress=False)
    assert bare.tokenizer is None
    with pytest.raises(RuntimeError, match=r"no tokenizer.*Tokenizer.from_directory"):
        bare.complete("The NPU")


def test_a_checkpoint_without_a_tokenizer_still_loads(tmp_path):
    directory = tiny.write_checkpoint(tmp_path)
    (directory / "tokenizer.json").unlink()
    decoder = Decoder.from_pretrained(directory, device="npu2", context=64)
    assert decoder.tokenizer is None


def test_from_pretrained_loads_the_tokenizer(checkpoints):
    decoder = Decoder.from_pretrained(checkpoints(), device="npu2", context=64)
    assert isinstance(decoder.tokenizer, Tokenizer)
    expected = Tokenizer.from_directory(checkpoints())
    assert decoder.tokenizer.eos_ids == expected.eos_ids
    assert decoder.tokenizer.chat_template == expected.chat_template


def test_the_docstring_examples_run(checkpoints):
    """iron.lm's example, then Decoder's, then its text calls', sharing names."""
    globs = {"directory": checkpoints()}
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    objects = [
        iron.lm,
        Decoder,
        Decoder.stream,
        Decoder.complete,
        Decoder.chat,
    ]
    examples = 0
    for obj in objects:
        for test in finder.find(obj, globs=globs):
            test.globs = globs  # one namespace, in order
            examples += len(test.examples)
            runner.run(test, clear_globs=False)
    assert examples >= 12
    assert runner.failures == 0, "a docstring example failed (see the output above)"
