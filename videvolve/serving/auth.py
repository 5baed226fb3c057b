"""The one API-key check of the servers (``serve --api-key-env``, ``mcp --http --api-key-env``)."""

from __future__ import annotations

import secrets

from starlette.datastructures import Headers
from starlette.types import Scope

KEY_HINT = "invalid API key: send Authorization: Bearer <key> (the value of the server's --api-key-env variable)"


def bearer_matches(scope: Scope, api_key: str) -> bool:
    """Whether an ASGI HTTP request carries ``Authorization: Bearer <api_key>`` (compared in constant time)."""
    given = Headers(scope=scope).get("authorization", "")
    return secrets.compare_digest(given.encode(), f"Bearer {api_key}".encode())
