"""Helpers of the serving tests: a tiny SynthWorld, a fast harness, `videvolve ask --json`, a real server process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from openai.types.chat import ChatCompletionContentPartParam

from tests.steps_support import model_call
from videvolve.errors import Cancelled
from videvolve.serving.agent import AgentAnswer, Cost
from videvolve.skill_library.harness import seed_path
from videvolve.tasks import Task
from videvolve.testing import serve_app

ROOT = Path(__file__).resolve().parents[1]


def video_part(url: str) -> ChatCompletionContentPartParam:
    """vLLM's ``video_url`` content part, as the stock ``openai`` client sends it to vLLM or to ``videvolve serve``.

    The SDK's types have no video part (it is vLLM's extension of the API), hence the ``type: ignore``.
    """
    return {"type": "video_url", "video_url": {"url": url}}  # type: ignore[return-value]


def tiny_world(path: Path) -> tuple[Path, list[Task]]:
    """One SynthWorld video of about a minute (as `videvolve synth DIR --videos 1 --minutes 1`); its tasks."""
    from videvolve.datasets.synthworld import generate_world

    world = generate_world(path, videos=1, minutes=1, seed=3, workers=1)
    return world.root, list(world.tasks)


def fast_harness(path: Path) -> Path:
    """The uniform seed at 12 frames of 160 px (seconds per question)."""
    shutil.copytree(seed_path("uniform"), path)
    (path / "config.toml").write_text("n_frames = 12\nmax_side = 160\n")
    return path


def env() -> dict[str, str]:
    """The environment of a child videvolve: this checkout first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def ask_json(*args: str) -> dict[str, Any]:
    """`videvolve ask ... --json` as a user runs it (a real process), parsed."""
    r = subprocess.run([sys.executable, "-m", "videvolve", "ask", *args, "--json", "--no-cache"],
                       capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def option_lines(task: Task) -> list[str]:
    """A task's options as "A) ..." lines."""
    return [f"{chr(65 + i)}) {o}" for i, o in enumerate(task.options or [])]


@dataclass(frozen=True)
class ServingWorld:
    """A one-minute SynthWorld, a fast harness, and `videvolve ask`'s answers to one question of each kind."""

    root: Path
    tasks: list[Task]
    harness: Path
    video: Path
    mcq: Task
    grounding: Task
    asked_mcq: dict[str, Any]
    asked_grounding: dict[str, Any]

    @classmethod
    def make(cls, path: Path) -> ServingWorld:
        """Generate it under ``path`` and ask the CLI (two real `videvolve ask --json` runs)."""
        root, tasks = tiny_world(path / "world")
        harness = fast_harness(path / "uniform12")
        video = root / "videos" / "video000.mp4"
        mcq = next(t for t in tasks if t.kind == "mcq")
        grounding = next(t for t in tasks if t.kind == "grounding")
        asked_mcq = ask_json(str(video), mcq.question, *[a for o in option_lines(mcq) for a in ("--option", o)],
                             "--harness", str(harness))
        asked_grounding = ask_json(str(video), grounding.question, "--harness", str(harness))
        assert asked_mcq["answer"] in ("A", "B", "C", "D") and isinstance(asked_grounding["answer"], list)
        return cls(root, tasks, harness, video, mcq, grounding, asked_mcq, asked_grounding)


@contextlib.contextmanager
def videvolve_server(args: list[str], health_url: str, extra_env: dict[str, str] | None = None,
                     attempts: int = 600, cwd: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Start `videvolve ARGS` and wait (at most ``attempts`` polls of 0.1 s) until ``health_url`` answers."""
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"videvolve-server-{os.getpid()}-{time.monotonic_ns()}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "videvolve", *args], stdout=fh, stderr=subprocess.STDOUT,
                                env={**env(), **(extra_env or {})}, cwd=cwd)
        try:
            for _ in range(attempts):
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()}")
                try:
                    httpx.get(health_url, timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            else:
                raise RuntimeError(f"server not up after {attempts} polls:\n{log.read_text()}")
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.unlink(missing_ok=True)


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """The app served by uvicorn on 127.0.0.1 in a thread; yields its base URL (without ``/v1``)."""
    with serve_app(app) as base:
        yield base.removesuffix("/v1")


class FakeAgent:
    """Blocks each question until released (or cancelled); answers as told, or raises as told."""

    def __init__(self, outcome: str = "ok", raises: Exception | None = None) -> None:
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        self.cancelled = threading.Event()
        self.outcome, self.raises = outcome, raises

    def ask(self, video: Any, question: str, options: list[str] | None = None,
            grounding: bool = False, cancel: threading.Event | None = None,
            on_step: Any = None) -> AgentAnswer:
        if on_step is not None:  # as a harness's first look is told to a server narrating it
            on_step(model_call([1.5, 30.0], event="chat", reply="a red star at 0:02"))
        self.started.release()
        deadline = time.monotonic() + 60
        while not self.release.wait(0.05):  # until released, or stopped as a harness is when its client goes away
            if cancel is not None and cancel.is_set():
                self.cancelled.set()
                raise Cancelled("the client went away")
            assert time.monotonic() < deadline
        if self.raises is not None:
            raise self.raises
        return AgentAnswer(harness="fake@1", kind="mcq", outcome=self.outcome, answer="B" if self.outcome == "ok"
                           else None, text="B" if self.outcome == "ok" else "", evidence_times=[1.5],
                           cost=Cost(frames=3, visual_tokens=30, image_tokens=30, prompt_tokens=50, calls=1),
                           error_kind=None if self.outcome == "ok" else "parse",
                           error=None if self.outcome == "ok" else "no option letter")


class FakeAgents:
    def __init__(self, agent: Any) -> None:
        self.the = agent

    def ids(self) -> list[str]:
        return ["fake"]

    def agent(self, model_id: str) -> FakeAgent:
        if model_id != "fake":
            raise KeyError(model_id)
        return self.the

    def describe(self, model_id: str) -> str:
        return "fake@1"
