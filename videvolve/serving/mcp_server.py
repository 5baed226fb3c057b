"""``videvolve mcp``: a Model Context Protocol server (the official ``mcp`` SDK) over one harness.

Tools: ``ask_video`` (a question, with options or not, as ``videvolve ask``), ``ground_in_video`` (every interval
where a query happens), ``search_diagnoses`` (the Chroma memory of failure diagnoses) and ``show_harness``. Video
paths are confined to the media roots; every answer carries its evidence times and its cost. At most
``--concurrency`` questions are answered at once; the others wait their turn.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import INVALID_REQUEST
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from videvolve.api import clean_option
from videvolve.errors import EndpointError, InfraError, VidevolveError
from videvolve.memory.records import Category
from videvolve.memory.store import DiagnosisStore
from videvolve.serving.agent import AgentAnswer, VideoAgent, naming_the_video
from videvolve.serving.auth import KEY_HINT, bearer_matches
from videvolve.serving.media import MediaRoots, video_file
from videvolve.serving.steps import narrated
from videvolve.tasks import LETTERS
from videvolve.version import __version__

if TYPE_CHECKING:
    from videvolve.memory.embedders import Embedder

PROGRESS_S = 5.0
"""How often a question in progress reports to a host that asked for progress (``notifications/progress``)."""
log = logging.getLogger(__name__)
INSTRUCTIONS = ("Answers questions about long videos with an evolved harness around a vision-language model: the "
                "harness decides which frames to look at. Videos are paths under the server's media roots.")
QUESTION_WORDS = frozenset({"when", "where", "what", "which", "who", "whose", "why", "how", "does", "do", "did", "is",
                            "are", "was", "were"})
"""Words a question opens with (``ground_in_video`` asks a query that opens with one as it is)."""
Video = Annotated[str, Field(description="the video: a path under the server's media roots (absolute, or relative "
                             "to the first root), a file:// or http(s):// URL, or a data:video/...;base64 URL")]


class DiagnosisHit(BaseModel):
    """One stored diagnosis of a past failure, with its similarity to the query."""

    id: str
    similarity: float
    category: str
    kind: str
    hypothesis: str
    applies_when: str
    preserve: str
    harness_id: str
    run_id: str
    video_id: str
    outcome: str = Field(description="what the revision it led to became (pending when none yet)")


class DiagnosisHits(BaseModel):
    """The diagnoses nearest a query."""

    memory: str
    hits: list[DiagnosisHit]


class ToolCard(BaseModel):
    """One media tool of the harness."""

    name: str
    description: str


class HarnessCard(BaseModel):
    """The harness that answers: its identity, policy, tunables and tools."""

    name: str
    version_id: str
    parent_id: str | None
    task_kinds: list[str]
    summary: str
    skill: str = Field(description="SKILL.md: the policy")
    config: dict[str, Any]
    tools: list[ToolCard]
    scores: dict[str, Any]


def harness_card(agent: VideoAgent) -> HarnessCard:
    """What ``show_harness`` returns."""
    h = agent.harness.harness
    m = h.manifest
    return HarnessCard(name=h.name, version_id=h.version_id, parent_id=m.get("parent_id"),
                       task_kinds=list(m.get("task_kinds", [])), summary=str(m.get("summary", "")), skill=h.skill,
                       config=h.config, tools=[ToolCard(name=t.name, description=t.description) for t in h.tools],
                       scores=dict(m.get("scores") or {}))


class _Gates:
    """A call's turn: waited for without a thread (``turn``), then its harness's place (``place``, in the thread).

    A call waiting in a thread held one of anyio's 40: past 40 waiting calls every other call hung. ``place`` is
    kept by a cancelled call's abandoned thread until its harness has stopped, so the bound holds meanwhile.
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.place = threading.BoundedSemaphore(concurrency)
        self._turn: anyio.Semaphore | None = None

    @property
    def turn(self) -> anyio.Semaphore:
        if self._turn is None:  # made in the server's event loop
            self._turn = anyio.Semaphore(self.concurrency)
        return self._turn


