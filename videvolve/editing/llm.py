"""The LLM editor: a model proposes a ``HarnessRevision`` (structured output read with bounded retries).

It may change policy text, config, solver.py and tools, and create or retire tools (CoEvoWhen's co-evolution).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field, ValidationError

from videvolve.editing.base import EditorInput, Proposal, Rationale, Workspaces
from videvolve.editing.taskdoc import EDITABLE_TEXT, allowed_imports, ctx_members, json_shape, render
from videvolve.models.base import VLM
from videvolve.models.parsing import strip_think
from videvolve.skill_library.static_check import FORBIDDEN_NAMES


class FileEdit(BaseModel):
    """One file's new content."""

    path: str = Field(description="relative path inside the harness, e.g. solver.py or config.toml")
    content: str = Field(description="the complete new content of the file")


class HarnessRevision(Rationale):
    """The LLM editor's decision: why, and the files to write."""

    edits: list[FileEdit] = Field(description="files to write")


def system_prompt() -> str:
    """The LLM editor's system prompt, from its template and the code it describes (imports, ctx, reply shape)."""
    refused = ", ".join(sorted(n for n in FORBIDDEN_NAMES if not n.startswith("_")))
    return render("llm_system.md.j2", editable=EDITABLE_TEXT, allowed_imports=allowed_imports(),
                  ctx_members=ctx_members(), refused_names=refused, reply_schema=json_shape(HarnessRevision)).strip()


SYSTEM = system_prompt()


def _prompt(inp: EditorInput) -> str:
    files = "\n\n".join(f"=== {p} ===\n{t}" for p, t in sorted(inp.files.items()))
    diags = "\n".join(f"- [{d.category}] {d.hypothesis} (applies when: {d.applies_when})" for d in inp.diagnoses)
    similar = "\n".join(
        f"- [{p.diagnosis.category}] {p.diagnosis.hypothesis} -> "
        f"{p.diagnosis.outcome.decision if p.diagnosis.outcome else 'pending'}"
        f"{' via ' + p.diagnosis.outcome.operator if p.diagnosis.outcome and p.diagnosis.outcome.operator else ''}"
        for p in inp.similar)
    history = "\n".join(json.dumps(h, default=float) for h in inp.history[-10:])
    text = (f"{inp.gate_rule}\n\nIncumbent harness {inp.incumbent}:\n{files}\n\n"
            f"Failures in this batch of training questions:\n"
            f"{diags or '- none'}\n\nSimilar past diagnoses and what their revisions became:\n{similar or '- none'}"
            f"\n\nGate history (aggregates):\n{history or '- none'}\n")
    if inp.feedback:
        text += f"\nYour previous revision was rejected by validation:\n{inp.feedback}\nFix it.\n"
    return text


def parse_revision(text: str) -> HarnessRevision:
    """The JSON object in a reply, validated."""
    s = strip_think(text)
    start, end = s.find("{"), s.rfind("}")  # the first brace to the last, as a greedy {...} search (in linear time)
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    return HarnessRevision.model_validate_json(s[start: end + 1])


class LLMEditor:
    """Asks a model for a revision; a reply that does not parse is asked again, at most ``retries`` times."""

    def __init__(self, vlm: VLM, retries: int = 2) -> None:
        self.vlm = vlm
        self.retries = retries
        self.last_failure: str | None = None

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """One revision, or None when the model gives nothing usable."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _prompt(inp)}]
        self.last_failure = None
        tools = workspaces.open(inp) if workspaces is not None else None
        for attempt in range(self.retries + 1):
            reply = self.vlm.complete(messages)
            if tools is not None:
                tools.log({"kind": "assistant", "round": attempt + 1, "text": reply.text[:4000], "calls": []})
            try:
                rev = parse_revision(reply.text)
            except (ValueError, ValidationError) as exc:
                head = " / ".join(reply.text.strip().splitlines()[:3])[:300] or "(an empty reply)"
                self.last_failure = (f"the editor model gave no usable revision in {attempt + 1} replies; the last "
                                     f"began {head!r} and failed with: {str(exc).splitlines()[0][:300]}")
                messages += [{"role": "assistant", "content": reply.text},
                             {"role": "user", "content": f"That did not parse ({str(exc)[:300]}). Reply with the "
                                                         "JSON object only."}]
                continue
            if tools is not None:  # the candidate folder shows the revision; path refusals come from the edit node
                for e in rev.edits:
                    tools.call("write_file", {"path": f"candidate/{e.path}", "content": e.content})
            return Proposal(operator="llm", rationale=rev.rationale, applies_when=rev.applies_when,
                            preserve=rev.preserve, edits={e.path: e.content for e in rev.edits},
                            diagnoses=[d.id for d in inp.diagnoses], workspace=str(tools.root) if tools else "")
        if tools is not None:
            tools.log({"kind": "failure", "reason": self.last_failure})
        return None
