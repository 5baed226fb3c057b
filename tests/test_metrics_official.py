"""The official scorers reproduced: oracle files from ../shared/samples, plus hand-made edge cases."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import sample
from videvolve.datasets.loaders import read_json_records
from videvolve.metrics import score_qvhighlights, score_vue_tr
from videvolve.metrics.qvhighlights import query_ap
from videvolve.metrics.vue_tr import auc, query_iou, query_precision_recall

ORACLES = [
    ("vue_tr", "VUE-TR_ground_truth.json", "results_Vidi.json", 1, (0.489556, 0.525075, 0.354340)),
    ("vue_tr", "VUE-TR_ground_truth.json", "results_Gemini-2.5-Pro.json", 1, (0.393065, 0.289149, 0.151852)),
    ("vue_tr_v2", "VUE-TRv2_ground_truth.json", "results_Vidi2.json", 2, (0.624450, 0.649266, 0.487459)),
    ("vue_tr_v2", "VUE-TRv2_ground_truth.json", "results_GPT-5.json", 2, (0.296351, 0.266325, 0.171519)),
]


@pytest.mark.parametrize(("folder", "gt", "pred", "version", "expected"), ORACLES)
def test_vue_tr_reproduces_official_files(folder, gt, pred, version, expected):
    result = score_vue_tr(read_json_records(sample(folder, gt)), read_json_records(sample(folder, pred)), version)
    got = (result["precision_auc"], result["recall_auc"], result["iou_auc"])
    assert [round(x, 6) for x in got] == list(expected)


def test_vue_tr_per_attribute_rows_match_the_official_table():
    gt = read_json_records(sample("vue_tr", "VUE-TR_ground_truth.json"))
    result = score_vue_tr(gt, read_json_records(sample("vue_tr", "results_Vidi.json")), 1)
    with open(sample("vue_tr", "results_table.csv")) as fh:
        rows = [r for r in csv.DictReader(fh) if r["method"] == "Vidi"]
    checked = 0
    for row in rows:
        if row["attribute"] == "overall":
            continue
        for attr, values in result["by_attribute"].items():
            if row["attribute"] in values:
                v = values[row["attribute"]]
                for key, col in (("precision_auc", "precision"), ("recall_auc", "recall"), ("iou_auc", "iou")):
                    assert f"{v[key] * 100:.1f}%" == row[col], (attr, row)
                checked += 1
    assert checked >= 8


def test_gemini_quirks_are_reported_beside_the_official_value():
    gt = read_json_records(sample("vue_tr", "VUE-TR_ground_truth.json"))
    result = score_vue_tr(gt, read_json_records(sample("vue_tr", "results_Gemini-2.5-Pro.json")), 1)
    assert result["empty_predictions"] == 521
    assert result["precision_auc_zero_filled"] < result["precision_auc"] - 0.1


@pytest.mark.slow
def test_qvhighlights_reproduces_official_metrics():
    gt = read_json_records(sample("qvhighlights", "highlight_val_release.jsonl"))
    preds = read_json_records(sample("qvhighlights", "sample_val_preds.jsonl"))
    expected = json.loads(sample("qvhighlights", "sample_val_preds_metrics_raw.json").read_text())
    result = score_qvhighlights(gt, preds)
    for key, value in expected["brief"].items():
        if key.startswith("MR-"):
            assert round(result[key] * 100, 2) == value, key
    for subset in ("full", "short", "middle", "long"):
        for metric in ("MR-mAP", "MR-R1"):
            for thr, value in expected[subset][metric].items():
                assert round(result[subset][metric][thr] * 100, 2) == value, (subset, metric, thr)


# ---- hand-made VUE-TR edge cases ----

def test_vue_iou_reversed_unsorted_overlapping_touching():
    gt = [[10.0, 20.0]]
    assert query_iou([[10, 20]], gt) == pytest.approx(1.0)
    assert query_iou([[15, 20], [10, 15]], gt) == pytest.approx(1.0)  # unsorted + touching: merged
    assert query_iou([[10, 18], [12, 20]], gt) == pytest.approx(1.0)  # overlapping: merged, not double counted
    assert query_iou([[20, 10]], gt) == 0.0  # reversed alone: dropped after merging
    assert query_iou([[10, 20], [15, 12]], gt) == pytest.approx(1.0)  # reversed inside another: absorbed
    assert query_iou([[0, 5]], gt) == 0.0
    assert query_iou([[10, 15]], [[10, 20], [30, 40]]) == pytest.approx(5 / 20)


def test_vue_empty_and_absent():
    assert query_iou([], [[1, 2]]) == 0.0
    assert query_iou([], []) == 1.0 and query_iou([[1, 2]], []) == 0.0
    assert query_precision_recall([], [[1, 2]], 1) == (None, 0.0)  # empty prediction: left out of precision
    assert query_precision_recall([], [], 1) == (None, None)
    assert query_precision_recall([], [], 2) == (1.0, None)  # V2's one change


def test_vue_precision_recall_quirks():
    # reversed intervals are swapped in precision / recall (unlike IoU)
    assert query_precision_recall([[20, 10]], [[10, 20]], 1) == (1.0, 1.0)
    # overlapping predictions are double counted by the sweep: recall can exceed 1
    p, r = query_precision_recall([[10, 20], [10, 20]], [[10, 20]], 1)
    assert r == pytest.approx(2.0) and p == pytest.approx(1.0)


def test_vue_scoring_floors_and_ceils_predictions_and_uses_submitted_denominator():
    gt = [{"query_id": 1, "gt": [[10, 20]]}, {"query_id": 2, "gt": [[0, 4]]}]
    preds = [{"query_id": 1, "answer": [[10.7, 19.2]]}]  # -> [10, 20]: perfect
    result = score_vue_tr(gt, preds, 1)
    assert result["n"] == 1 and result["miou"] == pytest.approx(1.0)
    assert result["iou_auc"] == pytest.approx(0.995)  # strict '>' fails only at t = 1
    assert score_vue_tr(gt, [{"query_id": 2, "answer": [[]]}], 1)["empty_predictions"] == 1
    with pytest.raises(Exception, match="list of"):
        score_vue_tr(gt, [{"query_id": 1, "answer": [[1, 2, 0.9]]}], 1)


def test_auc_strictness():
    assert auc([1.0], strict=False) == pytest.approx(1.0)
    assert auc([1.0], strict=True) == pytest.approx(0.995)
    assert auc([0.5], strict=True) == pytest.approx(0.5 - 0.005)


def test_qvh_average_precision_hand_case():
    gt = [[0, 10], [20, 30]]
    assert query_ap(gt, [[0, 10, 0.9], [20, 30, 0.8]])[0] == pytest.approx(1.0)
    # a false positive ranked first
    ap = query_ap(gt, [[50, 60, 0.95], [0, 10, 0.9], [20, 30, 0.8]])[0]
    assert ap == pytest.approx(2 / 3)  # VOC interpolation: precision is the envelope from the right
    # one GT window can be matched once
    assert query_ap([[0, 10]], [[0, 10, 0.9], [0, 10, 0.8]])[0] == pytest.approx(1.0)
    assert query_ap([[0, 10]], [])[0] == 0.0


def test_qvh_requires_matching_qids():
    gt = [{"qid": 1, "relevant_windows": [[0, 10]]}, {"qid": 2, "relevant_windows": [[0, 10]]}]
    with pytest.raises(Exception, match="differ"):
        score_qvhighlights(gt, [{"qid": 1, "pred_relevant_windows": [[0, 10, 1.0]]}])
    out = score_qvhighlights(gt, [{"qid": 1, "pred_relevant_windows": [[0, 10, 1.0]]}], match_number=False)
    assert out["MR-full-R1@0.5"] == 1.0
