"""Prompt templates are files with a strict loader: a missing variable raises instead of rendering blank."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from videvolve.errors import HarnessError


@functools.lru_cache(maxsize=32)
def _template(name: str) -> Template:
    path = resources.files("videvolve.skill_library") / "prompt_templates" / f"{name}.txt"
    try:
        return Template(path.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        raise HarnessError(f"no prompt template {name!r}") from None


def render(name: str, **values: object) -> str:
    """Fill a template; every ``$variable`` must be given."""
    try:
        return _template(name).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise HarnessError(f"prompt template {name!r} needs {exc.args[0]!r}") from None


def options_block(options: tuple[str, ...] | list[str]) -> str:
    """``A. text`` lines."""
    return "\n".join(f"{chr(65 + i)}. {text}" for i, text in enumerate(options))
