"""Which nodes a command talks to: ``--url``, else ``$REDLOCK_URLS``; never a default.

A default node once made every host of a cron job lock its own local Redis
(cron does not pass the shell's exports), so all of them ran the job at once:
with neither, a command stops before contacting anything (exit 2).
"""

from __future__ import annotations

import argparse
import os

from .._base._address import parse_url, redact_url
from .._redlock import Redlock
from ._exit import UsageError
from ._output import note

__all__ = ["NO_NODES", "announce", "node_urls", "redlock", "urls"]

NO_NODES = (
    "no nodes given: pass --url URL (once per node) or set REDLOCK_URLS=URL,URL,... "
    "(cron jobs do not see the shell's exports: set it in the crontab); "
    "there is no default node"
)


def _given(args: argparse.Namespace) -> tuple[list[str], str]:
    given: list[str] = [*(getattr(args, "top_url", None) or []), *(args.url or [])]
    if given:
        return given, "--url"
    raw = os.environ.get("REDLOCK_URLS")
    env = [u.strip() for u in (raw or "").split(",") if u.strip()]
    if env:
        return env, "REDLOCK_URLS"
    if raw is not None:  # set, but to nothing: say so, it is not the same mistake
        raise UsageError("REDLOCK_URLS lists no URL; " + NO_NODES)
    raise UsageError(NO_NODES)


def urls(args: argparse.Namespace) -> list[str]:
    """The nodes' URLs: ``--url`` (before or after the command), else ``$REDLOCK_URLS``.

    Raises UsageError (exit 2) naming both when neither gives a URL.
    """
    return _given(args)[0]


def node_urls(args: argparse.Namespace) -> list[str]:
    """The nodes' URLs, each checked; nothing is printed and nothing contacted.

    Raises UsageError when there are none, ConfigurationError (naming the
    redacted URL) for one that cannot be used.
    """
    given = urls(args)
    for url in given:
        parse_url(url)
    return given


def announce(args: argparse.Namespace) -> list[str]:
    """Check the nodes' URLs and say on stderr, in one line, which nodes these are; the URLs.

    Silent with ``--quiet``. Raises as :func:`node_urls`, before anything is printed.
    """
    given, source = _given(args)
    node_urls(args)
    if not getattr(args, "quiet", False):
        shown = ", ".join(redact_url(url) for url in given)
        count = f"{len(given)} node" + ("" if len(given) == 1 else "s")
        note(f"{count} (from {source}): {shown}")
    return given


def redlock(args: argparse.Namespace) -> Redlock:
    """A Redlock over the nodes, with ``--prefix`` and ``--node-timeout``."""
    # ConfigurationError names the (redacted) URL; main() prints it on one line.
    return Redlock(urls(args), prefix=args.prefix, node_timeout=args.node_timeout)
