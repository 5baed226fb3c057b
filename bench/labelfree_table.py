"""The tables and verdicts of ``bench/labelfree.py`` (issue 22's targets), from its rows.

A row is one arm on one world (``bench/.cache/labelfree/<world>/<arm>/result.json``); ``commit`` names the code
that made it (rows are reused across commits unless ``--fresh``, so the table says which code each one measured).
"""

from __future__ import annotations

from typing import Any

from protocol import fmt_p
from rich.console import Console
from rich.table import Table

ARMS = ("gold", "label-free", "teacher")
SEED_HARNESS = "uniform"
KEEP = 0.5
"""The label-free arm keeps at least this share of the gold arm's test gain."""
TEACHER_MARGIN, TEACHER_TOKENS = 0.03, 0.5
console = Console(width=190)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 1.0


def losses(row: dict[str, Any]) -> list[str]:
    """Kinds on which the arm's best is significantly worse than the seed on the test split."""
    return [g["group"] for g in row["groups"] if g["evolved"] < g["seed"] and g["p"] < 0.05]


def world_verdict(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's two targets on one world."""
    gold, free, teacher = rows.get("gold"), rows.get("label-free"), rows.get("teacher")
    out: dict[str, Any] = {}
    if gold and free:
        g, f = gold["score_diff"], free["score_diff"]
        kept = f / g if g > 0 else None
        out["kept"] = kept
        # at least half of gold's gain: f >= KEEP x g (where gold gained nothing, not losing more than half of its loss)
        out["label_free_ok"] = f >= KEEP * g and not losses(free)
        out["label_free_why"] = (f"gold arm has no test gain to keep ({g:+.3f}); label-free {f:+.3f}" if kept is None
                                 else f"keeps {kept:.2f} of gold's gain {g:+.3f}") + \
            (f"; significant loss on {', '.join(losses(free))}" if losses(free) else "")
    if teacher:
        ratio = _ratio(teacher["tokens_best"], teacher["tokens_teacher"])
        close = teacher["score_best"] >= teacher["score_teacher"] - TEACHER_MARGIN
        out["teacher_ok"] = close and ratio <= TEACHER_TOKENS
        out["teacher_why"] = (f"best - teacher {teacher['vs_teacher_diff']:+.3f} (p {fmt_p(teacher['vs_teacher_p'])}) "
                              f"at {ratio:.2f}x its tokens")
    return out


def table(seed: int, rows: dict[str, dict[str, Any]]) -> Table:
    """One world: each arm's best against the seed on the gold test split (and the teacher's row)."""
    any_row = next(iter(rows.values()))
    t = Table(title=f"world {seed}: each arm's best vs the seed ({SEED_HARNESS}) on the gold test split "
                    f"({any_row['test_questions']} questions, paired)")
    for col in ("arm", "train / selection labels", "score seed -> best [p]", "gain",
                "per kind: seed -> best [p]", "vis. tokens/q seed -> best", "best vs teacher [p]",
                "tokens vs teacher", "accepted / proposed", "min", "commit"):
        t.add_column(col, justify="right")
    for arm in ARMS:
        r = rows.get(arm)
        if r is None:
            continue
        groups = "\n".join(f"{g['group']} {g['seed']:.3f}->{g['evolved']:.3f} [{g['p']:.3f}]" for g in r["groups"])
        vs = tok = ""
        if arm == "teacher":
            vs = f"{r['score_teacher']:.3f} -> {r['score_best']:.3f} ({r['vs_teacher_diff']:+.3f}) " \
                 f"[{r['vs_teacher_p']:.3f}]"
            tok = f"{r['tokens_teacher']:,.0f} -> {r['tokens_best']:,.0f} " \
                  f"({_ratio(r['tokens_best'], r['tokens_teacher']):.2f}x)"
        t.add_row(arm, r.get("labels_short", r["labels"]),
                  f"{r['score_seed']:.3f} -> {r['score_best']:.3f} [{r['score_p']:.3f}]",
                  f"{r['score_diff']:+.3f}", groups,
                  f"{r['tokens_seed']:,.0f} -> {r['tokens_best']:,.0f} "
                  f"({_ratio(r['tokens_best'], r['tokens_seed']):.2f}x)", vs, tok,
                  f"{r['accepted']} / {r['proposed']}", f"{r['minutes']:.1f}", r.get("commit", "not recorded"))
    return t


def summary(by_world: dict[int, dict[str, dict[str, Any]]]) -> int:
    """One verdict line per world and one over all of them (0 when every world meets both targets)."""
    ok_all = True
    for seed, rows in by_world.items():
        v = world_verdict(rows)
        lf, te = v.get("label_free_ok", False), v.get("teacher_ok", False)
        ok_all &= lf and te
        free = (f"label-free {'meets' if lf else 'misses'} the target ({v['label_free_why']}; target >= {KEEP:.0%} "
                "of gold's gain, no significant loss on any kind)" if "label_free_why" in v else
                "label-free against gold not run")
        console.print(f"world {seed}: {free}; teacher arm "
                      + (f"{'meets' if te else 'misses'} it ({v['teacher_why']}; target within {TEACHER_MARGIN} of "
                         f"the teacher at <= {TEACHER_TOKENS}x its tokens)" if "teacher_why" in v else "not run"),
                      highlight=False, markup=False)
    pairs = [(rows["gold"]["score_diff"], rows["label-free"]["score_diff"]) for rows in by_world.values()
             if "gold" in rows and "label-free" in rows]
    if pairs:
        gold, free = sum(g for g, _ in pairs), sum(f for _, f in pairs)
        console.print(f"over {len(pairs)} world(s) the label-free arms gained {free:+.3f} on the test splits against "
                      f"the gold arms' {gold:+.3f} ({free / gold:.2f} of it)" if gold > 0 else
                      "the gold arms gained nothing on the test splits", highlight=False, markup=False)
    console.print(f"verdict over {len(by_world)} world(s): {'PASS' if ok_all else 'FAIL'}", highlight=False,
                  markup=False)
    return 0 if ok_all else 1


def markdown(by_world: dict[int, dict[str, dict[str, Any]]]) -> str:
    """Every world's arms as one Markdown table (what docs/benchmarks.md pastes, with the command)."""
    lines = ["| world | arm | train / selection labels | test score seed -> best (paired p) | per kind (p) | "
             "visual tokens / q | best vs teacher (p), tokens | accepted / proposed | commit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for seed, rows in by_world.items():
        for arm in ARMS:
            r = rows.get(arm)
            if r is None:
                continue
            groups = "; ".join(f"{g['group']} {g['seed']:.3f} -> {g['evolved']:.3f} ({fmt_p(g['p'])})"
                               for g in r["groups"])
            vs = (f"{r['score_teacher']:.3f} -> {r['score_best']:.3f} ({fmt_p(r['vs_teacher_p'])}), "
                  f"{_ratio(r['tokens_best'], r['tokens_teacher']):.2f}x" if arm == "teacher" else "")
            lines.append(f"| {seed} | {arm} | {r.get('labels_short', r['labels'])} | {r['score_seed']:.3f} -> "
                         f"{r['score_best']:.3f} ({fmt_p(r['score_p'])}) | {groups} | {r['tokens_seed']:,.0f} -> "
                         f"{r['tokens_best']:,.0f} | {vs} | {r['accepted']} / {r['proposed']} | "
                         f"{r.get('commit', 'not recorded')} |")
    return "\n".join(lines)
