"""The run folder has one owner (``videvolve/rundir.py``) and its lineage one merge (``memory/lineage.py``)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from videvolve.cli import main
from videvolve.errors import StorageError, UsageError
from videvolve.evaluation.experiment import compared_versions
from videvolve.memory.lineage import LineageStore
from videvolve.report.build import versions
from videvolve.rundir import EvalDir, RunDir
from videvolve.search.events import read_events
from videvolve.testing import full_disk

PACKAGE = Path(__file__).resolve().parents[1] / "videvolve"

# A seed written, a candidate written pending and rewritten by a later line with only what changed, a blank line,
# and the seed rewritten by a resumed run: every reader must see the same two merged versions.
LINEAGE = [
    {"version": "s0", "parent": None, "iteration": 0, "operator": None, "decision": "seed",
     "reason": "the seed harness", "score": 0.5, "cost": 100.0, "frames": 16.0},
    {"version": "c1", "parent": "s0", "iteration": 0, "operator": "denser_sampling", "decision": "pending",
     "reason": "", "score": None, "cost": None, "legacy_field": "kept"},
    None,
    {"version": "c1", "decision": "accepted", "reason": "gain", "score": 0.75, "cost": 90.0},
    {"version": "s0", "parent": None, "iteration": 0, "operator": None, "decision": "seed",
     "reason": "the seed harness", "score": 0.55, "cost": 100.0, "frames": 16.0},
]
MERGED = [
    {"version": "s0", "parent": None, "iteration": 0, "operator": None, "decision": "seed",
     "reason": "the seed harness", "score": 0.55, "cost": 100.0, "frames": 16.0},
    {"version": "c1", "parent": "s0", "iteration": 0, "operator": "denser_sampling", "decision": "accepted",
     "reason": "gain", "score": 0.75, "cost": 90.0, "legacy_field": "kept"},
]


def _run_with_lineage(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.harnesses.mkdir(parents=True)
    run.best.mkdir()
    (run.best / "manifest.json").write_text(json.dumps({"version_id": "c1"}))
    run.lineage_file.write_text("".join("\n" if rec is None else json.dumps(rec) + "\n" for rec in LINEAGE))
    return run


def test_report_cli_and_experiment_read_one_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_with_lineage(tmp_path)
    assert [r.as_dict() for r in run.lineage().values()] == MERGED

    assert versions(run) == MERGED  # the report (no manifest in harnesses/: no diff)

    capsys.readouterr()
    assert main(["harness", "list", "--run", str(run.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == MERGED

    assert compared_versions(run) == ("s0", "c1")  # the held-out comparison: merged lineage, best's manifest


def test_harness_list_counts_iterations_from_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_with_lineage(tmp_path)
    capsys.readouterr()
    assert main(["harness", "list", "--run", str(run.root)]) == 0
    rows = {line.split("│")[1].strip(): line for line in capsys.readouterr().out.splitlines() if "│" in line}
    assert rows["c1"].split("│")[3].strip() == "1" and rows["s0"].split("│")[3].strip() == "0"
    assert "accepted" in rows["c1"] and "0.750" in rows["c1"]


def test_a_damaged_lineage_line_names_the_file_and_line(tmp_path: Path) -> None:
    """A line that is not an entry and is not the unfinished last write (it ends, lines may follow) is damage."""
    run = _run_with_lineage(tmp_path)
    with run.lineage_file.open("a") as fh:
        fh.write('{"version": "c2", "decis\n')
    with pytest.raises(UsageError, match=r"lineage\.jsonl:6: not a lineage entry"):
        run.lineage()


def test_a_lineage_line_a_full_disk_tore_is_recorded_again_on_resume(tmp_path: Path) -> None:
    """A full disk stops the run (StorageError, not a traceback) leaving half a line; that unfinished line is no
    entry, and the resumed run's record of the same version (record runs again) is read back whole."""
    run = _run_with_lineage(tmp_path)
    with full_disk(run.lineage_file.stat().st_size + 20), pytest.raises(StorageError, match=r"lineage\.jsonl"):
        run.record_lineage("c2", parent="c1", iteration=1, decision="accepted", score=0.8)
    assert not run.lineage_file.read_text().endswith("\n")  # torn
    assert list(run.lineage()) == ["s0", "c1"]
    run.record_lineage("c2", parent="c1", iteration=1, decision="accepted", score=0.8)
    run.record_lineage("c3", parent="c2", iteration=2, decision="rejected")
    assert run.lineage()["c2"].score == 0.8 and run.lineage()["c3"].decision == "rejected"


