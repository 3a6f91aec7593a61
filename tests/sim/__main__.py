"""``python -m tests.sim``: the simulation's command line (the contract outside checks use).

``run --seed S --grants N --json FILE [--mutant NAME] [--workers K]
[--stop-at-first] [--pending] [--replay]`` simulates seeds S, S+1, ... (each
a deployment of a few simulated minutes: nodes, processes, the mixed
workload, faults) until N grants are done, on K worker processes (default
1), writes the run's figures to FILE, and exits 0 when no checker found a
violation, 1 otherwise. Each violation is printed with its seed, its
checker, a short trace and the command that replays it. ``--replay``
simulates seed S alone and prints every violation's trace in full.

``mutants``: the planted bugs' names, one a line (``--mutant`` takes them).
``pending``: the checkers and fault kinds awaiting a fix (issue 40), one a
line; ``run --pending`` adds them.

``diff --seed S --steps N`` holds the simulated node to a real redis-server
(``diff.py``): exit 0 when every step agreed, 1 at the first disagreement
(printed with its step, command, both sides and the seed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

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


def _run(args: argparse.Namespace) -> int:
    from . import mutants
    from .runner import SeedResult, run, run_seed

    if args.mutant and args.mutant not in mutants.MUTANTS:
        print(f"unknown mutant {args.mutant!r}: see python -m tests.sim mutants", file=sys.stderr)
        return 2
    flags = (f" --mutant {args.mutant}" if args.mutant else "") + (
        " --pending" if args.pending else ""
    )

    def show(result: SeedResult, total: int, wall: float) -> None:
        if not args.quiet:
            faults = sum(result.faults.values())
            print(f"seed {result.seed}: {result.grants} grants, {faults} faults,"
                  f" {len(result.violations)} violations ({total} grants in {wall:.1f} s)",
                  file=sys.stderr)  # fmt: skip
        for violation, lines in zip(result.violations, result.traces, strict=True):
            print(f"VIOLATION seed {violation['seed']} {violation['checker']}:"
                  f" {violation['detail']}")  # fmt: skip
            for line in lines if args.replay else lines[-12:]:
                print(f"    {line}")
            print(f"    replay: python -m tests.sim run --seed {violation['seed']} --grants 1"
                  f" --json replay.json --replay --minutes {args.minutes:g}{flags}")  # fmt: skip

    if args.replay:
        from .runner import Report, _worker_init

        _worker_init(args.mutant)
        started = time.monotonic()
        result = run_seed(args.seed, pending=args.pending, minutes=args.minutes)
        show(result, result.grants, time.monotonic() - started)
        report = Report(args.seed, [result], time.monotonic() - started)
    else:
        report = run(args.seed, args.grants, workers=args.workers, mutant=args.mutant,
                     stop_at_first=args.stop_at_first, pending=args.pending,
                     minutes=args.minutes, progress=show)  # fmt: skip
    figures = report.as_json()
    Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    print(f"{len(figures['seeds'])} seeds, {figures['grants']} grants, {figures['faults']} faults"
          f" of {len(figures['fault_kinds'])} kinds, {len(figures['violations'])} violations;"
          f" {figures['simulated_seconds']:.0f} simulated s in {figures['wall_seconds']:.1f} s;"
          f" history {figures['history_sha256'][:16]}")  # fmt: skip
    caught = report.grants_until_caught
    if caught is not None:
        print(f"the first violation came after {caught} grants")
    return 1 if figures["violations"] else 0


def _mutants(args: argparse.Namespace) -> int:
    from .mutants import MUTANTS

    for name in MUTANTS:
        print(name)
    return 0


def _pending(args: argparse.Namespace) -> int:
    from .pending import PENDING

    for line in PENDING:
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="simulated deployments from seeds, judged")
    run.add_argument("--seed", type=int, required=True, help="the first seed")
    run.add_argument("--grants", type=int, required=True, help="simulate until this many grants")
    run.add_argument("--json", required=True, help="where to write the run's figures")
    run.add_argument("--mutant", help="plant this bug (python -m tests.sim mutants)")
    run.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    run.add_argument("--stop-at-first", action="store_true", help="end at the first violation")
    run.add_argument("--pending", action="store_true",
                     help="add the checkers and fault kinds awaiting a fix")  # fmt: skip
    run.add_argument("--replay", action="store_true", help="seed --seed alone, traces in full")
    run.add_argument(
        "--minutes",
        type=float,
        default=2.0,
        help="each deployment's faulted part, in simulated minutes (default 2)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress per seed")
    run.set_defaults(handler=_run)
    commands.add_parser("mutants", help="the planted bugs' names").set_defaults(handler=_mutants)
    commands.add_parser("pending", help="what awaits a fix").set_defaults(handler=_pending)
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
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
