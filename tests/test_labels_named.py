"""Every command that scores or splits generated (needle, perceived, teacher) labels says which labels it rests on.

Before, `tasks split --fractions ...,test=...` dealt needle questions into the test split without a word (while
`tasks generate` refuses a test share: generated labels never make a test set), `eval` on that split printed a
score with nothing to tell it from a gold one, and `evolve --dry-run` planned a run on them without saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.datasets.synthworld import generate_world
from videvolve.tasks import read_tasks


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Needle tasks about a 3-video SynthWorld (real H.264 files, decoded with PyAV), written by the CLI."""
    root = tmp_path_factory.mktemp("labels_named")
    generate_world(root / "world", videos=3, minutes=0.5, seed=5, workers=1)
    out = root / "gen.jsonl"
    assert main(["tasks", "generate", str(root / "world" / "videos"), "--out", str(out),
                 "--questions-per-video", "6", "--workers", "1"]) == 0
    return out


def _said(capsys) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


def test_split_says_when_its_test_split_holds_generated_labels(generated: Path, tmp_path: Path, capsys):
    capsys.readouterr()
    dest = tmp_path / "split.jsonl"
    assert main(["tasks", "split", str(generated), "--fractions", "train=0.4,selection=0.3,test=0.3",
                 "--out", str(dest)]) == 0
    test = [t for t in read_tasks(dest) if t.split == "test"]
    assert test and all(t.label_source == "needles" for t in test)
    said = _said(capsys)
    assert f"the test split's labels are not all gold: test: {len(test)} questions, labels: needles {len(test)}" \
        in said, said
    # without a test share there is nothing to say
    assert main(["tasks", "split", str(generated), "--fractions", "train=0.7,selection=0.3",
                 "--out", str(tmp_path / "s2.jsonl")]) == 0
    assert "not all gold" not in _said(capsys)


def test_eval_names_the_labels_it_scored_against(generated: Path, tmp_path: Path, capsys):
    capsys.readouterr()
    n = sum(1 for t in read_tasks(generated) if t.split == "selection")
    assert main(["eval", "--tasks", str(generated), "--split", "selection", "--harness", "uniform", "--out",
                 str(tmp_path / "ev"), "--no-cache", "--budget", "8"]) == 0
    said = _said(capsys)
    assert f"labels are not all gold: selection: {n} questions, labels: needles {n}" in said, said


def test_a_dry_run_names_the_labels_the_run_would_rest_on(generated: Path, tmp_path: Path, capsys):
    capsys.readouterr()
    assert main(["evolve", "--run", str(tmp_path / "r"), "--tasks", str(generated), "--dry-run"]) == 0
    said = _said(capsys)
    assert "not all labels are gold: train: " in said and "labels: needles" in said, said
