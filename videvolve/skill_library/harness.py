"""The harness format: an immutable, content-hashed directory.

```
<version_id>/
  manifest.json        name, version_id, parent_id, created_at, task_kinds, entry, summary, scores
  SKILL.md             policy (the system prompt for agentic use)
  references/*.md      optional policy notes
  config.toml          tunables read by solver.py and tools
  solver.py            def solve(task, ctx) -> answer
  tools/<name>/tool.json + tool.py    media tools: {name, description, parameters} and run(ctx, **args)
```
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from videvolve.errors import HarnessError, UsageError
from videvolve.rundir import RunDir
from videvolve.skill_library.static_check import check_source

HASHED_SUFFIXES = (".py", ".md", ".toml", ".json")
MAX_FILE_BYTES = 256 * 1024
MANIFEST = "manifest.json"
"""A version's manifest: name, ids, creation time, summary and, for a revision, its operator, rationale and diff."""


def read_manifest(harness_dir: Path) -> dict[str, Any]:
    """A harness folder's manifest (empty when it has none)."""
    path = harness_dir / MANIFEST
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_manifest(harness_dir: Path, manifest: dict[str, Any]) -> None:
    """Write a harness folder's manifest (only while the folder is being made: versions are immutable)."""
    (harness_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def revision_diff(harness_dir: Path) -> str:
    """The unified diff a revision made to its parent, from its manifest ("" for a seed or no manifest)."""
    return str(read_manifest(harness_dir).get("revision", {}).get("diff", ""))


@dataclass(frozen=True)
class ToolSpec:
    """One media tool of a harness."""

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    path: str


@dataclass(frozen=True)
class Harness:
    """A loaded harness version (its files read once; the directory is never written again)."""

    path: Path
    version_id: str
    manifest: dict[str, Any]
    skill: str
    config: dict[str, Any]
    solver_source: str
    tools: tuple[ToolSpec, ...] = field(default=())

    @property
    def name(self) -> str:
        """The harness's name (its lineage shares it)."""
        return str(self.manifest.get("name", self.path.name))


def _content_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in HASHED_SUFFIXES
                  and p.name != MANIFEST and "__pycache__" not in p.parts)


def content_hash(path: str | Path) -> str:
    """A hash of every file that defines behaviour (not the manifest): the version id's source."""
    path = Path(path)
    h = hashlib.sha256()
    for p in _content_files(path):
        h.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def _json_safe(value: Any) -> bool:
    """Whether JSON can carry a value read from config.toml (TOML's dates and times it cannot)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


TEXT_SUFFIXES = frozenset({".py", ".toml", ".json", ".md"})
"""A harness's files read as text (code, config, tool specs, the skill notes, the manifest)."""


def _utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def validate_harness(path: str | Path) -> str | None:
    """Why a harness directory is not runnable, or None when it is (structure, config, static code check)."""
    path = Path(path)
    if not path.is_dir():
        return f"{path} is not a directory"
    problems: list[str] = []
    for p in path.rglob("*"):
        if p.is_symlink():
            problems.append(f"{p.relative_to(path)}: symbolic links are not allowed")
        elif p.is_file() and p.stat().st_size > MAX_FILE_BYTES:
            problems.append(f"{p.relative_to(path)}: larger than {MAX_FILE_BYTES} bytes")
        elif p.is_file() and p.suffix in TEXT_SUFFIXES and not _utf8(p):
            problems.append(f"{p.relative_to(path)}: not UTF-8 text")
    if any(p.endswith("not UTF-8 text") for p in problems):  # the checks below read those files as text
        return "; ".join(problems)
    solver = path / "solver.py"
    if not solver.is_file():
        problems.append("solver.py is missing")
    else:
        problems += check_source(solver.read_text(encoding="utf-8"), "solver.py")
    try:
        config = tomllib.loads((path / "config.toml").read_text(encoding="utf-8")) \
            if (path / "config.toml").exists() else {}
        problems += [f"config.toml: {key!r} is a date or time, which the sandbox cannot be sent (its config travels "
                     "as JSON): write it as a string" for key, value in config.items() if not _json_safe(value)]
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"config.toml: {exc}")
    except RecursionError:
        problems.append("config.toml: nested too deeply to read")
    tools = path / "tools"
    if tools.exists():
        for tool_dir in sorted(d for d in tools.iterdir() if d.is_dir()):
            rel = tool_dir.relative_to(path)
            try:
                spec = json.loads((tool_dir / "tool.json").read_text(encoding="utf-8"))
                if not isinstance(spec, dict) or not {"name", "description", "parameters"} <= set(spec):
                    problems.append(f"{rel}/tool.json: needs name, description and parameters")
            except (OSError, json.JSONDecodeError) as exc:
                problems.append(f"{rel}/tool.json: {exc}")
            except RecursionError:
                problems.append(f"{rel}/tool.json: nested too deeply to read")
            if not (tool_dir / "tool.py").is_file():
                problems.append(f"{rel}/tool.py is missing")
            else:
                problems += check_source((tool_dir / "tool.py").read_text(encoding="utf-8"), f"{rel}/tool.py")
    return "; ".join(problems) if problems else None


