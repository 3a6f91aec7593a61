"""Griffe extension: the docstrings' Sphinx roles as links in the API reference.

The package's docstrings cross-reference with Sphinx roles
(:class:`Lock`, :meth:`Redlock.lock`, :class:`~redlock_async.Redlock`).
Markdown would show them as ":class:" followed by code; this rewrites each
role into a mkdocstrings cross-reference (``[`Lock`][redlock_async.Lock]``)
when it names something public, and into plain code otherwise (private
helpers, which the reference does not document).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):`(~?)([^`]+)`")


class Roles(griffe.Extension):
    """Rewrite the roles of every docstring once the package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "redlock_async":
            return
        for obj in _walk(pkg, set()):
            if obj.docstring is not None:
                obj.docstring.value = _ROLE.sub(
                    lambda match, obj=obj: _link(pkg, obj, match[1] == "~", match[2]),
                    obj.docstring.value,
                )


def _walk(obj: griffe.Object, seen: set[str]) -> list[griffe.Object]:
    found = [obj]
    seen.add(obj.path)
    for member in obj.members.values():
        if not member.is_alias and member.path not in seen:
            found += _walk(member, seen)  # type: ignore[arg-type]
    return found


def _link(pkg: griffe.Module, obj: griffe.Object, short: bool, target: str) -> str:
    """``target`` as a link to its public path, or as code when it has none."""
    shown = target.rsplit(".", 1)[-1] if short else target
    shown = shown.removeprefix("redlock_async.").lstrip(".")
    path = _public(pkg, obj, target)
    return f"[`{shown}`][{path}]" if path else f"`{shown}`"


def _public(pkg: griffe.Module, obj: griffe.Object, target: str) -> str | None:
    name = target.removeprefix("redlock_async.")
    if name.startswith(("_", ".")):
        return None
    candidates = [name, f"testing.{name}"]
    parent = obj.parent
    if parent is not None and parent.is_class:
        candidates.append(f"{parent.name}.{name}")  # :meth:`lock` inside Redlock
    for candidate in candidates:
        head = candidate.split(".", 1)[0]
        module = pkg["testing"] if candidate.startswith("testing.") else pkg
        if candidate.startswith("testing."):
            head = candidate.split(".")[1]
        if head not in (module.exports or ()) and candidate != "testing":
            continue
        try:
            pkg[candidate]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        return f"redlock_async.{candidate}"
    return None
