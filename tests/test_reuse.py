"""A stored result is reused only by what produced it, and an input error is tried again on a rerun (issue 20)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.evaluation.evaluate import Evaluation, evaluate
from videvolve.evaluation.results import Producer
from videvolve.models.cache import ResponseCache
from videvolve.models.cost import cost_model
from videvolve.models.openai_backend import openai_vlm
from videvolve.models.sim import SimVLM
from videvolve.models.sim.server import create_app
from videvolve.tasks import Task, read_tasks, write_tasks
from videvolve.testing import serve_app

RUNTIME = RuntimeSettings(concurrency=2, warm_sandboxes=False)


def run(seed: Path, tasks: list[Task], out: Path, vlm=None, runtime: RuntimeSettings = RUNTIME,
        family: str = "qwen2.5-vl") -> Evaluation:
    return evaluate(seed, tasks, out, vlm or SimVLM(family), cost_model(family), runtime)


def reused(done: Evaluation) -> int:
    return int(done.summary["cache_use"]["reused_results"])


def test_sim_results_are_not_reused_by_the_openai_backend_against_serve_sim(small_world, seed: Path, tmp_path: Path):
    tasks = [t for t in small_world.tasks if t.split == "test"][:3]
    out = tmp_path / "e"
    run(seed, tasks, out)
    app = create_app()
    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url=base, retry_window_s=5))
        rehearsal = run(seed, tasks, out, vlm)
        served = app.state.stats["requests"]
    assert reused(rehearsal) == 0  # main: "3 result(s) reused from the output folder without asking the model"
    assert rehearsal.summary["cache_use"]["rerun_results"] == len(tasks)  # and the summary says why they ran
    assert served >= len(tasks)
    again = run(seed, tasks, out, vlm)  # the same producer reuses its own results (no server needed any more)
    assert reused(again) == len(tasks) and again.summary["score"] == rehearsal.summary["score"]


def test_reuse_follows_the_runtime_and_the_task_content(small_world, seed: Path, tmp_path: Path):
    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"
    first = run(seed, tasks, out)
    assert reused(first) == 0
    assert reused(run(seed, tasks, out)) == 2
    assert reused(run(seed, tasks, out, runtime=RUNTIME.model_copy(update={"budget": 8}))) == 0  # shows fewer frames
    assert reused(run(seed, tasks, out)) == 0  # back to the first settings: the budget-8 results are not its own
    assert reused(run(seed, tasks, out, runtime=RUNTIME.model_copy(update={"concurrency": 1}))) == 2  # same replies
    changed = [tasks[0].model_copy(update={"question": tasks[0].question + " (reworded)"}), tasks[1]]
    assert reused(run(seed, changed, out)) == 1  # only the unchanged task is reused


def test_results_metered_by_another_cost_model_are_not_reused(small_world, seed: Path, tmp_path: Path):
    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"
    qwen25 = run(seed, tasks, out)
    qwen3 = run(seed, tasks, out, family="qwen3-vl")  # main: both results reused, with Qwen2.5-VL's token counts
    assert reused(qwen3) == 0
    assert qwen3.summary["image_tokens_per_question"] != qwen25.summary["image_tokens_per_question"]
    assert reused(run(seed, tasks, out, family="qwen3-vl")) == 2


def test_a_media_error_is_tried_again_once_the_video_is_back(small_world, seed: Path, tmp_path: Path):
    task = next(t for t in read_tasks(small_world.tasks_path) if t.split == "test")
    video = tmp_path / "videos" / "v.mp4"
    tasks_file = write_tasks([task.model_copy(update={"video": str(video), "duration": None})],
                             tmp_path / "tasks.jsonl")
    tasks = read_tasks(tasks_file)
    out = tmp_path / "e"
    missing = run(seed, tasks, out)
    assert missing.results[0].error_kind == "media" and missing.summary["score"] == 0.0
    video.parent.mkdir()
    shutil.copy(task.video, video)
    restored = run(seed, tasks, out)  # main: the media error was reused and the score stayed 0.000
    assert restored.results[0].outcome == "ok" and reused(restored) == 0


def test_a_video_or_transcript_replaced_under_the_same_name_is_run_again(small_world, seed: Path, tmp_path: Path):
    task = next(t for t in read_tasks(small_world.tasks_path) if t.split == "test")
    video = tmp_path / "videos" / "v.mp4"
    video.parent.mkdir()
    shutil.copy(task.video, video)
    tasks = read_tasks(write_tasks([task.model_copy(update={"video": str(video)})], tmp_path / "tasks.jsonl"))
    out = tmp_path / "e"
    run(seed, tasks, out)
    assert reused(run(seed, tasks, out)) == 1
    shutil.copy(next(t.video for t in small_world.tasks if t.video_id != task.video_id), video)  # new content
    assert reused(run(seed, tasks, out)) == 0  # main: the first video's result was reused
    video.with_suffix(".vtt").write_text("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nhello\n", encoding="utf-8")
    assert reused(run(seed, tasks, out)) == 0  # a transcript the harness may read appeared beside it
    assert reused(run(seed, tasks, out)) == 1


def test_the_producer_key_names_backend_model_decoding_and_task(small_world):
    task = small_world.tasks[0]

    class Other(SimVLM):
        pass

    def key(vlm, harness: str = "h1", runtime: RuntimeSettings = RUNTIME, t: Task = task) -> str:
        return Producer.of(harness, vlm, runtime, cost_model("qwen2.5-vl")).key(t)

    hotter = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url="http://127.0.0.1:9/v1",
                                      temperature=0.7))
    cold = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url="http://127.0.0.1:9/v1"))
    elsewhere = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url="http://127.0.0.1:10/v1"))
    assert key(SimVLM()) == key(SimVLM())
    assert len({key(SimVLM()), key(Other()), key(cold), key(hotter), key(SimVLM(), "h2"),
                key(SimVLM(), t=task.model_copy(update={"video": task.video + ".other.mp4"}))}) == 6
    assert key(cold) == key(elsewhere)  # the endpoint's address is not what produced a reply
    before = Producer.of("h1", SimVLM(), RUNTIME, cost_model("qwen2.5-vl")).model_copy(update={"release": "0.0.9"})
    assert before.key(task) != key(SimVLM())  # another release's media and prompts made it (main: no release)


@pytest.mark.slow
def test_a_timeout_is_reused_only_under_a_limit_no_longer_than_its_own(small_world, seed: Path, tmp_path: Path):
    """A harness that never returns times out; a rerun with a longer --task-timeout, or a result an older version
    wrote (its clock also ran while the endpoint served the harness), gets the task run again."""
    busy = tmp_path / "busy"
    shutil.copytree(seed, busy)
    (busy / "solver.py").write_text("def solve(task, ctx):\n    while True:\n        pass\n")
    tasks = [t for t in small_world.tasks if t.split == "test"][:1]
    out = tmp_path / "e"
    short = RUNTIME.model_copy(update={"wall_seconds": 1.0})
    first = run(busy, tasks, out, runtime=short)
    assert first.results[0].error_kind == "timeout" and first.results[0].time_limit_s == 1.0
    assert reused(run(busy, tasks, out, runtime=short)) == 1
    assert reused(run(busy, tasks, out, runtime=short.model_copy(update={"wall_seconds": 0.5}))) == 1
    longer = run(busy, tasks, out, runtime=short.model_copy(update={"wall_seconds": 1.5}))
    assert reused(longer) == 0 and longer.results[0].time_limit_s == 1.5
    stored = next((out / "results").glob("*.json"))
    older = stored.read_text().replace('"time_limit_s": 1.5', '"time_limit_s": null')
    assert older != stored.read_text()
    stored.write_text(older)
    assert reused(run(busy, tasks, out, runtime=short.model_copy(update={"wall_seconds": 1.5}))) == 0


def test_a_memory_error_is_reused_only_under_a_limit_no_larger_than_its_own(small_world, seed: Path, tmp_path: Path):
    """A harness that needs ~500 MB fails under a 300 MB address-space limit; a rerun with a larger --memory-bytes
    runs it again instead of taking the stored memory error."""
    hungry = tmp_path / "hungry"
    shutil.copytree(seed, hungry)
    (hungry / "solver.py").write_text("def solve(task, ctx):\n    big = [0] * 60_000_000\n    return {'answer': 'A'}\n")
    tasks = [t for t in small_world.tasks if t.split == "test" and t.kind == "mcq"][:1]
    out = tmp_path / "e"
    small = RUNTIME.model_copy(update={"memory_bytes": 300 * 2**20})
    first = run(hungry, tasks, out, runtime=small)
    assert first.results[0].error_kind == "memory"
    assert reused(run(hungry, tasks, out, runtime=small)) == 1
    larger = run(hungry, tasks, out)  # main: the memory error was reused under the 2 GiB default
    assert reused(larger) == 0 and larger.results[0].outcome == "ok"


def test_a_video_spliced_in_by_a_needle_plan_is_part_of_the_result_key(small_world, tmp_path: Path):
    """A generated task shows stretches of another video (a splice needle): replacing that video changes what the
    model is shown, so a result made with the old one is not reused."""
    from videvolve.needles.frames import PLAN_KEY
    from videvolve.needles.needles import Needle, NeedlePlan

    source = tmp_path / "source.mp4"
    videos = sorted({t.video for t in small_world.tasks})
    shutil.copy(videos[1], source)
    plan = NeedlePlan(id="plan0001", video_id="v", style="synth", width=320, height=180,
                      needles=(Needle(start=10.0, end=12.0, kind="splice", source=str(source)),))
    task = small_world.tasks[0].model_copy(update={"meta": {PLAN_KEY: plan.model_dump(mode="json")}})

    def key(t: Task) -> str:
        return Producer.of("h", SimVLM(), RUNTIME, cost_model("qwen2.5-vl")).key(t)

    before = key(task)
    assert key(task) == before
    shutil.copy(videos[2], source)  # the spliced-in video replaced under the same name
    assert key(task) != before


@pytest.mark.slow
def test_a_request_refused_as_too_long_is_not_reused_once_the_server_takes_longer_ones(small_world, seed: Path,
                                                                                       tmp_path: Path):
    """The context guard refuses a request over the served max_model_len (a ``budget`` error, scored 0). Restarted
    with a longer --max-model-len, the server would take it: the stored refusal is not reused there, and the new
    result is reused only under that server's length."""
    from videvolve.models.sim.mimic import MimicSettings

    tasks = [t for t in small_world.tasks if t.split == "test" and t.kind == "mcq"][:1]
    out = tmp_path / "e"

    cache = ResponseCache(tmp_path / "cache.sqlite")

    def against(max_model_len: int, margin: float = 0.05) -> Evaluation:
        app = create_app("simvlm", mimic=MimicSettings(max_model_len=max_model_len))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url=base, retry_window_s=5,
                                           context_margin=margin))
            done = evaluate(seed, tasks, out, vlm, cost_model("qwen2.5-vl"), RUNTIME, cache=cache)
        done.summary["served"] = app.state.stats["requests"]
        return done

    short = against(400)
    assert short.results[0].error_kind == "budget" and "400 tokens" in str(short.results[0].error)
    assert short.results[0].served_context == 380
    assert reused(against(400)) == 1  # the same server: the same refusal
    longer = against(131_072)  # main: the refusal was reused, scored 0 against a server that takes the request
    assert reused(longer) == 0 and longer.results[0].outcome == "ok"
    assert reused(against(131_072)) == 1
    assert reused(against(262_144)) == 1  # a longer context takes whatever the shorter one took
    largest = longer.results[0].usage.largest_request_tokens
    assert 400 < largest < 20_000
    # A shorter one that still takes its largest request: reused (its requests would all be sent again as they were)
    assert reused(against(int(largest / 0.95) + 2)) == 1
    # One that does not: the answer is not reused, and the reply stored for its request is not given either
    # (main: both were, an answer the server can no longer give, scored as if it could)
    shrunk = against(400)
    assert reused(shrunk) == 0 and shrunk.results[0].error_kind == "budget" and shrunk.summary["served"] == 0


