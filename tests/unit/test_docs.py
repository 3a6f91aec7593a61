"""The docs site's sources: pages reachable, lists that nest, figures current.

``mkdocs build --strict`` (.ci/run) checks links and the API reference's
cross-references; these checks cover what it does not see: a page left out
of the nav or the index, a nested list Python-Markdown renders flat, a
public name missing from the API reference, a stale figure.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import redlock_async
import redlock_async.testing

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

# A list item: optional indent, then a bullet or a number and a space.
_ITEM = re.compile(r"^( *)(?:[-*+]|\d+[.)]) ")
_FENCE = re.compile(r"^ *(```|~~~)")


def list_items_misindented(text: str) -> list[tuple[int, str]]:
    """List items (outside code blocks) indented by other than a multiple of 4 spaces.

    Python-Markdown nests a list only under 4 spaces of indent: an item
    indented by 2 renders as a sibling of its parent, flat.
    """
    found = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = _FENCE.match(line)
        if opening:
            if fence is None:
                fence = opening[1]
            elif opening[1] == fence:
                fence = None
            continue
        item = _ITEM.match(line)
        if fence is None and item and len(item[1]) % 4:
            found.append((number, line))
    return found


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names (``- Title: page.md`` or ``- page.md``)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:") :]
    return re.findall(r"^\s*- (?:[^\n]*?: )?\"?([\w/.-]+\.md)\"?\s*$", nav, re.MULTILINE)


def test_the_check_finds_a_two_space_nested_list() -> None:
    text = "- top\n  - nested by 2\n    - nested by 4 under it\n```\n  - in code\n```\n"
    assert list_items_misindented(text) == [(2, "  - nested by 2")]
    assert list_items_misindented("- top\n    - nested\n        1. deeper\n") == []


def test_nested_lists_are_indented_by_four_spaces() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in PAGES
        for number, line in list_items_misindented(page.read_text(encoding="utf-8"))
    ]
    assert not found, "nested list items need 4 spaces of indent per level:\n" + "\n".join(found)


def test_every_page_is_in_the_nav() -> None:
    listed = nav_pages()
    missing = [page.name for page in PAGES if page.name not in listed]
    assert not missing, f"docs pages missing from mkdocs.yml's nav: {missing}"
    # Generated at build time by docs/hooks/site.py, not under docs/.
    generated = {"bench/method.md"}
    unknown = [name for name in listed if not (DOCS / name).exists() and name not in generated]
    assert not unknown, f"mkdocs.yml's nav names pages that do not exist: {unknown}"


def test_the_index_links_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w/.-]+\.md)(?:#[\w-]*)?\)", index))
    missing = [page.name for page in PAGES if page.name != "index.md" and page.name not in linked]
    assert not missing, f"docs/index.md does not link to: {missing}"


def test_the_api_reference_documents_every_public_name() -> None:
    api = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)\s*$", api, re.MULTILINE))
    missing = [
        f"redlock_async.{name}"
        for name in redlock_async.__all__
        if name != "__version__" and f"redlock_async.{name}" not in documented
    ]
    # The testing helpers are documented as one module, all of its __all__.
    if redlock_async.testing.__all__ and "redlock_async.testing" not in documented:
        missing.append("redlock_async.testing")
    assert not missing, f"docs/api.md has no '::: NAME' entry for: {missing}"


def test_every_benchmark_chart_is_shown() -> None:
    charts = {svg.name for svg in (ROOT / "benchmarks" / "img").glob("*.svg")}
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"\]\(bench/img/([\w.-]+\.svg)\)", page))
    assert charts, "benchmarks/img/ has no charts"
    assert shown == charts, (
        f"docs/benchmarks.md: not shown {sorted(charts - shown)}, "
        f"not in benchmarks/img/ {sorted(shown - charts)}"
    )


def test_the_timeline_figure_is_what_its_script_draws() -> None:
    script = DOCS / "hooks" / "timeline.py"
    spec = importlib.util.spec_from_file_location("timeline", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drawn: str = module.draw()
    committed = (DOCS / "img" / "timeline.svg").read_text(encoding="utf-8")
    assert committed == drawn, "docs/img/timeline.svg is stale: run python docs/hooks/timeline.py"
