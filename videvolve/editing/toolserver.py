"""The editor's tools served to an external command: a FastAPI app on a Unix socket, and the ``bin/`` scripts.

The run serves one :class:`~videvolve.editing.tools.EditorTools` on ``tools.sock`` in a private folder (short, so
that the socket's path fits the kernel's 108 bytes) that the sandbox mounts at ``WORKSPACE/.tools/``, for as long
as the command runs. Calls are taken one at a time (a trial writes where the next reads); before each, ``guard``
may refuse it (the command driver refuses a candidate holding links or special files, which the trusted side would
otherwise follow). ``bin/<tool>`` is one small stdlib-only Python script installed under every tool's name: it
turns its arguments into the tool's JSON arguments, POSTs them over the socket and prints the result (exit status
0 when the tool succeeded, 1 when it was refused).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from videvolve.editing.safefs import remove_tree
from videvolve.editing.tools import TOOLS, EditorTools, tool_schemas

SOCKET_NAME = "tools.sock"
POSITIONAL = {"trial": ("tasks", True), "submit": ("rationale", False), "memory_search": ("query", False),
              "read_file": ("path", False), "list_files": ("path", False), "probe": ("task_id", False)}
"""What a tool's bare (non ``--flag``) arguments fill: (field, whether it is a list)."""
MAX_BODY = 1024 * 1024
"""Bytes of one tool call's arguments (a whole editable file is at most 128 KiB); a larger request is drained
unkept and refused, so an agent cannot fill the run's memory through the socket."""
MAX_REQUESTS = 8
"""Connections served at once (calls are taken one at a time anyway); a request beyond them is answered 503 at its
headers, unread, so that many connections each holding almost :data:`MAX_BODY` cannot fill the run's memory either."""


class ToolServer:
    """The tools of one workspace behind a lock, with a journal of the calls made through it."""

    def __init__(self, tools: EditorTools, guard: Callable[[], str | None] = lambda: None) -> None:
        self.tools, self.guard = tools, guard
        self.lock = threading.Lock()
        self.closed = False
        self.calls: list[dict[str, Any]] = []

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """One tool call, as the ``bin/`` script receives it: {"ok", "result"}."""
        with self.lock:
            if self.closed:
                return {"ok": False, "result": "refused: the editor's session is over"}
            why = self.guard() if name in TOOLS else None
            if why:
                text, ok = f"refused: {why}", False
                self.tools.log({"kind": "tool", "name": name, "args": args, "ok": False, "result": text})
            else:
                text, ok = self.tools.call(name, args)
            self.calls.append({"name": name, "ok": ok})
            return {"ok": ok, "result": text}

    def close(self) -> None:
        """Refuse every later call; waits for the one in progress."""
        with self.lock:
            self.closed = True


