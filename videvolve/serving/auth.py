"""The one API-key check of the servers (``serve --api-key-env``, ``mcp --http --api-key-env``)."""

from __future__ import annotations

import secrets

from starlette.datastructures import Headers
from starlette.types import Scope

KEY_HINT = "invalid API key: send Authorization: Bearer <key> (the value of the server's --api-key-env variable)"


def bearer_matches(scope: Scope, api_key: str) -> bool:
    """Whether an ASGI HTTP request carries ``Authorization: Bearer <api_key>`` (compared in constant time).

    The scheme is case-insensitive (RFC 9110 11.1: ``bearer KEY`` is the same credential).
    """
    scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), api_key.encode())