@pytest.mark.slow
def test_a_request_the_server_refused_is_not_reused_once_it_is_restarted_to_take_it(small_world, seed: Path,
                                                                                    tmp_path: Path):
    """vLLM refuses a prompt with more images than its --limit-mm-per-prompt (a 400: that task's ``bad_request``
    error, scored 0); /v1/models does not say the limit. Restarted with a higher one, the server takes the request:
    the stored refusal is run again, not reused."""
    from videvolve.models.sim.mimic import MimicSettings

    tasks = [t for t in small_world.tasks if t.split == "test" and t.kind == "mcq"][:1]
    out = tmp_path / "e"

    def against(images: int) -> Evaluation:
        app = create_app("simvlm", mimic=MimicSettings(limit_mm_per_prompt={"image": images, "video": 1}))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="simvlm", base_url=base, retry_window_s=5))
            return run(seed, tasks, out, vlm)

    tight = against(2)
    assert tight.results[0].error_kind == "bad_request" and "At most 2 image(s)" in str(tight.results[0].error)
    wide = against(999)  # main: the refusal was reused, scored 0 against a server that takes the request
    assert reused(wide) == 0 and wide.results[0].outcome == "ok"
    assert reused(against(999)) == 1


def still_starting(vlm: Any, base: str) -> None:
    """The model's first GET /v1/models finds no server yet (counted by requests, not by the clock)."""
    import httpx

    from videvolve.models.context import ContextGuard, EndpointInfo, ServedModel, served_model

    asked: list[int] = []

    def fetch() -> ServedModel:
        asked.append(1)
        if len(asked) == 1:
            raise httpx.ConnectError("connection refused")
        return served_model(base, "qwen", None)

    assert vlm.guard is not None
    vlm.endpoint = EndpointInfo(fetch)
    vlm.guard = ContextGuard(vlm.guard.cost, vlm.endpoint.max_model_len, vlm.guard.margin)


