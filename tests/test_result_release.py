"""A stored result is keyed by the code that made it, not only by the version number (which never changed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import videvolve
from videvolve.config import RuntimeSettings
from videvolve.evaluation.results import Producer
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.version import RESULT_CODE, __version__, result_code_digest, result_release


def _package_copy(tmp_path: Path) -> Path:
    src = Path(videvolve.__file__).parent
    dst = tmp_path / "videvolve"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_a_change_to_the_code_that_makes_results_changes_the_key_and_the_orchestration_does_not(tmp_path: Path):
    root = _package_copy(tmp_path)
    before = result_code_digest.__wrapped__(root)
    assert before == result_code_digest()  # the copy is the package
    prompt = root / "skill_library" / "prompt_templates" / "answer_mcq.txt"
    prompt.write_text(prompt.read_text() + "\n")  # a prompt changed by one line
    changed = result_code_digest.__wrapped__(root)
    assert changed != before
    (root / "search" / "gate.py").write_text("# the gate decides which results are made, not what they are\n")
    (root / "skill_library" / "__pycache__").mkdir(exist_ok=True)
    (root / "skill_library" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert result_code_digest.__wrapped__(root) == changed
    assert all((root / name).exists() for name in RESULT_CODE)  # every name it lists is in the package


def test_results_are_keyed_by_the_release_and_the_code_digest():
    producer = Producer.of("h1", SimVLM(), RuntimeSettings(), cost_model("qwen2.5-vl"))
    assert producer.release == result_release() == f"{__version__}+{result_code_digest()}"