def create_app(server: ToolServer) -> Any:
    """``POST /call/<tool>`` with the JSON arguments; ``GET /tools``: the schemas."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.concurrency import run_in_threadpool

    app = FastAPI(title="videvolve editor tools", docs_url=None, redoc_url=None, openapi_url=None)

    async def call(name: str, request: Request) -> JSONResponse:
        body, size = bytearray(), 0
        async for chunk in request.stream():  # read as it comes, never more than MAX_BODY of it kept
            size += len(chunk)
            if size <= MAX_BODY:
                body += chunk
        if size > MAX_BODY:
            return JSONResponse({"ok": False, "result": f"refused: a request over {MAX_BODY} bytes"}, 413)
        try:
            args = json.loads(body or b"{}")
        except ValueError as exc:
            return JSONResponse({"ok": False, "result": f"refused: the arguments are not JSON ({exc})"}, 400)
        if not isinstance(args, dict):
            return JSONResponse({"ok": False, "result": "refused: the arguments must be a JSON object"}, 400)
        return JSONResponse(await run_in_threadpool(server.call, name, args))

    call.__annotations__.update(name=str, request=Request)  # this module's annotations are strings; FastAPI
    app.post("/call/{name}")(call)  # must see the class to pass the request itself

    @app.get("/tools")
    def tools() -> list[dict[str, Any]]:
        return tool_schemas()

    return app


@contextmanager
def serve_tools(server: ToolServer) -> Iterator[Path]:
    """Serve ``server`` on a Unix socket in a fresh private folder (yielded) until the block ends."""
    import uvicorn

    folder = Path(tempfile.mkdtemp(prefix="vv-tools-"))
    sock = folder / SOCKET_NAME
    config = uvicorn.Config(create_app(server), uds=str(sock), log_level="warning", lifespan="off",
                            limit_concurrency=MAX_REQUESTS)
    userver = uvicorn.Server(config)
    thread = threading.Thread(target=userver.run, daemon=True, name="editor-tools")
    thread.start()
    try:
        for _ in range(400):
            if userver.started or not thread.is_alive():
                break
            time.sleep(0.025)
        if not userver.started:
            raise RuntimeError(f"the editor's tool server did not start on {sock}")
        yield folder
    finally:
        server.close()
        userver.should_exit = True
        thread.join(timeout=30)
        with contextlib.suppress(OSError):
            remove_tree(folder)


CLIENT = '''#!/usr/bin/env python3
"""videvolve editor tool (installed as bin/<tool>). `bin/<tool> --help` shows its arguments."""
import http.client, json, os, socket, sys

SOCKET = os.environ.get("VIDEVOLVE_TOOLS_SOCKET") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".tools", "tools.sock")
SCHEMAS = __SCHEMAS__
POSITIONAL = __POSITIONAL__


class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCKET)


def value(prop, text):
    if prop.get("type") == "string":
        return text
    if prop.get("type") == "array" and not text.lstrip().startswith("["):
        items = [x.strip() for x in text.split(",") if x.strip()]
        return [float(x) for x in items] if prop.get("items", {}).get("type") == "number" else items
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse(name, argv):
    if len(argv) == 1 and argv[0].lstrip().startswith("{"):
        return json.loads(argv[0])
    props, args, bare, i = SCHEMAS[name]["properties"], {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and i + 1 < len(argv):
            key = a[2:].replace("-", "_")
            args[key] = value(props.get(key, {"type": "string"}), argv[i + 1])
            i += 2
        else:
            bare.append(a)
            i += 1
    if bare:
        if name not in POSITIONAL:
            sys.exit("%s takes only --name value arguments (or one JSON object); see --help" % name)
        field, many = POSITIONAL[name]
        args[field] = bare if many else " ".join(bare)
    return args


def main():
    name = os.path.basename(sys.argv[0])
    if name not in SCHEMAS:
        sys.exit("unknown tool %r; the tools are %s" % (name, ", ".join(SCHEMAS)))
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print("bin/%s: %s" % (name, SCHEMAS[name]["description"]))
        print(json.dumps(SCHEMAS[name]["properties"], indent=1))
        return 0
    conn = Conn("localhost", timeout=None)
    conn.request("POST", "/call/" + name, body=json.dumps(parse(name, sys.argv[1:])),
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status == 503:
        sys.exit("%s: the run's tool server is busy with other calls at once; call again" % name)
    reply = json.loads(response.read())
    print(reply["result"])
    return 0 if reply["ok"] else 1


sys.exit(main())
'''


def install_bin(root: Path) -> list[str]:
    """Write ``bin/<tool>`` for every tool into a workspace; returns their names."""
    schemas = {s["function"]["name"]: {"description": s["function"]["description"],
                                       "properties": s["function"]["parameters"].get("properties", {})}
               for s in tool_schemas()}
    text = CLIENT.replace("__SCHEMAS__", repr(schemas)).replace("__POSITIONAL__", repr(POSITIONAL))
    (root / "bin").mkdir(exist_ok=True)
    for name in TOOLS:
        path = root / "bin" / name
        path.unlink(missing_ok=True)
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return list(TOOLS)


def journal(calls: list[dict[str, Any]]) -> str:
    """The calls made through ``bin/`` in a line."""
    return ", ".join(f"{c['name']}{'' if c['ok'] else ' (refused)'}" for c in calls) or "none"

