"""End to end: eval with SimVLM in-process and through serve-sim over HTTP; faults; the cache; ask."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from videvolve.config import RuntimeSettings
from videvolve.evaluation.solve import solve_tasks
from videvolve.evaluation.summary import summarize
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.tasks import read_predictions
from videvolve.testing import GarbageVLM, reserved_port, serve_sim


def videvolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "videvolve", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> str:
    """scan_refine with 64 frames a question (the seed's 256 make these end-to-end tests slow)."""
    import shutil

    d = tmp_path_factory.mktemp("harness") / "scan_refine_64"
    shutil.copytree(seed_path("scan_refine"), d)
    config = (d / "config.toml").read_text().replace("frames = 256", "frames = 64")
    (d / "config.toml").write_text(config)
    return str(d)


def eval_args(world, out: Path, *extra: str, harness: str = "scan_refine") -> list[str]:
    return ["eval", "--tasks", str(world.tasks_path), "--split", "all", "--harness", harness, "--out", str(out),
            "--concurrency", "2", "--json", *extra]


@pytest.mark.slow
def test_serve_sim_over_http_equals_in_process(small_world, light, tmp_path: Path):
    local = videvolve(*eval_args(small_world, tmp_path / "local", "--no-cache", harness=light))
    assert local.returncode == 0, local.stderr
    with serve_sim() as base:
        remote = videvolve(*eval_args(small_world, tmp_path / "remote", "--no-cache", "--backend", "openai",
                                      "--base-url", base, "--model", "simvlm", "--image-format", "png",
                                      harness=light))
        stats = httpx.get(base.removesuffix("/v1") + "/stats").json()
    assert remote.returncode == 0, remote.stderr
    a = {p.task_id: p.answer for p in read_predictions(tmp_path / "local" / "predictions.jsonl")}
    b = {p.task_id: p.answer for p in read_predictions(tmp_path / "remote" / "predictions.jsonl")}
    assert a == b and len(a) == len(small_world.tasks)
    s_local, s_remote = json.loads(local.stdout), json.loads(remote.stdout)
    assert s_remote["mcq"]["accuracy"] == s_local["mcq"]["accuracy"] >= 0.5
    assert s_remote["frames_per_question"] == s_local["frames_per_question"]
    reported = sum(json.loads(p.read_text())["usage"]["reported_prompt_tokens"]
                   for p in (tmp_path / "remote" / "results").glob("*.json"))
    estimated = sum(json.loads(p.read_text())["usage"]["cumulative_tokens"]
                    for p in (tmp_path / "remote" / "results").glob("*.json"))
    assert reported == stats["prompt_tokens"] and reported != estimated  # the server's own counts are kept


@pytest.mark.slow
def test_second_eval_is_served_from_the_cache(small_world, light, tmp_path: Path):
    cache = tmp_path / "cache.sqlite"
    first = videvolve(*eval_args(small_world, tmp_path / "a", "--cache", str(cache), harness=light))
    second = videvolve(*eval_args(small_world, tmp_path / "b", "--cache", str(cache), harness=light))
    s1, s2 = json.loads(first.stdout), json.loads(second.stdout)
    assert s1["model_calls"] > 0 and s2["model_calls"] == 0 and s2["cache_hits"] == s2["requests"]
    for key in ("frames_per_question", "image_tokens_per_question", "cumulative_tokens_per_question", "score"):
        assert s1[key] == s2[key], key
    rerun = videvolve(*eval_args(small_world, tmp_path / "b", "--cache", str(cache), harness=light))
    assert json.loads(rerun.stdout)["requests"] == s2["requests"]  # results on disk are reused, not recomputed


@pytest.mark.slow
def test_endpoint_down_is_a_clear_error_after_bounded_retries(small_world, tmp_path: Path):
    with reserved_port() as port:  # nothing listens there, and no other worker's server can
        r = videvolve(*eval_args(small_world, tmp_path / "down", "--backend", "openai", "--base-url",
                                 f"http://127.0.0.1:{port}/v1", "--model", "m", "--max-retries", "1", "--no-cache"))
    assert r.returncode == 3
    assert "failed after 1 retries" in r.stderr and "rerun the same command to continue" in r.stderr
    assert "Traceback" not in r.stderr
    assert not list((tmp_path / "down" / "results").glob("*.json"))  # infrastructure errors are never scored


@pytest.mark.slow
def test_401_fails_at_once(small_world, tmp_path: Path):
    with serve_sim("--api-key", "right") as base:
        r = videvolve(*eval_args(small_world, tmp_path / "auth", "--backend", "openai", "--base-url", base,
                                 "--model", "simvlm", "--max-retries", "3", "--no-cache"))
    assert r.returncode == 3 and "authentication failed" in r.stderr and "401" in r.stderr


@pytest.mark.slow
def test_too_many_images_is_that_tasks_error(small_world, tmp_path: Path):
    with serve_sim("--max-images", "2") as base:
        r = videvolve("eval", "--tasks", str(small_world.tasks_path), "--split", "all", "--harness", "uniform",
                      "--out", str(tmp_path / "400"), "--backend", "openai", "--base-url", base, "--model", "simvlm",
                      "--no-cache", "--json", "--limit", "4")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["errors_by_kind"] == {"bad_request": 4} and summary["score"] == 0
    assert summary["frames_per_question"] > 0  # an error's frames still count


@pytest.mark.slow
def test_unparsable_reply_is_an_error_not_a_wrong_answer(small_world, tmp_path: Path):
    harness = load_harness(seed_path("uniform"))
    tasks = small_world.tasks[:6]
    results = solve_tasks(harness, tasks, GarbageVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2),
                          tmp_path)
    assert all(r.outcome == "error" and r.error_kind == "parse" and r.score == 0 for r in results)
    summary = summarize(tasks, results)
    assert summary["errors"] == 6 and summary["frames_per_question"] == harness.config["n_frames"]
    trace = (tmp_path / "traces" / f"{tasks[0].id}.jsonl").read_text()
    assert "Hmm, hard to say." in trace  # the reply is kept


