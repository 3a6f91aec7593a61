"""What a checker returns (``checkers.py`` and ``bounds.py`` alike)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Verdict"]


@dataclass(slots=True)
class Verdict:
    """The outcome of one checker over one history."""

    name: str
    ok: bool
    violations: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        state = "ok" if self.ok else f"FAILED ({len(self.violations)} violations)"
        lines = [f"{self.name}: {state} {self.counts}"]
        lines.extend(f"  - {violation}" for violation in self.violations)
        return "\n".join(lines)
