"""The efficacy protocol (``python bench/efficacy.py``): evolve on fresh worlds, judge on the test split only.

Worlds are the shipped SynthWorld generator's with default settings apart from size and questions per video
(``--videos 32 --minutes 6 --questions 100``: 8 selection and 8 test videos, the fewest the gate's power note accepts;
the protocol's worlds were 16 videos of 12 minutes until 2026-12-04, whose splits of 4 videos each could not tell a
gain that holds from one a few videos carry: see docs/benchmarks.md); speaking worlds (:data:`SPEAKING`:
``--narration``, gated under ``--cost-metric visual_tokens+text``: reading is not free). The seeds were chosen
before any result was seen: :data:`WORLDS`. For each world and seed harness (`uniform`, `scan_refine`), `evolve` with
SimVLM, the heuristic editor and the default gate for ``--iterations`` iterations, multi-fidelity validation; then,
on the test split (which neither the editor nor the gate saw), the seed against the evolved harness: per kind (and,
on a speaking world, per evidence type) mcq accuracy with exact McNemar p and grounding mIoU with paired-bootstrap p,
the paired bootstrap p of the per-question score, the visual-token ratio; accepted / proposed, selection evaluations,
and how many accepted revisions the test split would have rejected (the paired rule applied to each accepted
revision and its parent on the test split).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mf_agreement import mf_agreement
from rich.console import Console
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.experiment import compare_on_test
from videvolve.evaluation.results import TaskResult
from videvolve.evaluation.solve import solve_tasks
from videvolve.folderlock import remove_tree
from videvolve.graph.driver import evolve
from videvolve.loop.context import Context, GateSettings, StopSettings
from videvolve.metrics import mcnemar, paired_bootstrap
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.rundir import RunDir
from videvolve.search.gate import guarded, paired_rule
from videvolve.search.history import entries
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import Task, read_tasks
from videvolve.usage import VISUAL_TOKENS, CostMeasure

WORLDS = (15101, 15223, 15331, 15443, 15557)
"""World seeds of the protocol, written down on 2026-12-04 at 18:27 UTC before any run of them (15331 speaks)."""
SPEAKING = frozenset({7286, 7303, 12323, 13331, 14333, 15331, 18347, 25089, 27031, 73934, 221449, 348840, 449879,
                      533973, 741144, 89437, 179943, 819125})
"""Worlds that speak: 7303 of the first set (7101 7202 7303 7404 7505, at 16 x 12); 12323, 13331 and 14333 of the
sets written down on 2026-12-04 at 17:17, 17:34 and 18:06 UTC, each before any run of it (12107 12211 12323 12437
12541; 13103 13217 13331 13449 13567, at 16 x 12; 14107 14221 14333 14447 14551, at 32 x 6); 15331 of the set written
down at 18:27 (15101 15223 15331 15443 15557, 32 x 6: :data:`WORLDS`); 18347 of set F, written down at 21:47 before any
run of it (18119 18233 18347 18461 18577, at the new default size); 25089 of set L, written down on 2026-12-05 at
08:41 UTC before any run of it (25035 25089 25340 25757 25930, ``--children 3``); 27031 of set M, written down on
2026-12-05 at 11:40 UTC before any run of it (27018 27031 27223 27820 27989, ``--children 3``); 73934 of set P,
written down on 2026-12-06 at 02:40 UTC before any run of it (73331 73934 75190 76876 77519; SimVLM revision 3);
221449 and 348840 of set Q, written down on 2026-12-06 at 15:44 UTC before any run of it (uniform: 201630 221449
231887 267894 272159; scan_refine: 327566 348840 361253 366801 379252; the gate's test over videos); 741144 of set
U, written down on 2026-12-07 at 07:02 UTC before any run of it (uniform: 741144; scan_refine: 844147); 533973 of
set W, written down on 2026-12-07 at 10:04 UTC before any run of it (uniform: 533973 464444 535064; scan_refine:
508145 23772; the gate's cost bound over videos); 7286 of set X, written down on 2026-12-07 at 10:33 UTC before any
run of it (uniform: 7286 668284; the editor's headroom under the cost bound over videos); 449879 of set Z, written
down on 2026-12-07 at 13:26 UTC before any run of it (uniform: 449879 140492 428760; scan_refine: 886882 406296; the
guard on each kind at the stated level); 89437 of set AA, written down on 2026-12-07 at 16:14 UTC before any run of
it (uniform: 89437 345268 856205; scan_refine: 800418 341774; the same code); 179943 of set AC, written down on
2026-12-07 at 22:03 UTC before any run of it (uniform: 179943 491663 145362; scan_refine: 130082 877661; after the
reviews of stop 53); 819125 of set AD, written down on 2026-12-08 at 01:05 UTC before any run of it (uniform: 819125
735619 976294; scan_refine: 60993 650923; after stop 54's typed events and cost measure)."""
SIZE = {"videos": 32, "minutes": 6, "questions": 100}
"""The protocol's world size: 8 selection and 8 test videos (``--videos 16 --minutes 12``: the same minutes of video
in 4 and 4, the size before 2026-12-04; its worlds live in folders named by size)."""
CACHE = Path(__file__).resolve().parent / ".cache" / "protocol"
console = Console(width=170)


def size_tag(size: dict[str, Any]) -> str:
    """'' for the protocol's own size, else ``-v32-m6-q100``: worlds of other sizes live beside its own."""
    return "" if size == SIZE else f"-v{size['videos']}-m{size['minutes']:g}-q{size['questions']}"


def world(seed: int, size: dict[str, Any] = SIZE) -> Path:
    """The world's tasks file (generated once)."""
    root = CACHE / f"world{seed}{size_tag(size)}"
    if not (root / "tasks.jsonl").exists():
        generate_world(root, seed=seed, narration=seed in SPEAKING, **size)
    return root / "tasks.jsonl"


def _tokens(rs: list[TaskResult], measure: CostMeasure) -> float:
    return sum(measure.of(r) for r in rs) / max(1, len(rs))


def per_group(tasks: list[Task], a: list[TaskResult], b: list[TaskResult]) -> list[dict[str, Any]]:
    """Seed (a) against evolved (b) per group of questions the gate guards (on a speaking world each kind, each kind
    of evidence, and each cell of the two), with paired p."""
    out = []
    for group, idx in guarded(tasks).items():
        x, y = [a[i].score for i in idx], [b[i].score for i in idx]
        if all(tasks[i].kind == "mcq" for i in idx):
            p = mcnemar([v == 1 for v in x], [v == 1 for v in y]).p_value
        else:
            p = paired_bootstrap(x, y).p_value
        out.append({"group": group, "n": len(idx), "seed": sum(x) / len(x), "evolved": sum(y) / len(y), "p": p})
    return out


def run_one(seed: int, harness: str, iterations: int, size: dict[str, Any] = SIZE,
            children: int | None = None, resume: bool = False) -> dict[str, Any]:
    """One world, one seed harness: evolve, then the test split (``children``: candidates an iteration).

    ``resume``: a run this world and harness left unfinished (its folder holds checkpoints) goes on from its last
    checkpoint, as ``evolve --resume`` does (the same settings, the same tasks; the run refuses others); without it
    the folder is removed and the run starts anew.
    """
    started = time.time()
    tasks_path = world(seed, size)
    root = CACHE / f"world{seed}{size_tag(size)}-{harness}{f'-c{children}' if children else ''}"
    resumed = resume and (root / "run" / "checkpoints.sqlite").exists()
    if not resumed:
        remove_tree(root)
    measure = CostMeasure(metric="visual_tokens+text" if seed in SPEAKING else "visual_tokens")
    ctx = Context(run_dir=str(root / "run"), run_id=f"protocol{seed}-{harness}", tasks=str(tasks_path),
                  seed_harness=harness, memory=str(root / "memory"), stop=StopSettings(iterations=iterations),
                  seed=seed, runtime=RuntimeSettings(concurrency=2), cache=str(root / "cache.sqlite"),
                  gate=GateSettings(validation="multi-fidelity", cost_metric=measure.metric), children=children)
    final = evolve(ctx)
    history = entries(final.get("history", []))
    vlm, cost, runtime = SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
    cmp = compare_on_test(root / "run", vlm, cost, runtime)
    test = [t for t in read_tasks(tasks_path) if t.split == "test"]

    def on_test(version: str) -> list[TaskResult]:
        return solve_tasks(load_harness(root / "run" / "harnesses" / version), test, vlm, cost, runtime,
                           root / "run" / "test" / version)

    seed_res, best_res = on_test(cmp.seed["version"]), on_test(cmp.best["version"])
    accepted = [e for e in history if e.decision == "accepted"]
    test_rejects = 0
    for e in accepted:  # would the test split have taken it? the same rule, on other questions
        if e.candidate is None or e.level is None:
            continue
        verdict = paired_rule(test, on_test(e.parent), on_test(e.candidate), e.level, measure)
        test_rejects += not verdict.accept
    boot = paired_bootstrap([r.score for r in seed_res], [r.score for r in best_res])
    return {"world": seed, "seed_harness": harness, "metric": measure.metric,
            "groups": per_group(test, seed_res, best_res),
            "score_seed": sum(r.score for r in seed_res) / len(test),
            "score_evolved": sum(r.score for r in best_res) / len(test), "score_p": boot.p_value,
            "score_diff": boot.diff, "tokens_seed": _tokens(seed_res, measure), "tokens_evolved": _tokens(best_res,
                                                                                                     measure),
            "visual_seed": _tokens(seed_res, VISUAL_TOKENS), "visual_evolved": _tokens(best_res, VISUAL_TOKENS),
            "accepted": len(accepted), "proposed": sum(1 for e in history if e.decision in ("accepted", "rejected",
                                                                                       "dropped")),
            "selection_evaluations": sum(1 for _ in (root / "run").glob("evals/*/selection/results/*.json")),
            "test_would_reject": test_rejects, "test_questions": len(test), "videos": cmp.videos,
            "videos_gaining": cmp.videos_gaining, "video_p": cmp.video_p,
            "operators": [f"{e.operator}:{e.decision}" for e in history], "mf": mf_agreement(root / "run"),
            "minutes": (time.time() - started) / 60, "resumed": resumed}


def _mf(r: dict[str, Any]) -> str:
    m = r.get("mf")
    return f"{m['same']} / {m['decisions']} ({m['evaluations_full']:,} / {m['evaluations_mf']:,})" if m else ""


def visual_ratio(r: dict[str, Any]) -> float:
    """Evolved over seed visual tokens a test question, what issue 19's targets bound (else the run's metric's)."""
    seed, evolved = r.get("visual_seed", r["tokens_seed"]), r.get("visual_evolved", r["tokens_evolved"])
    return evolved / seed if seed else 1.0


def ratios(r: dict[str, Any]) -> str:
    """The visual-token ratio, and the run's own metric's where it differs (transcript tokens counted)."""
    text, ratio = f"{visual_ratio(r):.3f}x", r["tokens_evolved"] / r["tokens_seed"] if r["tokens_seed"] else 1.0
    return text if r.get("metric", "visual_tokens") == "visual_tokens" else f"{text} ({ratio:.3f}x with text)"


def verdict(r: dict[str, Any]) -> str:
    """How the run fares against the issue's targets (visual tokens a question)."""
    ratio = visual_ratio(r)
    losses = [g for g in r["groups"] if g["evolved"] < g["seed"] and g["p"] < 0.05]
    gain = r["score_diff"] > 0 and r["score_p"] < 0.05
    if losses:
        return "significant loss"
    if r["seed_harness"] == "uniform":
        return "gain" if gain and ratio <= 1.1 else "no significant gain"
    return "gain" if gain and ratio <= 1.0 else "cheaper, no loss" if ratio <= 0.8 else "neither"


def table(rows: list[dict[str, Any]]) -> Table:
    """One row per world and seed harness."""
    t = Table(title="evolved vs seed on the held-out test split (paired), SimVLM, heuristic editor, paired gate")
    for col in ("world", "seed", "score seed -> evolved [p]", "per kind / evidence: seed -> evolved [p]",
                "visual tokens ratio", "accepted / proposed", "selection evals", "test would reject",
                "multi-fidelity = full (evals full / mf)", "verdict", "min"):
        t.add_column(col, justify="right")
    for r in rows:
        groups = "; ".join(f"{g['group']} {g['seed']:.3f}->{g['evolved']:.3f} [{g['p']:.3f}]" for g in r["groups"])
        t.add_row(str(r["world"]), r["seed_harness"],
                  f"{r['score_seed']:.3f} -> {r['score_evolved']:.3f} [{r['score_p']:.3f}]", groups, ratios(r),
                  f"{r['accepted']} / {r['proposed']}", f"{r['selection_evaluations']:,}",
                  f"{r['test_would_reject']} / {r['accepted']}", _mf(r), verdict(r), f"{r['minutes']:.0f}")
    return t


def protocol(worlds: list[int], harnesses: list[str], iterations: int, size: dict[str, Any] = SIZE,
             children: int | None = None, resume: bool = False) -> int:
    """Run every world and seed harness; print the table after each; write results.json.

    ``resume``: the rows this command's results file already holds (the same worlds, harness, size, candidates and
    iterations) are kept, and an unfinished run goes on from its checkpoints (:func:`run_one`).
    """
    rows: list[dict[str, Any]] = []
    tag = "-".join(harnesses) + ("" if tuple(worlds) == WORLDS else "-" + "-".join(map(str, worlds))) + size_tag(size)
    tag += f"-c{children}" if children else ""
    out = CACHE / f"results-{tag}.json"  # runs of other worlds, side by side, write their own files
    done = _finished(out, size, children, iterations) if resume else {}
    for harness in harnesses:
        for seed in worlds:
            if (seed, harness) in done:
                rows.append(done[seed, harness])
                continue
            rows.append({**run_one(seed, harness, iterations, size, children, resume), "size": size,
                         "children": children, "iterations": iterations})
            console.print(table(rows))
            CACHE.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(rows, indent=1, default=float))
    return summary(rows)


def _finished(out: Path, size: dict[str, Any], children: int | None, iterations: int) -> dict[tuple[int, str], Any]:
    """The rows of a results file made with these settings, by (world, seed harness)."""
    if not out.exists():
        return {}
    try:
        rows = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--resume: {out} cannot be read ({exc}); move it aside to run its worlds anew") from exc
    return {(r["world"], r["seed_harness"]): r for r in rows
            if r.get("size") == size and r.get("children") == children and r.get("iterations") == iterations}


MF_SAVING = 3.0
"""Issue 19's multi-fidelity target: the same decisions as full validation for at least this many times fewer
selection evaluations."""


def summary(rows: list[dict[str, Any]]) -> int:
    """The verdict over the rows against each of the issue's targets, printed apart (0 when all are met)."""
    uni = [r for r in rows if r["seed_harness"] == "uniform"]
    scan = [r for r in rows if r["seed_harness"] == "scan_refine"]
    ok_uni = sum(verdict(r) == "gain" for r in uni) >= min(4, len(uni)) and not any(
        verdict(r) == "significant loss" for r in uni)
    ok_scan = sum(verdict(r) in ("gain", "cheaper, no loss") for r in scan) >= min(3, len(scan))
    mf = [r["mf"] for r in rows if r.get("mf")]
    full, fewer = sum(m["evaluations_full"] for m in mf), sum(m["evaluations_mf"] for m in mf)
    same, decisions = sum(m["same"] for m in mf), sum(m["decisions"] for m in mf)
    ok_mf = bool(mf) and same == decisions and full >= MF_SAVING * fewer

    def said(ok: bool, measured: list[Any]) -> str:
        return "not run" if not measured else "PASS" if ok else "FAIL"

    console.print(f"uniform: {sum(verdict(r) == 'gain' for r in uni)} of {len(uni)} worlds with a significant gain "
                  f"at <= 1.1x visual tokens -> {said(ok_uni, uni)}; scan_refine: "
                  f"{sum(verdict(r) in ('gain', 'cheaper, no loss') for r in scan)} of {len(scan)} cheaper without "
                  f"loss or better at <= 1.0x -> {said(ok_scan, scan)}; multi-fidelity: {same} / {decisions} "
                  f"decisions as full validation, {full / max(1, fewer):.2f}x fewer selection evaluations "
                  f"(>= {MF_SAVING:g}x asked) -> {said(ok_mf, mf)}")
    return 0 if ok_uni and ok_scan and ok_mf else 1


def stored(paths: list[Path], markdown: bool = False, replay_mf: bool = False) -> int:
    """The table and the verdict of runs stored in results files (``--from-results``).

    ``replay_mf``: multi-fidelity against full validation replayed again on each row's run (beside its results
    file) with the current screening, instead of the figures stored when it ran. ``markdown``: the table as the
    README and the benchmarks page show it.
    """
    rows = []
    for path in paths:
        for r in json.loads(path.read_text()):
            wide = f"-c{r['children']}" if r.get("children") else ""
            name = f"world{r['world']}{size_tag(r.get('size', SIZE))}-{r['seed_harness']}{wide}"
            run_dir = path.parent / name / "run"
            if replay_mf and run_dir.is_dir():
                r["mf"] = mf_agreement(run_dir)
            if "visual_seed" not in r and RunDir(run_dir).comparison.exists():
                r.update(_visual_from(RunDir(run_dir).comparison))
            rows.append(r)
    if markdown:
        print(markdown_table(rows))
    else:
        console.print(table(rows))
    return summary(rows)


def _visual_from(path: Path) -> dict[str, float]:
    """Seed and evolved visual tokens a test question from a run's comparison (none if OCR read: not stored there)."""
    try:
        cmp = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path} cannot be read ({exc}); move its run folder aside to print the stored row") from exc
    return {} if any(cmp[side].get("ocr_calls_per_question", 0) for side in ("seed", "best")) else {
        f"visual_{key}": cmp[side]["image_tokens_per_question"] + cmp[side]["video_tokens_per_question"]
        for key, side in (("seed", "seed"), ("evolved", "best"))}


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (what the README and docs/benchmarks.md paste, with the command)."""
    lines = ["| world | seed | test score seed -> evolved (paired p) | per kind / evidence (p) | visual tokens | "
             "accepted / proposed | test would reject | multi-fidelity = full (evaluations full / mf) | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        groups = "; ".join(f"{g['group']} {g['seed']:.3f} -> {g['evolved']:.3f} ({fmt_p(g['p'])})" for g in r["groups"])
        world = f"{r['world']} (speaks)" if r["world"] in SPEAKING else str(r["world"])
        videos = f"; {r['videos_gaining']} / {r['videos']} videos gain, {fmt_p(r['video_p'])}" if "videos" in r else ""
        lines.append(f"| {world} | `{r['seed_harness']}` | {r['score_seed']:.3f} -> {r['score_evolved']:.3f} "
                     f"({fmt_p(r['score_p'])}{videos}) | {groups} | {ratios(r)} | {r['accepted']} / {r['proposed']} | "
                     f"{r['test_would_reject']} / {r['accepted']} | {_mf(r)} | {verdict(r)} |")
    return "\n".join(lines)


def fmt_p(p: float) -> str:
    """A p-value as the tables print it."""
    return "<0.001" if p < 0.001 else f"{p:.3f}"
