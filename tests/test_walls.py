"""The walls around harness code, piece by piece (fast; the end-to-end hostile harnesses are in test_sandbox.py).

The static check's allowlist against every attribute-by-name route we know; the parent's refusals before it
decodes; request errors as the task's error; the weak sandbox only on request; private files; no leftovers.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox_cases import LEGITIMATE
from videvolve.config import RuntimeSettings
from videvolve.errors import HarnessError, InfraError, SandboxStartError
from videvolve.media import frame_cache
from videvolve.media.decode import Frame
from videvolve.media.sheet import MAX_SHEET_PIXELS, SheetTooLarge, contact_sheet
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import SEEDS, load_harness, seed_path, validate_harness
from videvolve.skill_library.runner import _serve
from videvolve.skill_library.services import ServiceError, TaskServices
from videvolve.skill_library.static_check import check_source, imported_modules
from videvolve.tasks import TaskView

ATTACKS = {
    "match class pattern": "def solve(task, ctx):\n    match ctx.probe:\n        case object(__func__=f):\n"
                           "            return f\n",
    "match class, positional": "def solve(task, ctx):\n    match ctx:\n        case dict(x):\n            return x\n",
    "format field attribute": 'def solve(task, ctx):\n    return "{0.__class__}".format(ctx)\n',
    "format field index": 'def solve(task, ctx):\n    return "{0[x]}".format({"x": 1})\n',
    "format field in a spec": 'def solve(task, ctx):\n    return "{:{0.__class__}}".format(ctx)\n',
    "format_map field": 'def solve(task, ctx):\n    return "{a.b}".format_map({"a": ctx})\n',
    "format on a variable": 'def solve(task, ctx):\n    s = "{0.__class__}"\n    return s.format(ctx)\n',
    "format through str": 'def solve(task, ctx):\n    return str.format("{0.__class__}", ctx)\n',
    "format as a value": 'def solve(task, ctx):\n    f = "{}".format\n    return f(ctx)\n',
    "f-string attribute": 'def solve(task, ctx):\n    return f"{ctx.__class__}"\n',
    "f-string spec attribute": 'def solve(task, ctx):\n    return f"{1:{ctx.__class__}}"\n',
    "type and mro": "def solve(task, ctx):\n    return type(ctx).__mro__\n",
    "mro method": "def solve(task, ctx):\n    return ctx.task.mro()\n",
    "subclasses": "def solve(task, ctx):\n    return ().__class__.__base__.__subclasses__()\n",
    "getattr": 'def solve(task, ctx):\n    return getattr(ctx, "_channel")\n',
    "getattr shadowed": 'getattr = print\ndef solve(task, ctx):\n    return getattr(ctx, "x")\n',
    "vars": "def solve(task, ctx):\n    return vars(ctx)\n",
    "hasattr oracle": 'def solve(task, ctx):\n    return hasattr(ctx, "__globals__")\n',
    "dir": "def solve(task, ctx):\n    return dir(ctx)\n",
    "globals": "def solve(task, ctx):\n    return globals()\n",
    "builtins name": "def solve(task, ctx):\n    return __builtins__\n",
    "import function": 'def solve(task, ctx):\n    return __import__("os")\n',
    "eval": 'def solve(task, ctx):\n    return eval("1")\n',
    "traceback frames": "def solve(task, ctx):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
                        "        return e.__traceback__.tb_frame\n",
    "with_traceback": "def solve(task, ctx):\n    return ValueError().with_traceback(None)\n",
    "generator frame": "def solve(task, ctx):\n    g = (i for i in [1])\n    return g.gi_frame\n",
    "frame back": "def solve(task, ctx, f=None):\n    return f.f_back\n",
    "coroutine": "async def solve(task, ctx):\n    return 1\n",
    "function globals": "def solve(task, ctx):\n    return solve.__globals__\n",
    "method func": "def solve(task, ctx):\n    return ctx.probe.__func__\n",
    "code object": "def solve(task, ctx):\n    return solve.__code__\n",
    "closure cells": "def solve(task, ctx):\n    return solve.__closure__[0].cell_contents\n",
    "lambda defaults": "def solve(task, ctx):\n    return (lambda x=ctx.probe: x).__defaults__\n",
    "reduce": "def solve(task, ctx):\n    return ctx.__reduce_ex__(2)\n",
    "class_getitem": "def solve(task, ctx):\n    return list.__class_getitem__(int).__origin__\n",
    "descriptor": "class D:\n    def __get__(self, obj, owner):\n        return obj\ndef solve(task, ctx):\n"
                  "    return D\n",
    "getattr hook": "class D:\n    def __getattr__(self, name):\n        return name\ndef solve(task, ctx):\n"
                    "    return D\n",
    "init_subclass": "class D:\n    def __init_subclass__(cls):\n        pass\ndef solve(task, ctx):\n"
                     "    return D\n",
    "metaclass": "class D(dict, metaclass=print):\n    pass\ndef solve(task, ctx):\n    return D\n",
    "private SDK channel": "def solve(task, ctx):\n    return ctx._channel\n",
    "module attribute": "import statistics\ndef solve(task, ctx):\n    return statistics.sys\n",
    "module alias attribute": "import statistics as s\ndef solve(task, ctx):\n    return s.sys.modules\n",
    "module reached by value": "import statistics\ndef solve(task, ctx):\n    m = statistics\n"
                               "    return m.sys.modules\n",
    "unknown import": "import os\ndef solve(task, ctx):\n    return os\n",
    "relative import": "from . import x\ndef solve(task, ctx):\n    return x\n",
    "SDK internals": "from videvolve_sdk import Channel\ndef solve(task, ctx):\n    return Channel\n",
    "unknown attribute": "def solve(task, ctx):\n    return ctx.task.modules\n",
    "decorator getattr": "@getattr\ndef solve(task, ctx):\n    return 1\n",
    "dunder import alias": "import math as __builtins__\ndef solve(task, ctx):\n    return 1\n",
    "trusted generator": "import heapq\ndef solve(task, ctx):\n    return heapq.merge([1], [2])\n",
    "except star": "def solve(task, ctx):\n    try:\n        pass\n    except* ValueError:\n        pass\n",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_the_static_check_refuses_every_attribute_by_name_route(name: str):
    assert check_source(ATTACKS[name], "solver.py"), name


def test_the_static_check_admits_ordinary_harness_code_and_the_seeds():
    assert check_source(LEGITIMATE, "solver.py") == []
    for seed in SEEDS:
        assert validate_harness(seed_path(seed)) is None, seed


@pytest.mark.parametrize(("file", "text", "why"), [
    ("config.toml", "n_frames = 16\nsince = 1979-05-27\n", "'since' is a date"),
    ("config.toml", "n_frames = 16\ndeep = " + "[" * 600 + "]" * 600 + "\n", "nested"),
    ("tools/x/tool.json", "[" * 100_000 + "]" * 100_000, "nested"),
], ids=["date", "toml-600-deep", "json-100000-deep"])
def test_harness_data_the_sandbox_cannot_be_sent_is_refused_not_a_crash_of_the_run(seed: Path, file: str, text: str,
                                                                                  why: str):
    """config.toml and tool.json travel to the child as JSON. Before: a date passed the check, and the warm pool's
    ``json.dumps`` of it raised TypeError out of ``solve_tasks`` (the run crashed, in the validate node's smoke run or
    an editor's trial); deep nesting raised RecursionError out of ``validate_harness`` itself."""
    path = seed / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if file.startswith("tools/"):
        (path.parent / "tool.py").write_text("def run(ctx):\n    return 1\n")
    reason = validate_harness(seed)
    assert reason is not None and file in reason and why in reason, reason
    with pytest.raises(HarnessError, match="is not valid"):
        load_harness(seed)


@pytest.mark.parametrize("file", ["solver.py", "config.toml", "SKILL.md", "tools/x/tool.py"])
def test_a_harness_file_that_is_not_utf8_is_refused_not_a_crash_of_the_run(seed: Path, file: str):
    """A command editor's workspace can leave any bytes behind. Before: UnicodeDecodeError out of
    ``validate_harness`` (SKILL.md: out of ``load_harness``), which no caller expects."""
    path = seed / file
    path.parent.mkdir(parents=True, exist_ok=True)
    if file.startswith("tools/"):
        (path.parent / "tool.json").write_text('{"name": "x", "description": "x", "parameters": {}}')
    path.write_bytes(b"# caf\xe9\n" + (path.read_bytes() if path.exists() else b""))
    reason = validate_harness(seed)
    assert reason is not None and f"{file}: not UTF-8 text" in reason, reason
    with pytest.raises(HarnessError, match="is not valid"):
        load_harness(seed)


def test_a_child_prepares_only_the_modules_its_harness_imports():
    source = ("import json, math as m\nfrom statistics import mean\nfrom collections.abc import Sequence\n"
              "def solve(task, ctx):\n    import heapq\n    return 1\n")
    assert imported_modules(source) == {"json", "math", "statistics", "heapq"}
    assert imported_modules("def solve(:") == frozenset()  # the child reports the syntax error itself


def test_refusals_name_the_file_line_and_route():
    problems = check_source(ATTACKS["match class pattern"], "tools/x/tool.py")
    assert problems == ["tools/x/tool.py:3: match class patterns read attributes by name"]
    assert "format field '0.__class__'" in check_source(ATTACKS["format field attribute"], "solver.py")[0]


@pytest.fixture()
def services(index_video: Path) -> TaskServices:
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)
    return TaskServices(view, str(index_video), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(budget=32))