def test_an_event_a_full_disk_tore_does_not_break_the_events(tmp_path: Path) -> None:
    run = _run_with_lineage(tmp_path)
    run.append_event({"iteration": 0, "node": "prepare", "event": "baseline"})
    with full_disk(run.events.stat().st_size + 10), pytest.raises(StorageError, match=r"events\.jsonl"):
        run.append_event({"iteration": 0, "node": "solve", "event": "solved", "score": 0.5})
    assert [e.event for e in read_events(run.events)] == ["baseline"]  # the report reads the run meanwhile
    run.append_event({"iteration": 0, "node": "solve", "event": "solved", "score": 0.5})
    assert [e.event for e in read_events(run.events)] == ["baseline", "solved"]
    with run.events.open("a") as fh:
        fh.write("not json\n")
    with pytest.raises(UsageError, match=r"events\.jsonl:3"):
        read_events(run.events)


def test_a_line_cut_inside_a_character_is_left_out_of_the_events_and_the_lineage(tmp_path: Path) -> None:
    """Every JSONL reader decoded the whole file first: a last line cut inside a multi-byte character (a hand edit,
    a file written by another tool) was a UnicodeDecodeError rather than an unfinished write."""
    run = _run_with_lineage(tmp_path)
    run.append_event({"iteration": 0, "node": "prepare", "event": "baseline"})
    line = '{"version": "c2", "reason": "caf\u00e9 \u2014 gone", "iteration": 1}\n'.encode()
    for path in (run.events, run.lineage_file):
        with full_disk(path.stat().st_size + line.index(b"\xa9")), pytest.raises(OSError), path.open("ab") as fh:
            fh.write(line)  # stopped between the two bytes of the e-acute
        assert not path.read_bytes().endswith(b"\n") and not path.read_bytes().isascii()
    assert [e.event for e in read_events(run.events)] == ["baseline"]
    assert list(run.lineage()) == ["s0", "c1"]
    run.record_lineage("c2", parent="c1", iteration=1, reason="caf\u00e9")
    assert run.lineage()["c2"].reason == "caf\u00e9" and run.lineage_file.read_bytes().isascii()


def test_a_promotion_a_full_disk_stops_leaves_the_former_best_whole(tmp_path: Path) -> None:
    """best/ was deleted, then copied file by file: a copy stopped half-way (a full disk, a kill) left a half harness
    that `eval --harness RUN` loads as the run's best. The former best stays whole until the new one is."""
    import shutil
    from types import SimpleNamespace

    from videvolve.nodes.record import _promote
    from videvolve.search.history import GateEntry

    run = RunDir(tmp_path / "run")
    for version, size in (("old", 10), ("new", 50_000)):
        run.harness(version).mkdir(parents=True)
        (run.harness(version) / "manifest.json").write_text(json.dumps({"version_id": version}))
        (run.harness(version) / "solver.py").write_text("#" * size)
    shutil.copytree(run.harness("old"), run.best)
    services = SimpleNamespace(ctx=SimpleNamespace(search="chain"), dir=run, harness_dir=run.harness)
    entry = GateEntry(iteration=0, parent="old", candidate="new", decision="accepted", reason="gain", cand_score=1.0,
                      cand_cost=1.0)
    with full_disk(20_000), pytest.raises(StorageError, match="best"):
        _promote(services, {"incumbent": "old"}, entry)  # type: ignore[arg-type]
    assert (run.best / "solver.py").read_text() == "#" * 10
    assert json.loads((run.best / "manifest.json").read_text())["version_id"] == "old"
    assert _promote(services, {"incumbent": "old"}, entry)["incumbent"] == "new"  # type: ignore[arg-type]
    assert (run.best / "solver.py").read_text() == "#" * 50_000
    assert [p.name for p in run.root.iterdir() if "best" in p.name] == ["best"]