async def _asked(agent: VideoAgent, roots: MediaRoots, gates: _Gates, video: str, question: str,
                 options: list[str] | None, grounding: bool, progress: Progress | None = None) -> AgentAnswer:
    """The answer, in a thread; a call the client cancels (``notifications/cancelled``) stops its harness.

    The SDK would run a plain function in a thread it waits for to the end: a cancelled call held its harness (and
    its place under ``--concurrency``) to the task timeout. ``progress`` is told every few seconds what the call
    is doing (a host that asked for progress shows it, and may keep a long call from timing out).
    """
    cancel = threading.Event()
    phase = ["waiting for a free place (--concurrency)", ""]  # what it does, and its last step (a line)
    async with anyio.create_task_group() as tg:  # raises nothing of its own: a task group would wrap a ToolError
        if progress is not None:
            tg.start_soon(progress.tick, phase)
        try:
            async with gates.turn:
                outcome = await anyio.to_thread.run_sync(functools.partial(
                    _answer, agent, roots, gates.place, video, question, options, grounding, cancel, phase),
                    abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()  # the thread, abandoned, stops its harness within a second and frees its place
            raise
        finally:
            tg.cancel_scope.cancel()
    if isinstance(outcome, ToolError):
        raise outcome
    return outcome


@dataclass
class Progress:
    """``notifications/progress`` for one call: seconds since it began, and what it is doing."""

    context: Context
    every_s: float

    async def tick(self, phase: list[str]) -> None:
        """Report every ``every_s`` until cancelled (a no-op for a host that sent no progress token)."""
        started = anyio.current_time()
        while True:
            await anyio.sleep(self.every_s)
            elapsed = anyio.current_time() - started
            try:
                last = f"; last step: {phase[1]}" if phase[1] else ""
                await self.context.report_progress(round(elapsed, 1), None, f"{phase[0]}: {elapsed:.0f} s{last}")
            except Exception as exc:  # a host gone or a closed stream ends the reports, never the question
                log.debug("progress not sent: %s", exc)
                return


def _answer(agent: VideoAgent, roots: MediaRoots, gate: threading.Semaphore, video: str, question: str,
            options: list[str] | None, grounding: bool, cancel: threading.Event, phase: list[str],
            ) -> AgentAnswer | ToolError:
    """The answer, or the tool error to raise (returned: see :func:`_asked`)."""
    try:
        with gate:  # at most --concurrency harnesses (and downloads) at once
            phase[0] = "getting the video"  # a download of an https:// video may take a while
            with video_file(video, roots, cancel=cancel) as path:
                phase[0] = "the harness is looking at the video"
                return naming_the_video(agent.ask(path, question, options, grounding, cancel=cancel,
                                                  on_step=narrated(lambda line: phase.__setitem__(1, line))), video)
    except EndpointError as exc:
        return ToolError(f"the model endpoint behind the harness refuses us: {exc}")
    except InfraError as exc:
        return ToolError(f"the model endpoint behind the harness is down: {exc}")
    except (VidevolveError, OSError) as exc:  # outside the roots, missing, unreadable, undownloadable
        return ToolError(str(exc))
    except Exception as exc:
        log.exception("a bug in videvolve while answering")
        return ToolError(f"a bug in videvolve, not in your call ({type(exc).__name__}: {exc}); the server log has "
                         "the traceback")


def as_question(query: str) -> str:
    """The question ``ground_in_video`` asks: "the red star appears" -> "When does the red star appears?".

    A harness is handed a question, as a task holds one (SimVLM reads only SynthWorld's questions); a query that is
    one already (it ends in "?" or opens with a question word) is asked as it is.
    """
    q = " ".join(query.split())
    first = q.split(" ", 1)[0].lower()
    if q.endswith("?") or first in QUESTION_WORDS:
        return query.strip()
    q = q.rstrip(".!;: ")
    return f"When does {q[0].lower() + q[1:] if first in ('the', 'a', 'an') else q}?"


def _said(text: str, name: str) -> None:
    """A blank question is a tool error (``serve``'s 400), not a harness run spending model calls on nothing."""
    if not text.strip():
        raise ToolError(f"the {name} is empty: say what to look for in the video")


def create_mcp(agent: VideoAgent, roots: MediaRoots, memory: Path,
               open_memory: Callable[[Path], DiagnosisStore] | None = None, progress_s: float = PROGRESS_S,
               ) -> MCPServer:
    """The server.

    ``open_memory`` opens the diagnosis memory for each search (default: ``read_store``); ``progress_s``: how often
    a question in progress reports to a host that asked for progress.
    """
    server: MCPServer = MCPServer("videvolve", instructions=INSTRUCTIONS, version=__version__)
    gates = _Gates(agent.runtime.concurrency)

    @functools.cache
    def _embedder() -> Embedder:  # one for the server's life: a record read again is not embedded again
        from videvolve.memory.embedders import default_embedder

        return default_embedder()

    @server.tool()
    async def ask_video(video: Video, question: Annotated[str, Field(description="the question about the video")],
                        options: Annotated[list[str] | None, Field(
                            description="2 to 26 choices, in order (\"A) red\", \"B) blue\" or just \"red\", "
                            "\"blue\"): multiple choice; none: a when-question answered with intervals")] = None,
                        ctx: Context | None = None) -> AgentAnswer:
        """Ask the harness a question about a video (a path under the media roots).

        With options (e.g. ["A) red", "B) blue"]) it is multiple choice and the answer is a letter; without, it is a
        'when does X happen?' question answered with every [start, end] interval in seconds. The reply carries the
        evidence times and the cost (frames, visual tokens, model calls).
        """
        if options and not 2 <= len(options) <= len(LETTERS):  # as a task file: one is always "A", a 27th unletterable
            raise ToolError(f"give 2 to {len(LETTERS)} options (got {len(options)}), or none for a when-question")
        if options and not all(clean_option(o) for o in options):
            raise ToolError(f"every option needs its text (got {options}): a blank one can only be chosen blindly")
        _said(question, "question")
        return await _asked(agent, roots, gates, video, question, options, grounding=False,
                            progress=Progress(ctx, progress_s) if ctx is not None else None)

    @server.tool()
    async def ground_in_video(video: Video, query: Annotated[str, Field(
            description="what to find, e.g. 'the red star appears' (asked as 'When does the red star appears?'), "
            "or a when-question ('When does the red star appear?'), asked as it is")],
            ctx: Context | None = None) -> AgentAnswer:
        """Every interval [start, end] (seconds) of a video where the query happens; [] when it never does.

        A query that is no question is asked as "When does <query>?"; a question (ending in "?" or opening with
        when, what, how, does, is, ...) is asked as it is.
        """
        _said(query, "query")
        return await _asked(agent, roots, gates, video, as_question(query), None, grounding=True,
                            progress=Progress(ctx, progress_s) if ctx is not None else None)

    @server.tool()
    def search_diagnoses(text: Annotated[str, Field(description="a failure, in words")],
                         k: Annotated[int, Field(ge=1, le=50, description="how many diagnoses")] = 5,
                         category: Annotated[Category | None, Field(description="only this category")] = None,
                         ) -> DiagnosisHits:
        """The stored diagnoses of past harness failures most similar to a text (e.g. 'missed short events')."""
        if not memory.exists():
            raise ToolError(f"no diagnosis memory at {memory}: run `videvolve evolve` first, or start the server "
                            "with --memory DIR")
        if open_memory is None:
            from videvolve.memory.store import read_store

            store: DiagnosisStore = read_store(memory, _embedder())
        else:
            store = open_memory(memory)
        try:  # opened per call and closed: a server holding the memory would refuse every run that writes it
            found = store.search(text, k=k, category=category)
        finally:
            store.close()
        return DiagnosisHits(memory=str(memory), hits=[DiagnosisHit(
            id=d.id, similarity=round(s, 4), category=d.category, kind=d.kind, hypothesis=d.hypothesis,
            applies_when=d.applies_when, preserve=d.preserve, harness_id=d.harness_id, run_id=d.run_id,
            video_id=d.video_id, outcome=d.outcome.decision if d.outcome else "pending") for d, s in found])

    @server.tool()
    def show_harness() -> HarnessCard:
        """The harness that answers: name, version, policy (SKILL.md), tunables, tools and scores."""
        return harness_card(agent)

    return server


def http_app(server: MCPServer, host: str, api_key: str | None = None) -> ASGIApp:
    """The server's streamable HTTP app (``/mcp``), as the SDK's own ``streamable-http`` transport serves it.

    With ``api_key`` every request must send ``Authorization: Bearer <key>`` (401 otherwise), as ``videvolve serve
    --api-key-env`` asks of its clients. The 401's body is a JSON-RPC error, as the SDK's transport answers what it
    refuses: an MCP client raises its message (a body of another shape is "Server returned an error response").
    """
    app = server.streamable_http_app(host=host)
    if api_key is None:
        return app

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not bearer_matches(scope, api_key):
            body = json.dumps({"jsonrpc": "2.0", "id": None,
                               "error": {"code": INVALID_REQUEST, "message": KEY_HINT}}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded

