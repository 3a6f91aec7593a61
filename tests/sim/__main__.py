"""``python -m tests.sim``: the simulation's command line.

``diff --seed S --steps N`` holds the simulated node to a real redis-server
(``diff.py``): exit 0 when every step agreed, 1 at the first disagreement
(printed with its step, command, both sides and the seed). ``run``,
``mutants`` and ``pending`` are the simulation's next parts (issue 39): not
built yet, they say so and exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time

from .node import QUIRKS

__all__ = ["main"]


def _diff(args: argparse.Namespace) -> int:
    from .diff import run
    from .real import RealServer

    quirks = frozenset(args.quirk or ())
    started = time.monotonic()
    with RealServer() as real:
        failed = 0
        for seed in range(args.seed, args.seed + args.seeds):
            report = run(real, seed, args.steps, quirks=quirks)
            print(
                f"seed {seed}: {report.steps} steps, {report.straddled} straddled a millisecond,"
                f" {report.unaligned} unaligned (not compared)"
            )
            if args.verbose:
                for label, count in sorted(report.labels.items()):
                    print(f"  {count:6d}  {label}")
            if report.disagreement is not None:
                print(report.disagreement)
                failed = 1
                break
    print(f"{'DISAGREE' if failed else 'agree'} in {time.monotonic() - started:.1f} s")
    return failed


def _not_built(args: argparse.Namespace) -> int:
    print(f"python -m tests.sim {args.command}: not yet built (issue 39)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    diff = commands.add_parser("diff", help="the simulated node against a real redis-server")
    diff.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    diff.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed (default 1)")
    diff.add_argument("--steps", type=int, default=2000, help="steps per seed (default 2000)")
    diff.add_argument(
        "--quirk",
        action="append",
        choices=sorted(QUIRKS),
        help="plant a known difference in the node (repeatable): the check must then fail",
    )
    diff.add_argument("-v", "--verbose", action="store_true", help="count the steps of each kind")
    diff.set_defaults(handler=_diff)
    for name, what in (
        ("run", "simulated clusters running the library from a seed"),
        ("mutants", "the library's planted bugs against the simulation"),
        ("pending", "the schedules the simulation still has to search"),
    ):
        stub = commands.add_parser(name, help=f"{what} (not yet built)")
        stub.add_argument("rest", nargs=argparse.REMAINDER)
        stub.set_defaults(handler=_not_built)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
