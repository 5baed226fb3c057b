"""Run ``videvolve evolve`` in this process, counting completed SimVLM calls; optionally SIGKILL itself.

Usage: python tests/evolve_killer.py COUNT_FILE KILL_AFTER_RESULTS -- EVOLVE ARGS...
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

count_file, kill_after, args = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[4:]

import videvolve.evaluation.one_task as one_task_module  # noqa: E402
import videvolve.evaluation.solve as solve_module  # noqa: E402
import videvolve.models.sim.vlm as vlm_module  # noqa: E402

original_complete = vlm_module.SimVLM.complete


def counted(self, messages, tools=None):
    reply = original_complete(self, messages, tools)
    with count_file.open("a") as fh:
        fh.write("1\n")
    return reply


vlm_module.SimVLM.complete = counted  # type: ignore[method-assign]
if kill_after > 0:
    original_write = one_task_module.write_result
    written = [0]

    def write(out_dir, result):
        original_write(out_dir, result)
        written[0] += 1
        if written[0] >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    one_task_module.write_result = write
    solve_module.write_result = write

from videvolve.cli import main  # noqa: E402

sys.exit(main(args))
