"""The chat-template sandbox measures a value before it builds it.

Issue 37: the output bound was checked after each operation, so one filter
(``'x'|center(10**10)``), ``~`` doubled in a loop, or a list of shared
strings printed or joined allocated gigabytes first (the ``~`` loop was
killed by the kernel here at 22 GB). Each case below would allocate at least
100 MB unbounded; it must be refused with a peak of a few MB.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from iron.lm.template import (
    JSON_INDENT,
    TEMPLATE_CHARS,
    TEMPLATE_SECONDS,
    TemplateLimitError,
    render,
)

#: Peak Python allocation allowed while refusing a case (the bound is 1 Mi characters).
PEAK_BYTES = 16 * 2**20

MESSAGES = [
    {"role": "user", "content": "Hi\nthere"},
    {"role": "assistant", "content": "Yo"},
]

HOSTILE = {
    "center": "{{ 'x'|center(10**8) }}",
    "indent-width": "{{ ('x\\n' * 100)|indent(10**6 + 1) }}",
    "indent-text": "{{ ('x\\n' * 1000)|indent('y' * 100000) }}",
    "format-filter": "{{ '%100000000s'|format(1) }}",
    "percent": "{{ '%100000000s' % 1 }}",
    "str-format": "{{ '{:>100000000}'.format(1) }}",
    "replace-method": "{% set s = 'x' * 1000 %}{{ s.replace('', 'y' * 100000)|length }}",
    "replace-filter": "{% set s = 'x' * 1000 %}{{ s|replace('x', 'y' * 100000)|length }}",
    "join-filter": "{% set s = 'x' * 1000000 %}{{ ([s, s] * 50)|join|length }}",
    "join-method": "{% set s = 'x' * 1000000 %}{{ ''.join([s, s] * 50)|length }}",
    "tilde-doubling": "{% set ns = namespace(s='x') %}{% for i in range(28) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    "tilde-chain": "{% set a = 'x' * 1000000 %}{{ (a~a~a~a~a~a~a~a~a~a~a~a)|length }}",
    "print-list": "{{ ['x' * 1000000] * 100 }}",
    "string-list": "{{ (['x' * 1000000] * 100)|string|length }}",
    "tojson-indent": "{{ ([1] * 1000)|tojson(indent=100000) }}",
    "wordwrap": "{{ ('x' * 100000)|wordwrap(1, wrapstring='y' * 1000)|length }}",
    "expandtabs": "{{ ('\\t' * 1000).expandtabs(100000)|length }}",
    "translate": "{{ ('x' * 100000).translate({120: 'y' * 10000})|length }}",
}


@pytest.mark.parametrize("source", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_value_past_the_bound_is_refused_before_it_is_built(source):
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(TemplateLimitError) as caught:
            render(source, {"messages": MESSAGES})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < TEMPLATE_SECONDS
    assert peak < PEAK_BYTES, f"{peak} bytes allocated before refusing"
    message = str(caught.value)
    assert "would make" in message or "was given" in message or "over" in message


def test_what_templates_do_still_renders():
    source = (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{{ m.role|center(11) }}|{{ m.content|indent(2) }}|{{ '%-9s|' % m.role }}"
        "{{ '{:>4}'.format(ns.n) }}|{{ [m.role, m.content]|join(', ') }}|"
        "{{ 'a' ~ m.role ~ 'b' }}|{{ m|tojson(indent=2) }}|{{ m.content.replace('\\n', ' ') }}\n"
        "{% endfor %}"
    )
    expected = "".join(
        f"{m['role'].center(11)}|{m['content'].replace(chr(10), chr(10) + '  ')}|{m['role']:<9}|"
        f"{n:>4}|{m['role']}, {m['content']}|a{m['role']}b|"
        + __import__("json").dumps(m, indent=2)
        + f"|{m['content'].replace(chr(10), ' ')}\n"
        for n, m in enumerate(MESSAGES, 1)
    )
    assert render(source, {"messages": MESSAGES}) == expected


def test_the_bounds_sit_at_their_documented_values():
    at = "x" * TEMPLATE_CHARS
    assert (
        len(render(f"{{{{ s|center({TEMPLATE_CHARS}) }}}}", {"s": "x"}))
        == TEMPLATE_CHARS
    )
    assert len(render("{{ s ~ '' }}", {"s": at})) == TEMPLATE_CHARS
    with pytest.raises(TemplateLimitError):
        render("{{ s ~ 'y' }}", {"s": at})
    assert render(f"{{{{ 1|tojson(indent={JSON_INDENT}) }}}}", {}) == "1"
    with pytest.raises(TemplateLimitError):
        render(f"{{{{ [1]|tojson(indent={JSON_INDENT + 1}) }}}}", {})