@pytest.mark.slow
def test_traces_carry_times_outcome_and_score(small_world, tmp_path: Path):
    harness = load_harness(seed_path("scan_refine"))
    task = next(t for t in small_world.tasks if t.kind == "grounding" and t.intervals)
    result = solve_tasks(harness, [task], SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(), tmp_path)[0]
    steps = [json.loads(line) for line in (tmp_path / "traces" / f"{task.id}.jsonl").read_text().splitlines()]
    events = [s["event"] for s in steps]
    assert events[0] == "ask:match" and events[-2:] == ["final", "result"]
    assert all("observed_times" in s and "image_tokens" in s for s in steps if s["event"].startswith("ask"))
    assert steps[-1]["outcome"] == "ok" and steps[-1]["score"] == pytest.approx(result.score)
    assert result.usage.observed_times and result.frames == steps[-1]["frames"]


@pytest.mark.slow
def test_ask_cli(small_world, tmp_path: Path):
    task = next(t for t in small_world.tasks if t.kind == "mcq")
    options = [x for o in task.options or [] for x in ("--option", o)]
    args = ["ask", task.video, task.question, *options, "--json", "--no-cache"]
    r = videvolve(*args)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["outcome"] == "ok" and out["answer"] in "ABCD" and out["usage"]["frames"] > 0
    g = videvolve("ask", task.video, "When does the red circle appear?", "--no-cache")
    assert g.returncode == 0 and "answer:" in g.stdout and "cost:" in g.stdout
    missing = videvolve("ask", str(tmp_path / "nope.mp4"), "When?")
    assert missing.returncode == 2 and "video not found" in missing.stderr and len(missing.stderr.splitlines()) == 1
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all" * 50)
    corrupt = videvolve("ask", str(bad), "When?")
    assert corrupt.returncode == 2 and "bad.mp4" in corrupt.stderr and "Traceback" not in corrupt.stderr
    with reserved_port() as port:
        down = videvolve("ask", task.video, "When?", "--backend", "openai", "--base-url",
                         f"http://127.0.0.1:{port}/v1", "--model", "m", "--max-retries", "0", "--no-cache")
    assert down.returncode != 0 and "error" in down.stderr.lower() and "Traceback" not in down.stderr


@pytest.mark.slow
def test_python_api(small_world):
    from videvolve import load_harness as api_load

    task = next(t for t in small_world.tasks if t.kind == "grounding")
    answer = api_load("scan_refine").ask(task.video, task.question)
    assert answer.outcome == "ok" and isinstance(answer.answer, list) and answer.usage["frames"] > 0


