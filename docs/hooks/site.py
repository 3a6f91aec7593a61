"""mkdocs hooks: serve the benchmarks' charts and method page from benchmarks/.

``benchmarks/plot.py`` writes its charts to ``benchmarks/img/`` and
``benchmarks/README.md`` is the method and the full tables. Copies under
``docs/`` would fall out of step with them; instead the build adds the files
where they are, as ``bench/img/*.svg`` and ``bench/method.md`` (whose
``img/...`` links then resolve to the same charts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    for svg in sorted((BENCHMARKS / "img").glob("*.svg")):
        files.append(File.generated(config, f"bench/img/{svg.name}", abs_src_path=str(svg)))
    files.append(
        File.generated(config, "bench/method.md", abs_src_path=str(BENCHMARKS / "README.md"))
    )
    return files
