"""MkDocs hook: leave out nav entries whose page does not exist (yet).

So the strict build passes while pages other engineers are writing have not landed; a section left empty goes too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _prune(items: list[Any], docs: Path) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, str):
            if (docs / item).is_file():
                kept.append(item)
            continue
        (title, value), = item.items()
        if isinstance(value, list):
            value = _prune(value, docs)
            if value:
                kept.append({title: value})
        elif "://" in str(value) or (docs / str(value)).is_file():
            kept.append(item)
    return kept


def on_config(config: Any) -> Any:
    """Prune ``nav`` to the pages that exist."""
    if config.get("nav"):
        config["nav"] = _prune(config["nav"], Path(config["docs_dir"]))
    return config
