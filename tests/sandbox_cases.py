"""Hostile and broken harnesses, run side by side with a good one; prints one JSON object of outcomes.

Run in-process by tests/test_sandbox.py (as whoever runs the tests) and, when the tests run as root, again as an
unprivileged user: ``python tests/sandbox_cases.py VIDEO SECRET_FILE [PORT [NAME ...]]``. The printed object also
holds ``peak_rss_mb``, this process's peak resident memory (the trusted parent's, since harnesses run in children).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GOOD = '''
def solve(task, ctx):
    frames = ctx.frames([1.0, 2.0])
    return {"answer": "A", "raw": ctx.ask(frames)}
'''
LEGITIMATE = '''
import json, math, re, statistics, heapq
from collections import Counter, namedtuple
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple
from videvolve_sdk import HarnessContext, SDKError, TaskView

Point = namedtuple("Point", "x y")


class Pair(NamedTuple):
    left: int
    right: int


class Colour(Enum):
    RED = 1


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    tags: list = field(default_factory=list)

    def __post_init__(self):
        assert self.start <= self.end


class Base:
    def __init__(self, n):
        self.n = n


class Child(Base):
    def __init__(self, n):
        super().__init__(n)
        self.seen = []

    def __eq__(self, other):
        return isinstance(other, Child) and self.n == other.n


def frames_gen(n, step=0.5):
    for i in range(n):
        yield i * step


def solve(task: TaskView, ctx: HarnessContext) -> dict:
    times = list(frames_gen(4))
    m = re.search(r"(\\d+)", task.question or "")
    count = Counter(task.question.split()).most_common(1)
    text = "{:.2f} s, {} options, {name}".format(task.duration, len(task.options or ()), name=task.id)
    text += f"{task.id!r:>10} {math.sqrt(2):.3f} {Colour.RED.name}{Colour.RED.value}"
    p = Point(1, 2)
    q = Pair(1, 2)
    best = heapq.nlargest(2, times, key=lambda t, k=1.0: -abs(t - k))
    match task.kind:
        case "mcq" | "grounding":
            pass
    match {"a": [1, 2]}:
        case {"a": [first, *rest]}:
            pass
    try:
        frames = ctx.frames(times, max_side=ctx.config.get("max_side"))
        reply = ctx.ask(frames)
    except SDKError as exc:
        reply = str(exc.args)
    if (n := len(times)) > 3 and m is not None and m.group(1):
        reply += json.dumps({"n": n, "mean": statistics.mean(times), "p": p.x + q.right, "c": count})
    return {"answer": "A", "raw": reply + text + str(best) + str(Window(0.0, 1.0)) + str(Child(1) == Child(1))}
'''
ESCAPE = '''
def _outer():
    try:
        raise ValueError("x")
    except ValueError as exc:
        frame = exc.__traceback__.tb_frame
        while frame.f_back is not None:
            frame = frame.f_back
        return frame.f_globals
'''
WALK = '''
class R{base}:
    def {method}(self):
        def gen():
            yield me.gi_frame.f_back
        me = gen()
        f = next(me)
        while f.f_back is not None:
            f = f.f_back
        return "reached " + ",".join(sorted(f.f_globals))
'''
"""A harness callback run while its answer or error is encoded: the bottom frame must be the restricted launcher's."""
REAL = "len.__self__"  # a C builtin's module: the route the static check alone closes (see bootstrap.py)
STATIC = {  # refused before running
    "reads_secret_file": 'def solve(task, ctx):\n    return open(SECRET).read()\n',
    "imports_os": 'import os\ndef solve(task, ctx):\n    return os.listdir("/")\n',
    "imports_subprocess": 'import subprocess\ndef solve(task, ctx):\n    return subprocess.run(["id"])\n',
    "imports_socket": 'import socket\ndef solve(task, ctx):\n    return socket.create_connection(("127.0.0.1", 1))\n',
    "os_through_typing": 'import typing\ndef solve(task, ctx):\n    return typing.sys.modules["os"].listdir("/")\n',
    "os_through_dataclasses": 'import dataclasses\ndef solve(task, ctx):\n'
                              '    return dataclasses.inspect.getfile(dataclasses)\n',
    "os_through_statistics": 'import statistics\ndef solve(task, ctx):\n    return statistics.sys.modules["os"]\n',
    "frame_walking": ESCAPE + 'def solve(task, ctx):\n    return _outer()["sys"].modules["os"].listdir("/")\n',
    "generator_frames": 'def solve(task, ctx):\n    g = (i for i in [1])\n    return g.gi_frame.f_back.f_globals\n',
    "match_class": 'def solve(task, ctx):\n    match ctx.probe:\n        case object(__func__=f):\n'
                   '            return f\n',
    "format_field": 'def solve(task, ctx):\n    return "{0.probe.__func__.__globals__}".format(ctx)\n',
    "subclasses": 'def solve(task, ctx):\n    return ().__class__.__base__.__subclasses__()\n',
    "type_mro": 'def solve(task, ctx):\n    return type(ctx).mro()\n',
    "forks": 'import os\ndef solve(task, ctx):\n    return os.fork()\n',
    "writes_huge_file": 'def solve(task, ctx):\n    with open("/tmp/big", "wb") as fh:\n'
                        '        fh.write(bytes(512 * 1024 ** 2))\n    return "A"\n',
}
RUNTIME = {  # the static check switched off: the structural wall and the OS walls must hold on their own
    "runtime_match_escape": 'def solve(task, ctx):\n    match ctx.probe:\n        case object(__func__=f):\n'
                            '            pass\n    match f:\n        case object(__globals__=g):\n            pass\n'
                            '    return g["__builtins__"]["open"](SECRET).read()\n',
    "runtime_format_escape": 'def solve(task, ctx):\n'
                             '    return "{0.probe.__func__.__globals__[__builtins__][open]}".format(ctx)\n',
    "runtime_traceback_walk": ESCAPE + 'def solve(task, ctx):\n    return _outer()["__builtins__"]["open"]\n',
    "runtime_generator_walk": 'def solve(task, ctx):\n    def gen():\n        yield me.gi_frame.f_back\n'
                              '    me = gen()\n    f = next(me)\n    while f.f_back is not None:\n'
                              '        f = f.f_back\n    return f.f_builtins["open"]\n',
    "runtime_sdk_traceback": 'def solve(task, ctx):\n    try:\n'
                             '        ctx.ask([ctx.frames([1.0])[0], ctx.frames([2.0])[0]], mode="bogus")\n'
                             '    except Exception as exc:\n        tb = exc.__traceback__\n'
                             '    while tb.tb_next is not None:\n        tb = tb.tb_next\n'
                             '    return tb.tb_frame.f_globals["__builtins__"]["open"]\n',
    "runtime_dataclass_globals": 'from dataclasses import dataclass\n@dataclass(frozen=True)\nclass A:\n'
                                 '    x: int = 1\ndef solve(task, ctx):\n'
                                 '    return A.__init__.__globals__["__builtins__"]["open"]\n',
    "runtime_importer_globals": 'def solve(task, ctx):\n    return __import__.__globals__["__builtins__"]["open"]\n',
    "runtime_repr_walk": WALK.format(base="", method="__repr__") + 'def solve(task, ctx):\n    return R()\n',
    "runtime_str_walk": WALK.format(base="(Exception)", method="__str__") + 'def solve(task, ctx):\n    raise R()\n',
    "runtime_reads_secret_file": f'def solve(task, ctx):\n    return {REAL}.open(SECRET).read()\n',
    "runtime_imports_os": 'def solve(task, ctx):\n    import os\n    return os.listdir("/")\n',
    "runtime_network": f'def solve(task, ctx):\n    s = {REAL}.__import__("socket")\n'
                       '    c = s.create_connection(("127.0.0.1", PORT), 2)\n    return "A"\n',
    "runtime_writes_huge_file": f'def solve(task, ctx):\n    with {REAL}.open("/tmp/big", "wb") as fh:\n'
                                '        fh.write(bytes(64 * 1024 ** 2))\n    return "A"\n',
    "runtime_lists_host_files": f'def solve(task, ctx):\n    b = {REAL}\n    os = b.__import__("os")\n'
                                '    status = b.open("/proc/self/status").read()\n'
                                '    cap = [x.split()[1] for x in status.splitlines() if x.startswith("CapEff")][0]\n'
                                '    seen = {"/": sorted(os.listdir("/")), "/tmp": os.listdir("/tmp"),'
                                ' "uid": os.getuid(), "cap": cap}\n'
                                '    return {"answer": "A", "raw": b.__import__("json").dumps(seen)}\n',
    "runtime_forks": f'def solve(task, ctx):\n    b = {REAL}\n    os = b.__import__("os")\n    n = 0\n'
                     '    for i in range(100):\n        try:\n            pid = os.fork()\n'
                     '        except OSError as exc:\n            raise RuntimeError(f"fork failed after {n}: {exc}")\n'
                     '        if pid == 0:\n            b.__import__("time").sleep(3)\n            os._exit(0)\n'
                     '        n += 1\n    return {"answer": "A", "raw": f"forked {n}"}\n',
    "runtime_raw_requests": 'def solve(task, ctx):\n    refused = []\n    for op, args in [\n'
                            '        ("chat", {"messages": "x"}), ("ask", {"handles": "abc"}),\n'
                            '        ("frames", {"times": None}), ("sheet", {"times": [1.0], "cols": "x"}),\n'
                            '        ("nope", {}), ("frames", {"bogus": 1}),\n'
                            '        ("clip", {"start": 0, "end": 1e308, "fps": 1e308})]:\n'
                            '        try:\n            ctx._channel.call(op, **args)\n'
                            '        except Exception as exc:\n            refused.append(op)\n'
                            '    return {"answer": "A", "raw": ",".join(refused)}\n',
}
PARENT = {  # legitimate code the parent must refuse before it works
    "big_sheet": 'def solve(task, ctx):\n    s = ctx.sheet([i * 0.05 for i in range(400)], cols=16, cell_width=1024)\n'
                 '    return ctx.ask([s])\n',
    "budget_before_decode": 'def solve(task, ctx):\n    s = ctx.sheet([i * 0.1 for i in range(100)], cols=10)\n'
                            '    return ctx.ask([s])\n',
    "frames_loop": 'def solve(task, ctx):\n    while True:\n        ctx.frames([1.0] * 400)\n',
    "handle_flood": 'def solve(task, ctx):\n    kept = []\n    while True:\n'
                    '        kept += ctx.frames([i * 0.05 for i in range(400)], max_side=4096)\n',
    "malformed_chat": 'def solve(task, ctx):\n'
                      '    return ctx.chat([{"role": "user", "content": {"type": "text"}}]).text\n',
}
OTHER = {
    "good": GOOD,
    "ordinary_code": LEGITIMATE,
    "loops_forever": 'def solve(task, ctx):\n    while True:\n        pass\n',
    "allocates_8gb": 'def solve(task, ctx):\n    block = bytearray(8 * 1024 ** 3)\n    return "A"\n',
    "raises": 'def solve(task, ctx):\n    raise RuntimeError("boom")\n',
    "returns_garbage": 'def solve(task, ctx):\n    return {"answer": 42}\n',
    "exceeds_budget": 'def solve(task, ctx):\n    return ctx.ask(ctx.frames([i * 0.5 for i in range(40)]))\n',
}
CASES: dict[str, tuple[str, bool]] = {**{k: (v, True) for k, v in {**OTHER, **STATIC, **PARENT}.items()},
                                      **{k: (v, False) for k, v in RUNTIME.items()}}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_all(video: str, secret: str, port: int, names: list[str] | None = None, timeout: float = 4.0,
            budget: int = 32) -> dict[str, dict[str, object]]:
    from videvolve.config import RuntimeSettings
    from videvolve.models.cost import cost_model
    from videvolve.models.sim import SimVLM
    from videvolve.skill_library.harness import Harness, content_hash
    from videvolve.skill_library.runner import run_task
    from videvolve.skill_library.services import TaskServices
    from videvolve.tasks import TaskView

    root = Path(tempfile.mkdtemp(prefix="videvolve-cases-"))
    settings = RuntimeSettings(budget=budget, wall_seconds=timeout, memory_bytes=1024**3)
    view = TaskView(id="t", kind="mcq", question="What colour is the star that appears on the navy background?",
                    options=("red", "blue", "green", "pink"), duration=20.0)

    def one(name: str) -> tuple[str, dict[str, object]]:
        source, checked = CASES[name]
        source = source.replace("SECRET", repr(secret)).replace("PORT", str(port))
        d = root / name
        d.mkdir()
        (d / "solver.py").write_text(source)
        harness = Harness(path=d, version_id=content_hash(d), manifest={}, skill="", config={},
                          solver_source=source)
        services = TaskServices(view, video, SimVLM(), cost_model("qwen2.5-vl"), settings)
        run = run_task(harness, services, static_check=checked)
        return name, {"outcome": run.outcome, "kind": run.error_kind, "error": (run.error or "")[:600],
                      "answer": None if run.prediction is None else run.prediction.answer,
                      "raw": None if run.prediction is None else run.prediction.raw,
                      "frames": run.usage.get("frames"), "wall_s": run.wall_s}

    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            return dict(pool.map(one, names or list(CASES)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    only = sys.argv[4:] or None
    out: dict[str, object] = dict(run_all(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 9,
                                          only))
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(out))
