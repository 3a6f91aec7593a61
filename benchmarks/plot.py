"""Plot the benchmarks' ``--json`` figures: one SVG per curve, into ``benchmarks/img/``.

Run: ``python benchmarks/plot.py FILE.json [FILE.json ...] [--out DIR]``
(needs matplotlib: the ``bench`` extra).

It plots what the files hold, with no list of benchmarks to keep in step.
Every ``--json`` file is ``{loop: figures}`` (``asyncio``, ``uvloop``: the
loops run). In one loop's figures:

- a list of flat dicts is a *series*, one point per dict; its x is the first
  of ``X_KEYS`` (``n``, ``tasks``, ``waiters``, ``locks``) that its points
  have. A list without one, as long as a series of the same loop that has
  one, shares that series' x (``waiters.py``'s ``baseline``);
- a flat dict with an x key is one point (``renewal.py`` at one lock
  count): the points of several files of one benchmark join into a series;
- a flat dict without an x key is a *baseline*: each of its numbers is drawn
  as a dotted horizontal line on the chart of the same figure, if any;
- a list of dicts without an x key but with text fields (``cold_start.py``)
  is drawn as bars, one group per row, named by its text fields.

Each numeric figure of a benchmark is one chart, ``{benchmark}_{figure}.svg``
(a few figures share a chart: ``COMPANIONS``), with a line per loop and file.
The benchmark is the file's name up to its first dot: ``burst.json`` and
``burst.after.json`` are both ``burst``; the rest of the name, unless it is a
number (``renewal.20000.json``), labels that file's lines ("asyncio, after"),
so runs before and after a change draw on one chart. Axis labels and units
come from ``LABELS``, else from the figure's suffix (``_ms``, ``_s``,
``_pct``, ``_per_s``).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

# Text as text (a tenth of the size of glyphs drawn as paths), and ids that
# do not change between runs: a chart redrawn from the same figures is the
# same file.
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["svg.hashsalt"] = "redlock_async"

X_KEYS = ("n", "tasks", "waiters", "locks")
X_LABELS = {
    "n": "concurrent acquires N (one burst)",
    "tasks": "looping tasks",
    "waiters": "waiters on one name",
    "locks": "locks held",
}
LABELS = {
    "granted_pct": "granted (%)",
    "burst_s": "burst wall time (s)",
    "ideal_s": "ideal: N / baseline grants/s (s)",
    "burst_over_ideal": "burst time / ideal",
    "release_confirmed_pct": "releases confirmed by a quorum (%)",
    "release_s": "releasing them all (s)",
    "warnings": "warnings logged",
    "keys_left": "keys left on the nodes",
    "grants_per_s": "grants/s",
    "p50_ms": "acquire latency p50 (ms)",
    "p99_ms": "acquire latency p99 (ms)",
    "max_ms": "acquire latency max (ms)",
    "p99_over_p50": "p99 / p50",
    "gave_up": "acquires that gave up",
    "releases_unconfirmed": "releases not confirmed",
    "drain_s": "drain time (s)",
    "calls_per_grant": "script calls per grant, one node",
    "cpu_share": "client CPU (share of one core)",
    "bytes_per_lock": "memory per held lock (bytes)",
    "lost": "locks lost",
    "first_ms": "time to first grant (ms)",
    "second_ms": "second grant, same process (ms)",
    "first_p90_ms": "time to first grant, p90 (ms)",
    "first_over_second": "first grant / second grant",
    "first_over_floor": "first grant / floor's first grant",
}
# Figures drawn on their main figure's chart (dashed), not on charts of their own,
# and what such a chart's axis says.
COMPANIONS = {"burst_s": ("ideal_s",), "p50_ms": ("p99_ms",), "first_ms": ("second_ms",)}
CHART_LABELS = {
    "burst_s": "burst wall time (s), ideal dashed",
    "p50_ms": "acquire latency (ms), p50 and p99 dashed",
    "first_ms": "time to first grant (ms), second grant inside",
}
# Settings and counts, not results.
SKIP = {"rounds", "concurrent_tasks", "ttl_s", "hold_s", "granted", "grants", "s"}
COLORS = {"asyncio": "tab:blue", "uvloop": "tab:orange"}
STYLES = ("-", "-.", ":", (0, (5, 1)))  # plain dashes: companions
MARKERS = ("o", "s", "^", "D")


@dataclass
class Series:
    """Points of one loop of one file: a line on every chart of its figures."""

    benchmark: str
    tag: str  # the file's label ("" or e.g. "after")
    loop: str
    name: str  # the key the points came under ("burst", "drain", "baseline", ...)
    x_key: str | None  # None: bars
    points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        parts = [self.loop] + [p for p in (self.tag, self.name) if p and p != self.benchmark]
        return ", ".join(parts)


def _numbers(point: Mapping[str, Any]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in point.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and key not in SKIP
    }


def _x_key(points: Sequence[Mapping[str, Any]]) -> str | None:
    for key in X_KEYS:
        if points and all(isinstance(p.get(key), int | float) for p in points):
            return key
    return None


def read(paths: Iterable[Path]) -> tuple[list[Series], list[tuple[Series, dict[str, float]]]]:
    """Every file's series, and its baselines (each with the series it is drawn beside)."""
    series: dict[tuple[str, str, str, str], Series] = {}
    baselines: list[tuple[str, str, str, dict[str, float]]] = []
    for path in paths:
        benchmark, _, tag = path.name.removesuffix(".json").partition(".")
        if tag.replace(".", "").isdigit():
            tag = ""  # a run of a single point: joins the others
        by_loop = json.loads(path.read_text())
        for loop, figures in by_loop.items():
            if not isinstance(figures, dict):
                continue
            lists = {k: v for k, v in figures.items() if _is_rows(v)}
            x_of = {k: _x_key(v) for k, v in lists.items()}
            for key, rows in lists.items():
                x_key = x_of[key]
                if x_key is None and not _has_text(rows):
                    # A parallel list (waiters.py's baseline): the x of a sibling.
                    sibling = next(
                        (k for k in lists if x_of[k] and len(lists[k]) == len(rows)), None
                    )
                    if sibling is None:
                        continue
                    sibling_key = x_of[sibling]
                    assert sibling_key is not None
                    xs = [row[sibling_key] for row in lists[sibling]]
                    rows = [{**row, sibling_key: x} for row, x in zip(rows, xs, strict=True)]
                    x_key = sibling_key
                one = series.setdefault(
                    (benchmark, tag, loop, key), Series(benchmark, tag, loop, key, x_key)
                )
                one.points += rows
            flat = {k: v for k, v in figures.items() if not isinstance(v, list | dict)}
            if _x_key([flat]) is not None:  # one point of a curve spread over files
                one = series.setdefault(
                    (benchmark, tag, loop, ""), Series(benchmark, tag, loop, "", _x_key([flat]))
                )
                one.points.append(flat)
            for value in figures.values():
                if isinstance(value, dict) and _x_key([value]) is None:
                    baselines.append((benchmark, tag, loop, _numbers(value)))
    found = list(series.values())
    for one in found:
        if one.x_key is not None:
            one.points.sort(key=lambda p, k=one.x_key: float(p[k]))  # type: ignore[misc]
    drawn_beside = []
    for benchmark, tag, loop, numbers in baselines:
        beside = next(
            (s for s in found if (s.benchmark, s.tag, s.loop) == (benchmark, tag, loop)), None
        )
        if beside is not None and numbers:
            drawn_beside.append((beside, numbers))
    return found, drawn_beside