def load_harness(path: str | Path) -> Harness:
    """Load a harness directory (validated first); raises :class:`HarnessError` with the reason."""
    path = Path(path)
    reason = validate_harness(path)
    if reason:
        raise HarnessError(f"harness {path} is not valid: {reason}")
    manifest = read_manifest(path)
    config = tomllib.loads((path / "config.toml").read_text(encoding="utf-8")) if (path / "config.toml").exists() \
        else {}
    tools = []
    if (path / "tools").exists():
        for tool_dir in sorted(d for d in (path / "tools").iterdir() if d.is_dir()):
            spec = json.loads((tool_dir / "tool.json").read_text(encoding="utf-8"))
            tools.append(ToolSpec(spec["name"], spec["description"], spec["parameters"],
                                  (tool_dir / "tool.py").read_text(encoding="utf-8"),
                                  f"tools/{tool_dir.name}/tool.py"))
    skill = (path / "SKILL.md").read_text(encoding="utf-8") if (path / "SKILL.md").exists() else ""
    return Harness(path=path, version_id=content_hash(path), manifest=manifest, skill=skill, config=config,
                   solver_source=(path / "solver.py").read_text(encoding="utf-8"), tools=tuple(tools))


SEEDS = ("uniform", "scan_refine", "coevowhen_base")


def seed_path(name: str) -> Path:
    """The packaged directory of a seed harness (read-only package data)."""
    if name not in SEEDS:
        raise HarnessError(f"unknown seed harness {name!r}; seeds: {', '.join(SEEDS)}")
    return Path(str(resources.files("videvolve.skill_library") / "seeds" / name))


def find_harness(name_or_dir: str | Path) -> Path:
    """A seed name or a harness directory (run directories are resolved at the edge: ``videvolve.api``)."""
    p = Path(name_or_dir)
    if (run := RunDir(p)).is_run():
        raise HarnessError(f"{p} is a run directory, not a harness: use {run.best} or a version under "
                           f"{run.harnesses} (the CLI and videvolve.load_harness accept run directories)")
    if p.is_dir():
        return p
    if str(name_or_dir) in SEEDS:
        return seed_path(str(name_or_dir))
    raise HarnessError(f"no harness {name_or_dir!r}: give a directory or one of the seeds ({', '.join(SEEDS)})")


def check_version(path: Path) -> Path:
    """``path``, a folder stored under its version id (``harnesses/<version>``), once its files are that version.

    A folder whose files hash to another id is refused, not rebuilt: it is half a copy an earlier videvolve left when
    it was stopped (a whole copy is renamed into place now) or a folder edited by hand, and the two cannot be told
    apart. Rebuilding it would throw a hand edit away; going on would judge other files under the version's name.
    The message says what to do: move the folder away, and the run writes the version again where it makes it again.
    Its manifest must be there and name the version too: without it the version's lineage (its parent, operator
    and diff) is lost, and one naming another version was copied in by hand. A folder that does not exist is left
    to the caller.
    """
    if not path.is_dir():
        return path
    if (found := content_hash(path)) != path.name:
        why = f"its files hash to {found} (half a copy a stopped run left, or files edited by hand)"
    elif (named := _manifest_version(path)) != path.name:
        why = (f"its {MANIFEST} is missing or damaged" if named is None else
               f"its {MANIFEST} names version {named} (copied in by hand)")
    else:
        return path
    raise UsageError(
        f"{path} does not hold harness version {path.name}: {why}. Move that folder away (keep it if you edited "
        "it: `videvolve eval --harness DIR` runs any folder) and resume: a version the run makes again (the "
        "candidate it was writing, the seed) is written anew; for one it kept earlier put its files back (the "
        "run's best/ holds the best's) or start a new run")


def _manifest_version(path: Path) -> str | None:
    """The version id a folder's manifest names (None: no manifest, or one that cannot be read)."""
    try:
        found = json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("version_id")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def copy_harness(src: str | Path, dest_root: str | Path, parent_id: str | None = None,
                 summary: str = "") -> Path:
    """Copy a harness into ``dest_root/<version_id>`` with a fresh manifest; returns the new directory.

    Copied beside it first and renamed into place: a copy stopped half-way is never found under the version's name.
    A folder already there is reused once it holds that version (:func:`check_version`).
    """
    src, dest_root = Path(src), Path(dest_root)
    version = content_hash(src)
    dest = dest_root / version
    if dest.exists():
        return check_version(dest)
    tmp = dest_root / f".{version}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    old = read_manifest(src)
    manifest = {**old, "version_id": version, "parent_id": parent_id,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "summary": summary or
                old.get("summary", "")}
    write_manifest(tmp, manifest)
    tmp.rename(dest)
    return dest
