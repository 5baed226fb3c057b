"""Grounding benchmarks: VUE-TR, VUE-TR-V2, QVHighlights, ExtremeWhenBench, Charades-STA, CoMET-Bench."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from videvolve.datasets.benchmarks.registry import (
    Benchmark,
    Pair,
    by_key,
    intervals,
    register,
    write_json,
    write_jsonl,
)
from videvolve.datasets.loaders import build_tasks, find_video, read_json_records
from videvolve.errors import InputNotFoundError, TaskFormatError
from videvolve.metrics import (
    parse_extremewhen,
    render_extremewhen,
    score_charades,
    score_comet,
    score_extremewhen,
    score_qvhighlights,
    score_vue_tr,
)
from videvolve.tasks import Interval, Task, read_text


def _vue(version: int) -> Benchmark:
    source = "vue-tr" if version == 1 else "vue-tr-v2"

    def load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
        return build_tasks(path, read_json_records(path), lambda r: {
            "id": f"{source}-{r['query_id']}", "video_id": str(r["video_id"]),
            "video": str(find_video(videos, str(r["video_id"]))), "kind": "grounding", "question": r["query"],
            "answer": [Interval(start=s, end=e) for s, e in r["gt"]], "duration": r["duration"], "source": source,
            "meta": {"query_id": r["query_id"],
                     **{k: r[k] for k in ("duration_category", "query_format", "query_modality") if k in r}}})

    def write(pairs: Sequence[Pair], out: Path) -> Path:
        return write_json(out / f"submission_{source}.json", [
            {"query_id": t.meta.get("query_id"), "video_id": t.video_id, "duration": t.duration, "query": t.question,
             "answer": intervals(p), "task": "temporal_retrieval"} for t, p in pairs])

    def score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
        return score_vue_tr(read_json_records(gt), read_json_records(pred), version)

    return Benchmark(source, "grounding", load, write, score)


register(_vue(1))
register(_vue(2))


def _qvh_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    def make(r: dict[str, Any]) -> dict[str, Any]:
        if "relevant_windows" not in r:
            raise ValueError("no relevant_windows (a test file without ground truth cannot become tasks)")
        return {"id": f"qvhighlights-{r['qid']}", "video_id": str(r["vid"]), "video": str(find_video(videos, r["vid"])),
                "kind": "grounding", "question": r["query"],
                "answer": [Interval(start=s, end=e) for s, e in r["relevant_windows"]], "duration": r["duration"],
                "source": "qvhighlights", "meta": {"qid": r["qid"], "vid": r["vid"]}}

    return build_tasks(path, read_json_records(path), make)


def _qvh_write(pairs: Sequence[Pair], out: Path) -> Path:
    return write_jsonl(out / "submission_qvhighlights.jsonl", [
        {"qid": t.meta.get("qid"), "query": t.question, "vid": t.meta.get("vid"),
         "pred_relevant_windows": [[s, e, 1.0] for s, e in intervals(p)] or [[0.0, 0.0, 0.0]],
         "pred_saliency_scores": []} for t, p in pairs])


register(Benchmark("qvhighlights", "grounding", _qvh_load, _qvh_write,
                   lambda gt, pred, o: score_qvhighlights(read_json_records(gt), read_json_records(pred)),
                   "an empty prediction is written as the window [0, 0] (the official scorer needs one)"))


def _ewb_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    return build_tasks(path, read_json_records(path), lambda r: {
        "id": f"ewb-{r['qid']}", "video_id": str(r["video_id"]), "video": str(find_video(videos, str(r["video_id"]))),
        "kind": "grounding", "question": r["question"], "answer": [Interval(start=r["correct_interval"][0],
                                                                          end=r["correct_interval"][1])],
        "duration": r.get("video_duration_s"), "source": "extremewhenbench",
        "meta": {"qid": r["qid"], **{k: r[k] for k in ("category", "source_corpus") if k in r}}})


def _ewb_write(pairs: Sequence[Pair], out: Path) -> Path:
    rows = []
    for t, p in pairs:
        ivs = intervals(p)
        first = min(ivs) if ivs else None  # one interval per query: the earliest
        rows.append({"qid": t.meta.get("qid"), "response": render_extremewhen(first) if first else
                     "The event does not happen in the video.", "interval": first})
    return write_jsonl(out / "submission_extremewhenbench.jsonl", rows)


def _ewb_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    preds = by_key(read_json_records(pred), "qid", pred)
    rows = []
    for r in read_json_records(gt):
        if "correct_interval" not in r or "qid" not in r:
            raise TaskFormatError(gt, [f"{gt}: each ground-truth row needs 'qid' and 'correct_interval'"])
        p = preds.get(str(r["qid"]), {})
        rows.append({"correct_interval": r["correct_interval"], "response": p.get("response", ""),
                     "interval": None if opts.get("text_only") else p.get("interval")})
    return score_extremewhen(rows, parser=opts.get("parser", "lmms"))


register(Benchmark("extremewhenbench", "grounding", _ewb_load, _ewb_write, _ewb_score,
                   "one interval per query (the earliest predicted one), also rendered as 'start - end' text"))


def _charades_rows(path: Path) -> list[tuple[str, float, float, str]]:
    rows, problems = [], []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            head, sentence = line.split("##", 1)
            vid, s, e = head.split()
            rows.append((vid, float(s), float(e), sentence.strip()))
        except ValueError:
            problems.append(f"{path}:{i}: expected 'VIDEO START END##sentence'")
    if problems:
        raise TaskFormatError(path, problems)
    return rows


def _charades_lengths(meta: Path) -> dict[str, float]:
    """Charades_v1_test.csv's ``length`` by ``id``; errors name the file and line."""
    if not meta.is_file():
        raise InputNotFoundError(f"durations file not found: {meta} (Charades_v1_test.csv, or leave out --meta)")
    reader = csv.DictReader(io.StringIO(read_text(meta), newline=""))
    if not {"id", "length"} <= set(reader.fieldnames or []):
        raise TaskFormatError(meta, [f"{meta}: no 'id' and 'length' columns (is it Charades_v1_test.csv?)"])
    lengths, problems = {}, []
    for r in reader:
        try:
            lengths[r["id"]] = float(r["length"])
        except (TypeError, ValueError):
            problems.append(f"{meta}:{reader.line_num}: length {r['length']!r} is not a number of seconds")
    if problems:
        raise TaskFormatError(meta, problems)
    return lengths


