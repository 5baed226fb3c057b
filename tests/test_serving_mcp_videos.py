"""`videvolve mcp` over stdio, with the MCP SDK's own client: how a query is asked, and what a damaged video gives."""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.serving_support import ServingWorld, env

pytestmark = pytest.mark.slow


async def _calls(w: ServingWorld, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], dict[str, Any]]:
    """The results of ``calls`` to a real `videvolve mcp` (stdio), and its tools by name."""
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "videvolve", "mcp", "--harness", str(w.harness), "--media-root", str(w.root), "--backend", "sim",
        "--no-cache"], env=env())
    async with Client(params, read_timeout_seconds=300) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return [await client.call_tool(name, args) for name, args in calls], tools


def test_ground_in_video_asks_a_bare_query_as_a_when_question(serving_world: ServingWorld):
    """The tool's own example, a query such as "the orange diamond appears", was handed to the harness as it was:
    on SimVLM an `unsupported` error (outside SynthWorld's grammar) where "When does the orange diamond appear?"
    was answered. A query that is no question is asked as "When does <query>?"; a question is asked as it is."""
    w = serving_world
    target = re.fullmatch(r"When does (.+) appear\?", w.grounding.question)
    assert target is not None, w.grounding.question
    bare = f"{target[1]} appears"  # e.g. "the orange diamond appears", as the tool's description suggests
    video = str(w.video)
    (as_query, as_question), tools = anyio.run(_calls, w, [
        ("ground_in_video", {"video": video, "query": bare}),
        ("ground_in_video", {"video": video, "query": w.grounding.question})])
    for result in (as_query, as_question):
        assert not result.is_error, result.content
        s = result.structured_content  # main: outcome "error", error_kind "unsupported" for the bare query
        assert s["outcome"] == "ok" and s["answer"] == w.asked_grounding["answer"], s
    said = tools["ground_in_video"]
    assert "When does <query>?" in (said.description or ""), said.description
    assert "When does" in said.input_schema["properties"]["query"]["description"]


def test_a_video_damaged_part_way_is_a_result_and_one_that_is_no_video_a_tool_error(serving_world: ServingWorld):
    """As the guide says: a video that opens but stops decoding part-way is found by the harness while it looks (a
    result: outcome "error", error_kind "media", where it broke); a file that is no video is refused before any
    harness runs (a tool error naming it)."""
    from tests.conftest import sample

    w = serving_world
    damaged, junk = w.root / "damaged_part_way.mp4", w.root / "not_a_video.mp4"
    shutil.copy(sample("videos", "decord_corrupted.mp4"), damaged)
    junk.write_bytes(b"not a video" * 100)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ask_video", {"video": str(damaged), "question": "Which?", "options": ["A) red", "B) blue"]}),
        ("ground_in_video", {"video": str(junk), "query": w.grounding.question})]
    (part_way, no_video), _ = anyio.run(_calls, w, calls)
    assert not part_way.is_error, part_way.content
    s = part_way.structured_content
    assert s["outcome"] == "error" and s["error_kind"] == "media" and "cannot decode" in s["error"], s
    assert f"the video {damaged}" in s["error"] and "the task's video" not in s["error"], s  # as the host sent it
    assert no_video.is_error and "not_a_video.mp4" in no_video.content[0].text, no_video.content
