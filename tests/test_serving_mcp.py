"""`videvolve mcp`: the MCP SDK's own client, over stdio and streamable HTTP, gets the answers `videvolve ask` gives."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.serving_support import ServingWorld, env, option_lines, videvolve_server
from tests.steps_support import model_call
from videvolve.testing import reserved_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def world(serving_world, tmp_path_factory: pytest.TempPathFactory):
    memory = tmp_path_factory.mktemp("memory")
    from videvolve.memory import Diagnosis, open_store

    store = open_store(memory)
    common = {"run_id": "r1", "iteration": 1, "harness_id": "h0", "video_id": "v9", "kind": "grounding",
              "preserve": "the answer format"}
    store.put([
        Diagnosis(id="d1", task_id="t1", category="missed_event", hypothesis="uniform sampling skipped a short "
                  "event between two frames", applies_when="events shorter than the sampling gap", **common),
        Diagnosis(id="d2", task_id="t2", category="format_error", hypothesis="the reply listed times as text "
                  "instead of intervals", applies_when="grounding replies", **common)])
    store.close()
    return serving_world, memory


def _args(w: ServingWorld, memory: Path) -> list[str]:
    return ["mcp", "--harness", str(w.harness), "--media-root", str(w.root), "--memory", str(memory), "--backend",
            "sim", "--no-cache"]


async def _session(client: Client, w: ServingWorld) -> dict[str, Any]:
    video = str(w.video)
    names = {t.name for t in (await client.list_tools()).tools}
    ask = await client.call_tool("ask_video", {"video": video, "question": w.mcq.question,
                                               "options": option_lines(w.mcq)})
    ground = await client.call_tool("ground_in_video", {"video": video, "query": w.grounding.question})
    outside = await client.call_tool("ask_video", {"video": "/etc/hostname", "question": "When?"})
    escape = await client.call_tool("ground_in_video", {"video": "../../../etc/hostname", "query": "When?"})
    search = await client.call_tool("search_diagnoses", {"text": "a short event was missed by sparse sampling",
                                                          "k": 1})
    show = await client.call_tool("show_harness", {})
    return {"names": names, "ask": ask, "ground": ground, "outside": outside, "escape": escape, "search": search,
            "show": show}


def _check(got: dict[str, Any], w: ServingWorld) -> None:
    assert got["names"] == {"ask_video", "ground_in_video", "search_diagnoses", "show_harness"}
    for result, expected in ((got["ask"], w.asked_mcq), (got["ground"], w.asked_grounding)):
        assert not result.is_error, result.content
        s = result.structured_content
        assert s["outcome"] == "ok" and s["answer"] == expected["answer"]
        assert s["cost"]["frames"] == expected["usage"]["frames"] > 0
        assert s["cost"]["visual_tokens"] == expected["usage"]["image_tokens"] + expected["usage"]["video_tokens"]
        assert s["cost"]["calls"] == expected["usage"]["requests"]
        assert s["evidence_times"] == expected["evidence_times"]
    assert got["ask"].structured_content["kind"] == "mcq" and got["ground"].structured_content["kind"] == "grounding"
    for refused in (got["outside"], got["escape"]):
        assert refused.is_error and "outside the media roots" in refused.content[0].text
    hits = got["search"].structured_content["hits"]
    assert [h["id"] for h in hits] == ["d1"] and hits[0]["category"] == "missed_event"
    card = got["show"].structured_content
    assert card["name"] == "uniform" and card["config"]["n_frames"] == 12 and "frames spread evenly" in card["skill"]


def test_stdio(world):
    w, memory = world
    params = StdioServerParameters(command=sys.executable, args=["-m", "videvolve", *_args(w, memory)], env=env())

    async def main() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=300) as client:
            return await _session(client, w)

    _check(anyio.run(main), w)


def test_streamable_http(world):
    w, memory = world
    with reserved_port() as port, \
            videvolve_server([*_args(w, memory), "--http", "--port", str(port)], f"http://127.0.0.1:{port}/mcp"):
        async def main() -> dict[str, Any]:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=300) as client:
                return await _session(client, w)

        got = anyio.run(main)
    _check(got, w)


def test_streamable_http_with_a_key_refuses_clients_without_it(world):
    """`videvolve mcp --http` answered anyone who could reach it; `--api-key-env VAR` asks for Authorization: Bearer
    $VAR as `videvolve serve` does. The SDK's own client with the key gets the whole session; without it, 401."""
    import httpx
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from videvolve.serving.auth import KEY_HINT

    w, memory = world
    with reserved_port() as port, \
            videvolve_server([*_args(w, memory), "--http", "--port", str(port), "--api-key-env", "MCP_TEST_KEY"],
                             url := f"http://127.0.0.1:{port}/mcp", extra_env={"MCP_TEST_KEY": "s3cret"}):
        refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
        wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"}, timeout=30)

        async def main() -> dict[str, Any]:
            keyed = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=300)
            async with Client(streamable_http_client(url, http_client=keyed), read_timeout_seconds=300) as client:
                return await _session(client, w)

        got = anyio.run(main)
    assert refused.status_code == wrong.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert refused.json()["error"]["message"] == KEY_HINT == wrong.json()["error"]["message"]  # JSON-RPC's error
    _check(got, w)