def test_settings_predictions_and_mixture_are_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """settings.json (rewritten at every resume), predictions and mixture.json were written in place: a full disk or
    a kill half-way left half a file (the run's settings then unreadable). Now the former file stays whole."""
    from videvolve.atomic import write_text_atomic
    from videvolve.tasks import Prediction, read_predictions, write_predictions

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"run_id": "r"}))
    with pytest.raises(StorageError, match="the run's settings"), full_disk(100):
        write_text_atomic(settings, json.dumps({"run_id": "r", "padding": "x" * 10_000}), "the run's settings")
    assert json.loads(settings.read_text()) == {"run_id": "r"} and not list(tmp_path.glob("*.tmp"))
    preds = tmp_path / "preds.jsonl"
    write_predictions([Prediction(task_id="a", kind="mcq", answer="A")], preds)
    with pytest.raises(StorageError, match="the predictions"), full_disk(200):
        write_predictions([Prediction(task_id=f"t{i}", kind="mcq", answer="B") for i in range(100)], preds)
    assert [p.task_id for p in read_predictions(preds)] == ["a"]
    # a name the file system refuses (over 255 bytes): main raised the same OSError again from the clean-up, a bug
    with pytest.raises(StorageError, match="the part"):
        write_text_atomic(tmp_path / ("x" * 252), "{}", "the part")


def test_a_damaged_mixture_is_named_with_what_to_do(tmp_path: Path) -> None:
    """A mixture.json that is not one videvolve wrote (edited, truncated) was a traceback out of eval/ask/serve."""
    from videvolve.search.mixture import resolve_run_harness

    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    for text in ("{not json", json.dumps({"tiers": {}}), json.dumps([1])):
        run.mixture.write_text(text)
        with pytest.raises(UsageError, match=r"not a mixture videvolve wrote.*delete it"):
            resolve_run_harness(run.root, 32)


def test_recording_an_unchanged_entry_writes_nothing(tmp_path: Path) -> None:
    store = LineageStore(tmp_path / "lineage.jsonl")
    store.record("a", parent=None, decision="seed", score=0.5)
    store.record("a", decision="seed", score=0.5)  # a resumed run repeating a node: idempotent
    assert len(store.path.read_text().splitlines()) == 1
    store.record("a", score=0.6)
    assert len(store.path.read_text().splitlines()) == 2
    assert store.read()["a"].score == 0.6 and store.read()["a"].decision == "seed"


def test_the_layout_is_the_one_existing_runs_have(tmp_path: Path) -> None:
    """No migration: the paths are those every run so far was written with."""
    run = RunDir(tmp_path)
    assert run.evals("v1", "train").result("a/b") == tmp_path / "evals/v1/train/results/a_b.json"
    assert run.evals("v1", "train").trace("a/b") == tmp_path / "evals/v1/train/traces/a_b.jsonl"
    assert run.test_evals("v1").path == tmp_path / "test/v1"
    assert (run.settings, run.checkpoints, run.events, run.lineage_file) == (
        tmp_path / "settings.json", tmp_path / "checkpoints.sqlite", tmp_path / "events.jsonl",
        tmp_path / "lineage.jsonl")
    assert (run.harness("v1"), run.best, run.workspaces, run.comparison, run.mixture, run.stop_file) == (
        tmp_path / "harnesses/v1", tmp_path / "best", tmp_path / "workspaces", tmp_path / "test/comparison.json",
        tmp_path / "mixture.json", tmp_path / "STOP")
    assert EvalDir.default("uniform", "test").path == Path("evals/uniform-test")


# ---- the run folder's names appear in rundir.py only ----

RUN_NAMES = {"settings.json", "checkpoints.sqlite", "events.jsonl", "lineage.jsonl", "inputs.json", "mixture.json",
             "STOP", "harnesses", "best", "evals", "results", "traces", "test", "workspaces", "investigations",
             "report", "heldout", "comparison.json", "manifest.json"}
FILE_NAMES = {n for n in RUN_NAMES if "." in n}
"""Names distinctive enough to be flagged as any string constant; the others only where a path is built."""

