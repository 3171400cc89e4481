"""Build the tiny tokenizer that iron-lm ships for its embedded default model.

A byte-level BPE (as Llama 3's: every byte is a token, so any text encodes)
trained with the tokenizers library on the short English text below, to a
vocabulary of 512 with Llama 3's special tokens first (ids 0-4). It writes
``tokenizer.json`` and ``tokenizer_config.json`` (with a Llama 3 style chat
template) to ``src/iron/lm/data/tiny`` or ``--out``. The output is
deterministic: run it twice and the files are byte-identical.

    python packages/iron-lm/scripts/make_tiny_tokenizer.py [--out DIR]

The text was written for this script. It only has to give the merges
something English-shaped to learn; the model that uses them has random
weights.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

VOCAB_SIZE = 512
SPECIAL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
]
BOS, EOS = "<|begin_of_text|>", "<|eot_id|>"

# Llama 3's chat layout: a header per turn, the text, then <|eot_id|>.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"
    "{{ (message['content'] | trim) + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)

CORPUS = """\
The small machine on the desk wakes up before anyone else in the house. It
listens for the kettle, counts the minutes until the first cup of tea, and
then it starts to think about the day. There is a list of things to do: read
the letters that came in the night, sort the pictures from the garden, and
answer the questions that the children left on the kitchen table.

A question is a strange thing. It looks small on paper, but inside it there
is often a second question, and inside that one a third. Why does the river
run to the sea? Because water falls downhill. Why does water fall? Because the
earth pulls on everything it holds. Why does the earth pull? At that point the
machine writes down what it knows, marks what it does not, and moves on.

In the afternoon the light turns gold and the room grows warm. The cat climbs
onto the window sill and watches the birds in the hedge. Numbers go by on the
screen: one, two, three, four, five, six, seven, eight, nine, ten, eleven,
twelve, twenty, thirty, forty, fifty, a hundred, a thousand. The machine adds
them, multiplies them, and checks each answer twice, because a careful
answer is worth more than a fast one.

People ask it many kinds of things. Some want a recipe for bread with seeds
and honey. Some want to know the way to the station, the time of the next
train, or the name of a flower they saw by the road. Others want a story
about a dragon who was afraid of the dark, or a poem about the first snow of
the winter. The machine tries to be helpful, honest, and kind, and it says so
plainly when it does not know.

Every word is made of pieces. The machine learns which pieces appear
together again and again: "th" and "he" and "ing", "tion" and "ment", the
space before a word and the letters that start it. When two pieces are seen
side by side often enough, they are joined into one new piece, and the list
of pieces grows. After a while the common words are single pieces and the rare
ones are built from a few.

Some words come from other languages and carry their own letters: the café
on the corner, a naïve plan, a façade of old stone, the Zürich train, a
crème brûlée for dessert, the señora who sells oranges, a smörgåsbord of
small dishes. Some text is not written with Latin letters at all: 日本語,
한국어, русский, Ελληνικά, and even little pictures like 🙂 and 🚀. Each of
them is still a sequence of bytes, so nothing is ever lost.

At night the house is quiet again. The machine writes a short summary of what
it learned: the river, the bread, the dragon, the snow. Tomorrow there will be
new letters, new questions, and new answers. It saves its notes, turns down
the light on its small screen, and waits for the kettle in the morning.

Questions and answers, turn by turn:
User: What is the capital of France?
Assistant: The capital of France is Paris.
User: How many days are there in a week?
Assistant: There are seven days in a week.
User: Can you count to five?
Assistant: One, two, three, four, five.
User: Thank you for your help today.
Assistant: You are welcome. Have a good evening.
"""


def build_tokenizer():
    """Train the tiny byte-level BPE (deterministic for a given library)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines(keepends=True), trainer)
    # Like Llama 3's tokenizer.json: the post-processor puts
    # <|begin_of_text|> in front of every encoding with special tokens.
    bos = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, bos)],
    )
    return tokenizer


def tokenizer_config() -> dict:
    return {
        "bos_token": BOS,
        "eos_token": EOS,
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 256,
        "clean_up_tokenization_spaces": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def write(out: Path) -> None:
    tokenizer = build_tokenizer()
    if tokenizer.get_vocab_size() != VOCAB_SIZE:
        raise SystemExit(
            f"trained vocabulary has {tokenizer.get_vocab_size()} entries, "
            f"not {VOCAB_SIZE}: lengthen CORPUS"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(
        tokenizer.to_str(pretty=False) + "\n", encoding="utf-8"
    )
    (out / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    default = Path(__file__).resolve().parents[1] / "src/iron/lm/data/tiny"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=default, help="output folder")
    args = parser.parse_args(argv)
    write(args.out)
    print(f"wrote {args.out / 'tokenizer.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
