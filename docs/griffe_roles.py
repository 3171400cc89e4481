"""A griffe extension: Sphinx roles in IRON's docstrings become cross-references.

The code's docstrings are Google style but name other objects the Sphinx way
(``:class:`~iron.core.profile.Profile```, ``:func:`set_backend```). Once the
whole ``iron`` package is loaded, each role is rewritten into a
mkdocstrings cross-reference (``[`Profile`][iron.core.profile.Profile]``)
when its target resolves, relative names looked up from the documented
object outwards; a role that resolves to nothing stays inline code. A
cross-reference to an object no page renders is then a broken link, which
``mkdocs build --strict`` reports.

``mkdocs.yml`` loads it with the python handler's ``extensions`` option.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj):`(?P<tilde>~?)(?P<target>[\w.]+)(?:\(\))?`"
)


def _lookup(collection: Any, path: str) -> griffe.Object | None:
    try:
        found = collection[path]
    except (KeyError, ValueError, griffe.AliasResolutionError):
        return None
    if isinstance(found, griffe.Alias):
        try:
            return found.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
    return found


def _resolve(obj: griffe.Object, target: str, collection: Any) -> str | None:
    """The full path ``target`` names, seen from ``obj``; None if nothing."""
    target = target.lstrip(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        found = _lookup(collection, f"{scope.path}.{target}")
        if found is not None:
            return found.path
        scope = scope.parent
    for candidate in (target, f"iron.{target}"):
        found = _lookup(collection, candidate)
        if found is not None:
            return found.path
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring of a loaded package."""

    def on_package(
        self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any
    ) -> None:
        """Rewrite the roles once every module of ``pkg`` is loaded."""
        collection = loader.modules_collection
        seen: set[int] = set()

        def visit(obj: griffe.Object) -> None:
            if id(obj) in seen:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(
                    lambda m: self._link(obj, m, collection), obj.docstring.value
                )
            for member in obj.members.values():
                if not member.is_alias:
                    visit(member)  # type: ignore[arg-type]

        visit(pkg)

    @staticmethod
    def _link(obj: griffe.Object, match: re.Match[str], collection: Any) -> str:
        target = match.group("target")
        shown = target.rsplit(".", 1)[-1] if match.group("tilde") else target
        path = _resolve(obj, target, collection)
        if path is None or not path.startswith("iron"):
            return f"`{shown}`"
        return f"[`{shown}`][{path}]"
