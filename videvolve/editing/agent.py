"""The agent editor: a tool-calling loop over any OpenAI-compatible model, in the proposal's workspace.

The model is driven through the :class:`~videvolve.models.base.VLM` protocol, whose OpenAI backend binds the tools
with langchain's ``bind_tools`` and sends their results back as ``ToolMessage``s; the conversation is kept as plain
OpenAI messages in ``conversation.json`` so that a repair round (the candidate failed validation) goes on in the same
conversation, with the failure as the result of the ``submit`` call. The conversation is the one tool loop of
every model-driven part (:class:`~videvolve.models.toolloop.ToolLoop`); every way a model can fail (no tool call,
unknown tools, bad arguments, unreadable calls, rounds or time spent, a request the endpoint rejects) ends the
proposal with its reason in ``last_failure`` and the run goes on; an endpoint down past the retry window
(``InfraError``) stops the run for ``--resume``.
"""

from __future__ import annotations

import json
from typing import Any

from videvolve.editing.base import EditorInput, Proposal, Workspaces
from videvolve.editing.taskdoc import render
from videvolve.editing.tools import TOOLS, EditorTools, tool_schemas
from videvolve.models.base import VLM, Reply, ToolCall
from videvolve.models.toolloop import ToolLoop

SYSTEM = render("agent_system.md.j2", tool_names=", ".join(TOOLS)).strip()
NUDGE = "Use the tools (the workspace is only reachable through them) and finish with submit."


class AgentEditor:
    """Proposes by letting a model use the editor's tools in a workspace."""

    def __init__(self, vlm: VLM, rounds: int = 16) -> None:
        self.vlm = vlm
        self.rounds = rounds
        self.last_failure: str | None = None

    def _start(self, tools: EditorTools, inp: EditorInput) -> list[dict[str, Any]]:
        path = tools.root / "conversation.json"
        if tools.resumed and path.exists() and inp.feedback:
            saved = json.loads(path.read_text(encoding="utf-8"))
            messages: list[dict[str, Any]] = saved["messages"]
            result = (f"validation failed: {inp.feedback}\nThe candidate is as you left it; fix it and submit "
                      "again.")
            messages.append({"role": "tool", "tool_call_id": saved.get("pending") or "submit", "content": result})
            tools.log({"kind": "tool", "name": "submit", "ok": False, "result": result})
            return messages
        return [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Your workspace is ready. Start with read_file('TASK.md')."}]

    def _save(self, tools: EditorTools, messages: list[dict[str, Any]], pending: str | None = None) -> None:
        (tools.root / "conversation.json").write_text(json.dumps({"messages": messages, "pending": pending},
                                                                 indent=1), encoding="utf-8")

    def _fail(self, tools: EditorTools, messages: list[dict[str, Any]], why: str) -> None:
        self.last_failure = why
        tools.log({"kind": "failure", "reason": why})
        self._save(tools, messages)

    def propose(self, inp: EditorInput, workspaces: Workspaces | None = None) -> Proposal | None:
        """One proposal, or None with the reason in ``last_failure``."""
        if workspaces is None:
            raise ValueError("the agent editor works in a workspace: pass the edit node's workspaces")
        self.last_failure = None
        tools = workspaces.open(inp, resume=True)
        messages = self._start(tools, inp)

        def on_reply(reply: Reply) -> None:
            tools.ledger.rounds += 1
            tools.log({"kind": "assistant", "round": tools.ledger.rounds, "text": reply.text[:2000],
                       "calls": [c.name for c in reply.tool_calls]})
            self._save(tools, messages)

        def dispatch(call: ToolCall) -> tuple[str, bool, Proposal | None]:
            text, ok = tools.call(call.name, call.arguments)
            return text, ok, tools.submitted if call.name == "submit" else None

        loop: ToolLoop[Proposal] = ToolLoop(self.vlm, tool_schemas(), self.rounds, who="editor", goal="submitting",
                                            nudge=NUDGE, deadline=tools.deadline, on_reply=on_reply,
                                            answer_final=False)
        proposal = loop.run(messages, dispatch)
        if proposal is None:
            self._fail(tools, messages, loop.failure or "the editor model submitted nothing")
            return None
        self._save(tools, messages, pending=loop.pending)
        return proposal
