"""What an editor sees and what it proposes; writing a proposal as a new, immutable candidate version.

An editor never receives a selection-set task, question, video or per-item outcome: only the incumbent's files,
this batch's training diagnoses, similar past diagnoses from memory (without this run's selection or test videos)
and the gate's aggregate history.
"""

from __future__ import annotations

import difflib
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from videvolve.editing.tools import EditorTools

from videvolve.errors import HarnessError
from videvolve.memory.records import Diagnosis
from videvolve.skill_library.harness import content_hash, copy_harness, read_manifest, write_manifest

EDITABLE = re.compile(r"^(SKILL\.md|config\.toml|solver\.py|references/[A-Za-z0-9_-]+\.md|"
                      r"tools/[A-Za-z0-9_-]+/tool\.(json|py))\Z")
"""The files an edit may write (``\\Z``, not ``$``, which also matches before a final newline: ``"solver.py\\n"`` was
written as a file of that name, which the static check never read and which made a copy of the parent look new)."""
MAX_EDIT_BYTES = 128 * 1024
MAX_NAME = 64
"""Characters of one name in an edit path (a longer one the file system may refuse: the edit's fault, not the run's)."""


class PastDiagnosis(BaseModel):
    """A similar diagnosis from memory, with the outcome of the revision it led to."""

    diagnosis: Diagnosis
    similarity: float


class GateTerms(BaseModel):
    """The gate's rule as an editor applies it to its own trials, with this run's numbers.

    The edit node fills it from ``ctx.gate`` (``nodes/edit.py:editor_input``); a new rule says here what an editor
    must know of it.
    """

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(description="a gain may cost at most (1 + alpha) x its parent's")
    beta: float = Field(description="a cost cut must cost at most (1 - beta) x its parent's")
    tolerance: float = Field(description="the score a cost cut may lose: the paired gate's margin, video-rsi's eps")
    ceiling: float | None = Field(None, description="--cost-ceiling: a gain may cost up to this instead")
    spends_wealth: bool = Field(True, description="each decision spends the run's alpha-wealth (the paired gate): "
                                "a prototype that fails the rule on its trials is not worth sending")
    headroom: dict[str, float] = Field(default_factory=dict, description="per operator, how far above its mean "
                                       "cost the upper bound of its cost over the selection videos lay, as this run's "
                                       "gate measured it (the gate bounds that, not the mean): a trial's mean cost "
                                       "must fit a bound divided by it")


class EditorInput(BaseModel):
    """Everything an editor may know."""

    incumbent: str
    files: dict[str, str] = Field(description="the incumbent's files, path -> text")
    diagnoses: list[Diagnosis] = Field(description="this batch's diagnoses (training tasks only)")
    similar: list[PastDiagnosis] = Field(default_factory=list, description="similar past diagnoses and outcomes")
    history: list[dict[str, Any]] = Field(default_factory=list, description="the gate's aggregate history")
    feedback: str | None = Field(None, description="why the previous proposal failed validation")
    tried: list[str] = Field(default_factory=list, description="operators already tried on this incumbent")
    gate_rule: str = Field("", description="the gate's rule in words, with this run's thresholds and cost metric")
    gate: GateTerms | None = Field(None, description="the rule's numbers, for the editor's own trials (None: no "
                                   "rule to apply; every trial passes)")


class Proposal(BaseModel):
    """A revision: edits to the incumbent's files and why."""

    operator: str
    rationale: str
    applies_when: str = ""
    preserve: str = ""
    edits: dict[str, str | None] = Field(description="path -> new content (None deletes the file)")
    diagnoses: list[str] = Field(default_factory=list)
    workspace: str = Field("", description="the workspace folder it was made in (empty: none)")


class Rationale(BaseModel):
    """Why a revision should help: what every editor states with its edits (the agent's ``submit``, the LLM's reply)."""

    rationale: str = Field(description="which failures this addresses and why it should help on unseen questions")
    applies_when: str = Field("", description="the conditions under which the change helps")
    preserve: str = Field("", description="behaviour the change must keep")


class Workspaces(Protocol):
    """Opens the workspace an editor works in for one proposal, with its tools (the edit node's ``Sessions``)."""

    def open(self, inp: EditorInput, resume: bool = False) -> EditorTools:
        """A fresh workspace; ``resume``: the one whose submission failed validation, in a repair round."""
        ...


class Editor(Protocol):
    """Proposes a revision, or None when it has nothing to try (``last_failure`` then says why, if it knows).

    This is all the edit node uses. ``workspaces`` opens the proposal's workspace; the agent and command editors
    need one, the heuristic and LLM editors use one when given (trials, a log), and work without (offline tests).
    """

    last_failure: str | None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """One proposal."""
        ...


def read_files(harness_dir: Path) -> dict[str, str]:
    """The editable files of a harness."""
    out = {}
    for p in sorted(harness_dir.rglob("*")):
        rel = p.relative_to(harness_dir).as_posix()
        if p.is_file() and EDITABLE.match(rel):
            out[rel] = p.read_text(encoding="utf-8")
    return out


def check_edit(path: str, content: str | None) -> str | None:
    """Why an edit is refused, or None: no absolute paths, no '..', only the harness's own kinds of files."""
    if path.startswith("/") or "\\" in path or any(part == ".." for part in path.split("/")):
        return f"edit path {path!r} leaves the harness folder"
    if any(len(part) > MAX_NAME for part in path.split("/")):
        return f"edit path {path[:80]!r}...: a name over {MAX_NAME} characters"
    if not EDITABLE.match(path):
        return (f"edit path {path!r} is not an editable harness file (SKILL.md, config.toml, solver.py, "
                "references/*.md, tools/<name>/tool.json|tool.py)")
    if content is None:
        return None
    try:
        size = len(content.encode())
    except UnicodeEncodeError as exc:
        return f"{path}: the content is not text UTF-8 can hold ({exc.reason} at character {exc.start})"
    if size > MAX_EDIT_BYTES:
        return f"{path}: {size} bytes is over the {MAX_EDIT_BYTES}-byte limit"
    return None


def unified_diff(old: dict[str, str], new: dict[str, str]) -> str:
    """A unified diff of two file sets."""
    lines: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path, ""), new.get(path, "")
        if a != b:
            lines += difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                          f"a/{path}", f"b/{path}")
    return "".join(lines)


def write_candidate(incumbent_dir: Path, harnesses_dir: Path, proposal: Proposal) -> str:
    """Copy the incumbent, apply the edits, and store the result as a new version; the incumbent is untouched."""
    for path, content in proposal.edits.items():
        reason = check_edit(path, content)
        if reason:
            raise HarnessError(reason)
    before = read_files(incumbent_dir)
    work = Path(tempfile.mkdtemp(prefix="videvolve-candidate-")) / "h"
    shutil.copytree(incumbent_dir, work, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        for path, content in proposal.edits.items():
            target = work / path
            if target.is_symlink() or any(p.is_symlink() for p in target.parents if work in p.parents):
                raise HarnessError(f"edit path {path!r} goes through a symbolic link")
            if content is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")
        after = read_files(work)
        manifest = read_manifest(incumbent_dir)
        manifest.update({
            "summary": proposal.rationale[:500],
            "revision": {"operator": proposal.operator, "rationale": proposal.rationale,
                         "applies_when": proposal.applies_when, "preserve": proposal.preserve,
                         "diagnoses": proposal.diagnoses, "diff": unified_diff(before, after)},
        })
        write_manifest(work, manifest)
        dest = copy_harness(work, harnesses_dir, parent_id=content_hash(incumbent_dir),
                            summary=proposal.rationale[:500])
        return dest.name
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)
