"""A version's folder holds that version or is refused: a kill mid-copy leaves no half version under its name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from videvolve.editing.base import Proposal, write_candidate
from videvolve.errors import UsageError
from videvolve.loop.services import open_run
from videvolve.skill_library.harness import check_version, content_hash, copy_harness, seed_path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# The edit node's write of a candidate, SIGKILLed after two files of the new version are copied into harnesses/.
KILLED_WRITE = """
import os, shutil, signal, sys
from pathlib import Path
from videvolve.editing.base import write_candidate
from tests.test_version_folders import parent_and_proposal
harnesses = Path(sys.argv[1])
real, copied = shutil.copyfile, [0]
def copyfile(src, dst, **kw):
    if Path(dst).is_relative_to(harnesses):
        if copied[0] == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        copied[0] += 1
    return real(src, dst, **kw)
shutil.copyfile = copyfile
parent, proposal = parent_and_proposal(harnesses.parent)
write_candidate(parent, harnesses, proposal)
"""


def parent_and_proposal(base: Path) -> tuple[Path, Proposal]:
    """The seed, copied into ``base/parent``, and a proposal that edits two of its files."""
    parent = copy_harness(seed_path("uniform"), base / "parent")
    solver = (parent / "solver.py").read_text()
    return parent, Proposal(operator="demo", rationale="more frames",
                            edits={"solver.py": solver + "\n# edited\n", "config.toml": "n_frames = 48\n"})


def test_a_kill_while_a_candidate_is_copied_leaves_no_half_version_under_its_name(tmp_path: Path) -> None:
    """write_candidate copied straight into harnesses/<version> and skipped the copy when that folder existed: a
    kill mid-copy left half a version under its name, and the resumed edit returned it as made."""
    harnesses = tmp_path / "harnesses"
    harnesses.mkdir()
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(harnesses)], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert [p.name for p in harnesses.iterdir() if not p.name.startswith(".")] == []  # only the copy beside it
    parent, proposal = parent_and_proposal(tmp_path)
    version = write_candidate(parent, harnesses, proposal)  # the resumed edit writes the same proposal again
    assert content_hash(harnesses / version) == version
    assert [p.name for p in harnesses.iterdir()] == [version]
    assert (harnesses / version / "config.toml").read_text() == "n_frames = 48\n"


def test_a_run_refuses_a_version_folder_whose_files_are_not_that_version(make_context, tmp_path: Path) -> None:
    """Run.harness loaded whatever the folder held under the version's name: half a copy an earlier videvolve left,
    or a folder edited by hand, was evaluated (and its results stored) as that version."""
    run = open_run(make_context())
    try:
        version = copy_harness(seed_path("uniform"), run.dir.harnesses).name
        assert run.harness(version).version_id == version
        config = run.dir.harness(version) / "config.toml"
        config.write_text(config.read_text().replace("n_frames = 256", "n_frames = 32"))  # edited by hand
        with pytest.raises(UsageError, match=rf"{run.dir.harness(version)} does not hold harness version "
                                             rf"{version}: .*Move that folder away"):
            run.harness(version)
        with pytest.raises(UsageError, match="does not hold harness version"):
            run.harness_dir(version)  # what validate, edit and record read
        parent, proposal = parent_and_proposal(tmp_path)
        made = write_candidate(parent, run.dir.harnesses, proposal)
        (run.dir.harness(made) / "solver.py").unlink()  # half a copy, as an earlier videvolve left one
        with pytest.raises(UsageError, match=rf"{made}: its files hash to"):
            write_candidate(parent, run.dir.harnesses, proposal)  # the resumed edit does not take it as made
        assert not (run.dir.harness(made) / "solver.py").exists()  # nothing is overwritten: the user decides
    finally:
        run.close()


@pytest.mark.parametrize("damage", ["removed", "unreadable", "another version"])
def test_a_version_folder_whose_manifest_is_gone_or_names_another_version_is_refused(tmp_path: Path,
                                                                                    damage: str) -> None:
    """The manifest is not hashed, so a folder whose manifest was removed (the version's parent, operator and diff
    lost from the lineage and the report) or copied in from another version passed as that version."""
    harnesses = tmp_path / "harnesses"
    version = copy_harness(seed_path("uniform"), harnesses, summary="seed").name
    assert check_version(harnesses / version) == harnesses / version
    manifest = harnesses / version / "manifest.json"
    if damage == "removed":
        manifest.unlink()
        expected = "its manifest.json is missing or damaged"
    elif damage == "unreadable":
        manifest.write_text("{not json")
        expected = "its manifest.json is missing or damaged"
    else:
        manifest.write_text(json.dumps({"version_id": "0123456789ab"}))
        expected = "its manifest.json names version 0123456789ab"
    with pytest.raises(UsageError, match=rf"{version}: {expected}.*Move that folder away"):
        copy_harness(seed_path("uniform"), harnesses)