class _Blocking:
    """An agent whose questions wait to be released, counting how many run at once (the harness's place)."""

    def __init__(self, concurrency: int) -> None:
        from types import SimpleNamespace

        self.runtime = SimpleNamespace(concurrency=concurrency)
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.now = self.most = 0

    def ask(self, video: Any, question: str, options: list[str] | None = None, grounding: bool = False,
            cancel: threading.Event | None = None, on_step: Any = None) -> Any:
        from videvolve.serving.agent import AgentAnswer, Cost

        if on_step is not None:  # the harness's first look, as the server is told it
            on_step(model_call([0.0, 60.0], event="ask:match", reply="yes"))
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            assert self.release.wait(60)
            return AgentAnswer(harness="fake@1", kind="grounding", outcome="ok", answer=[], text="[]", cost=Cost())
        finally:
            with self.lock:
                self.now -= 1


async def _flood(client: Any, tg: Any, agent: Any, n: int, results: list[Any]) -> None:
    """Start ``n`` ground_in_video calls in ``tg``; return once ``agent``'s places are all taken and a second more
    has passed (time for more to start, were they let)."""
    async def one() -> None:
        results.append(await client.call_tool("ground_in_video", {"video": "v.mp4", "query": "When?"}))

    for _ in range(n):
        tg.start_soon(one)
    with anyio.fail_after(30):
        while agent.now < agent.runtime.concurrency:
            await anyio.sleep(0.02)
    await anyio.sleep(1.0)


@pytest.mark.timeout(120)
def test_concurrent_asks_run_at_most_concurrency_harnesses(tmp_path: Path):
    """Every ask ran at once (up to anyio's 40 threads), each a sandboxed harness and its decoding: a client's
    flood of calls held them all. At most --concurrency run; the others wait their turn."""
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Blocking(concurrency=2)
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]

    async def main() -> list[Any]:
        results: list[Any] = []
        async with Client(server) as client, anyio.create_task_group() as tg:
            await _flood(client, tg, agent, 6, results)
            agent.release.set()
        return results

    results = anyio.run(main)
    assert agent.most == 2 and len(results) == 6 and not any(r.is_error for r in results), agent.most


class _Hangs:
    """An agent whose question runs until it is cancelled, as a harness that never returns would."""

    def __init__(self) -> None:
        from types import SimpleNamespace

        self.runtime = SimpleNamespace(concurrency=1)
        self.stopped = threading.Event()

    def ask(self, video: Any, question: str, options: list[str] | None = None, grounding: bool = False,
            cancel: threading.Event | None = None, on_step: Any = None) -> Any:
        from videvolve.errors import Cancelled

        if cancel is None or not cancel.wait(60):
            raise AssertionError("never cancelled")
        self.stopped.set()
        raise Cancelled("the client went away")


@pytest.mark.timeout(120)
def test_a_call_the_client_cancels_stops_its_harness(tmp_path: Path):
    """Before: the SDK ran the tool in a thread it waited for to the end; a cancelled call (an MCP host's user
    pressing Esc) held its harness, and its place under --concurrency, to the task timeout."""
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Hangs()
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]

    async def main() -> None:
        async with Client(server) as client:
            with anyio.move_on_after(1):  # the SDK's client sends notifications/cancelled for an abandoned call
                await client.call_tool("ground_in_video", {"video": "v.mp4", "query": "When?"})
            started = anyio.current_time()
            while not agent.stopped.is_set() and anyio.current_time() - started < 10:
                await anyio.sleep(0.05)

    anyio.run(main)
    assert agent.stopped.is_set()  # main: the question was never told (it ran on, 60 s here)


