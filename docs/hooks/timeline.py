"""Draw docs/img/timeline.svg: one grant from acquire to release, and one lost.

Run ``python docs/hooks/timeline.py`` after changing the timing rules; a unit
test (tests/unit/test_docs.py) fails while the committed figure differs from
what this draws. Every instant on the figure is computed with the library's
own formulas (``redlock_async._base._timing``: validity, renewal_delay,
renewal_due, extend_retry_interval, loss_deadline), so the picture moves when
the code does. The durations are schematic: a 12 s ttl with elapsed time,
drift and node_timeout enlarged so that they can be seen.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from redlock_async._base._timing import (  # noqa: E402 (the checkout's package, not an installed one)
    drift,
    extend_retry_interval,
    loss_deadline,
    renewal_delay,
    renewal_due,
    validity,
)

OUT = ROOT / "docs" / "img" / "timeline.svg"

# Schematic settings (seconds): the defaults' proportions would hide elapsed
# time and drift (50 ms and 0.3 s against 30 s) under a pixel.
TTL = 12.0
ELAPSED = 0.5  # from sending to the quorum's decision
DRIFT_FACTOR = 0.04
NODE_TIMEOUT = 1.2  # = ttl / 10, so the loss guard is visible
RETRY_DELAY = 3.0  # > ttl / 6: retries every ttl / 6
RELEASE_AT = 6.5
T_MAX = 16.0

WIDTH, HEIGHT = 980, 475
LEFT, RIGHT = 120, 950
GREEN, BLUE, RED, GREY = "#2e7d32", "#1565c0", "#c62828", "#9e9e9e"
ORANGE, INK = "#ef6c00", "#212121"
MINUS, TIMES = "\N{MINUS SIGN}", "\N{MULTIPLICATION SIGN}"
ARROW, CROSS = "\N{RIGHTWARDS ARROW}", "\N{BALLOT X}"


def x(t: float) -> float:
    return round(LEFT + (RIGHT - LEFT) * t / T_MAX, 1)


class Svg:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        t: float,
        y: float,
        words: str,
        *,
        anchor: str = "middle",
        size: int = 12,
        **style: str,
    ) -> None:
        attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in style.items())
        self.add(
            f'<text x="{x(t)}" y="{y}" text-anchor="{anchor}" font-size="{size}"{attrs}>'
            f"{escape(words)}</text>"
        )

    def bar(self, start: float, end: float, y: float, h: float, fill: str, **style: str) -> None:
        attrs = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in style.items())
        width = round(x(end) - x(start), 1)
        self.add(
            f'<rect x="{x(start)}" y="{y}" width="{width}" height="{h}" fill="{fill}"{attrs}/>'
        )

    def mark(self, t: float, top: float, bottom: float, colour: str, dash: str = "") -> None:
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.add(
            f'<line x1="{x(t)}" y1="{top}" x2="{x(t)}" y2="{bottom}" stroke="{colour}"'
            f' stroke-width="1.5"{extra}/>'
        )

    def span(
        self, start: float, end: float, y: float, colour: str, label: str, *, below: bool = False
    ) -> None:
        """A double-headed arrow from ``start`` to ``end``, ``label`` above (or below) it."""
        self.add(
            f'<line x1="{x(start)}" y1="{y}" x2="{x(end)}" y2="{y}" stroke="{colour}"'
            ' stroke-width="1.2" marker-start="url(#head)" marker-end="url(#head)"/>'
        )
        self.text((start + end) / 2, y + 15 if below else y - 5, label, fill=colour, size=11)


def lane_rows(svg: Svg, top: float, title: str) -> tuple[float, float]:
    """The lane's title and row labels; returns the y of its keys and validity rows."""
    keys, valid = top + 40, top + 80
    svg.text(0, top + 12, title, anchor="start", size=14, font_weight="bold")
    for y, label in ((keys, "keys on nodes"), (valid, "validity")):
        svg.add(
            f'<text x="{LEFT - 8}" y="{y + 12}" text-anchor="end" font-size="12">{label}</text>'
        )
    return keys, valid


def draw() -> str:
    d = drift(TTL, DRIFT_FACTOR)
    # Acquire: sent at t0 = 0 (``started``), decided after ELAPSED.
    left = validity(TTL, 0.0, ELAPSED, DRIFT_FACTOR)
    end0 = ELAPSED + left  # = ttl - drift, whatever the elapsed time
    renew_at = renewal_due(ELAPSED, renewal_delay(left, TTL, 0.0), TTL)

    svg = Svg()
    svg.add(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' width="{WIDTH}" height="{HEIGHT}" font-family="Helvetica, Arial, sans-serif"'
        f' fill="{INK}" role="img" aria-label="Timeline of a grant: acquire, validity,'
        ' renewal, release or loss">'
    )
    svg.add(
        '<defs><marker id="head" viewBox="0 0 8 8" refX="4" refY="4" markerWidth="7"'
        ' markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z"'
        ' fill="context-stroke"/></marker></defs>'
    )
    # A white card: the figure stays legible on the site's dark theme.
    svg.add(f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff" rx="6"/>')
    formula = f"ttl {MINUS} elapsed {MINUS} drift"

    # Lane 1: renewed once, then released (before the next renewal is due).
    keys, valid = lane_rows(svg, 10, "Held, renewed, released")
    renewed_end = renew_at + validity(TTL, renew_at, renew_at + ELAPSED, DRIFT_FACTOR) + ELAPSED
    svg.bar(0.0, RELEASE_AT, keys, 16, GREY, fill_opacity="0.55")
    svg.bar(ELAPSED, RELEASE_AT, valid, 16, GREEN, fill_opacity="0.85")
    svg.bar(RELEASE_AT, renewed_end, valid, 16, GREEN, fill_opacity="0.18")
    for t, label in ((end0, "end before renewal"), (renewed_end, "end after renewal")):
        svg.mark(t, valid - 4, valid + 22, GREEN, "3,3")
        svg.text(t, valid + 36, label, fill=GREEN, size=11)
    svg.span(renew_at, renewed_end, keys - 10, BLUE, f"renewed: {formula}, from its own send")
    svg.span(ELAPSED, end0, valid - 8, GREEN, f"validity = {formula}")
    svg.span(
        renew_at, end0, valid + 28, BLUE, "renewal due when 2/3 of the ttl is left", below=True
    )
    svg.mark(0.0, keys - 8, valid + 64, INK)
    svg.text(0.0, valid + 78, "t0: SET NX PX to every node", anchor="start", size=11)
    svg.mark(ELAPSED, keys - 8, valid + 50, INK)
    svg.text(ELAPSED, valid + 64, "quorum decided", anchor="start", size=11)
    svg.mark(renew_at, keys - 12, valid + 64, BLUE)
    renewal = "renewal sent: PEXPIRE where the token is ours"
    svg.text(renew_at, valid + 78, renewal, anchor="start", fill=BLUE, size=11)
    svg.mark(RELEASE_AT, keys - 8, valid + 20, RED)
    release = "release: DEL where the token is ours; renewal stops"
    svg.text(RELEASE_AT + 0.1, keys + 12, release, anchor="start", fill=RED, size=11)

    # Lane 2: every renewal fails; the grant is lost before its validity ends.
    keys, valid = lane_rows(svg, 200, "Renewals fail: lost")
    deadline = loss_deadline(end0, TTL, NODE_TIMEOUT)
    # Each try is decided (no quorum) ELAPSED after it is sent; the next is
    # sent a retry interval later, or at the deadline, which then means lost.
    retries = [renew_at]
    while True:
        decided = retries[-1] + ELAPSED
        step = max(0.0, min(extend_retry_interval(RETRY_DELAY, TTL), deadline - decided))
        if decided + step >= deadline:
            break
        retries.append(decided + step)
    svg.bar(0.0, deadline, keys, 16, GREY, fill_opacity="0.55")
    svg.bar(deadline, TTL, keys, 16, GREY, fill_opacity="0.18")
    svg.text(TTL + 0.1, keys + 12, "(else they expire by t0 + ttl)", anchor="start", size=11)
    svg.bar(ELAPSED, deadline, valid, 16, GREEN, fill_opacity="0.85")
    svg.bar(deadline, end0, valid, 16, ORANGE, fill_opacity="0.7")
    svg.bar(end0, TTL, valid, 16, GREY, fill_opacity="0.35")
    svg.span(deadline, end0, valid + 26, ORANGE, "guard", below=True)
    svg.span(end0, TTL, valid + 26, GREY, "drift", below=True)
    for n, t in enumerate(retries):
        svg.mark(t, keys - 8, valid + 20, RED)
        svg.text(
            t,
            keys - 12,
            f"retry fails {CROSS}" if n else f"renewal fails {CROSS}",
            fill=RED,
            size=11,
        )
    retry = "retry after min(retry_delay, ttl/6)"
    svg.span(retries[0] + ELAPSED, retries[1], valid + 30, RED, retry, below=True)
    svg.mark(deadline, keys - 8, valid + 56, RED)
    svg.text(deadline, valid + 70, "lost: lost_event set, on_lost called,", fill=RED, size=11)
    svg.text(
        deadline, valid + 84, f"body cancelled {ARROW} LockLost; keys released", fill=RED, size=11
    )

    # The time axis, in fractions of the ttl.
    axis = 400
    svg.add(f'<line x1="{x(0)}" y1="{axis}" x2="{x(T_MAX)}" y2="{axis}" stroke="{INK}"/>')
    for k, label in enumerate(("t0", "ttl/3", "2ttl/3", "ttl")):
        t = k * TTL / 3
        svg.mark(t, axis - 4, axis + 4, INK)
        svg.text(t, axis + 18, label)
    svg.text(T_MAX, axis + 18, f"time {ARROW}", anchor="end")
    svg.text(
        0,
        axis + 46,
        f"Schematic: ttl {TTL:g} s, elapsed {ELAPSED:g} s, drift = ttl {TIMES} drift_factor + 2 ms"
        f" = {d:.3f} s, guard = min(node_timeout, ttl/10) = {min(NODE_TIMEOUT, TTL / 10):g} s.",
        anchor="start",
        size=11,
    )
    svg.text(
        0,
        axis + 62,
        "Renewals fall due up to ttl/12 earlier than drawn (a random spread), on a ttl/64 grid.",
        anchor="start",
        size=11,
    )
    svg.add("</svg>")
    return "\n".join(svg.parts) + "\n"


if __name__ == "__main__":
    OUT.write_text(draw(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