@pytest.mark.slow
def test_results_made_while_the_endpoint_was_still_starting_name_its_checkpoint(small_world, seed: Path,
                                                                                tmp_path: Path):
    """``vllm serve /models/ckpt-a --served-model-name qwen`` still loading when the loop starts solving: GET
    /v1/models is not reached at first. The checkpoint is asked again before anything is sent, not taken for a model
    served under its own name: what the run makes is ckpt-a's, reused against ckpt-a and never against ckpt-b."""

    from videvolve.evaluation.solve import solve_tasks
    from videvolve.models.sim.mimic import MimicSettings
    from videvolve.skill_library.harness import load_harness

    harness = load_harness(seed)
    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"

    def against(checkpoint: str, starting: bool) -> tuple[list[str | None], int]:
        app = create_app("qwen", mimic=MimicSettings(checkpoint=checkpoint))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            if starting:
                still_starting(vlm, base)
            results = solve_tasks(harness, tasks, vlm, cost_model("qwen2.5-vl"), RUNTIME, out)
            return [r.outcome for r in results], app.state.stats["served"]

    assert against("/models/ckpt-a", starting=True)[0] == ["ok", "ok"]
    assert against("/models/ckpt-a", starting=False)[1] == 0  # main: run again (keyed as a model under its own name)
    assert against("/models/ckpt-b", starting=True)[1] > 0  # main: 0, ckpt-a's results reused for ckpt-b


