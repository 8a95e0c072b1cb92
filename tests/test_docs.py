"""The documentation: the site builds with `mkdocs build --strict`, loads nothing from the
network, and its command line reference names every subcommand of the parser; the README stays
a front door (short, the two commands, links that lead somewhere)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from onnx_studio.engine.cli import build_parser
from tests.conftest import REPO

# hosts of web fonts and CDNs: the site must render offline, so no page or style sheet names one
NETWORK = ("fonts.googleapis", "fonts.gstatic", "cdn.jsdelivr", "unpkg.com", "cdnjs")
INSTALL = "python -m pip install torch==2.13.0 -e '.[test]'"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's tests."""
    folder = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=REPO, capture_output=True, text=True, timeout=280,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return folder


def _page(site: Path, name: str) -> str:
    """A built page's HTML (`name.html`, or `name/index.html` with directory URLs)."""
    path = site / f"{name}.html"
    if not path.is_file():
        path = site / name / "index.html"
    return path.read_text(encoding="utf-8")


def _subcommands() -> list[str]:
    parser = build_parser()
    found = [action for action in parser._actions
             if isinstance(action, argparse._SubParsersAction)]
    assert len(found) == 1
    return list(found[0].choices)


@pytest.mark.timeout(300)
def test_the_site_builds_strict_and_loads_nothing_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    styles = sorted(site.rglob("*.css"))
    assert len(pages) >= 15 and styles
    for path in pages + styles:
        text = path.read_text(encoding="utf-8")
        named = [host for host in NETWORK if host in text]
        assert not named, f"{path.relative_to(site)} names {named}"
        if path.suffix == ".html":
            # links to other sites are fine; nothing the page loads may come from one
            loaded = re.findall(r'\bsrc="https?://[^"]*"|<link\b[^>]*\bhref="https?://[^"]*"',
                                text)
            assert not loaded, f"{path.relative_to(site)} loads {loaded}"


@pytest.mark.timeout(300)
def test_the_command_line_reference_names_every_subcommand(site: Path) -> None:
    page = _page(site, "cli")
    assert "cli-reference" not in page  # the marker was replaced by the generated reference
    names = _subcommands()
    assert {"export", "validate", "inspect", "batch"} <= set(names)
    for name in names:
        assert f"onnx-studio {name}" in page, f"the CLI reference has no section for {name}"
        assert f"usage: onnx-studio {name}" in page


@pytest.mark.timeout(300)
def test_the_api_reference_documents_the_public_names(site: Path) -> None:
    import onnx_studio

    page = _page(site, "api")
    for name in ("export", "validate", "compare", "profile", "variant", "explain", "batch",
                 "load_recipe", "ExportReport", "BatchSummary"):
        assert name in onnx_studio.__all__
        assert f'id="onnx_studio.{name}"' in page, f"the API reference has no entry for {name}"


def test_the_readme_is_a_front_door() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 220
    assert f"\n{INSTALL} && onnx-studio\n" in readme
    assert f"\n{INSTALL} && python -m pytest\n" in readme
    links = re.findall(r"\]\((docs/[^)#]*)", readme)
    assert links, "the README links to no documentation page"
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, f"the README links to missing files: {missing}"
