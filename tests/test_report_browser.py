"""The report in a real browser (headless Chromium): nothing runs past a 1400-px window or cuts a trial's JSON, the
trace viewer shows each observed time with its thumbnail, the question's options and the gold answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser import browser_missing, chromium, open_everything, overflowing
from videvolve.graph.driver import evolve
from videvolve.report import build_report

pytestmark = pytest.mark.slow  # a two-iteration run, then the browser


@pytest.fixture(scope="module")
def report(small_world, tmp_path_factory) -> Path:
    from tests.conftest import run_context
    from videvolve.skill_library.harness import seed_path

    tmp = tmp_path_factory.mktemp("report")
    seed = tmp / "uniform16"
    import shutil

    shutil.copytree(seed_path("uniform"), seed)
    (seed / "config.toml").write_text("n_frames = 16\nmax_side = 160\n")
    evolve(run_context(small_world, tmp, seed, iterations=2))
    return build_report(tmp / "run")


def test_the_report_fits_1400_px_and_shows_each_observed_time(report: Path) -> None:
    why = browser_missing()
    if why:
        pytest.skip(why)
    from selenium.webdriver.common.by import By

    with chromium(1400, 1000) as driver:
        open_everything(driver, report)
        assert overflowing(driver) == []
        trials = [p.text for p in driver.find_elements(By.CSS_SELECTOR, "pre") if '"per_task"' in p.text]
        assert trials and all(json.loads(t)["per_task"] for t in trials)  # whole, parseable JSON
        texts = driver.find_element(By.TAG_NAME, "body").text
        assert not re.search(r"step \d+: result\s*$", texts, re.M)  # a result step says what it was
        assert "gold answer:" in texts and "A) " in texts  # options and the gold answer
        assert not re.search(r"\d\.\d{3,}(?![\d%])", "".join(re.findall(r"evidence_times[^\]]*\]", texts)))
        steps = driver.find_elements(By.XPATH, "//p[b[contains(., ': ask')]]")
        assert steps
        for step in steps:
            m = re.search(r"observed (\d+) time\(s\)", step.text)
            assert m, step.text
            figures = step.find_elements(By.XPATH, "following-sibling::div[1][@class='thumbs']/figure")
            captions = [f.find_element(By.TAG_NAME, "figcaption").text for f in figures]
            assert len(captions) == int(m.group(1)) and all(re.fullmatch(r"\d+\.\d\d s", c) for c in captions)
            assert all(f.find_element(By.TAG_NAME, "img").get_property("naturalWidth") > 0 for f in figures)


def test_a_run_without_a_test_comparison_says_how_to_get_one(report: Path) -> None:
    html = report.read_text()
    assert "No test comparison for this run yet" in html
    assert f"videvolve compare --run {report.parent.parent.resolve()}" in html
    assert "the first rungs only where multi-fidelity validation stopped it early" in " ".join(html.split())


def test_the_report_gives_the_best_s_cost_unit_and_each_diagnosis_s_id(report: Path) -> None:
    html = report.read_text()
    assert re.search(r"selection score \d\.\d{3}, [\d,]+\.\d visual tokens per question", html)
    memory = json.loads((report.parent.parent / "settings.json").read_text())["memory"]
    ids = [json.loads(x)["id"] for x in (Path(memory) / "diagnoses.jsonl").read_text().splitlines() if x.strip()]
    assert ids and all(f"<code>{i}</code>" in html for i in ids)  # what `videvolve diagnoses show` takes
