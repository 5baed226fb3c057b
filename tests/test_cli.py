from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sample
from tests.test_tasks import grounding, mcq
from videvolve.cli import main
from videvolve.tasks import Prediction, read_tasks, write_predictions, write_tasks


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True)


@pytest.mark.parametrize(("benchmark", "folder", "gt", "pred", "expected"), [
    ("vue-tr", "vue_tr", "VUE-TR_ground_truth.json", "results_Vidi.json", (0.489556, 0.525075, 0.354340)),
    ("vue-tr", "vue_tr", "VUE-TR_ground_truth.json", "results_Gemini-2.5-Pro.json", (0.393065, 0.289149, 0.151852)),
    ("vue-tr-v2", "vue_tr_v2", "VUE-TRv2_ground_truth.json", "results_Vidi2.json", (0.624450, 0.649266, 0.487459)),
    ("vue-tr-v2", "vue_tr_v2", "VUE-TRv2_ground_truth.json", "results_GPT-5.json", (0.296351, 0.266325, 0.171519)),
])
def test_score_cli_reproduces_vue_tr(benchmark, folder, gt, pred, expected):
    r = run("score", "--benchmark", benchmark, "--gt", str(sample(folder, gt)), "--pred", str(sample(folder, pred)),
            "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["scale"].startswith("0-100")  # results_table.csv reports the AUCs x 100
    assert tuple(round(out[k] / 100, 6) for k in ("precision_auc", "recall_auc", "iou_auc")) == expected


@pytest.mark.slow
def test_score_cli_qvhighlights_table_and_json():
    gt, pred = sample("qvhighlights", "highlight_val_release.jsonl"), sample("qvhighlights", "sample_val_preds.jsonl")
    r = run("score", "--benchmark", "qvhighlights", "--gt", str(gt), "--pred", str(pred), "--json")
    out = json.loads(r.stdout)
    assert out["MR-full-R1@0.5"] == 53.94 and out["MR-full-mAP"] == 32.2 and out["HL-min-VeryGood-Hit1"] == 55.55
    table = run("score", "--benchmark", "qvhighlights", "--gt", str(gt), "--pred", str(pred))
    assert "MR-full-R1@0.7" in table.stdout and "34.84" in table.stdout and "HL-min-Fair-mAP" in table.stdout
    assert "scale: 0-100" in table.stdout and "not computed" not in table.stdout


def test_score_cli_on_our_own_format(tmp_path: Path, capsys):
    tasks = [mcq(0), mcq(1, answer="C"), grounding(2, answer=((0, 4),)), grounding(3, answer=())]
    write_tasks(tasks, tmp_path / "tasks.jsonl")
    write_predictions([Prediction(task_id="t0", kind="mcq", answer="B"),
                       Prediction(task_id="g2", kind="grounding", answer=[[0, 2]]),
                       Prediction(task_id="g3", kind="grounding", answer=[])], tmp_path / "p.jsonl")
    assert main(["score", "--benchmark", "videvolve", "--gt", str(tmp_path / "tasks.jsonl"),
                 "--pred", str(tmp_path / "p.jsonl"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mcq"]["accuracy"] == 0.5 and out["grounding"]["miou"] == 0.75 and out["unanswered"] == 1


def test_score_cli_extremewhenbench(tmp_path: Path, capsys):
    gt = tmp_path / "gt.jsonl"
    gt.write_text(sample("extremewhenbench", "readme_example_record.json").read_text().strip() + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"qid": "-WnyRMZqV1U_q042", "response": "The event happens in 1805 - 1822."}) + "\n")
    assert main(["score", "--benchmark", "extremewhenbench", "--gt", str(gt), "--pred", str(pred), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["miou"] == 1.0


def test_bad_prediction_file_is_one_clear_line(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"query_id": 0, "answer": [[1, 2, 0.5]]}]')
    r = run("score", "--benchmark", "vue-tr", "--gt", str(sample("vue_tr", "VUE-TR_ground_truth.json")),
            "--pred", str(bad))
    assert r.returncode == 2 and "error:" in r.stderr and "query 0" in r.stderr and "Traceback" not in r.stderr


def test_tasks_validate_reports_lines_and_exit_code(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(mcq(0).model_dump(mode="json")) + "\n" + '{"id": "x"}\n')
    r = run("tasks", "validate", str(path), "--no-videos")
    assert r.returncode == 2
    assert f"{path}:2:" in r.stderr.replace("\n", "") or ":2:" in r.stderr


def test_tasks_split_warns_about_small_selection(tmp_path: Path):
    tasks = [mcq(i * 10 + j, video=f"v{i}") for i in range(8) for j in range(2)]
    write_tasks(tasks, tmp_path / "t.jsonl")
    r = run("tasks", "split", str(tmp_path / "t.jsonl"), "--fractions", "train=0.5,selection=0.25,test=0.25")
    assert r.returncode == 0, r.stderr
    assert "eps = 1/4" in r.stderr.replace("\n", " ")
    out = read_tasks(tmp_path / "t.split.jsonl")
    assert {t.split for t in out} == {"train", "selection", "test"}
    v = run("tasks", "validate", str(tmp_path / "t.split.jsonl"), "--no-videos", "--json")
    assert json.loads(v.stdout)["by_split"]["selection"] == {"mcq": 4}


@pytest.mark.slow
def test_import_vue_tr_and_qvhighlights(tmp_path: Path):
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "coPfnSFOXj0.mkv").write_bytes(b"")
    r = run("import", "vue-tr", str(sample("vue_tr", "VUE-TR_ground_truth.json")), "--videos", str(videos),
            "--out", str(tmp_path / "vue.jsonl"))
    assert r.returncode == 0, r.stderr
    tasks = read_tasks(tmp_path / "vue.jsonl")
    assert len(tasks) == 1598 and tasks[0].video.endswith("coPfnSFOXj0.mkv") and tasks[0].meta["query_id"] == 0
    assert "not found" in r.stderr
    r = run("import", "qvhighlights", str(sample("qvhighlights", "highlight_val_release.jsonl")),
            "--videos", str(videos), "--out", str(tmp_path / "qvh.jsonl"))
    assert r.returncode == 0 and len(read_tasks(tmp_path / "qvh.jsonl")) == 1550


def test_import_reports_malformed_records(tmp_path: Path):
    bad = tmp_path / "gt.json"
    bad.write_text(json.dumps([{"query_id": 1, "video_id": "v", "duration": 10, "query": "q", "gt": [[5, 2]]},
                               {"query_id": 2, "video_id": "v", "query": "q", "gt": [[1, 2]]}]))
    r = run("import", "vue-tr", str(bad), "--videos", str(tmp_path), "--out", str(tmp_path / "o.jsonl"))
    assert r.returncode == 2 and "record 1" in r.stderr and "record 2" in r.stderr


def test_version_and_module_entry():
    r = run("--version")
    assert r.returncode == 0 and "videvolve" in r.stdout


def test_tasks_validate_reads_each_videos_duration_and_names_what_is_not_its_own(tmp_path: Path):
    from videvolve.testing import make_index_video

    video = str(make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48))
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video")
    def on(task, path, **update):
        return task.model_copy(update={"video": str(path), "split": "train", **update})

    tasks = [on(mcq(0, "v"), video, duration=4.0),  # its own: no warning
             on(mcq(1, "v"), video, duration=1804.5),
             on(grounding(2, "v", answer=((1.0, 2.0), (30.0, 31.0))), video, duration=None),
             on(mcq(3, "b"), broken, duration=60.0)]
    write_tasks(tasks, tmp_path / "t.jsonl")
    r = run("tasks", "validate", str(tmp_path / "t.jsonl"))
    said = " ".join(r.stderr.split())
    assert r.returncode == 0, r.stderr  # warnings, not errors
    assert "1 task(s) declare a duration that is not their video's (e.g. task t1: 1804.5 s declared" in said
    assert "1 task(s) have an interval that ends after their video does (e.g. task g2" in said
    assert f"1 video file(s) cannot be read (e.g. {broken})" in said  # main: none of the three


def test_servers_give_up_on_a_down_model_endpoint_before_their_clients_do() -> None:
    """``serve`` and ``mcp`` retry a failing endpoint for 30 s unless told (a client or host times out long before
    an overnight run's 10 minutes, then retries the whole question); ``--retry-window`` still decides."""
    from videvolve.cli import build_parser
    from videvolve.cli.serve_cmds import SERVING_RETRY_WINDOW_S, answering_model

    parser = build_parser()
    for command in (["serve", "uniform"], ["mcp"]):
        assert answering_model(parser.parse_args(command)).retry_window_s == SERVING_RETRY_WINDOW_S == 30
        assert answering_model(parser.parse_args([*command, "--retry-window", "120"])).retry_window_s == 120


def _two_videos(tmp_path: Path) -> tuple[str, str]:
    import shutil

    from videvolve.testing import make_index_video

    v = make_index_video(tmp_path / "v.mp4", seconds=4, fps=10, gop=10, width=64, height=48)
    shutil.copy(v, tmp_path / "w.mp4")
    return str(v), str(tmp_path / "w.mp4")


def test_tasks_validate_says_each_warning_once(tmp_path: Path, capsys):
    """An interval past the video's end was said twice in two wordings (against the declared duration and the
    video's own), and a small selection set twice (its eps, then the gate's power)."""
    v, w = _two_videos(tmp_path)
    tasks = [mcq(0, "v").model_copy(update={"video": v, "split": "train", "duration": 4.0}),
             grounding(1, "w", answer=((1.0, 2.0), (30.0, 31.0))).model_copy(
                 update={"video": w, "split": "selection", "duration": 4.0})]
    write_tasks(tasks, tmp_path / "t.jsonl")
    for extra in ([], ["--no-videos"]):
        assert main(["tasks", "validate", str(tmp_path / "t.jsonl"), *extra]) == 0
        warnings = [" ".join(x.split()) for x in capsys.readouterr().err.split("warning:")[1:]]
        assert len([x for x in warnings if "ends after" in x]) == 1, warnings
        assert len([x for x in warnings if "selection" in x]) == 1, warnings
        assert len(warnings) == 2 and "task g1" in next(x for x in warnings if "ends after" in x)


def test_tasks_split_warns_when_a_split_asked_for_gets_no_video(tmp_path: Path, capsys):
    """Two videos, three splits asked for: no test split was written, without a word."""
    write_tasks([mcq(0, "v0"), mcq(1, "v1")], tmp_path / "t.jsonl")
    assert main(["tasks", "split", str(tmp_path / "t.jsonl"), "--fractions", "train=0.6,selection=0.2,test=0.2"]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "1 split(s) asked for got no video: test (2 video(s) for 3 splits" in said
    assert "leave test out of --fractions" in said
    assert {t.split for t in read_tasks(tmp_path / "t.split.jsonl")} == {"train", "selection"}
    assert main(["tasks", "split", str(tmp_path / "t.jsonl"), "--fractions", "train=0.5,selection=0.5"]) == 0
    assert "got no video" not in capsys.readouterr().err


def test_tasks_from_csv_names_the_rows_whose_times_end_after_their_video(tmp_path: Path, capsys):
    """`812.5-815` on a 204.8 s video was taken without a word; the answer can never be found."""
    _two_videos(tmp_path)
    (tmp_path / "q.csv").write_text("video,question,options,answer,evidence\n"
                                    "v.mp4,When does it start?,,1-2,\n"
                                    "v.mp4,When does it end?,,812.5-815; 1-2,\n"
                                    "w.mp4,What colour?,red|blue,B,300-310\n"
                                    "w.mp4,When does it stop?,,3.5-5.5,\n")  # within the slack of frame rounding
    assert main(["tasks", "from-csv", str(tmp_path / "q.csv"), "--videos", str(tmp_path), "--out",
                 str(tmp_path / "t.jsonl")]) == 0
    said = " ".join(capsys.readouterr().err.split())
    assert "2 row(s) of" in said and "line 3 (v-002): 812.5-815 s, on a video of 4.0 s" in said, said
    assert "line 4 (w-001): 300-310 s" in said and "line 2 " not in said and "line 5 " not in said
    assert len(read_tasks(tmp_path / "t.jsonl")) == 4  # a warning: the tasks are written


def test_the_help_names_what_tasks_holds_and_every_synth_flag_says_what_it_does(capsys):
    """`tasks` read "check or split a tasks.jsonl file", though it also makes one (`from-csv`, `generate`: where the
    own-data guides start); `synth --seed` had no help at all."""
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "from-csv (your questions about your videos), generate (" in text
    import argparse

    from videvolve.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    synth = commands.choices["synth"]
    assert all(a.help for a in synth._actions if a.option_strings), [a.dest for a in synth._actions if not a.help]


def test_every_flag_of_every_command_says_what_it_does():
    """About thirty flags had no help text (``--run``, ``--json``, ``--port``, ``demo --videos``, ...): ``--help``
    and the generated CLI reference showed them bare."""
    import argparse

    from videvolve.cli import build_parser

    def bare(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
        out = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    out += bare(sub, [*path, name])
            elif action.option_strings and not action.help and "-h" not in action.option_strings:
                out.append(f"{' '.join(path)} {action.option_strings[-1]}")
        return out

    assert bare(build_parser(), []) == []