def _no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the parent decoded before refusing")

    monkeypatch.setattr("videvolve.needles.frames.frames_at", refuse)
    monkeypatch.setattr("videvolve.skill_library.rendering.contact_sheet", refuse)


def test_the_parent_refuses_a_huge_sheet_and_an_over_budget_request_before_decoding(
        services: TaskServices, monkeypatch: pytest.MonkeyPatch):
    _no_decoding(monkeypatch)
    with pytest.raises(ServiceError, match="pixels") as big:
        services.handle("sheet", {"times": [i * 0.05 for i in range(400)], "cols": 16, "cell_width": 1024})
    assert big.value.kind == "invalid"
    sheet = services.handle("sheet", {"times": [i * 0.1 for i in range(100)], "cols": 10})
    with pytest.raises(ServiceError, match="at least 100 distinct frames") as over:
        services.handle("ask", {"handles": [sheet["handle"]]})
    assert over.value.kind == "budget" and services.meter.frames == 0 and frame_cache.misses == 0


def test_a_task_has_a_handle_cap(services: TaskServices):
    with pytest.raises(ServiceError, match="cap") as exc:
        for _ in range(100):
            services.handle("frames", {"times": [1.0] * 400})
    assert exc.value.kind == "invalid" and len(services._handles) <= 4096


