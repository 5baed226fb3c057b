"""The lmms-eval model: `lmms-eval --model videvolve` (found through the entry point) answers as `videvolve ask`.

lmms-eval pulls torch, so it lives in its own environment, ``.venv-lmms`` (`make test-integrations` builds it);
without it these tests skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serving_support import ROOT, env

LMMS = ROOT / ".venv-lmms" / "bin"
pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not (LMMS / "lmms-eval").exists(),
                                 reason="lmms-eval is not installed in .venv-lmms (run `make test-integrations`)")]
DATA = Path(__file__).parent / "data" / "lmms_eval"


def test_lmms_eval_runs_the_harness_on_each_documents_video(serving_world, tmp_path: Path):
    w = serving_world
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"video": str(w.video), "question": w.mcq.question, "options": list(w.mcq.options or []),
                                "answer": w.mcq.answer}) + "\n")
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    shutil.copy(DATA / "utils.py", task_dir / "utils.py")
    (task_dir / "videvolve_synth.yaml").write_text(
        (DATA / "videvolve_synth.yaml.in").read_text().replace("@DOCS@", str(docs)))
    costs = tmp_path / "costs.jsonl"
    r = subprocess.run([str(LMMS / "lmms-eval"), "--model", "videvolve", "--model_args",
                        f"harness={w.harness},no_cache=true,costs={costs}", "--tasks", "videvolve_synth",
                        "--include_path", str(task_dir), "--output_path", str(tmp_path / "out"), "--log_samples",
                        "--batch_size", "1"],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path,
                       env={**env(), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled",
                            "HF_HOME": str(tmp_path / "hf"), "TOKENIZERS_PARALLELISM": "false",
                            "PATH": f"{LMMS}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    (got,) = [json.loads(line) for line in costs.read_text().splitlines()]
    (sample,) = [json.loads(line) for p in (tmp_path / "out").rglob("*samples*.jsonl") for line in
                 p.read_text().splitlines()]
    asked = w.asked_mcq
    assert got["text"] == asked["answer"] and got["kind"] == "mcq" and got["video"] == str(w.video)
    assert got["cost"]["frames"] == asked["usage"]["frames"] > 0
    assert got["cost"]["visual_tokens"] == asked["usage"]["image_tokens"] + asked["usage"]["video_tokens"]
    assert got["cost"]["calls"] == asked["usage"]["requests"]
    assert got["evidence_times"] == asked["evidence_times"]
    assert sample["filtered_resps"] == asked["answer"]  # what lmms-eval scored
    assert sample["accuracy"] == float(asked["answer"] == w.mcq.answer)
