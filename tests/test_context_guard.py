"""The context guard asks the endpoint for its max_model_len once, not before every request."""

from __future__ import annotations

import httpx
import pytest

from videvolve.models.context import ContextGuard, served_max_model_len
from videvolve.models.cost import cost_model
from videvolve.models.sim.server import create_app
from videvolve.testing import serve_app


def test_a_length_not_reported_is_not_asked_for_again_and_an_unreachable_endpoint_is():
    asked: list[str] = []

    def fetch() -> int | None:
        asked.append("GET /v1/models")
        if len(asked) == 1:
            raise httpx.ConnectError("connection refused")  # the server is still starting
        return None  # then it answers, without a length (not vLLM)

    guard = ContextGuard(cost_model("qwen2.5-vl"), fetch)
    assert guard.limit() is None and len(asked) == 1
    for _ in range(5):
        guard.check([{"role": "user", "content": "hello"}], None)
    assert guard.limit() is None and len(asked) == 2  # main: one GET before every request (7)


def test_served_max_model_len_against_a_real_server():
    with serve_app(create_app()) as base:
        assert served_max_model_len(base, "simvlm", None) == 131072
        assert served_max_model_len(base, "another-model", None) is None  # answered: not this model's
    with pytest.raises(httpx.TransportError):  # gone: not taken for a server that reports no length
        served_max_model_len(base, "simvlm", None, timeout=2)
