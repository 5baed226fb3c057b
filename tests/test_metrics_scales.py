"""`score` on each benchmark's official scale, with every official metric or a line saying which are not computed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import sample
from videvolve.datasets.benchmarks import REGISTRY
from videvolve.datasets.loaders import read_json_records
from videvolve.metrics import score_qvhighlights
from videvolve.metrics.qvhighlights import saliency_ap
from videvolve.metrics.scales import SCALES, on_official_scale


@pytest.fixture(scope="module")
def qvh() -> tuple[list, list, dict]:
    gt = read_json_records(sample("qvhighlights", "highlight_val_release.jsonl"))
    preds = read_json_records(sample("qvhighlights", "sample_val_preds.jsonl"))
    return gt, preds, json.loads(sample("qvhighlights", "sample_val_preds_metrics_raw.json").read_text())


def test_qvhighlights_on_its_official_scale_reproduces_every_official_number(qvh):
    gt, preds, expected = qvh
    result = on_official_scale("qvhighlights", score_qvhighlights(gt, preds))
    assert {k: result[k] for k in expected["brief"]} == expected["brief"]  # MR-* and HL-*, 0-100, 2 decimals
    for level in ("HL-min-Fair", "HL-min-Good", "HL-min-VeryGood"):
        assert result[level] == expected[level]
    for subset in ("full", "short", "middle", "long"):
        assert result[subset]["MR-mAP"] == expected[subset]["MR-mAP"]
        assert result[subset]["MR-R1"] == expected[subset]["MR-R1"]
    assert "not_computed" not in result and result["full"]["n"] == len(preds)  # counts are not scaled


@pytest.mark.slow
def test_qvhighlights_says_which_metrics_it_cannot_compute(qvh, tmp_path: Path):
    gt, preds, _ = qvh
    windows_only = [{k: v for k, v in p.items() if k != "pred_saliency_scores"} for p in preds]
    result = score_qvhighlights(gt, windows_only)
    assert not any(k.startswith("HL-") for k in result)
    assert "HL-min" in result["not_computed"][0] and "pred_saliency_scores" in result["not_computed"][0]
    pred = tmp_path / "windows_only.jsonl"
    pred.write_text("".join(json.dumps(p) + "\n" for p in windows_only))
    r = subprocess.run([sys.executable, "-m", "videvolve", "score", "--benchmark", "qvhighlights", "--gt",
                        str(sample("qvhighlights", "highlight_val_release.jsonl")), "--pred", str(pred)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "53.94" in r.stdout and "not computed: HL-min" in r.stdout and "pred_saliency_scores" in r.stdout


def test_saliency_ap_hand_cases():
    assert saliency_ap(np.array([1.0, 1, 0]), np.array([0.9, 0.8, 0.1])) == 1.0
    # ranks: miss, hit, miss, hit -> precision 1/2 at recall 1/2 and 2/4 at recall 1
    assert saliency_ap(np.array([0.0, 1, 0, 1]), np.array([0.9, 0.8, 0.3, 0.1])) == pytest.approx(0.5)
    assert saliency_ap(np.zeros(4), np.arange(4.0)) == 0.0 and saliency_ap(np.ones(3), np.arange(3.0)) == 1.0


def test_every_benchmark_names_its_scale_and_percentages_scale_rates_not_counts():
    assert set(REGISTRY) | {"videvolve"} == set(SCALES)
    result = {"benchmark": "vue-tr", "iou_auc": 0.354, "n": 1598, "empty_predictions": 0,
              "by_attribute": {"duration_category": {"long": {"iou_auc": 0.276, "n": 300}}}}
    scaled = on_official_scale("vue-tr", result)
    assert scaled["iou_auc"] == pytest.approx(35.4) and scaled["n"] == 1598 and scaled["empty_predictions"] == 0
    assert scaled["by_attribute"]["duration_category"]["long"] == {"iou_auc": pytest.approx(27.6), "n": 300}
    assert on_official_scale("videomme", {"accuracy": 0.54321})["accuracy"] == 54.3  # eval_your_results: 1 decimal
    fractions = on_official_scale("extremewhenbench", {"miou": 0.0485})
    assert fractions["miou"] == 0.0485 and fractions["scale"].startswith("fractions")
