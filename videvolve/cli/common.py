"""Arguments shared by the commands that talk to a model (generated from the settings models); the stdout console."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from videvolve.cli.flags import add_settings, build, given
from videvolve.config import ModelSettings, RuntimeSettings
from videvolve.errors import UsageError
from videvolve.models.cache import ResponseCache

PIPED_WIDTH = 10_000
"""Columns of stdout when it is not a terminal: wide enough that no table folds an id (so it can be copied)."""


def stdout_console() -> Console:
    """A terminal's own width on a TTY; when piped or redirected, ``PIPED_WIDTH`` so tables never wrap."""
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else PIPED_WIDTH)


def add_model_args(p: argparse.ArgumentParser, cache: bool = True, skip_runtime: Iterable[str] = ()) -> None:
    """The model's and the harness runtime's settings as flags (``--backend``, ``--model``, ``--budget``, ...).

    ``skip_runtime``: runtime settings the command sets its own way (``from-csv``'s ``--teacher-budget``).
    """
    add_settings(p.add_argument_group("model"), ModelSettings)
    add_settings(p.add_argument_group("harness runtime"), RuntimeSettings, skip=skip_runtime)
    if cache:
        c = p.add_argument_group("cache and sources")
        c.add_argument("--cache", type=Path, default=None, help="response cache file (default ~/.cache/videvolve)")
        c.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
        c.add_argument("--proxy", choices=["never", "auto", "always"], default="never",
                       help="read frames from low-resolution proxies (auto: for long, 4K, HEVC/AV1 or VFR sources)")


def model_settings(args: argparse.Namespace, ask_endpoint: bool = True) -> ModelSettings:
    """Model settings from the flags given (the sim backend's model is ``simvlm`` unless named).

    A server's model not named with ``--model`` is the one its endpoint serves (:func:`with_served_model`, asked
    once: the name found is kept in ``args``); ``ask_endpoint=False`` leaves it unnamed (``doctor`` says why).
    """
    settings = build(ModelSettings, given(args, ModelSettings), "the command line")
    if not ask_endpoint:
        return settings
    from videvolve.models.openai_backend import with_served_model

    named = with_served_model(settings)
    if named is not settings:
        setattr(args, "ModelSettings.model", named.model)
    return named


def runtime_settings(args: argparse.Namespace) -> RuntimeSettings:
    """Runtime settings from the flags given (images as png for SimVLM, jpeg for a real server by default)."""
    data = given(args, RuntimeSettings)
    data.setdefault("image_format", "png" if given(args, ModelSettings).get("backend", "sim") == "sim" else "jpeg")
    return build(RuntimeSettings, data, "the command line")


def open_cache(args: argparse.Namespace) -> ResponseCache | None:
    """The response cache the arguments ask for."""
    if args.no_cache:
        return None
    from videvolve.config import default_cache_path

    return ResponseCache(args.cache or default_cache_path())


def output_folder(path: Path, what: str) -> Path:
    """``path``, checked to be a folder that can be made: a file in its place (or above it) is a UsageError."""
    for part in (path, *path.parents):
        if part.is_dir():
            return path
        if part.exists() or part.is_symlink():
            kind = "a file" if part.exists() else "a link to nothing"
            raise UsageError(f"cannot write {what} {path}: {part} is {kind}, not a folder: choose another path")
    return path
