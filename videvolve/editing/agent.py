"""The agent editor: a tool-calling loop over any OpenAI-compatible model, in the proposal's workspace.

The model is driven through the :class:`~videvolve.models.base.VLM` protocol, whose OpenAI backend binds the tools
with langchain's ``bind_tools`` and sends their results back as ``ToolMessage``s; the conversation is kept as plain
OpenAI messages in ``conversation.json`` so that a repair round (the candidate failed validation) goes on in the same
conversation, with the failure as the result of the ``submit`` call. Every way a model can fail (no tool call,
unknown tools, bad arguments, rounds or time spent, an endpoint that gives up) ends the proposal with its reason in
``last_failure``; the run goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import openai

from videvolve.editing.base import EditorInput, Proposal
from videvolve.editing.tools import EditorTools, tool_schemas
from videvolve.errors import InfraError, ModelRequestError
from videvolve.models.base import VLM, Reply
from videvolve.models.toolloop import REFUSED_ROUNDS, assistant_message

SYSTEM = """You are an engineer improving an executable harness that lets a frozen vision-language model answer
questions about long videos. You work in a folder (the workspace) through tools only. Read TASK.md first: it states
the goal, the gate that will judge your change, the rules and your budgets. Look at the traces of this batch's
training tasks, edit files under candidate/ (edit_file for exact search/replace), test your change with trial, look
at videos with probe when you need to see what the model saw, and finish with submit. Make changes that generalise
to unseen questions; the gate judges on a held-out set."""


class AgentEditor:
    """Proposes by letting a model use the editor's tools in a workspace."""

    def __init__(self, vlm: VLM, rounds: int = 16) -> None:
        self.vlm = vlm
        self.rounds = rounds
        self.last_failure: str | None = None
        self.open: Callable[..., EditorTools] | None = None

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

    def propose(self, inp: EditorInput) -> Proposal | None:
        """One proposal, or None with the reason in ``last_failure``."""
        if self.open is None:
            raise RuntimeError("the agent editor needs a workspace (set .open)")
        self.last_failure = None
        tools = self.open(inp, resume=True)
        messages = self._start(tools, inp)
        schemas = tool_schemas()
        quiet = refused = 0
        while tools.ledger.rounds < self.rounds:
            if time.monotonic() > tools.deadline:
                self._fail(tools, messages, f"the editor agent timed out after {tools.limits.timeout_s:.0f} s "
                                            f"({tools.ledger.rounds} rounds) without submitting")
                return None
            try:
                reply = self.vlm.complete(messages, schemas)
            except InfraError:  # down past the retry window, or refusing us: the run stops for --resume
                raise
            except (ModelRequestError, openai.APIError) as exc:
                self._fail(tools, messages, f"the editor model failed: {str(exc)[:400]}")
                return None
            tools.ledger.rounds += 1
            messages.append(assistant_message(reply))
            tools.log({"kind": "assistant", "round": tools.ledger.rounds, "text": reply.text[:2000],
                       "calls": [c.name for c in reply.tool_calls]})
            if not reply.tool_calls:
                quiet += 1
                if quiet >= 2:
                    self._fail(tools, messages, "the editor model answered without calling a tool "
                                                f"{quiet} times in a row (last reply: {reply.text.strip()[:200]!r})")
                    return None
                messages.append({"role": "user", "content": "Use the tools (the workspace is only reachable "
                                                            "through them) and finish with submit."})
                continue
            quiet = 0
            proposal, ok_any, last = self._run_calls(tools, messages, reply)
            if proposal is not None:
                return proposal
            refused = 0 if ok_any else refused + 1
            if refused >= REFUSED_ROUNDS:
                self._fail(tools, messages, f"every tool call of the editor model's last {refused} rounds was "
                                            f"refused; the last: {last[:300]}")
                return None
            self._save(tools, messages)
        self._fail(tools, messages, f"the editor model used its {self.rounds} rounds without submitting")
        return None

    def _run_calls(self, tools: EditorTools, messages: list[dict[str, Any]],
                   reply: Reply) -> tuple[Proposal | None, bool, str]:
        ok_any, last = False, ""
        for i, call in enumerate(reply.tool_calls):
            text, ok = tools.call(call.name, call.arguments)
            ok_any, last = ok_any or ok, text
            if call.name == "submit" and tools.submitted is not None:
                for later in reply.tool_calls[i + 1:]:
                    messages.append({"role": "tool", "tool_call_id": later.id, "content": "skipped: submitted"})
                self._save(tools, messages, pending=call.id)
                return tools.submitted, True, text
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return None, ok_any, last
