"""Which nodes a command talks to: ``--url``, else ``$REDLOCK_URLS``, else the default."""

from __future__ import annotations

import argparse
import os

from .._redlock import Redlock

__all__ = ["DEFAULT_URL", "redlock", "urls"]

DEFAULT_URL = "redis://localhost:6379/0"


def urls(args: argparse.Namespace) -> list[str]:
    """The nodes' URLs: ``--url`` (before or after the command), ``$REDLOCK_URLS``, the default."""
    given: list[str] = [*(getattr(args, "top_url", None) or []), *(args.url or [])]
    if not given:
        given = [u.strip() for u in os.environ.get("REDLOCK_URLS", "").split(",") if u.strip()]
    return given or [DEFAULT_URL]


def redlock(args: argparse.Namespace) -> Redlock:
    """A Redlock over the nodes, with ``--prefix`` and ``--node-timeout``."""
    # ConfigurationError names the (redacted) URL; main() prints it on one line.
    return Redlock(urls(args), prefix=args.prefix, node_timeout=args.node_timeout)
