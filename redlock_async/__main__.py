"""``python -m redlock_async``: the command line."""

from ._cli import main

raise SystemExit(main())
