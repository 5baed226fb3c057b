"""CoEvoWhen's base skill: the model drives; tools prepare media; at most max_rounds rounds."""

import json

from videvolve_sdk import HarnessContext, TaskView


def _request(task: TaskView) -> str:
    text = f"The video is {task.duration:.0f} seconds long.\nQuestion: {task.question}"
    if task.options:
        text += "\nOptions:\n" + "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(task.options))
        text += "\nFinish by calling final_answer with exactly one option letter."
    else:
        text += "\nFinish by calling final_answer with a JSON list of [start, end] intervals in seconds, or []."
    return text


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    tools = [ctx.tools[name] for name in sorted(ctx.tools)]
    messages = [{"role": "system", "content": ctx.skill},
                {"role": "user", "content": [{"type": "text", "text": _request(task)}]}]
    rounds = int(ctx.config.get("max_rounds", 24))
    for _ in range(rounds):
        reply = ctx.chat(messages, tools)
        if not reply.tool_calls:
            return {"answer": reply.text, "raw": reply.text}
        messages.append({"role": "assistant", "content": reply.text, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for c in reply.tool_calls]})
        shown = []
        for call in reply.tool_calls:
            if call["name"] == "final_answer":
                answer = call["arguments"].get("answer")
                return {"answer": answer if isinstance(answer, str) else json.dumps(answer), "raw": reply.text}
            try:
                result = ctx.call_tool(call["name"], **call["arguments"])
            except Exception as exc:  # a tool error becomes an observation the model can read
                result = {"text": f"error: {exc}"}
            if isinstance(result, dict):
                text = str(result.get("text", ""))
                shown += result.get("observations", [])
            else:
                text = str(result)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        if shown:
            messages.append({"role": "user", "content": [o.part() for o in shown]})
    return {"answer": None, "raw": f"no final_answer within {rounds} rounds"}