def _is_rows(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _has_text(rows: Sequence[Mapping[str, Any]]) -> bool:
    return any(isinstance(v, str) for v in rows[0].values())


def label_of(figure: str) -> str:
    if figure in LABELS:
        return LABELS[figure]
    for suffix, unit in (("_per_s", "/s"), ("_ms", "ms"), ("_pct", "%"), ("_s", "s")):
        if figure.endswith(suffix):
            return f"{figure.removesuffix(suffix).replace('_', ' ')} ({unit})"
    return figure.replace("_", " ")


def plot(
    series: list[Series],
    baselines: list[tuple[Series, dict[str, float]]],
    out: Path,
    fmt: str = "svg",
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    by_benchmark: dict[str, list[Series]] = defaultdict(list)
    for one in series:
        by_benchmark[one.benchmark].append(one)
    companions = {c for cs in COMPANIONS.values() for c in cs}
    for benchmark, group in by_benchmark.items():
        # Loops are told apart by colour; files and series of one loop by line style.
        kinds = list(dict.fromkeys((s.tag, s.name) for s in group))  # files in given order
        figures = sorted(
            {f for s in group for p in s.points for f in _numbers(p)} - set(X_KEYS) - companions
        )
        for figure in figures:
            bars = [s for s in group if s.x_key is None and any(figure in p for p in s.points)]
            fig = Figure(figsize=(8.0 if bars else 6.4, 4.0))
            ax = fig.add_subplot()
            drawn = False
            ys_all: list[float] = []
            for one in group:
                kind = kinds.index((one.tag, one.name))
                style, marker = STYLES[kind % len(STYLES)], MARKERS[kind % len(MARKERS)]
                if one.x_key is None:
                    continue
                for name in (figure, *COMPANIONS.get(figure, ())):
                    pts = [p for p in one.points if name in _numbers(p)]
                    if not pts:
                        continue
                    xs = [float(p[one.x_key]) for p in pts]
                    ys = [float(p[name]) for p in pts]
                    ys_all += ys
                    companion = name != figure
                    label = one.label + (f": {label_of(name)}" if companion else "")
                    ax.plot(xs, ys, linestyle="--" if companion else style, marker=marker,
                            markersize=3, color=COLORS.get(one.loop), label=label)  # fmt: skip
                    drawn = True
            for one, numbers in baselines:
                if one.benchmark == benchmark and figure in numbers and one.x_key is not None:
                    ax.axhline(numbers[figure], linestyle=":", color=COLORS.get(one.loop),
                               label=f"{one.loop}, baseline")  # fmt: skip
            if bars:
                _bars(ax, bars, figure)
                drawn = True
            if not drawn:
                continue
            if not bars:
                xs_all = [float(p[s.x_key]) for s in group if s.x_key for p in s.points]
                if xs_all and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 20:
                    ax.set_xscale("log")
                x_keys = {s.x_key for s in group if s.x_key}
                ax.set_xlabel(" / ".join(X_LABELS.get(k, k) for k in sorted(x_keys)))
                if ys_all and min(ys_all) > 0 and max(ys_all) / min(ys_all) >= 100:
                    ax.set_yscale("log")  # latencies from 0.2 ms to 50 ms
            title = CHART_LABELS.get(figure, label_of(figure))
            ax.set_ylabel(title)
            ax.set_title(f"{benchmark}: {title}", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
            fig.tight_layout()
            path = out / f"{benchmark}_{figure}.{fmt}"
            # No date in the file: a plot redrawn from the same figures is the same file.
            fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
            written.append(path)
    return written


def _bars(ax: Any, bars: list[Series], figure: str) -> None:
    """One group of bars per row (its text fields), one bar per series:
    by loop, then by file (later files paler)."""
    tags = list(dict.fromkeys(one.tag for one in bars))  # in the order of the files
    bars = sorted(bars, key=lambda one: (one.loop, tags.index(one.tag)))
    names: list[str] = []
    for one in bars:
        for p in one.points:
            name = _row_name(p)
            if name not in names:
                names.append(name)
    width = 0.8 / len(bars)
    for i, one in enumerate(bars):
        values = {_row_name(p): p for p in one.points}
        xs = [j + i * width for j, name in enumerate(names) if figure in values.get(name, {})]
        ys = [float(values[name][figure]) for name in names if figure in values.get(name, {})]
        ax.bar(xs, ys, width, label=one.label, color=COLORS.get(one.loop),
               alpha=1.0 - 0.4 * tags.index(one.tag) / max(1, len(tags) - 1))  # fmt: skip
        for name in COMPANIONS.get(figure, ()):
            cs = [float(values[n][name]) for n in names if name in values.get(n, {})]
            if len(cs) == len(xs):
                ax.bar(xs, cs, width * 0.5, color="black", alpha=0.5,
                       label=label_of(name) if i == 0 else None)  # fmt: skip
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, fontsize=7)


def _row_name(row: Mapping[str, Any]) -> str:
    return "\n".join(str(v) for v in row.values() if isinstance(v, str))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="--json files of the benchmarks")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "img")
    parser.add_argument("--format", choices=("svg", "png"), default="svg")
    args = parser.parse_args()
    series, baselines = read(args.files)
    for path in plot(series, baselines, args.out, args.format):
        print(path)


if __name__ == "__main__":
    main()