OWNER = "rundir.py"
EXCEPTIONS: dict[str, tuple[set[str], str]] = {
    "skill_library/harness.py": ({"manifest.json"}, "the harness format owns its manifest (MANIFEST, read_manifest)"),
    "editing/workspace.py": ({"traces"}, "the editor workspace's own traces/ folder, not the run's"),
}


def _segments(text: str) -> set[str]:
    return {s for s in text.split("/") if s}


def path_literals(source: str) -> set[str]:
    """Run-folder names in a module's code: in a path built with ``/``, ``Path()``, ``joinpath`` or a glob pattern,
    and the distinctive file names in any string constant (docstrings, help texts and descriptions are prose)."""
    tree = ast.parse(source)
    prose: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            prose.add(id(node.body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # attribute docstrings
            prose.add(id(node.value))
        if isinstance(node, ast.keyword) and node.arg in ("help", "description"):
            prose.update(id(n) for n in ast.walk(node.value))
    found: set[str] = set()

    def strings(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
        return []

    for node in ast.walk(tree):
        built: list[ast.AST] = []
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            built = [node.left, node.right]
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else ""
            if name in ("Path", "joinpath", "glob", "rglob"):
                built = list(node.args)
        for operand in built:
            for text in strings(operand):
                found |= _segments(text) & RUN_NAMES
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            found |= {n for n in FILE_NAMES if n in _segments(node.value) and not node.value.startswith("~")}
    return found


def literals_outside_rundir(package: Path) -> dict[str, set[str]]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == OWNER or "seeds" in path.parts:
            continue
        found = path_literals(path.read_text(encoding="utf-8")) - EXCEPTIONS.get(rel, (set(), ""))[0]
        if found:
            out[rel] = found
    return out


def test_the_run_folder_names_appear_only_in_rundir() -> None:
    found = literals_outside_rundir(PACKAGE)
    assert not found, ("run-folder paths built outside videvolve/rundir.py (use RunDir / EvalDir, or add an "
                       f"explained exception): {found}")


def test_every_exception_is_still_needed() -> None:
    """An exception nobody needs any more is removed, so the list only shrinks."""
    for rel, (names, _why) in EXCEPTIONS.items():
        assert path_literals((PACKAGE / rel).read_text(encoding="utf-8")) & names, f"{rel} needs no exception"


def test_the_literal_check_can_fail() -> None:
    old = '''
def f(run, out_dir, task):
    """Reads lineage.jsonl (prose is fine)."""
    a = run / "lineage.jsonl"
    b = out_dir / "traces" / f"{task}.jsonl"
    c = sorted(run.glob("evals/*/train/results/*.json"))
    d = Path("evals") / "x"
    MIXTURE = "mixture.json"
    e = {"best": 1, "split": "test"}
    p.add_argument("--x", help="print settings.json")
    cfg = "~/.claude/settings.json"
'''
    assert path_literals(old) == {"lineage.jsonl", "traces", "evals", "results", "mixture.json"}


def test_the_end_of_run_note_on_errors_leaves_out_a_result_it_cannot_read(tmp_path: Path) -> None:
    """The note at the end of `evolve` parsed every selection result of the best harness as it found it: one file
    edited or torn by hand ended an overnight run's summary in a traceback."""
    from videvolve.cli.evolve_cmd import _errors_note
    from videvolve.evaluation.results import TaskResult
    from videvolve.loop.context import Context

    ctx = Context(run_dir=str(tmp_path / "run"), run_id="r", tasks=str(tmp_path / "tasks.jsonl"))
    folder = RunDir(ctx.root).evals("v1", "selection").results
    folder.mkdir(parents=True)
    for i in range(3):
        result = TaskResult(task_id=f"t{i}", harness_id="v1", kind="mcq", outcome="error",
                            error="the model cannot see it", score=0.0)
        (folder / f"t{i}.json").write_text(result.model_dump_json())
    (folder / "t3.json").write_text("{torn")
    note = _errors_note(ctx, "v1")
    assert note is not None and note.startswith("3 of 3 selection answers") and "cannot see it" in note
