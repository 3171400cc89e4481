"""Chat templates rendered in a bounded Jinja sandbox.

A chat template is code from the checkpoint: a hostile one can loop forever
or build a string of gigabytes with a single filter (``'x'|center(10**10)``,
``s ~ s`` doubled in a loop, a list of shared megabyte strings joined). Here
templates render in Jinja's immutable sandbox, set up as transformers sets
up its own (trim_blocks, lstrip_blocks, loop controls, a ``tojson`` that
keeps non-ASCII text, ``raise_exception`` and ``strftime_now``), with two
bounds: :data:`TEMPLATE_SECONDS` of time, checked at each call, filter,
operator, loop step over a ``range`` and output piece; and
:data:`TEMPLATE_CHARS` characters, for the output and for every value the
template builds. A value's size is checked *before* the operation that
would build it (the width given to ``center``, the copies ``*`` and ``~``
would make, what ``join``, ``replace``, ``indent``, ``format`` and ``%``
would produce, what printing a list would print), so no bound is passed by
allocating first and measuring after.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import lru_cache, wraps
from typing import Any

__all__ = [
    "JSON_INDENT",
    "TEMPLATE_CHARS",
    "TEMPLATE_SECONDS",
    "TemplateLimitError",
    "compiled",
    "render",
]

#: Characters a chat template may render, and the size of any value it builds.
TEMPLATE_CHARS = 1 << 20
#: Seconds a chat template may take to render.
TEMPLATE_SECONDS = 2.0
#: The widest ``tojson(indent=...)`` a template may ask for (templates use 2 or 4).
JSON_INDENT = 64


class TemplateLimitError(ValueError):
    """A chat template passed :data:`TEMPLATE_CHARS` or :data:`TEMPLATE_SECONDS`."""


#: This thread's render deadline (``time.monotonic()``), or None.
_deadline = threading.local()


def _check_time() -> None:
    at = getattr(_deadline, "at", None)
    if at is not None and time.monotonic() > at:
        raise TemplateLimitError(f"it ran past {TEMPLATE_SECONDS:g} s")


def _weight(value: Any, budget: int = TEMPLATE_CHARS) -> int:
    """At least the characters ``value`` prints as; stops counting past ``budget``.

    A list made by ``*`` holds one string many times: counted each time, as
    printing or joining it would write it each time.
    """
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 2
    if isinstance(value, Mapping):
        value = [part for item in value.items() for part in item]
    if isinstance(value, (list, tuple)):
        total = len(value)
        for item in value:
            if total > budget:
                break
            total += _weight(item, budget - total)
        return total
    return 1


def _check(size: int, what: str) -> None:
    if size > TEMPLATE_CHARS:
        raise TemplateLimitError(f"{what} would make {size} characters")


def _sized(value: Any) -> Any:
    _check(_weight(value), "a value")
    return value


#: A width or precision in a ``%`` format (``%-100s``, ``%.9f``).
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\d*)(?:\.(\d*))?")
#: A replacement field's format spec in ``str.format`` (``{:>100}``).
_FIELD = re.compile(r"\{[^{}]*?:([^{}]*)\}")


def _format_widths(text: Any) -> int:
    """The largest width or precision a format string asks for."""
    if not isinstance(text, str):
        return 0
    numbers = [n for m in _PERCENT.finditer(text) for n in m.groups() if n]
    numbers += re.findall(r"\d+", " ".join(_FIELD.findall(text)))
    return max(map(int, numbers), default=0)


def _replaced(
    text: Any, old: Any = None, new: Any = "", count: Any = -1, *_: Any
) -> int:
    if (
        not isinstance(text, str)
        or not isinstance(old, str)
        or not isinstance(new, str)
    ):
        return 0
    times = len(text) + 1 if old == "" else text.count(old)
    if isinstance(count, int) and count >= 0:
        times = min(times, count)
    return len(text) + times * len(new)


def _indented(text: Any, width: Any = 4, *_: Any, **__: Any) -> int:
    lines = text.count("\n") + 1 if isinstance(text, str) else 1
    step = (
        len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    )
    return _weight(text) + lines * step


def _joined(items: Any, sep: Any = "", *_: Any, **__: Any) -> int:
    seps = _weight(sep) * len(items) if isinstance(items, (list, tuple, str)) else 0
    return _weight(list(items) if isinstance(items, (list, tuple)) else items) + seps


def _padded(text: Any, width: Any = 80, *_: Any) -> int:
    return max(_weight(text), width if isinstance(width, int) else 0)


def _tabbed(text: Any, size: Any = 8, *_: Any) -> int:
    tabs = text.count("\t") if isinstance(text, str) else 0
    return _weight(text) + tabs * (size if isinstance(size, int) else 8)


def _wrapped(
    text: Any,
    width: Any = 79,
    _breaks: Any = True,
    wrapstring: Any = None,
    *_: Any,
    **kwargs: Any,
) -> int:
    wrapstring = kwargs.get("wrapstring", wrapstring)
    width = kwargs.get("width", width)
    lines = _weight(text) // max(width, 1) + 1 if isinstance(width, int) else 1
    return _weight(text) + lines * (
        _weight(wrapstring) if wrapstring is not None else 1
    )


def _translated(text: Any, table: Any = None, *_: Any) -> int:
    longest = (
        max((_weight(v) for v in table.values()), default=1)
        if isinstance(table, Mapping)
        else 1
    )
    return _weight(text) * max(longest, 1)


def _json(value: Any, *args: Any, indent: Any = None, **__: Any) -> int:
    indent = args[1] if len(args) > 1 and indent is None else indent
    step = (
        len(indent)
        if isinstance(indent, str)
        else indent
        if isinstance(indent, int)
        else 0
    )
    if step > JSON_INDENT:
        raise TemplateLimitError(
            f"tojson() was given indent {indent!r}, over {JSON_INDENT}"
        )
    return _weight(value)


def _formatted(text: Any, *args: Any, **kwargs: Any) -> int:
    return _weight(text) + _format_widths(text) + _weight([*args, *kwargs.values()])


#: What an operation would build, in characters, from its subject and arguments:
#: for the filters and ``str`` methods that can make far more than they are given.
_SIZES: dict[str, Callable[..., int]] = {
    "center": _padded,
    "ljust": _padded,
    "rjust": _padded,
    "zfill": _padded,
    "indent": _indented,
    "join": _joined,
    "replace": _replaced,
    "expandtabs": _tabbed,
    "format": _formatted,
    "format_map": _formatted,
    "wordwrap": _wrapped,
    "translate": _translated,
    "tojson": _json,
}
#: Filters whose output is about the printed size of their input.
_PRINTING = {"string", "pprint", "list", "sum", "xmlattr", "urlencode", "escape", "e"}


def _check_call(
    name: str, subject: Any, args: tuple, kwargs: Mapping[str, Any]
) -> None:
    """Refuse an operation whose result would pass the bound, before it runs."""
    _check_time()
    for arg in (*args, *kwargs.values()):
        if isinstance(arg, int) and not isinstance(arg, bool) and arg > TEMPLATE_CHARS:
            raise TemplateLimitError(f"{name}() was given {arg}")
    size = _SIZES.get(name)
    if size is not None:
        _check(size(subject, *args, **kwargs), f"{name}()")
    elif name in _PRINTING:
        _check(_weight(subject), f"{name}()")


def _bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    # Jinja passes the context or environment first to filters marked so
    # (the mark is an attribute ``wraps`` copies); the subject follows.
    passed = getattr(function, "jinja_pass_arg", None) is not None

    @wraps(function)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        subject, rest = (args[1], args[2:]) if passed else (args[0], args[1:])
        _check_call(name, subject, rest, kwargs)
        return _sized(function(*args, **kwargs))

    return bounded


@lru_cache(maxsize=8)
def compiled(source: str) -> Any:
    """``source`` compiled in the bounded sandbox (cached).

    Raises:
        jinja2.TemplateSyntaxError: ``source`` does not parse.
    """
    import jinja2
    import jinja2.ext
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range
    from jinja2.utils import Namespace

    class Generation(jinja2.ext.Extension):
        # {% generation %}...{% endgeneration %} marks assistant text for
        # training masks in transformers; rendering keeps the body as is.
        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        # Jinja's own tojson escapes HTML characters; chat text must stay as is.
        return json.dumps(
            value,
            ensure_ascii=ensure_ascii,
            indent=indent,
            separators=separators,
            sort_keys=sort_keys,
        )

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    class Generator(CodeGenerator):
        """Jinja's code generator, with ``~`` measured before it joins."""

        def visit_Concat(self, node: Any, frame: Any) -> None:
            self.write("environment.concatenated((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class BoundedNamespace(Namespace):
        """``namespace()``, refusing an attribute past the size bound."""

        def __setitem__(self, name: str, value: Any) -> None:
            super().__setitem__(name, _sized(value))

    class Bounded(ImmutableSandboxedEnvironment):
        """The sandbox, with the time and size bounds checked as it runs."""

        code_generator_class = Generator
        # intercepted, so never folded at compile time either
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        @staticmethod
        def concatenated(parts: tuple) -> str:
            _check_time()
            _check(sum(_weight(part) for part in parts), "~")
            return "".join(map(str, parts))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any):
            _check_time()
            if operator == "*":
                for seq, count in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
                        _check(_weight(seq) * max(count, 0), "*")
            if operator == "**" and isinstance(right, (int, float)) and right > 64:
                if isinstance(left, (int, float)) and abs(left) > 1:
                    raise TemplateLimitError(f"{left!r} ** {right!r} is too large")
            if operator == "+":
                _check(_weight(left) + _weight(right), "+")
            if operator == "%" and isinstance(left, str):
                values = right if isinstance(right, tuple) else (right,)
                _check(_formatted(left, *values), "%")
            return _sized(super().call_binop(context, operator, left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any):
            # the sandbox hands out str.format wrapped; the method is __wrapped__
            method = getattr(__obj, "__wrapped__", __obj)
            name = getattr(method, "__name__", "")
            subject = getattr(method, "__self__", None)
            if not isinstance(subject, str):
                name = ""
            elif name == "join" and args:  # sep.join(items): the items are the subject
                subject, args = args[0], (subject, *args[1:])
            # Jinja passes its own loop and block variables as keywords
            given = {
                k: v
                for k, v in kwargs.items()
                if k not in ("_loop_vars", "_block_vars")
            }
            _check_call(name, subject, args, given)
            return _sized(super().call(__context, __obj, *args, **kwargs))

    class TimedRange:
        """``range``, checking the time as a loop steps through it."""

        def __init__(self, *args: int) -> None:
            self.r = safe_range(*args)

        def __len__(self) -> int:
            return len(self.r)

        def __getitem__(self, i: Any) -> Any:
            return self.r[i]

        def __iter__(self) -> Any:
            for n, i in enumerate(self.r):
                if not n & 1023:
                    _check_time()
                yield i

        def __reversed__(self) -> Any:
            for n, i in enumerate(reversed(self.r)):
                if not n & 1023:
                    _check_time()
                yield i

    env = Bounded(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[Generation, jinja2.ext.loopcontrols],
        finalize=_sized,  # what ``{{ value }}`` prints, measured before str()
    )
    env.filters["tojson"] = tojson
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items()}
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["range"] = TimedRange
    env.globals["namespace"] = BoundedNamespace
    return env.from_string(source)


def render(source: str, variables: Mapping[str, Any]) -> str:
    """``source`` rendered with ``variables``, within both bounds.

    Raises:
        TemplateLimitError: The template passed :data:`TEMPLATE_CHARS` or
            :data:`TEMPLATE_SECONDS`.
        jinja2.TemplateSyntaxError: ``source`` does not parse.
        Exception: Whatever the template itself raised (``raise_exception``,
            a type error in its code).
    """
    template = compiled(source)
    _deadline.at = time.monotonic() + TEMPLATE_SECONDS
    pieces: list[str] = []
    size = 0
    try:
        for piece in template.generate(**variables):
            size += len(piece)
            if size > TEMPLATE_CHARS:
                raise TemplateLimitError(f"its text passed {TEMPLATE_CHARS} characters")
            _check_time()
            pieces.append(piece)
    finally:
        _deadline.at = None
    return "".join(pieces)
