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

from tests.serving_support import ROOT, ask_json, env, fast_harness, tiny_world

LMMS = ROOT / ".venv-lmms" / "bin"
pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not (LMMS / "lmms-eval").exists(),
                                 reason="lmms-eval is not installed in .venv-lmms (run `make test-integrations`)")]
DATA = Path(__file__).parent / "data" / "lmms_eval"


def test_lmms_eval_runs_the_harness_on_each_documents_video(tmp_path: Path):
    root, tasks = tiny_world(tmp_path / "world")
    harness = fast_harness(tmp_path / "uniform12")
    video = str(root / "videos" / "video000.mp4")
    mcq = [t for t in tasks if t.kind == "mcq"][:2]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"video": video, "question": t.question, "options": list(t.options or []),
                                        "answer": t.answer}) + "\n" for t in mcq))
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    shutil.copy(DATA / "utils.py", task_dir / "utils.py")
    (task_dir / "videvolve_synth.yaml").write_text(
        (DATA / "videvolve_synth.yaml.in").read_text().replace("@DOCS@", str(docs)))
    costs = tmp_path / "costs.jsonl"
    r = subprocess.run([str(LMMS / "lmms-eval"), "--model", "videvolve", "--model_args",
                        f"harness={harness},no_cache=true,costs={costs}", "--tasks", "videvolve_synth",
                        "--include_path", str(task_dir), "--output_path", str(tmp_path / "out"), "--log_samples",
                        "--batch_size", "1"],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path,
                       env={**env(), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled",
                            "HF_HOME": str(tmp_path / "hf"), "TOKENIZERS_PARALLELISM": "false",
                            "PATH": f"{LMMS}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    logged = [json.loads(line) for line in costs.read_text().splitlines()]
    assert len(logged) == len(mcq)
    samples = [json.loads(line) for p in (tmp_path / "out").rglob("*samples*.jsonl") for line in
               p.read_text().splitlines()]
    assert len(samples) == len(mcq)
    for doc_id, task in enumerate(mcq):
        options = [f"{chr(65 + i)}) {o}" for i, o in enumerate(task.options or [])]
        asked = ask_json(video, task.question, *[a for o in options for a in ("--option", o)],
                         "--harness", str(harness))
        got = next(x for x in logged if x["doc_id"] == doc_id)
        assert got["text"] == asked["answer"] and got["kind"] == "mcq"
        assert got["cost"]["frames"] == asked["usage"]["frames"] > 0
        assert got["cost"]["visual_tokens"] == asked["usage"]["image_tokens"] + asked["usage"]["video_tokens"]
        assert got["cost"]["calls"] == asked["usage"]["requests"]
        assert got["evidence_times"] == asked["evidence_times"]
        sample = next(s for s in samples if s["doc_id"] == doc_id)
        assert sample["filtered_resps"] == asked["answer"]
        assert sample["accuracy"] == float(asked["answer"] == task.answer)