def test_a_task_holds_a_bounded_number_of_times_and_makes_a_bounded_number_of_requests(
        services: TaskServices, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(ServiceError, match="65536 times"):
        for _ in range(200):
            services.handle("sheet", {"times": [i * 0.05 for i in range(400)], "cols": 16, "cell_width": 16})
    assert services._times_held <= 65536
    monkeypatch.setattr("videvolve.skill_library.limits.MAX_REQUESTS", 3)
    frame = services.handle("frames", {"times": [1.0]})[0]["handle"]
    with pytest.raises(ServiceError, match="3 model requests") as exc:
        for _ in range(4):
            services.handle("ask", {"handles": [frame]})
    assert exc.value.kind == "invalid" and services.meter.requests == 3


def test_a_harness_cannot_flood_its_trace(tmp_path: Path):
    from videvolve.skill_library.steps import LogNote
    from videvolve.skill_library.trace import MAX_NOTE_CHARS, MAX_NOTES, TraceWriter

    trace = TraceWriter(tmp_path / "t.jsonl")
    for _ in range(MAX_NOTES + 500):
        trace.note(LogNote(message="x", data={"blob": "y" * 100_000}))
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert len(lines) == MAX_NOTES + 1 and "notes_capped" in lines[-1]
    assert max(len(line) for line in lines) < MAX_NOTE_CHARS + 200


def test_a_clip_too_large_to_decode_is_refused(services: TaskServices, monkeypatch: pytest.MonkeyPatch):
    from videvolve.media.info import probe

    real = probe(services.video)
    monkeypatch.setattr("videvolve.skill_library.services.probe",
                        lambda path: dataclasses.replace(real, width=3840, height=2160))
    _no_decoding(monkeypatch)
    with pytest.raises(ServiceError, match="would decode"):
        services.handle("clip", {"start": 0.0, "end": 20.0, "fps": 12.0})


def test_the_sheet_itself_refuses_to_allocate_past_its_pixel_cap():
    from PIL import Image

    frames = [Frame(time=0.0, requested=0.0, image=Image.new("RGB", (64, 36)))] * 4
    with pytest.raises(SheetTooLarge):
        contact_sheet(frames, cols=4, cell_width=4096)
    assert contact_sheet(frames, cols=2, cell_width=64).image.size[0] * 2 < MAX_SHEET_PIXELS


class _Broken:
    """A model whose parser chokes on what it is sent (SimVLM did on a dict content)."""

    name = "broken"
    revision = "1"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def complete(self, messages: Any, tools: Any = None) -> Any:
        raise self.error

    def decoding(self) -> dict[str, Any]:
        return {}


def test_any_error_serving_a_request_is_the_tasks_error_but_infrastructure_stops_the_run(index_video: Path):
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)

    def serve(vlm: Any, op: str, args: dict[str, Any]) -> dict[str, Any]:
        services = TaskServices(view, str(index_video), vlm, cost_model("qwen2.5-vl"), RuntimeSettings())
        return _serve(services, {"id": 1}, op, args)

    chat = {"messages": [{"role": "user", "content": "hi"}]}
    reply = serve(_Broken(AttributeError("'dict' object has no attribute 'get'")), "chat", chat)
    assert reply["ok"] is False and reply["kind"] == "invalid" and "AttributeError" in reply["error"]
    reply = serve(SimVLM(), "chat", {"messages": [{"role": "user", "content": {"type": "text"}}]})
    assert reply["kind"] == "invalid" and "content" in reply["error"]
    assert serve(SimVLM(), "frames", {"times": [1.0], "bogus": 1})["kind"] == "invalid"
    with pytest.raises(InfraError):
        serve(_Broken(InfraError("endpoint down")), "chat", chat)