def test_the_summary_counts_the_results_reused_when_the_endpoint_was_still_starting(small_world, seed: Path,
                                                                                   tmp_path: Path):
    """The reuse figure an evaluation prints is counted as solve_tasks reuses: with the endpoint's checkpoint asked
    first, not from a producer made before it answered (which read 0 reused while every result was)."""

    from videvolve.models.sim.mimic import MimicSettings

    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"

    def against(starting: bool) -> tuple[Evaluation, int]:
        app = create_app("qwen", mimic=MimicSettings(checkpoint="/models/ckpt-a"))
        with serve_app(app) as base:
            vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=30))
            if starting:
                still_starting(vlm, base)
            return run(seed, tasks, out, vlm), int(app.state.stats["served"])

    first, served = against(starting=False)
    assert reused(first) == 0 and served > 0
    again, served = against(starting=True)
    assert served == 0  # nothing asked: every result was reused
    assert reused(again) == 2  # main: 0 (the summary's producer did not know the checkpoint yet)


@pytest.mark.slow
def test_a_reused_result_keeps_its_own_trace_after_another_run_stopped_mid_task(small_world, seed: Path,
                                                                                 tmp_path: Path):
    """``eval --out E`` finished; the same command against a server (another producer) stopped by an outage while
    tasks were running; the first command again reuses its results: their traces were the stopped run's (emptied
    and half-written when it started them), shown beside results they did not make."""
    from videvolve.errors import InfraError
    from videvolve.models.sim.mimic import MimicSettings
    from videvolve.skill_library.steps import Result
    from videvolve.skill_library.trace import read_steps

    tasks = [t for t in small_world.tasks if t.split == "test"][:2]
    out = tmp_path / "e"
    first = run(seed, tasks, out)
    before = {t.id: (out / "traces" / f"{t.id}.jsonl").read_text() for t in tasks}
    app = create_app("qwen", mimic=MimicSettings(fail_first=10**6))  # every request answered 503
    with serve_app(app) as base:
        vlm = openai_vlm(ModelSettings(backend="openai", model="qwen", base_url=base, retry_window_s=1))
        with pytest.raises(InfraError):
            run(seed, tasks, out, vlm)
    again = run(seed, tasks, out)
    assert reused(again) == 2 and again.summary["score"] == first.summary["score"]
    for task, result in zip(tasks, again.results, strict=True):
        trace = out / "traces" / f"{task.id}.jsonl"
        assert trace.read_text() == before[task.id]  # main: the stopped run's few steps, no end
        end = read_steps(trace)[-1]
        assert isinstance(end, Result) and end.score == result.score


