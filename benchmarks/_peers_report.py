"""benchmarks/peers.py's output: tables, a markdown summary, an SVG bar chart."""

from __future__ import annotations

import argparse
from typing import Any

from _common import table
from _peers_workloads import WORKLOADS

NODE = "node-redlock"
FLOOR_W = "floor: bare, write per command"
FLOOR_C = "floor: bare, coalesced writes"


def _x(row: dict[str, Any], key: str) -> str:
    return f"{row[key]:.2f}x" if key in row else "-"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _notes(row: dict[str, Any]) -> str:
    notes = []
    if row["stalled"]:
        notes.append(f"stalled in {row['stalled']} round(s)")
    if row["refused"]:
        notes.append(f"{row['refused']} refused")
    if row["failed"]:
        notes.append(f"{row['failed']} releases failed")
    return "; ".join(notes)


def report(figures: dict[str, dict[str, dict[str, Any]]], skipped: dict[str, str],
           args: argparse.Namespace) -> None:  # fmt: skip
    print(f"\nmedians of {args.rounds} rounds of {args.seconds} s; ratios are this run's")
    for workload, rows in figures.items():
        if not rows:
            continue
        print(f"\n{workload}: {WORKLOADS[workload]}")
        lines = []
        for label, row in rows.items():
            spread = f"{min(row['rounds']):,.0f}-{max(row['rounds']):,.0f}"
            if workload == "one_name":
                lines.append(
                    [
                        label,
                        f"{row['ops_per_s']:,.0f}",
                        _ms(row["handoff_p50_ms"]),
                        f"{row['handoffs']:,}",
                        _ms(row["wait_p50_ms"]),
                        _ms(row["wait_p99_ms"]),
                        _ms(row["wait_max_ms"]),
                        f"{row['busiest_share']:.0%}",
                        _x(row, "vs_node"),
                        _notes(row),
                    ]
                )
            elif workload.startswith("sync"):
                lines.append(
                    [label, f"{row['ops_per_s']:,.0f}", spread, _x(row, "vs_redis_py"), _notes(row)]
                )
            else:
                extra = [_x(row, "vs_healthy")] if workload == "blackhole" else []
                lines.append(
                    [
                        label,
                        f"{row['ops_per_s']:,.0f}",
                        spread,
                        _x(row, "vs_node"),
                        _x(row, "vs_floor_w"),
                        _x(row, "vs_floor_c"),
                        *extra,
                        _notes(row),
                    ]
                )
        if workload == "one_name":
            headers = [
                "contender",
                "grants/s",
                "handoff p50 ms",
                "handoffs (all rounds)",
                "wait p50 ms",
                "wait p99 ms",
                "wait max ms",
                "busiest",
                "vs node-redlock",
                "notes",
            ]
        elif workload.startswith("sync"):
            headers = ["contender", "pairs/s", "range", "vs redis-py Lock", "notes"]
        else:
            headers = [
                "contender",
                "pairs/s",
                "range",
                "vs node-redlock",
                "vs floor (per write)",
                "vs floor (coalesced)",
                *(["vs own healthy"] if workload == "blackhole" else []),
                "notes",
            ]
        print(table(headers, lines))
    for label, why in skipped.items():
        print(f"skipped {label}: {why}")


def _cell(rows: dict[str, dict[str, Any]], label: str, ratio: str) -> str:
    row = rows.get(label)
    if row is None:
        return ""
    stalled = ", stalled" if row["stalled"] else ""
    return f"{row['ops_per_s']:,.0f} ({_x(row, ratio)}{stalled})"


def markdown(by_loop: dict[str, dict[str, Any]]) -> str:
    """Three tables per loop: rates on free names, one name, threads."""
    out = []
    for loop, run in by_loop.items():
        f = run["figures"]
        out += [
            f"\n{loop}, pairs/s (x node-redlock; blackholed: x its own healthy 1-task rate):\n",
            "| contender | 1 task | 50 tasks | 1 task, node 0 blackholed |",
            "|---|---:|---:|---:|",
        ]
        for label in f["seq"]:
            cells = [_cell(f["seq"], label, "vs_node"), _cell(f["tasks"], label, "vs_node"),
                     _cell(f["blackhole"], label, "vs_healthy")]  # fmt: skip
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out += [
            f"\n{loop}, 8 workers on one name, hold 1 ms:\n",
            "| contender | grants/s | handoffs (all rounds) | handoff p50 ms | wait p50 ms "
            "| wait p99 ms | wait max ms | busiest worker |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for label, row in f["one_name"].items():
            cells = [f"{row['ops_per_s']:,.0f}", f"{row['handoffs']:,}",
                     _ms(row["handoff_p50_ms"]), _ms(row["wait_p50_ms"]),
                     _ms(row["wait_p99_ms"]), _ms(row["wait_max_ms"]),
                     f"{row['busiest_share']:.0%}"]  # fmt: skip
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out += [
            f"\n{loop}, one node, pairs/s (x redis-py's sync Lock):\n",
            "| contender | 1 thread (1 task) | 8 threads (8 tasks) |",
            "|---|---:|---:|",
        ]
        for label in f["sync1"]:
            cells = [
                _cell(f["sync1"], label, "vs_redis_py"),
                _cell(f["sync8"], label, "vs_redis_py"),
            ]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def svg(by_loop: dict[str, dict[str, Any]]) -> str:
    """Bars of pairs (grants) per second: a panel per workload and loop, each to its own scale."""
    panels = [(loop, w, run["figures"][w]) for loop, run in by_loop.items()
              for w in WORKLOADS if run["figures"][w]]  # fmt: skip
    bar, gap, label_w, bars_w, top = 14, 4, 250, 330, 28
    colours = {NODE: "#2c7fb8"}
    parts, y = [], 10
    for loop, workload, rows in panels:
        peak = max(r["ops_per_s"] for r in rows.values()) or 1.0
        parts.append(
            f'<text x="4" y="{y + 16}" font-weight="bold">{_esc(WORKLOADS[workload])} '
            f"({'grants' if workload == 'one_name' else 'pairs'}/s, {loop})</text>"
        )
        y += top
        for label, row in rows.items():
            width = bars_w * row["ops_per_s"] / peak
            fill = colours.get(label, "#7f7f7f")
            if label.startswith("redlock_async"):
                fill = "#c0392b"
            elif label.startswith("floor"):
                fill = "#bbbbbb"
            note = " (stalled)" if row["stalled"] else ""
            if workload == "one_name":  # the rate alone hides who got the grants
                note = f" (busiest worker {row['busiest_share']:.0%})"
            parts.append(
                f'<text x="{label_w - 6}" y="{y + bar - 3}" text-anchor="end">{_esc(label)}</text>'
                f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="{bar}" fill="{fill}"/>'
                f'<text x="{label_w + width + 4:.1f}" y="{y + bar - 3}">'
                f"{row['ops_per_s']:,.0f}{note}</text>"
            )
            y += bar + gap
        y += 10
    width = label_w + bars_w + 170
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" '
        f'font-family="sans-serif" font-size="11">\n'
        f'<rect width="{width}" height="{y}" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n"
    )


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