def test_a_video_that_cannot_be_read_is_a_media_error_when_the_harness_probes_it_too(tmp_path: Path,
                                                                                    index_video: Path):
    """``ctx.probe()`` on a broken video (its duration given, so nothing probed it before the harness ran).

    Before: the request failed as ``invalid``, the harness's own fault (validation sends such a candidate back to the
    editor), where every other request on the same video says ``media``, an input error retried on rerun."""
    from videvolve.evaluation.solve import solve_tasks
    from videvolve.tasks import Task

    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00not a video" * 100)
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)
    services = TaskServices(view, str(broken), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings())
    for op, args in (("probe", {}), ("frames", {"times": [1.0]})):
        reply = _serve(services, {"id": 1}, op, args)
        assert (reply["ok"], reply["kind"]) == (False, "media"), (op, reply)
        assert str(tmp_path) not in str(reply) and "the task's video" in str(reply), reply  # harnesses see no path
    gone = tmp_path / "gone.mp4"
    shutil.copy(index_video, gone)
    services = TaskServices(view, str(gone), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings())
    handles = _serve(services, {"id": 1}, "frames", {"times": [1.0]})["result"]
    gone.unlink()  # after its observations were made
    reply = _serve(services, {"id": 2}, "ask", {"handles": [h["handle"] for h in handles]})
    assert (reply["ok"], reply["kind"]) == (False, "media"), reply
    assert str(tmp_path) not in str(reply), reply
    harness = tmp_path / "prober"
    harness.mkdir()
    (harness / "solver.py").write_text("def solve(task, ctx):\n    ctx.probe()\n    return 'A'\n")
    task = Task(id="t0", video_id="v", video=str(broken), kind="mcq", question="What?", options=["x", "y"],
                answer="A", duration=20.0)
    [result] = solve_tasks(load_harness(harness), [task], SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                           tmp_path / "out")
    assert (result.outcome, result.error_kind) == ("error", "media"), result.error
    assert str(broken) in str(result.error), result.error  # the user is told which file


@pytest.fixture()
def secret_video(tmp_path: Path) -> Path:
    """A video damaged at 3 s, at a path that says what a harness must not learn."""
    from tests.conftest import sample

    video = tmp_path / "selection_split" / "gold_is_B" / "video_4711.mp4"
    video.parent.mkdir(parents=True)
    video.write_bytes(sample("videos", "decord_corrupted.mp4").read_bytes())
    return video