@pytest.mark.slow
def test_python_evaluate_writes_what_eval_writes(small_world, light, tmp_path: Path):
    import videvolve

    done = videvolve.evaluate(light, small_world.tasks_path, split="test", out=tmp_path / "e", limit=3)
    assert done.summary["n"] == 3 and done.summary["split"] == "test" and len(done.results) == 3
    assert {p.name for p in (tmp_path / "e").iterdir()} >= {"summary.json", "predictions.jsonl", "results"}
    again = videvolve.evaluate(light, small_world.tasks_path, split="test", out=tmp_path / "e", limit=3)
    assert again.summary["requests"] == done.summary["requests"]  # finished tasks are reused
    from videvolve.errors import UsageError

    with pytest.raises(UsageError, match=r"no tasks in split 'nope'"):
        videvolve.evaluate(light, small_world.tasks_path, split="nope")


@pytest.mark.slow
def test_doctor_against_serve_sim():
    with serve_sim() as base:
        r = videvolve("doctor", "--backend", "openai", "--base-url", base, "--model", "simvlm")
        wrong = videvolve("doctor", "--backend", "openai", "--base-url", base, "--model", "nope")
    assert r.returncode == 0, r.stdout + r.stderr
    for check in ("PyAV decoding", "sandbox", "endpoint", "model name", "chat", "tool calling", "images per"):
        assert check in r.stdout
    flat = " ".join(r.stdout.split())  # SimVLM never calls tools, and serve-sim takes tools: not a missing parser
    assert "made no tool call" in flat and "has no tool parser" not in flat
    assert wrong.returncode == 1 and "is not served" in wrong.stdout.replace("\n", " ")


ECHO_ID = '''def solve(task, ctx):
    return {"answer": "A" if task.kind == "mcq" else [], "raw": task.id}
'''


def test_harnesses_see_opaque_ids_results_keep_real_ones(small_world, tmp_path: Path):
    """Ids are random per folder of results, stable when the folder is reused, never the task's own."""
    harness_dir = tmp_path / "echo"
    shutil.copytree(seed_path("uniform"), harness_dir)
    (harness_dir / "solver.py").write_text(ECHO_ID)
    harness = load_harness(harness_dir)
    tasks = small_world.tasks[:4]
    args = (SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
    first = solve_tasks(harness, tasks, *args, tmp_path / "a")
    seen = {r.task_id: r.prediction.raw for r in first if r.prediction}
    assert len(seen) == 4 and all(r.task_id == t.id for r, t in zip(first, tasks, strict=True))
    for real, opaque in seen.items():
        assert opaque != real and opaque.startswith("task-") and real.split("-")[0] not in opaque
    mapping = json.loads((tmp_path / "a" / "opaque_ids.json").read_text())
    assert mapping == seen and oct((tmp_path / "a" / "opaque_ids.json").stat().st_mode & 0o777) == "0o600"
    other = solve_tasks(harness, tasks, *args, tmp_path / "b")
    assert not set(seen.values()) & {r.prediction.raw for r in other if r.prediction}  # another folder, other ids
    shutil.rmtree(tmp_path / "a" / "results")  # rerun into the same folder: the same ids
    again = solve_tasks(harness, tasks, *args, tmp_path / "a")
    assert {r.task_id: r.prediction.raw for r in again if r.prediction} == seen


@pytest.mark.slow
def test_eval_names_the_videos_it_could_not_read(small_world, tmp_path: Path):
    # a missing video was scored 0 as a `media` error with only "media 2" in the table: the file's name was in
    # results/*.json alone, though getting started promises that a missing video names the file
    from videvolve.tasks import write_tasks

    tasks = [t.model_copy(update={"video": str(tmp_path / "gone.mp4")}) for t in small_world.tasks[:2]]
    write_tasks(tasks, tmp_path / "tasks.jsonl")
    r = videvolve("eval", "--tasks", str(tmp_path / "tasks.jsonl"), "--split", "all", "--harness", "uniform",
                  "--out", str(tmp_path / "out"), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "media 2" in r.stdout
    assert "2 task(s) could not read their video" in r.stderr and "gone.mp4" in r.stderr, r.stderr
    assert "rerun the same command" in r.stderr
