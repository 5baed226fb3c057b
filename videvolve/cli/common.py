"""Arguments shared by the commands that talk to a model."""

from __future__ import annotations

import argparse
from pathlib import Path

from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.models.cache import ResponseCache


def add_model_args(p: argparse.ArgumentParser) -> None:
    """--backend, --model, --base-url, --api-key-env, --family, --budget, ..."""
    g = p.add_argument_group("model")
    g.add_argument("--backend", choices=["sim", "openai"], default="sim",
                   help="sim: offline SimVLM (default); openai: an OpenAI-compatible server such as vLLM")
    g.add_argument("--model", default=None, help="model name as the server knows it (default simvlm for sim)")
    g.add_argument("--base-url", default=None, help="e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    g.add_argument("--family", default="qwen2.5-vl", choices=["qwen2.5-vl", "qwen3-vl"],
                   help="visual-token formula of the model family")
    g.add_argument("--max-tokens", type=int, default=1024)
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per model request")
    g.add_argument("--max-retries", type=int, default=4, help="retries of transient endpoint failures")
    r = p.add_argument_group("harness runtime")
    r.add_argument("--budget", type=int, default=None, help="per-question cap on distinct frames shown to the model")
    r.add_argument("--image-format", choices=["png", "jpeg"], default=None,
                   help="how images are sent (default: png for sim, jpeg for openai)")
    r.add_argument("--clip-mode", choices=["frames", "video"], default="frames")
    r.add_argument("--task-timeout", type=float, default=900.0, help="seconds before a harness is killed")
    r.add_argument("--cache", type=Path, default=None, help="response cache file (default ~/.cache/videvolve)")
    r.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    r.add_argument("--proxy", choices=["never", "auto", "always"], default="never",
                   help="read frames from low-resolution proxies (auto: for long, 4K, HEVC/AV1 or VFR sources)")


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """Model settings from the arguments."""
    return ModelSettings(backend=args.backend, model=args.model or ("simvlm" if args.backend == "sim" else ""),
                         base_url=args.base_url, api_key_env=args.api_key_env, family=args.family,
                         max_tokens=args.max_tokens, timeout_s=args.timeout, max_retries=args.max_retries)


def runtime_settings(args: argparse.Namespace, concurrency: int = 1) -> RuntimeSettings:
    """Runtime settings from the arguments."""
    fmt = args.image_format or ("png" if args.backend == "sim" else "jpeg")
    return RuntimeSettings(budget=args.budget, image_format=fmt, clip_mode=args.clip_mode,
                           wall_seconds=args.task_timeout, concurrency=concurrency)


def open_cache(args: argparse.Namespace) -> ResponseCache | None:
    """The response cache the arguments ask for."""
    if args.no_cache:
        return None
    from videvolve.config import default_cache_path

    return ResponseCache(args.cache or default_cache_path())
