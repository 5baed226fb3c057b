"""`videvolve mcp` over stdio, with the MCP SDK's own client: how a query is asked."""

from __future__ import annotations

import re
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

