"""``videvolve serve`` (an OpenAI-compatible server of harness versions) and ``videvolve mcp`` (an MCP server)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from videvolve.cli.common import model_settings, open_cache, runtime_settings
from videvolve.cli.flags import add_settings
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import UsageError

if TYPE_CHECKING:
    from videvolve.serving.media import MediaRoots

err = Console(stderr=True, soft_wrap=True)
DEFAULT_MEMORY = Path.home() / ".videvolve" / "memory"
SERVING_RETRY_WINDOW_S = 30.0
"""``serve``'s and ``mcp``'s ``--retry-window`` unless given: a client or host gives up on a call long before an
overnight run's 10 minutes, and a 503 (a tool error) it can retry tells it more than its own timeout."""


def _short_retries(p: argparse.ArgumentParser, what: str) -> None:
    for action in p._actions:
        if action.dest == "ModelSettings.retry_window_s":
            action.help = (f"seconds a failing model endpoint is retried before the question is {what} (default "
                           f"{SERVING_RETRY_WINDOW_S:g}: a client gives up on a call long before evolve's 600)")


def answering_model(args: argparse.Namespace) -> ModelSettings:
    """The model settings of a server: a failing endpoint retried for ``SERVING_RETRY_WINDOW_S`` unless given."""
    model = model_settings(args)
    if getattr(args, "ModelSettings.retry_window_s", None) is None:
        model = model.model_copy(update={"retry_window_s": SERVING_RETRY_WINDOW_S})
    return model


def _agent_args(p: argparse.ArgumentParser) -> None:
    """Model, runtime and cache flags, as ``ask`` has them; the model's key variable is ``--vlm-api-key-env``."""
    g = p.add_argument_group("model (behind the harness)")
    add_settings(g, ModelSettings, skip=("api_key_env",))
    g.add_argument("--vlm-api-key-env", dest="ModelSettings.api_key_env", default=None, metavar="VAR",
                   help="environment variable holding the model endpoint's key (default OPENAI_API_KEY)")
    add_settings(p.add_argument_group("harness runtime"), RuntimeSettings)
    c = p.add_argument_group("cache")
    c.add_argument("--cache", type=Path, default=None, help="response cache file (default ~/.cache/videvolve)")
    c.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    p.add_argument("--media-root", type=Path, action="append", default=[], metavar="DIR",
                   help="a folder local videos may come from (repeat); none: no local files are served")
    p.add_argument("--no-fetch", action="store_true", help="refuse http(s) video URLs (403): for a server others "
                   "can reach, so that it cannot be made to fetch from hosts only it can reach")
    p.add_argument("--allowed-media-domains", nargs="+", default=[], metavar="HOST",
                   help="fetch http(s) videos only from these hosts, each redirect's included (403 otherwise; the "
                   "host name exactly, as vLLM's flag of this name)")


def media_roots(args: argparse.Namespace) -> MediaRoots:
    """Where served videos may come from: ``--media-root``, ``--no-fetch``, ``--allowed-media-domains``."""
    from videvolve.serving.media import MediaRoots

    return MediaRoots(args.media_root, fetch=not args.no_fetch, domains=args.allowed_media_domains)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve`` and ``mcp``."""
    s = sub.add_parser("serve", help="an OpenAI-compatible server whose models are harness versions")
    s.add_argument("harness", metavar="HARNESS_OR_RUN", help="seed name, harness folder or run directory")
    s.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    s.add_argument("--port", type=int, default=8100, help="port to listen on")
    s.add_argument("--api-key-env", dest="server_api_key_env", default=None, metavar="VAR",
                   help="require Authorization: Bearer $VAR from clients (the variable must be set)")
    s.add_argument("--queue", type=int, default=16, help="questions waiting beyond --concurrency before 429")
    _agent_args(s)
    _short_retries(s, "a 503")
    s.set_defaults(func=cmd_serve)

    m = sub.add_parser("mcp", help="a Model Context Protocol server: ask_video, ground_in_video, search_diagnoses, "
                       "show_harness")
    m.add_argument("--harness", default="scan_refine", help="seed name, harness folder or run directory")
    m.add_argument("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp (default: stdio)")
    m.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    m.add_argument("--port", type=int, default=8101, help="port to listen on")
    m.add_argument("--api-key-env", dest="server_api_key_env", default=None, metavar="VAR",
                   help="--http: require Authorization: Bearer $VAR from clients (the variable must be set)")
    m.add_argument("--memory", type=Path, default=DEFAULT_MEMORY, help="the diagnosis memory search_diagnoses reads")
    _agent_args(m)
    _short_retries(m, "a tool error")
    m.set_defaults(func=cmd_mcp)


def _server_key(var: str | None) -> str | None:
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise UsageError(f"--api-key-env {var}: the variable is not set (export {var}=<a secret> first)")
    return key


def cmd_serve(args: argparse.Namespace) -> int:
    """``videvolve serve``."""
    import uvicorn

    from videvolve.serving.agent import CatalogAgents, HarnessCatalog
    from videvolve.serving.openai_api import ServerLimits, create_app

    if args.queue < 0:
        raise UsageError("--queue must be 0 or more")
    key = _server_key(args.server_api_key_env)
    runtime = runtime_settings(args)
    roots = media_roots(args)
    agents = CatalogAgents(HarnessCatalog.open(args.harness, runtime.budget), answering_model(args), runtime,
                           cache=open_cache(args))
    app = create_app(agents, roots, ServerLimits(api_key=key, concurrency=runtime.concurrency, queue=args.queue))
    err.print(f"serving {', '.join(f'{i} ({agents.describe(i)})' for i in agents.ids())} at "
              f"http://{args.host}:{args.port}/v1 (Ctrl-C stops)", highlight=False)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``videvolve mcp``."""
    from videvolve.api import load_harness
    from videvolve.serving.agent import VideoAgent
    from videvolve.serving.mcp_server import create_mcp

    runtime = runtime_settings(args)
    agent = VideoAgent(load_harness(args.harness, runtime.budget), answering_model(args), runtime,
                       cache=open_cache(args))
    if args.server_api_key_env is not None and not args.http:
        raise UsageError("--api-key-env asks HTTP clients for a key: it goes with --http (stdio has no clients but "
                         "the host that started the server)")
    key = _server_key(args.server_api_key_env)
    server = create_mcp(agent, media_roots(args), args.memory)
    if args.http:
        import uvicorn

        from videvolve.serving.mcp_server import http_app

        err.print(f"MCP server for {agent.version} at http://{args.host}:{args.port}/mcp"
                  f"{' (clients send Authorization: Bearer $' + args.server_api_key_env + ')' if key else ''} "
                  "(Ctrl-C stops)", highlight=False)
        uvicorn.run(http_app(server, args.host, key), host=args.host, port=args.port, log_level="warning")
    else:
        server.run("stdio")
    return 0
