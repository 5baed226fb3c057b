"""Hostile and broken harnesses, run side by side with a good one; prints one JSON object of outcomes.

Run in-process by tests/test_sandbox.py (as whoever runs the tests) and, when the tests run as root, again as an
unprivileged user: ``python tests/sandbox_cases.py VIDEO SECRET_FILE [PORT]``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GOOD = '''
def solve(task, ctx):
    frames = ctx.frames([1.0, 2.0])
    return {"answer": "A", "raw": ctx.ask(frames)}
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
CASES = {
    "good": (GOOD, True),
    "reads_secret_file": ('def solve(task, ctx):\n    return open(SECRET).read()\n', True),
    "imports_os": ('import os\ndef solve(task, ctx):\n    return os.listdir("/")\n', True),
    "imports_subprocess": ('import subprocess\ndef solve(task, ctx):\n    return subprocess.run(["id"])\n', True),
    "imports_socket": ('import socket\ndef solve(task, ctx):\n    return socket.create_connection(("127.0.0.1", 1))\n',
                       True),
    "os_through_typing": ('import typing\ndef solve(task, ctx):\n    return typing.sys.modules["os"].listdir("/")\n',
                          True),
    "os_through_dataclasses": ('import dataclasses\ndef solve(task, ctx):\n'
                               '    return dataclasses.inspect.getfile(dataclasses)\n', True),
    "frame_walking": (ESCAPE + 'def solve(task, ctx):\n    return _outer()["sys"].modules["os"].listdir("/")\n', True),
    "loops_forever": ('def solve(task, ctx):\n    while True:\n        pass\n', True),
    "allocates_8gb": ('def solve(task, ctx):\n    block = bytearray(8 * 1024 ** 3)\n    return "A"\n', True),
    "writes_huge_file": ('def solve(task, ctx):\n    with open("/tmp/big", "wb") as fh:\n'
                         '        fh.write(bytes(512 * 1024 ** 2))\n    return "A"\n', True),
    "forks": ('import os\ndef solve(task, ctx):\n    return os.fork()\n', True),
    "raises": ('def solve(task, ctx):\n    raise RuntimeError("boom")\n', True),
    "returns_garbage": ('def solve(task, ctx):\n    return {"answer": 42}\n', True),
    "exceeds_budget": ('def solve(task, ctx):\n    return ctx.ask(ctx.frames([i * 0.5 for i in range(40)]))\n', True),
    # the same attacks with the static check switched off: the runtime and OS walls must hold on their own
    "runtime_reads_secret_file": (ESCAPE + 'def solve(task, ctx):\n'
                                  '    return _outer()["builtins"].open(SECRET).read()\n', False),
    "runtime_imports_os": ('def solve(task, ctx):\n    import os\n    return os.listdir("/")\n', False),
    "runtime_network": (ESCAPE + 'def solve(task, ctx):\n    b = _outer()["builtins"]\n'
                        '    s = b.__import__("socket")\n    c = s.create_connection(("127.0.0.1", PORT), 2)\n'
                        '    return "A"\n', False),
    "runtime_writes_huge_file": (ESCAPE + 'def solve(task, ctx):\n'
                                 '    with _outer()["builtins"].open("/tmp/big", "wb") as fh:\n'
                                 '        fh.write(bytes(64 * 1024 ** 2))\n    return "A"\n', False),
    "runtime_lists_host_files": (ESCAPE + 'def solve(task, ctx):\n    os = _outer()["sys"].modules["os"]\n'
                                 '    seen = {"/": sorted(os.listdir("/")), "/tmp": os.listdir("/tmp")}\n'
                                 '    return {"answer": "A", "raw": _outer()["json"].dumps(seen)}\n', False),
}


def run_all(video: str, secret: str, port: int, timeout: float = 6.0) -> dict[str, dict[str, object]]:
    from videvolve.config import RuntimeSettings
    from videvolve.models.cost import cost_model
    from videvolve.models.sim import SimVLM
    from videvolve.skill_library.harness import Harness
    from videvolve.skill_library.runner import run_task
    from videvolve.skill_library.services import TaskServices
    from videvolve.tasks import TaskView

    root = Path(tempfile.mkdtemp(prefix="videvolve-cases-"))
    root.chmod(0o755)
    settings = RuntimeSettings(budget=16, wall_seconds=timeout, memory_bytes=1024**3)
    view = TaskView(id="t", kind="mcq", question="What colour is the star that appears on the navy background?",
                    options=("red", "blue", "green", "pink"), duration=20.0)

    def one(name: str) -> tuple[str, dict[str, object]]:
        source, checked = CASES[name]
        source = source.replace("SECRET", repr(secret)).replace("PORT", str(port)).replace(
            "DIR", repr(str(Path(secret).parent)))
        d = root / name
        d.mkdir()
        (d / "solver.py").write_text(source)
        d.chmod(0o755)
        (d / "solver.py").chmod(0o644)
        from videvolve.skill_library.harness import content_hash

        harness = Harness(path=d, version_id=content_hash(d), manifest={}, skill="", config={},
                          solver_source=source)
        services = TaskServices(view, video, SimVLM(), cost_model("qwen2.5-vl"), settings)
        run = run_task(harness, services, static_check=checked)
        return name, {"outcome": run.outcome, "kind": run.error_kind, "error": (run.error or "")[:600],
                      "answer": None if run.prediction is None else run.prediction.answer,
                      "raw": None if run.prediction is None else run.prediction.raw}

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, CASES))


if __name__ == "__main__":
    print(json.dumps(run_all(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 9)))