def test_no_request_that_meets_a_media_error_tells_the_harness_the_videos_path(secret_video: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """Before: ``ocr`` turned a ``MediaError`` into its refusal before the video's path was taken out of the text,
    so a harness read the path (a split's folder, a benchmark's file name) where every other request said "the
    task's video". Each request is made on the damaged video, then on the video gone."""
    monkeypatch.setattr("videvolve.media.ocr.available", lambda: True)  # the frame fails before any OCR runs
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=5.0)
    services = TaskServices(view, str(secret_video), SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings())
    frame = _serve(services, {"id": 1}, "frames", {"times": [3.0]})["result"][0]["handle"]
    sheet = _serve(services, {"id": 2}, "sheet", {"times": [1.0, 3.0], "cols": 2, "cell_width": 64})["result"]
    decoding = {"ask": {"handles": [frame]}, "ocr": {"handle": frame}, "ocr sheet": {"handle": sheet["handle"]},
                "chat": {"messages": [{"role": "user", "content": [{"type": "observation", "handle": frame}]}]}}
    probing = {"probe": {}, "frames": {"times": [1.0]}, "sheet": {"times": [1.0]}, "clip": {"start": 0, "end": 1}}
    for gone, requests in ((False, decoding), (True, {**decoding, **probing})):
        if gone:
            secret_video.unlink()
        for op, args in requests.items():
            reply = _serve(services, {"id": 3}, op.split()[0], args)
            assert (reply["ok"], reply["kind"]) == (False, "media"), (op, gone, reply)
            assert "gold_is_B" not in str(reply) and "the task's video" in reply["error"], (op, gone, reply)


OCR_AND_ASK = """
from videvolve_sdk import SDKError
def solve(task, ctx):
    f = ctx.frames([3.0])[0]
    seen = []
    for op in ("ask", "ocr"):
        try:
            ctx.ask([f]) if op == "ask" else ctx.ocr(f)
        except SDKError as exc:
            seen.append(str(exc))
    if UNCAUGHT:
        ctx.ocr(f)
    return {"answer": "A", "raw": " || ".join(seen)}
"""


@pytest.mark.parametrize("uncaught", [False, True])
def test_a_harness_reads_no_path_in_the_media_errors_of_its_sandbox(secret_video: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch, uncaught: bool):
    """The same through the sandbox: what ``ask`` and ``ocr`` raise in harness code, and the task's failure."""
    from tests.test_hostile_code import run_source

    monkeypatch.setattr("videvolve.media.ocr.available", lambda: True)
    view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=5.0)
    out, _ = run_source(OCR_AND_ASK.replace("UNCAUGHT", str(uncaught)), str(secret_video), tmp_path, view=view)
    said = out.error if uncaught else out.prediction.raw if out.prediction else None
    assert out.error_kind == ("media" if uncaught else None), (out.error_kind, out.error)
    assert said and "gold_is_B" not in said and "the task's video" in said, said
    assert uncaught or said.count("the task's video") == 2, said


class _Picky:
    """Answers A, but its parser chokes on one question (as SimVLM's did on a dict content)."""

    name = "picky"
    revision = "1"

    def complete(self, messages: Any, tools: Any = None) -> Any:
        from videvolve.models.base import Reply

        if any("BREAK" in str(p.get("text", "")) for m in messages if isinstance(m["content"], list)
               for p in m["content"]):
            raise AttributeError("'dict' object has no attribute 'get'")
        return Reply(text="A")

    def decoding(self) -> dict[str, Any]:
        return {}


def test_eval_finishes_the_other_tasks_when_one_request_breaks_the_model(index_video: Path, seed: Path,
                                                                         tmp_path: Path):
    from videvolve.evaluation.solve import solve_tasks
    from videvolve.skill_library.harness import load_harness
    from videvolve.tasks import Task

    tasks = [Task(id=f"t{i}", video_id="v", video=str(index_video), kind="mcq", question=q, options=["x", "y"],
                  answer="A", duration=20.0) for i, q in enumerate(["What?", "BREAK it?", "Which?"])]
    results = solve_tasks(load_harness(seed), tasks, _Picky(), cost_model("qwen2.5-vl"), RuntimeSettings(),
                          tmp_path / "out")
    got = {r.task_id: (r.outcome, r.error_kind, r.score) for r in results}
    assert got == {"t0": ("ok", None, 1.0), "t1": ("error", "invalid", 0.0), "t2": ("ok", None, 1.0)}, results
    assert "AttributeError" in str(results[1].error)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700


