"""Every benchmark: import -> predictions -> its own submission file -> its official scorer (max and min)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample
from videvolve.datasets.benchmarks import REGISTRY, import_benchmark
from videvolve.datasets.benchmarks.mcq import read_lenient_json
from videvolve.metrics import parse_extremewhen
from videvolve.metrics.mcq import parse_videomme
from videvolve.tasks import Prediction

LVBENCH = [{"key": "abc123", "type": "documentary", "video_info": {"duration_minutes": 61.5}, "qa": [
    {"uid": "55", "question": "What year appears in the opening caption of the video?\n(A) 1636\n(B) 1366\n(C) 1363"
     "\n(D) 1633", "answer": "D", "question_type": ["key information retrieval"], "time_reference": "00:15-00:19"},
    {"uid": "56", "question": "Who speaks first?\n(A) a man\n(B) a woman\n(C) a child\n(D) nobody", "answer": "B",
     "question_type": ["entity recognition"], "time_reference": "01:02-01:10"}]}]
LONGVIDEOBENCH = [{"id": "86CxyhFV9MI_0", "video_id": "86CxyhFV9MI", "video_path": "86CxyhFV9MI.mp4", "duration": 23.9,
                   "question": "What is the man holding?", "candidates": ["a cup", "a phone", "a book", "a pen"],
                   "correct_choice": 2, "duration_group": 15, "question_category": "O2E"},
                  {"id": "86CxyhFV9MI_1", "video_id": "86CxyhFV9MI", "video_path": "86CxyhFV9MI.mp4", "duration": 23.9,
                   "question": "Where is he?", "candidates": ["a kitchen", "a park", "a car", "a shop", "a boat"],
                   "correct_choice": 4, "duration_group": 15, "question_category": "S2E"}]
COMET = [{"query_id": 1, "video_id": "v1", "query": "a dog jumps after a ball is thrown", "gt": [[10, 14], [40, 45]],
          "duration": 1900.0},
         {"query_id": 2, "video_id": "v1", "query": "a cat rides a bicycle", "gt": [], "duration": 1900.0}]


def crafted(tmp_path: Path, name: str) -> Path:
    tables: dict[str, list[dict[str, Any]]] = {"lvbench": LVBENCH, "longvideobench": LONGVIDEOBENCH,
                                               "comet-bench": COMET}
    data = tables[name]
    path = tmp_path / f"{name}.json"
    path.write_text("\n".join(json.dumps(r) for r in data) if name == "lvbench" else json.dumps(data))
    return path


CASES = {  # benchmark: (annotation file, metric key, maximum, minimum)
    "vue-tr": (("vue_tr", "VUE-TR_ground_truth.json"), "iou_auc", 0.99, 0.0),
    "vue-tr-v2": (("vue_tr_v2", "VUE-TRv2_ground_truth.json"), "iou_auc", 0.99, 0.0),
    "qvhighlights": (("qvhighlights", "highlight_val_release.jsonl"), "MR-full-R1@0.5", 1.0, 0.0),
    "extremewhenbench": (("extremewhenbench", "readme_example_record.json"), "miou", 1.0, 0.0),
    "charades-sta": (("charades_sta", "charades_sta_test_first40.txt"), "miou", 1.0, 0.0),
    "mlvu": (("mlvu", "mlvu_dev_first3_per_task.json"), "m_avg", 1.0, 0.0),
    "videomme": (("videomme", "output_test_template.verbatim_not_strict_json.txt"), "accuracy", 1.0, 0.0),
    "lsdbench": (("lsdbench", "mc_qa_annotations_first10.json"), "accuracy", 1.0, 0.0),
    "video-holmes": (("video_holmes", "example_questions_RSmjqss0XKQ.json"), "accuracy", 1.0, 0.0),
    "lvbench": (None, "accuracy", 1.0, 0.0),
    "longvideobench": (None, "accuracy", 1.0, None),
    "comet-bench": (None, "miou", 1.0, 0.0),
}


def test_every_benchmark_is_covered():
    assert set(CASES) == set(REGISTRY)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_import_then_score_gives_the_maximum_and_empty_answers_the_minimum(name, tmp_path: Path):
    where, key, best, worst = CASES[name]
    ann = sample(*where) if where else crafted(tmp_path, name)
    meta = sample("charades_sta", "Charades_v1_test_lengths_subset.csv") if name == "charades-sta" else None
    tasks = import_benchmark(name, ann, tmp_path / "videos", meta)
    assert tasks and all(t.source == name for t in tasks)
    bench = REGISTRY[name]
    perfect = [(t, Prediction(task_id=t.id, kind=t.kind, answer=t.answer)) for t in tasks]
    result = bench.score(ann, bench.write(perfect, tmp_path / "perfect"), {})
    assert result[key] == pytest.approx(best, abs=1e-9) or result[key] >= best, result
    empty = [(t, Prediction(task_id=t.id, kind=t.kind, answer=[] if t.kind == "grounding" else None))
             for t in tasks]
    result = bench.score(ann, bench.write(empty, tmp_path / "empty"), {})
    if worst is None:  # LongVideoBench guesses a random letter for an unparsable answer (official behaviour)
        assert result["random_guesses"] == len(tasks)
    else:
        assert result[key] == pytest.approx(worst), result


def test_extremewhen_text_is_read_back_by_both_official_parsers(tmp_path: Path):
    ann = sample("extremewhenbench", "readme_example_record.json")
    tasks = import_benchmark("extremewhenbench", ann, tmp_path)
    preds = [(t, Prediction(task_id=t.id, kind="grounding", answer=[[1805.25, 1822.5], [1900, 1910]])) for t in tasks]
    path = REGISTRY["extremewhenbench"].write(preds, tmp_path)
    row = json.loads(path.read_text().splitlines()[0])
    for parser in ("lmms", "vllm"):
        assert parse_extremewhen(row["response"], parser) == (1805.25, 1822.5)
    text_only = REGISTRY["extremewhenbench"].score(ann, path, {"text_only": True})
    assert text_only["parse_fail"] == 0.0 and text_only["miou"] > 0.9


def test_videomme_letter_is_read_back_by_the_official_parser(tmp_path: Path):
    ann = sample("videomme", "output_test_template.verbatim_not_strict_json.txt")
    tasks = import_benchmark("videomme", ann, tmp_path)
    preds = [(t, Prediction(task_id=t.id, kind="mcq", answer="C")) for t in tasks]
    path = REGISTRY["videomme"].write(preds, tmp_path)
    responses = [q["response"] for v in read_lenient_json(path) for q in v["questions"]]
    assert responses and all(parse_videomme(r) == "C" for r in responses)
    assert tasks[0].options is not None and tasks[0].options[0] == "Apples." and tasks[0].answer == "C"


def test_loaders_keep_evidence_durations_and_report_bad_records(tmp_path: Path):
    lv = import_benchmark("lvbench", crafted(tmp_path, "lvbench"), tmp_path)
    assert lv[0].options == ["1636", "1366", "1363", "1633"] and lv[0].duration == pytest.approx(61.5 * 60)
    assert lv[0].evidence[0].pair() == (15.0, 19.0) and lv[0].question.endswith("caption of the video?")
    lsd = import_benchmark("lsdbench", sample("lsdbench", "mc_qa_annotations_first10.json"), tmp_path)
    assert lsd[0].duration is None and lsd[0].evidence[0].pair() == (0.0, 240.0)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"qid": "x", "video_id": "v", "question": "q"}]))
    with pytest.raises(Exception, match="record 1: missing field 'correct_interval'"):
        import_benchmark("extremewhenbench", bad, tmp_path)


def test_a_durations_file_or_an_mlvu_file_of_the_wrong_shape_names_the_file(tmp_path: Path):
    from videvolve.errors import InputNotFoundError, TaskFormatError

    charades = tmp_path / "charades.txt"
    charades.write_text("AO8RW 0.0 6.9##a person is putting a book on a shelf.\n")
    meta = tmp_path / "Charades_v1_test.csv"
    with pytest.raises(InputNotFoundError, match=f"durations file not found: {meta}"):
        import_benchmark("charades-sta", charades, tmp_path, meta)
    for text, says in [("name,len\nAO8RW,30\n", f"{meta}: no 'id' and 'length' columns"),
                       ("id,length\nAO8RW,30\nAO8RX,abc\n", f"{meta}:3: length 'abc' is not a number of seconds")]:
        meta.write_text(text)
        with pytest.raises(TaskFormatError, match=says):
            import_benchmark("charades-sta", charades, tmp_path, meta)
    mlvu = tmp_path / "mlvu.json"
    for data, says in [([1, 2], "record 1 is not a JSON object"), ({"plotQA": 5}, "'plotQA' is not a list")]:
        mlvu.write_text(json.dumps(data))
        with pytest.raises(TaskFormatError, match=says):
            import_benchmark("mlvu", mlvu, tmp_path)


def test_answer_files_of_the_wrong_shape_or_nested_too_deep_name_the_file(tmp_path: Path):
    """An LVBench answer file that is a list (not uid -> letter) was a TypeError out of the scorer; Video-MME's
    lenient JSON and a LongVideoBench subtitle file nested past Python's limit were a RecursionError."""
    from videvolve.datasets.transcripts import TranscriptFormatError, parse_subtitles
    from videvolve.errors import TaskFormatError

    gt = crafted(tmp_path, "lvbench")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(["A", "B"]))
    with pytest.raises(TaskFormatError, match="one JSON object"):
        REGISTRY["lvbench"].score(gt, answers, {})
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TaskFormatError, match="nested too deep"):
        read_lenient_json(deep)
    subs = tmp_path / "v_en.json"
    subs.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TranscriptFormatError, match="nested too deep"):
        parse_subtitles(subs)