def test_a_result_is_reused_where_its_largest_request_still_fits_whatever_the_context_was_when_it_ended():
    """A result's served context is read when the task ends: a ``/v1/models`` busy at that moment recorded None,
    and such a result was reused under any context (main). Reuse now follows the largest request the task made, as
    the context guard counted it; a result that recorded none (stored before) is reused only under a context at
    least as long as the one recorded with it, and never where none was."""
    from videvolve.evaluation.results import TaskResult, still_fits
    from videvolve.usage import TaskUsage

    def made(largest: int, requests: int, served: int | None) -> TaskResult:
        return TaskResult(task_id="t", harness_id="h", kind="mcq", outcome="ok", score=1.0, served_context=served,
                          usage=TaskUsage(requests=requests, largest_request_tokens=largest))

    busy_at_the_end = made(5_000, 3, None)
    assert not still_fits(busy_at_the_end, 4_999) and still_fits(busy_at_the_end, 5_000)
    assert still_fits(made(5_000, 3, 100_000), 6_000)  # a shorter context that still takes every request
    assert still_fits(made(0, 0, None), 10)  # nothing was sent
    older = made(0, 3, 8_000)
    assert still_fits(older, 8_000) and not still_fits(older, 7_999)
    assert not still_fits(made(0, 3, None), 1_000_000)
    merged = TaskUsage(largest_request_tokens=5, requests=1) + TaskUsage(largest_request_tokens=7, requests=2)
    assert merged.largest_request_tokens == 7 and merged.requests == 3