def _charades_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    meta = meta or next((p for p in (path.parent / "Charades_v1_test.csv",) if p.exists()), None)
    lengths = _charades_lengths(meta) if meta is not None else {}
    records = [{"i": i, "vid": v, "s": s, "e": e, "q": q} for i, (v, s, e, q) in enumerate(_charades_rows(path))]
    return build_tasks(path, records, lambda r: {
        "id": f"charades-{r['i']}", "video_id": r["vid"], "video": str(find_video(videos, r["vid"])),
        "kind": "grounding", "question": r["q"],
        "answer": [Interval(start=min(r["s"], r["e"]), end=max(r["s"], r["e"]))],
        "duration": lengths.get(r["vid"]), "source": "charades-sta", "meta": {"qid": r["i"]}})


def _charades_write(pairs: Sequence[Pair], out: Path) -> Path:
    rows = []
    for t, p in pairs:
        ivs = intervals(p)
        top = max(ivs, key=lambda x: x[1] - x[0]) if ivs else None
        rows.append({"qid": t.meta.get("qid"), "video": t.video_id, "query": t.question, "timestamp": top,
                     "response": render_extremewhen(top) if top else ""})
    return write_jsonl(out / "submission_charades-sta.jsonl", rows)


def _charades_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    preds = by_key(read_json_records(pred), "qid", pred)
    rows = _charades_rows(gt)
    out: list[tuple[float, float] | None] = []
    for i in range(len(rows)):
        p = preds.get(str(i), {})
        ts = p.get("timestamp")
        out.append((float(ts[0]), float(ts[1])) if ts else parse_extremewhen(str(p.get("response", ""))))
    return score_charades(out, [(s, e) for _, s, e, _ in rows])


register(Benchmark("charades-sta", "grounding", _charades_load, _charades_write, _charades_score,
                   "durations from Charades_v1_test.csv (next to the annotations, or --meta); top-1 interval"))


def _comet_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    return build_tasks(path, read_json_records(path), lambda r: {
        "id": f"comet-{r['query_id']}", "video_id": str(r["video_id"]),
        "video": str(find_video(videos, str(r["video_id"]))), "kind": "grounding", "question": r["query"],
        "answer": [Interval(start=s, end=e) for s, e in r["gt"]], "duration": r.get("duration"),
        "source": "comet-bench", "meta": {"query_id": r["query_id"]}})


def _comet_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    truth = read_json_records(gt)
    preds = by_key(read_json_records(pred), "query_id", pred)
    return score_comet([preds.get(str(r["query_id"]), {}).get("answer") or [] for r in truth],
                       [r["gt"] for r in truth])


register(Benchmark("comet-bench", "grounding", _comet_load,
                   lambda pairs, out: write_json(out / "submission_comet-bench.json", [
                       {"query_id": t.meta.get("query_id"), "answer": intervals(p)} for t, p in pairs]),
                   _comet_score, "schema assumed (query_id, video_id, query, gt, duration); metrics unverified"))
