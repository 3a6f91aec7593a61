"""The wheel and the sdist carry the licence and the project's addresses."""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
URLS = {"Homepage", "Documentation", "Repository", "Changelog"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it (as a release does): about 2 s, offline."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def project_urls(metadata: Message) -> dict[str, str]:
    urls = {}
    for entry in metadata.get_all("Project-URL") or []:
        label, _, url = entry.partition(", ")
        urls[label] = url
    return urls


def check_metadata(metadata: Message) -> None:
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    urls = project_urls(metadata)
    assert set(urls) == URLS
    assert all(url.startswith("https://") for url in urls.values())
    # The docs site names the same repository and address.
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert f"repo_url: {urls['Repository']}\n" in mkdocs
    assert f"site_url: {urls['Documentation']}\n" in mkdocs


def test_the_repository_has_the_mit_licence() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c)" in text
    assert "the redlock_async authors" in text


def test_the_wheel_carries_the_licence_and_the_urls(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (info,) = {name.split("/")[0] for name in names if ".dist-info/" in name}
        assert archive.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    check_metadata(metadata)
    assert f"{info}/entry_points.txt" in names


def test_the_sdist_carries_the_licence_and_the_urls(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        top = archive.getnames()[0].split("/")[0]
        licence = archive.extractfile(f"{top}/LICENSE")
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert licence is not None
        assert pkg_info is not None
        assert licence.read() == (ROOT / "LICENSE").read_bytes()
        metadata = email.message_from_bytes(pkg_info.read())
    check_metadata(metadata)