def test_every_tool_argument_is_described_for_the_host(tmp_path: Path):
    """A host's model sees a tool's input schema: every argument had only a title ("Video", "K", "Category"), so
    it was left to guess a path's form, the options' form, k's range and the categories (a wrong one found
    nothing, silently). Each is described; k is bounded and category an enum the SDK checks. The server says its
    version (it said "")."""
    from videvolve import __version__
    from videvolve.memory.records import CATEGORIES
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    server = create_mcp(_Blocking(concurrency=1), MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]

    async def main() -> tuple[Any, Any]:
        async with Client(server) as client:
            assert client.server_info is not None and client.server_info.version == __version__  # main: ""
            tools = (await client.list_tools()).tools
            wrong = await client.call_tool("search_diagnoses", {"text": "missed", "category": "missed"})
            return tools, wrong

    tools, wrong = anyio.run(main)
    for tool in tools:
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)  # main: ask_video's video has none
    search = next(t for t in tools if t.name == "search_diagnoses").input_schema["properties"]
    assert (search["k"]["minimum"], search["k"]["maximum"]) == (1, 50)
    assert set(search["category"]["anyOf"][0]["enum"]) == set(CATEGORIES)
    assert wrong.is_error and "missed_event" in wrong.content[0].text


@pytest.mark.timeout(120)
def test_the_key_is_asked_with_the_bearer_scheme_in_any_case(tmp_path: Path):
    """HTTP's auth scheme is case-insensitive (RFC 9110 11.1): a host configured with `authorization: bearer KEY`
    sent the right key and was refused (401) by `mcp --http` and `serve`. A wrong key still is, and the SDK's client
    raises what to send: the 401's body was not JSON-RPC, so the client said only "Server returned an error
    response"."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from tests.serving_support import running
    from videvolve.serving.auth import KEY_HINT
    from videvolve.serving.mcp_server import create_mcp, http_app
    from videvolve.serving.media import MediaRoots

    server = create_mcp(_Blocking(concurrency=1), MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]
    with running(http_app(server, "127.0.0.1", "s3cret")) as base:
        async def tools(header: str) -> list[str]:
            keyed = httpx2.AsyncClient(headers={"Authorization": header}, timeout=60)
            async with Client(streamable_http_client(f"{base}/mcp", http_client=keyed)) as client:
                return [t.name for t in (await client.list_tools()).tools]

        for header in ("bearer s3cret", "BEARER  s3cret"):
            assert "ask_video" in anyio.run(tools, header), header  # main: 401
        with pytest.raises(BaseException) as refused:  # the SDK's client raises it in (nested) exception groups
            anyio.run(tools, "bearer s3cre")
    said = _leaves(refused.value)  # main: only "MCPError: Server returned an error response", no hint
    assert [type(e).__name__ for e in said] == ["MCPError"] and KEY_HINT in str(said[0]), said


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group, however deep (the exception itself when it is none)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@pytest.mark.timeout(200)
def test_a_down_model_endpoint_is_a_tool_error_before_the_host_gives_up(serving_world):
    """The model endpoint was retried for --retry-window's 10 minutes (an overnight run's patience): the host timed
    out first (the SDK's client here at 90 s) and its user never saw why. `mcp` retries for 30 s unless told
    (``tests/test_cli.py`` checks the default), then the call is the documented tool error with the reason; here
    with a 3 s window, so that the test does not wait the default's 30."""
    w = serving_world

    async def main(port: int) -> Any:
        params = StdioServerParameters(command=sys.executable, args=[
            "-m", "videvolve", "mcp", "--harness", str(w.harness), "--media-root", str(w.root), "--no-cache",
            "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
            "--retry-window", "3"], env=env())
        async with Client(params, read_timeout_seconds=90) as client:
            started = anyio.current_time()
            result = await client.call_tool("ground_in_video", {"video": str(w.video), "query": "When?"})
            return result, anyio.current_time() - started

    with reserved_port() as port:  # nothing listens there, and no other worker's server can
        result, took = anyio.run(main, port)  # main: MCPError "Request 'tools/call' timed out"
    assert result.is_error and "down" in result.content[0].text and took < 30, (took, result.content)


@pytest.mark.timeout(120)
def test_a_wrong_number_of_options_is_a_tool_error(tmp_path: Path):
    """One option, or more than the 26 letters: the harness ran (model calls spent) on a question it cannot answer
    (one option is always "A"; a 27th is lettered "[" and can never be chosen) and the host got a confident answer.
    A task file refuses both; ask_video says so. No options (null or []) is still a when-question."""
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Blocking(concurrency=1)
    agent.release.set()
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]

    async def main() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool("ask_video", {"video": "v.mp4", "question": "Which?", "options": options})
                    for options in (["A) only"], [f"option {i}" for i in range(27)], [], None, ["red", "blue"])]

    one, many, empty, none, two = anyio.run(main)
    for refused in (one, many):
        assert refused.is_error and "2 to 26 options" in refused.content[0].text  # main: answered
    assert not any(r.is_error for r in (empty, none, two)) and agent.most == 1


