"""Which nodes a command talks to: ``--url``, else ``$REDLOCK_URLS``, else the default."""

from __future__ import annotations

import argparse
import os

from .._address import parse_url, redact_url
from .._redlock import Redlock
from ._output import note

__all__ = ["DEFAULT_URL", "announce", "redlock", "urls"]

DEFAULT_URL = "redis://localhost:6379/0"


def _given(args: argparse.Namespace) -> tuple[list[str], str]:
    given: list[str] = [*(getattr(args, "top_url", None) or []), *(args.url or [])]
    if given:
        return given, "--url"
    env = [u.strip() for u in os.environ.get("REDLOCK_URLS", "").split(",") if u.strip()]
    if env:
        return env, "REDLOCK_URLS"
    return [DEFAULT_URL], ""


def urls(args: argparse.Namespace) -> list[str]:
    """The nodes' URLs: ``--url`` (before or after the command), ``$REDLOCK_URLS``, the default."""
    return _given(args)[0]


def announce(args: argparse.Namespace) -> list[str]:
    """Check the nodes' URLs and say on stderr, in one line, which nodes these are; the URLs.

    A silent default once had a user reading a shared server: the default is
    named as one. Raises ConfigurationError (naming the redacted URL) for a
    URL that cannot be used, before anything is printed.
    """
    given, source = _given(args)
    for url in given:
        parse_url(url)
    shown = ", ".join(redact_url(url) for url in given)
    if not source:
        note(f"no --url or REDLOCK_URLS: using the default {shown}")
    else:
        count = f"{len(given)} node" + ("" if len(given) == 1 else "s")
        note(f"{count} (from {source}): {shown}")
    return given


def redlock(args: argparse.Namespace) -> Redlock:
    """A Redlock over the nodes, with ``--prefix`` and ``--node-timeout``."""
    # ConfigurationError names the (redacted) URL; main() prints it on one line.
    return Redlock(urls(args), prefix=args.prefix, node_timeout=args.node_timeout)
