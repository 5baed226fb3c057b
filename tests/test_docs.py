"""The docs: a short README (the package's long description), generated reference pages that match the code, and a
site that builds with ``mkdocs build --strict`` (broken links and missing pages fail)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_is_the_long_description() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["readme"] == "README.md"


def test_the_cli_and_sdk_reference_match_the_code() -> None:
    stale = _generator().stale()
    assert not stale, f"stale generated docs: {[str(p) for p in stale]}; run `python docs/generate.py`"


def test_a_changed_flag_makes_the_cli_reference_stale(tmp_path: Path, monkeypatch) -> None:
    gen = _generator()
    page = tmp_path / "cli.md"
    page.write_text(gen.render()["cli"].replace("--iterations", "--rounds", 1))
    monkeypatch.setitem(gen.PAGES, "cli", page)
    assert gen.stale() == [page]


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("the docs extra is not installed: pip install -e '.[docs]' (`make install-dev` does)")
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1",
                                                                         "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site / "index.html").is_file() and (site / "reference" / "cli" / "index.html").is_file()
    assert "videvolve evolve" in (site / "reference" / "cli" / "index.html").read_text()


def test_nav_entries_of_pages_not_written_yet_are_left_out(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "guides").mkdir()
    (tmp_path / "index.md").write_text("# home")
    (tmp_path / "guides" / "here.md").write_text("# here")
    nav = [{"Home": "index.md"}, {"Guides": [{"Here": "guides/here.md"}, {"Later": "guides/later.md"}]},
           {"Empty": [{"Later": "guides/later.md"}]}]
    assert hooks._prune(nav, tmp_path) == [{"Home": "index.md"}, {"Guides": [{"Here": "guides/here.md"}]}]