@pytest.mark.timeout(180)
def test_calls_waiting_their_turn_hold_no_thread(tmp_path: Path):
    """Each call waiting for its --concurrency place waited in a thread of anyio's 40: past 40 waiting calls (several
    clients over --http), every other tool call, and every new one, hung until a harness finished. They wait
    without a thread now; the bound holds."""
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Blocking(concurrency=1)
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory")  # type: ignore[arg-type]

    async def main() -> tuple[list[Any], Any]:
        results: list[Any] = []
        other = None
        async with Client(server) as client, anyio.create_task_group() as tg:
            await _flood(client, tg, agent, 45, results)
            with anyio.move_on_after(10):  # main: never answered while 45 calls wait
                other = await client.call_tool("search_diagnoses", {"text": "missed"})
            agent.release.set()
        return results, other

    results, other = anyio.run(main)
    assert other is not None and other.is_error and "no diagnosis memory" in other.content[0].text
    assert len(results) == 45 and not any(r.is_error for r in results) and agent.most == 1


@pytest.mark.timeout(120)
def test_a_long_question_reports_progress_to_a_host_that_asks(tmp_path: Path):
    """A question takes minutes; a host that sent a progress token heard nothing until the answer (hosts show the
    reports, and may keep a call that reports from timing out). Now every few seconds: what it waits for, how long."""
    from videvolve.serving.mcp_server import create_mcp
    from videvolve.serving.media import MediaRoots

    (tmp_path / "v.mp4").write_bytes(b"x")
    agent = _Blocking(concurrency=1)
    server = create_mcp(agent, MediaRoots([tmp_path]), tmp_path / "memory", progress_s=0.1)  # type: ignore[arg-type]
    heard: dict[str, list[tuple[float, str]]] = {"first": [], "second": []}

    def listener(name: str) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            heard[name].append((progress, message or ""))
            if name == "second" and len(heard["second"]) == 3:
                agent.release.set()  # three reports while it waits behind the first, then both answer
        return on_progress

    async def main() -> list[Any]:
        results: list[Any] = []
        async with Client(server) as client, anyio.create_task_group() as tg:
            async def ask(name: str) -> None:
                results.append(await client.call_tool("ground_in_video", {"video": "v.mp4", "query": "When?"},
                                                       progress_callback=listener(name)))
            tg.start_soon(ask, "first")
            with anyio.fail_after(30):
                while agent.now < 1:
                    await anyio.sleep(0.02)
            tg.start_soon(ask, "second")
        results.append(await client_free_call(server))
        return results

    async def client_free_call(server: Any) -> Any:  # a call without a progress token hears nothing, answers alike
        async with Client(server) as client:
            agent.release.set()
            return await client.call_tool("ground_in_video", {"video": "v.mp4", "query": "When?"})

    results = anyio.run(main)
    assert len(results) == 3 and not any(r.is_error for r in results)
    assert all("the harness is looking at the video" in m for _, m in heard["first"]) and len(heard["first"]) >= 3
    assert heard["first"][-1][1].endswith("; last step: Asked the model (match) about 2 moments from 0:00 to 1:00 "
                                          "(2 new frame(s)); it said: yes.")
    assert all("waiting for a free place" in m for _, m in heard["second"][:3])
    progress = [p for p, _ in heard["first"]]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)  # increasing, as the spec asks
