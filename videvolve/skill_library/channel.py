"""The parent's end of a sandboxed child's channel: newline-delimited JSON, each way with a deadline and caps.

A child's message is checked for size, nesting and number of values before it is decoded (:func:`decode_request`);
a reply the child could not read (over :data:`~videvolve.skill_library.sdk.MAX_MESSAGE_BYTES`) is refused as the
request's error (:func:`encode_reply`); neither a read nor a write ever waits past the task's deadline (:class:`Pipe`).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import time
from typing import Any

from videvolve.errors import HarnessError
from videvolve.models.toolloop import unencodable
from videvolve.skill_library.sdk import MAX_MESSAGE_BYTES, message_problem


class Pipe:
    """Both ends of the child's channel, each with a deadline: newline-delimited reads with a size cap, and writes.

    The parent's end of the child's stdin is non-blocking, so a child that stops reading (its own stdout full) cannot
    hold the parent in a write: the write waits for room until the task's deadline, then the task times out.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        self.fd = proc.stdout.fileno()
        self.out = proc.stdin.fileno()
        os.set_blocking(self.out, False)
        self.buf = b""
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)
        self.wsel = selectors.DefaultSelector()
        self.wsel.register(self.out, selectors.EVENT_WRITE)

    def close(self) -> None:
        """Forget the descriptors (the caller closes them)."""
        self.sel.close()
        self.wsel.close()

    def readline(self, deadline: float) -> bytes | None:
        """One message without its newline (None: the child closed its end); TimeoutError past ``deadline``."""
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_MESSAGE_BYTES:
                raise HarnessError(f"a message from the harness exceeds the size cap of {MAX_MESSAGE_BYTES} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not self.sel.select(timeout=left):
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def write(self, data: bytes, deadline: float) -> None:
        """Write all of ``data`` before ``deadline`` (TimeoutError), or BrokenPipeError when the child is gone."""
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not self.wsel.select(timeout=left):
                continue
            try:
                view = view[os.write(self.out, view[:65536]):]
            except BlockingIOError:
                continue


def decode_request(line: bytes) -> tuple[dict[str, Any] | None, str]:
    """A child's request, or None and why it breaks the protocol (checked for size and shape before decoding)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the harness broke the protocol (a message that is not UTF-8)"
    why = message_problem(text)
    if why is not None:
        return None, f"the harness sent a message the parent refuses: {why}"
    try:
        msg = json.loads(text)
    except (ValueError, RecursionError):
        return None, "the harness broke the protocol (not a JSON request)"
    if not isinstance(msg, dict) or "op" not in msg or not isinstance(msg.get("args", {}), dict):
        return None, "the harness broke the protocol (not a JSON request with an op and an object of args)"
    if _SURROGATE_ESCAPE.search(text) and unencodable(msg):  # in a stored answer or error it would stop the run
        return None, "the harness broke the protocol (a string with a lone surrogate, which is not text)"
    return msg, ""


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""Where a decoded string may hold a surrogate: a JSON escape of one (an emoji comes as an escaped pair)."""


def encode_reply(reply: dict[str, Any], op: Any) -> bytes:
    """A reply as one line; one over the child's cap is refused as the request's error (the child could not read it)."""
    data = (json.dumps(reply) + "\n").encode()
    if len(data) <= MAX_MESSAGE_BYTES:
        return data
    refused = {"id": reply.get("id"), "ok": False, "kind": "invalid",
               "error": f"the reply to {str(op)[:100]!r} would be {len(data):,} bytes, over the cap of "
                        f"{MAX_MESSAGE_BYTES:,}; ask for less at once"}
    return (json.dumps(refused) + "\n").encode()
