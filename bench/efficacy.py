"""Does evolution help on data it never saw? Does prototyping with trials make the heuristic editor better?

``--compare protocol`` (the default): the efficacy protocol of ``bench/protocol.py`` -- five fresh worlds (one
speaking), from `uniform` and `scan_refine`, the test split judged paired; see that module.

``--compare seed`` (the first demo's comparison): for each world seed a SynthWorld (12 videos of 10 minutes, 20
questions each), `evolve` from `uniform` with SimVLM and the heuristic editor for 6 iterations, then the seed and
the evolved harness on the held-out test split, with paired tests (bootstrap on the per-question score and on
grounding IoU, exact McNemar on mcq).

``--compare editors``: on the same worlds, the heuristic editor that prototypes its best operators with trials on
the batch (the default) against ``--no-trials`` (its first guess goes to the gate): accepted / tried, selection-set
evaluations, trial task runs, the best harness's test mcq accuracy, grounding mIoU, visual tokens and frames per
question, and the paired bootstrap and McNemar tests between the two best harnesses on the same test questions.

``--compare speech``: on a speaking SynthWorld (``synth --narration``: 16 videos of 10 minutes, 20 questions each,
40 % answered by the pictures only, 30 % by the words only, 30 % needing both; 7 test videos), `evolve` from
`uniform` with the heuristic editor (trials on) under ``--cost-metric visual_tokens+text`` (a transcript token
weighs as much as a visual token: reading is not free), then per question type the seed and the evolved harness on
the test split: mcq accuracy (exact McNemar), grounding mIoU (paired bootstrap), visual and text tokens per question;
and the same for the run's ``read_transcript`` revision alone, when later revisions were accepted on top of it.

Usage: ``python bench/efficacy.py [--compare protocol|seed|editors|speech] [--worlds ...] [--harness uniform
scan_refine] [--seeds 0 1 2] [--iterations 6] [--resume]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from protocol import SIZE, WORLDS, protocol, stored
from rich.console import Console
from rich.table import Table

from videvolve.config import RuntimeSettings
from videvolve.datasets.synthworld import generate_world
from videvolve.evaluation.experiment import compare_on_test
from videvolve.evaluation.solve import solve_tasks
from videvolve.evaluation.summary import summarize
from videvolve.folderlock import remove_tree
from videvolve.graph.driver import evolve
from videvolve.loop.context import Context
from videvolve.metrics import mcnemar, paired_bootstrap
from videvolve.models.cost import cost_model
from videvolve.models.sim import SimVLM
from videvolve.skill_library.harness import load_harness
from videvolve.tasks import read_tasks

CACHE = Path(__file__).resolve().parent / ".cache" / "efficacy"
console = Console(width=150)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--compare", choices=["protocol", "seed", "editors", "speech"], default="protocol")
    parser.add_argument("--worlds", type=int, nargs="+", default=list(WORLDS))
    parser.add_argument("--harness", nargs="+", default=["uniform", "scan_refine"])
    parser.add_argument("--videos", type=int, default=SIZE["videos"], help="--compare protocol: videos per world")
    parser.add_argument("--minutes", type=float, default=SIZE["minutes"], help="--compare protocol: minutes each")
    parser.add_argument("--questions", type=int, default=SIZE["questions"],
                        help="--compare protocol: questions per video")
    parser.add_argument("--children", type=int, default=None,
                        help="--compare protocol: candidates the editor proposes each iteration (default: evolve's)")
    parser.add_argument("--resume", action="store_true",
                        help="--compare protocol: keep the worlds this command finished before and go on with an "
                             "unfinished run from its checkpoints (default: every world anew)")
    parser.add_argument("--no-trials", action="store_true", help="--compare seed with the editor's first guesses")
    parser.add_argument("--from-results", type=Path, nargs="+", metavar="JSON",
                        help="--compare protocol: print the table and verdict of stored results files (runs of "
                             "different worlds made side by side)")
    parser.add_argument("--markdown", action="store_true", help="--from-results: the table in Markdown")
    parser.add_argument("--replay-mf", action="store_true",
                        help="--from-results: replay multi-fidelity against full validation on the stored runs with "
                             "the current screening")
    args = parser.parse_args()
    if args.compare == "protocol" and args.from_results:
        return stored(args.from_results, args.markdown, args.replay_mf)
    if args.compare == "protocol":
        size = {"videos": args.videos, "minutes": args.minutes, "questions": args.questions}
        return protocol(args.worlds, args.harness, args.iterations, size, args.children, args.resume)
    if args.compare == "editors":
        return editors(args.seeds, args.iterations)
    if args.compare == "speech":
        return speech(args.seeds, args.iterations)
    table = Table(title=f"evolved vs seed (uniform) on held-out test splits, {args.iterations} iterations each")
    for col in ("world seed", "accepted / tried", "mcq acc. seed -> evolved", "McNemar p", "grounding mIoU "
                "seed -> evolved", "bootstrap p", "frames/q seed -> evolved", "minutes"):
        table.add_column(col, justify="right")
    rows = []
    for seed in args.seeds:
        started = time.time()
        root = CACHE / f"seed{seed}"
        remove_tree(root / "run")
        remove_tree(root / "memory")
        if not (root / "world" / "tasks.jsonl").exists():
            generate_world(root / "world", videos=12, minutes=10, seed=seed, questions=20)
        ctx = Context(run_dir=str(root / "run"), run_id=f"efficacy{seed}", tasks=str(root / "world" / "tasks.jsonl"),
                      seed_harness="uniform", memory=str(root / "memory"), iterations=args.iterations, batch=8,
                      seed=seed, runtime=RuntimeSettings(concurrency=2), cache=str(root / "cache.sqlite"),
                      no_trials=args.no_trials)
        final = evolve(ctx)
        history = final.get("history", [])
        cmp = compare_on_test(root / "run", SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
        s, b = cmp.seed, cmp.best
        accepted = sum(1 for h in history if h["decision"] == "accepted")
        tried = sum(1 for h in history if h["decision"] in ("accepted", "rejected", "dropped"))
        rows.append({"seed": seed, **cmp.to_dict()})
        table.add_row(str(seed), f"{accepted} / {tried}",
                      f"{s['mcq']['accuracy']:.3f} -> {b['mcq']['accuracy']:.3f}", f"{cmp.mcq_p:.4f}",
                      f"{s['grounding']['miou']:.3f} -> {b['grounding']['miou']:.3f}", f"{cmp.grounding_p:.4f}",
                      f"{s['frames_per_question']:.1f} -> {b['frames_per_question']:.1f}",
                      f"{(time.time() - started) / 60:.1f}")
        console.print(table)
    (CACHE / "results.json").write_text(json.dumps(rows, indent=1, default=float))
    ok = all(r["best"]["grounding"]["miou"] > r["seed"]["grounding"]["miou"] and
             r["best"]["mcq"]["accuracy"] > r["seed"]["mcq"]["accuracy"] and
             r["best"]["frames_per_question"] <= 1.1 * r["seed"]["frames_per_question"] for r in rows)
    console.print(f"{'PASS' if ok else 'FAIL'}: on every seed the evolved harness has higher mcq accuracy and "
                  "grounding mIoU on the test split, within +10 % frames")
    return 0 if ok else 1


# ---- the prototyping heuristic editor (trials on the batch) against its first guess (--no-trials) ----


def selection_evaluations(run: Path) -> int:
    """(version, selection question) evaluations a run paid for."""
    return sum(1 for _ in run.glob("evals/*/selection/results/*.json"))


def editors(seeds: list[int], iterations: int) -> int:
    """Both editors from the same seed harness on the same world; their best harnesses on the test split, paired."""
    table = Table(title=f"heuristic editor with trials vs --no-trials, {iterations} iterations, test split")
    for col in ("world seed", "editor", "accepted / tried", "selection evals", "trial task runs", "mcq acc.",
                "grounding mIoU", "visual tokens / q", "frames / q", "score diff (trials - no) [p]", "McNemar p"):
        table.add_column(col, justify="right")
    rows = []
    vs = Table(title="each editor's best harness against the seed (uniform) on the test split, paired")
    for col in ("world seed", "editor", "mcq acc. seed -> evolved", "McNemar p", "grounding mIoU seed -> evolved",
                "bootstrap p (score)", "visual tokens / q seed -> evolved", "frames / q"):
        vs.add_column(col, justify="right")
    for seed in seeds:
        root = CACHE / f"seed{seed}"
        if not (root / "world" / "tasks.jsonl").exists():
            generate_world(root / "world", videos=12, minutes=10, seed=seed, questions=20)
        test = [t for t in read_tasks(root / "world" / "tasks.jsonl") if t.split == "test"]
        out: dict[str, dict] = {}
        for name, no_trials in (("trials", False), ("no-trials", True)):
            run = root / f"editor-{name}"
            remove_tree(run)
            remove_tree(root / f"memory-{name}")
            ctx = Context(run_dir=str(run), run_id=f"efficacy{seed}-{name}", tasks=str(root / "world" / "tasks.jsonl"),
                          seed_harness="uniform", memory=str(root / f"memory-{name}"), iterations=iterations,
                          batch=8, seed=seed, no_trials=no_trials, runtime=RuntimeSettings(concurrency=2),
                          cache=str(root / "cache.sqlite"))
            final = evolve(ctx)
            history = final.get("history", [])
            cmp = compare_on_test(run, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2))
            best = load_harness(run / "harnesses" / cmp.best["version"])
            results = solve_tasks(best, test, SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2),
                                  run / "test" / best.version_id)  # stored by compare_on_test: read back
            out[name] = {"history": history, "spent": final.get("spent", {}), "best": cmp.best, "results": results,
                         "selection": selection_evaluations(run), "cmp": cmp.to_dict()}
        a, b = out["trials"]["results"], out["no-trials"]["results"]
        overall = paired_bootstrap([y.score for y in b], [x.score for x in a])
        m = [(y.score == 1, x.score == 1) for x, y in zip(a, b, strict=True) if x.kind == "mcq"]
        mc = mcnemar([u for u, _ in m], [v for _, v in m]).p_value if m else None
        for name in ("trials", "no-trials"):
            o = out[name]
            accepted = sum(1 for h in o["history"] if h["decision"] == "accepted")
            tried = sum(1 for h in o["history"] if h["decision"] in ("accepted", "rejected", "dropped"))
            s = o["best"]
            tokens = s["image_tokens_per_question"] + s["video_tokens_per_question"]
            diff = f"{overall.diff:+.3f} [{overall.p_value:.3f}]" if name == "trials" else ""
            mcp = f"{mc:.3f}" if name == "trials" and mc is not None else ""
            table.add_row(str(seed), name, f"{accepted} / {tried}", str(o["selection"]),
                          str(int(o["spent"].get("editor_trial_tasks", 0))), f"{s['mcq']['accuracy']:.3f}",
                          f"{s['grounding']['miou']:.3f}", f"{tokens:,.0f}", f"{s['frames_per_question']:.1f}", diff,
                          mcp)
            rows.append({"seed": seed, "editor": name, "accepted": accepted, "tried": tried,
                         "selection_evaluations": o["selection"], "spent": o["spent"], "best": s,
                         "score_diff_trials_minus_no": overall.diff, "score_p": overall.p_value, "mcnemar_p": mc,
                         "seed_vs_evolved": o["cmp"]})
            vs.add_row(*seed_vs_evolved_row(seed, name, o["cmp"]))
        console.print(table)
        console.print(vs)
    (CACHE / "editors.json").write_text(json.dumps(rows, indent=1, default=float))
    return 0


def seed_vs_evolved_row(seed: int, editor: str, cmp: dict) -> list[str]:
    """One row: the seed and the evolved harness on the same test questions."""
    a, b = cmp["seed"], cmp["best"]
    va = a["image_tokens_per_question"] + a["video_tokens_per_question"]
    vb = b["image_tokens_per_question"] + b["video_tokens_per_question"]
    mcq_p = "" if cmp["mcq_p"] is None else f"{cmp['mcq_p']:.4f}"
    return [str(seed), editor, f"{a['mcq']['accuracy']:.3f} -> {b['mcq']['accuracy']:.3f}", mcq_p,
            f"{a['grounding']['miou']:.3f} -> {b['grounding']['miou']:.3f}", f"{cmp['score_p']:.4f}",
            f"{va:,.0f} -> {vb:,.0f} ({vb / va:.2f}x)" if va else f"{va:,.0f} -> {vb:,.0f}",
            f"{a['frames_per_question']:.0f} -> {b['frames_per_question']:.0f}"]


# ---- a speaking world: does the loop learn to read where reading pays, and keep what it sees? ----

SPEECH_FRACTIONS = {"train": 0.375, "selection": 0.1875, "test": 0.4375}


def _tokens(rs: list, key: str) -> float:
    return sum(getattr(r.usage, key) for r in rs) / len(rs) if rs else 0.0


def speech_rows(tasks: list, seed_res: list, best_res: list) -> list[list[str]]:
    """Per evidence type (and all together): accuracy, mIoU, tokens, seed -> evolved, with paired tests."""
    rows = []
    for kind in ("pictures", "words", "both", "all"):
        idx = [i for i, t in enumerate(tasks) if kind == "all" or t.meta.get("evidence") == kind]
        ts = [tasks[i] for i in idx]
        a, b = [seed_res[i] for i in idx], [best_res[i] for i in idx]
        sa, sb = summarize(ts, a), summarize(ts, b)
        m = [(x.score == 1, y.score == 1) for x, y in zip(a, b, strict=True) if x.kind == "mcq"]
        g = [(x.score, y.score) for x, y in zip(a, b, strict=True) if x.kind == "grounding"]
        mp = f"{mcnemar([u for u, _ in m], [v for _, v in m]).p_value:.3f}" if m else ""
        gp = f"{paired_bootstrap([u for u, _ in g], [v for _, v in g]).p_value:.3f}" if g else ""
        va = _tokens(a, "image_tokens") + _tokens(a, "video_tokens")
        vb = _tokens(b, "image_tokens") + _tokens(b, "video_tokens")
        rows.append([kind, f"{len(m)} / {len(g)}",
                     f"{sa.get('mcq', {}).get('accuracy', 0):.3f} -> {sb.get('mcq', {}).get('accuracy', 0):.3f}", mp,
                     f"{sa.get('grounding', {}).get('miou', 0):.3f} -> {sb.get('grounding', {}).get('miou', 0):.3f}",
                     gp, f"{va:,.0f} -> {vb:,.0f}",
                     f"{_tokens(a, 'transcript_tokens'):.0f} -> {_tokens(b, 'transcript_tokens'):.0f}"])
    return rows


def speech(seeds: list[int], iterations: int) -> int:
    """Evolve `uniform` on a speaking world; the seed and the evolved harness per question type on the test split."""
    out = []
    for seed in seeds:
        started = time.time()
        root = CACHE / f"speech{seed}"
        if not (root / "world" / "tasks.jsonl").exists():
            generate_world(root / "world", videos=16, minutes=10, seed=seed, questions=20, narration=True,
                           fractions=SPEECH_FRACTIONS)
        for name in ("run", "memory"):
            remove_tree(root / name)
        ctx = Context(run_dir=str(root / "run"), run_id=f"speech{seed}", tasks=str(root / "world" / "tasks.jsonl"),
                      seed_harness="uniform", memory=str(root / "memory"), iterations=iterations, batch=8, seed=seed,
                      runtime=RuntimeSettings(concurrency=2), cache=str(root / "cache.sqlite"),
                      cost_metric="visual_tokens+text", text_token_weight=1.0)
        history = evolve(ctx).get("history", [])
        vlm, cost, runtime = SimVLM(), cost_model("qwen2.5-vl"), RuntimeSettings(concurrency=2)
        cmp = compare_on_test(root / "run", vlm, cost, runtime)
        test = [t for t in read_tasks(root / "world" / "tasks.jsonl") if t.split == "test"]
        res = {k: solve_tasks(load_harness(root / "run" / "harnesses" / v), test, vlm, cost, runtime,
                              root / "run" / "test" / v)  # stored by compare_on_test: read back
               for k, v in (("seed", cmp.seed["version"]), ("best", cmp.best["version"]))}
        accepted = [h for h in history if h["decision"] == "accepted"]
        tried = sum(1 for h in history if h["decision"] in ("accepted", "rejected", "dropped"))
        minutes = (time.time() - started) / 60
        tables = [(f"world {seed}: uniform -> evolved ({len(accepted)} of {tried} accepted, {iterations} iterations, "
                   f"{minutes:.1f} min), test split, by what the answer needs", speech_rows(test, *res.values()))]
        reading = next((h["candidate"] for h in accepted if "read_transcript" in str(h.get("operator"))), None)
        if reading and reading != cmp.best["version"]:  # the reading revision alone: what reading did by itself
            read = solve_tasks(load_harness(root / "run" / "harnesses" / reading), test, vlm, cost, runtime,
                               root / "run" / "test" / reading)
            tables.append((f"world {seed}: uniform -> its read_transcript revision alone", speech_rows(
                test, res["seed"], read)))
        rows = []
        for title, table_rows in tables:
            table = Table(title=title)
            for col in ("answer needs", "mcq / grounding q", "mcq acc. seed -> evolved", "McNemar p",
                        "grounding mIoU seed -> evolved", "bootstrap p", "visual tokens / q", "text tokens / q"):
                table.add_column(col, justify="right")
            for row in table_rows:
                table.add_row(*row)
            console.print(table)
            rows.append({"title": title, "rows": table_rows})
        config = (root / "run" / "harnesses" / cmp.best["version"] / "config.toml").read_text()
        console.print("evolved config: " + "; ".join(x for x in config.splitlines() if x and not x.startswith("#")))
        for h in history:
            console.print(f"  iteration {h.get('iteration')}: {h.get('operator')} {h['decision']}: {h['reason']}"[:200])
        out.append({"seed": seed, "rows": rows, "history": history, "config": config, "cmp": cmp.to_dict()})
    (CACHE / "speech.json").write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