def test_the_weak_sandbox_runs_only_when_allowed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The refusal and the warning say what harness code can do under ``unshare``: they said only "read files",
    where it also writes /tmp, /var/tmp and /dev/shm (memory outside its limits) and reaches Unix sockets."""
    from videvolve.skill_library import sandbox

    real_which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    sandbox.get_sandbox.cache_clear()
    holes = ("read every file", "/tmp", "/var/tmp", "/dev/shm", "Unix sockets")
    try:
        with pytest.raises(SandboxStartError, match="--allow-weak-sandbox") as refused:  # the machine's, never a task's
            sandbox.get_sandbox()
        assert all(hole in str(refused.value) for hole in holes), refused.value
        if real_which("unshare"):
            assert sandbox.get_sandbox(allow_weak=True).mode == "unshare"
            warned = capsys.readouterr().err
            assert "WEAK SANDBOX" in warned and all(hole in warned for hole in holes), warned
    finally:
        sandbox.get_sandbox.cache_clear()


def test_the_flag_reaches_the_runtime_settings(tmp_path: Path):
    from videvolve.cli import build_parser
    from videvolve.cli.common import runtime_settings
    from videvolve.cli.evolve_cmd import build_context

    for command in ("eval", "ask"):
        assert any("--allow-weak-sandbox" in a.option_strings for a in _subparser(build_parser(), command)._actions)
    args = build_parser().parse_args(["eval", "--tasks", "t.jsonl", "--allow-weak-sandbox"])
    assert runtime_settings(args).allow_weak_sandbox is True
    assert runtime_settings(build_parser().parse_args(["eval", "--tasks", "t.jsonl"])).allow_weak_sandbox is False
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("")
    args = build_parser().parse_args(["evolve", "--run", str(tmp_path / "run"), "--tasks", str(tasks),
                                      "--allow-weak-sandbox"])
    assert build_context(args).runtime.allow_weak_sandbox is True


def _subparser(parser: Any, name: str) -> Any:
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_tasks_files_are_private(tmp_path: Path):
    from videvolve.tasks import Task, write_tasks

    task = Task(id="a", video_id="v", video="v.mp4", kind="mcq", question="q", options=["x", "y"], answer="A",
                duration=1.0)
    path = write_tasks([task], tmp_path / "tasks.jsonl")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


TIDY = '''
import sys
from tests.sandbox_cases import LEGITIMATE
from videvolve import interrupt
from videvolve.config import RuntimeSettings
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness, seed_path
from videvolve.skill_library.runner import run_task
from videvolve.skill_library.services import TaskServices
from videvolve.tasks import TaskView

view = TaskView(id="t", kind="mcq", question="q?", options=("a", "b"), duration=20.0)
services = TaskServices(view, sys.argv[1], SimVLM(), cost_model("qwen2.5-vl"),
                        RuntimeSettings(clip_mode="video", wall_seconds=60))
harness = load_harness(sys.argv[2])
print("running", flush=True)
with interrupt.installed():  # as the console runs every command
    print(run_task(harness, services).outcome, flush=True)
'''


@pytest.mark.parametrize("interrupt", [False, True])
@pytest.mark.slow
def test_no_sandbox_folder_is_left_behind(index_video: Path, tmp_path: Path, interrupt: bool):
    """A process that ran harness code leaves nothing in the temporary folder, even when stopped with Ctrl-C."""
    harness = tmp_path / "h"
    harness.mkdir()
    loop = "    while True:\n        pass\n" if interrupt else ""
    (harness / "solver.py").write_text("def solve(task, ctx):\n    c = ctx.clip(1.0, 3.0)\n"
                                       f"    r = ctx.ask([c])\n{loop}    return 'A'\n")
    tmp = Path(tempfile.mkdtemp(dir=tmp_path))
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": f"{repo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", TIDY, str(index_video), str(harness)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "running"
    if interrupt:
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert interrupt or out.strip() == "ok", err[-2000:]
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())
