"""Multiple-choice benchmarks: LVBench, MLVU, Video-MME, LongVideoBench, LSDBench, Video-Holmes.

Each writer renders the predicted letter the way the benchmark's official parser reads it back.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from videvolve.datasets.benchmarks.registry import (
    Benchmark,
    Pair,
    by_key,
    letter,
    register,
    span,
    write_json,
    write_jsonl,
)
from videvolve.datasets.loaders import build_tasks, find_subtitles, find_video, read_json_records
from videvolve.errors import TaskFormatError
from videvolve.metrics import mcq_accuracy, mlvu_m_avg
from videvolve.metrics.mcq import parse_lvbench, parse_mlvu
from videvolve.tasks import LETTERS, Task, parse_json, read_text

_INLINE = re.compile(r"^\s*\(([A-Z])\)\s*(.+?)\s*$", re.M)


def _lvbench_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    records = []
    for video in read_json_records(path):
        minutes = (video.get("video_info") or {}).get("duration_minutes")
        for qa in video.get("qa", []):
            records.append({**qa, "key": video.get("key"), "minutes": minutes})

    def make(r: dict[str, Any]) -> dict[str, Any]:
        options = dict(_INLINE.findall(r["question"]))
        question = r["question"].split("\n(A)")[0].strip()
        return {"id": f"lvbench-{r['uid']}", "video_id": str(r["key"]), "video": str(find_video(videos, str(r["key"]))),
                "kind": "mcq", "question": question, "options": [options[k] for k in sorted(options)],
                "answer": r["answer"], "duration": r["minutes"] * 60 if r.get("minutes") else None,
                "evidence": [span(r["time_reference"])] if r.get("time_reference") else [], "source": "lvbench",
                "meta": {"uid": r["uid"], "question_type": r.get("question_type", [])}}

    return build_tasks(path, records, make)


def _lvbench_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    answers = parse_json(read_text(pred), pred)
    if not isinstance(answers, dict):
        raise TaskFormatError(pred, [f"{pred}: LVBench's answers are one JSON object, uid -> answer letter"])
    truth = {str(qa["uid"]): qa["answer"] for v in read_json_records(gt) for qa in v.get("qa", [])}
    present = [u for u in answers if u in truth]  # the official denominator: uids present in the answer file
    right = sum(parse_lvbench(str(answers[u])) == truth[u] for u in present)
    return {"benchmark": "lvbench", "accuracy": right / len(present) if present else 0.0, "n": len(present),
            "missing": len(truth) - len(present)}


register(Benchmark("lvbench", "mcq", _lvbench_load,
                   lambda pairs, out: write_json(out / "submission_lvbench.json",
                                                 {str(t.meta.get("uid")): letter(p) for t, p in pairs if letter(p)}),
                   _lvbench_score, "no sample file here: built from the documented schema (video_info.meta.jsonl)"))


def _mlvu_records(path: Path) -> list[dict[str, Any]]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out = []
    for f in files:
        data = parse_json(read_text(f), f)
        groups = data.items() if isinstance(data, dict) else [(f.stem, data)]
        for stem, items in groups:
            if not isinstance(items, list):
                raise TaskFormatError(f, [f"{f}: {stem!r} is not a list of questions"])
            for i, r in enumerate(items):
                if not isinstance(r, dict):
                    raise TaskFormatError(f, [f"{f}: {stem!r}, record {i + 1} is not a JSON object"])
                if r.get("candidates"):  # the two generation tasks have no options
                    out.append({**r, "stem": stem, "index": i})
    return out


def _mlvu_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    def make(r: dict[str, Any]) -> dict[str, Any]:
        cands = list(r["candidates"])
        if r["answer"] not in cands:
            raise ValueError(f"answer {r['answer']!r} is not one of the candidates")
        stem = Path(r["video"]).stem
        return {"id": f"mlvu-{r['question_type']}-{r['index']}", "video_id": stem,
                "video": str(find_video(videos, stem)), "kind": "mcq", "question": r["question"], "options": cands,
                "answer": LETTERS[cands.index(r["answer"])], "duration": r.get("duration"), "source": "mlvu",
                "meta": {"question_type": r["question_type"], "index": r["index"]}}

    return build_tasks(path, _mlvu_records(path), make)


def _mlvu_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    preds = by_key(read_json_records(pred), "question_id", pred)
    per: dict[str, list[bool]] = defaultdict(list)
    for r in _mlvu_records(gt):
        qid = f"mlvu-{r['question_type']}-{r['index']}"
        gold = LETTERS[list(r["candidates"]).index(r["answer"])]
        per[r["question_type"]].append(parse_mlvu(str(preds.get(qid, {}).get("option", ""))) == gold)
    acc = {k: sum(v) / len(v) for k, v in per.items()}
    return {"benchmark": "mlvu", "m_avg": mlvu_m_avg(acc), "by_task": acc, "n": sum(len(v) for v in per.values())}


register(Benchmark("mlvu", "mcq", _mlvu_load,
                   lambda pairs, out: write_json(out / "submission_mlvu.json", [
                       {"question_id": t.id, "question_type": t.meta.get("question_type"), "option": letter(p)}
                       for t, p in pairs]),
                   _mlvu_score, "a task file, a folder of them, or one JSON object keyed by task; M-Avg over the MC "
                                "tasks present"))


def read_lenient_json(path: Path) -> Any:
    """JSON that may carry trailing commas (Video-MME's template does)."""
    return parse_json(re.sub(r",(\s*[}\]])", r"\1", read_text(path)), path)


def _videomme_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    records = [{"videoID": v.get("videoID"), **q, "video_id": v["video_id"], "category": v.get("duration"),
                "domain": v.get("domain")}
               for v in read_lenient_json(path) for q in v.get("questions", [])]
    subtitles: dict[str, str | None] = {}  # the subtitle of a video: subtitle/<YouTube videoID or video_id>.srt

    def subtitle(r: dict[str, Any]) -> str | None:
        names = [f"{r[k]}.srt" for k in ("videoID", "video_id") if r.get(k)]
        return subtitles.setdefault(names[0], find_subtitles(path, videos, names)) if names else None

    return build_tasks(path, records, lambda r: {
        "id": f"videomme-{r['question_id']}", "video_id": str(r["video_id"]),
        "video": str(find_video(videos, str(r["video_id"]))), "kind": "mcq", "question": r["question"],
        "options": [re.sub(r"^[A-Z]\.\s*", "", o) for o in r["options"]], "answer": r["answer"], "source": "videomme",
        "transcript": subtitle(r),
        "meta": {"question_id": r["question_id"], "task_type": r.get("task_type"), "duration_category": r["category"],
                 "domain": r.get("domain"), **({"videoID": r["videoID"]} if r.get("videoID") else {})}})


def _videomme_write(pairs: Sequence[Pair], out: Path) -> Path:
    videos: dict[str, dict[str, Any]] = {}
    for t, p in pairs:
        v = videos.setdefault(t.video_id, {"video_id": t.video_id, "duration": t.meta.get("duration_category"),
                                           "domain": t.meta.get("domain"), "questions": []})
        v["questions"].append({"question_id": t.meta.get("question_id"), "task_type": t.meta.get("task_type"),
                               "question": t.question, "options": [f"{LETTERS[i]}. {o}" for i, o in
                                                                   enumerate(t.options or [])],
                               "answer": t.answer, "response": letter(p)})
    return write_json(out / "submission_videomme.json", list(videos.values()))


def _videomme_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    truth = {q["question_id"]: q["answer"] for v in read_lenient_json(gt) for q in v.get("questions", [])}
    responses = {q["question_id"]: q.get("response", "") for v in read_lenient_json(pred)
                 for q in v.get("questions", [])}
    ids = sorted(truth)
    out = mcq_accuracy("videomme", [truth[i] for i in ids], [str(responses.get(i, "")) for i in ids])
    out.pop("letters")
    return out


register(Benchmark("videomme", "mcq", _videomme_load, _videomme_write, _videomme_score,
                   "the results file of the official template, the response being the letter alone"))


def _lvb_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    return build_tasks(path, read_json_records(path), lambda r: {
        "id": f"longvideobench-{r['id']}", "video_id": str(r["video_id"]),
        "video": str(videos / r["video_path"]) if r.get("video_path") else str(find_video(videos, str(r["video_id"]))),
        "kind": "mcq", "question": r["question"], "options": list(r["candidates"]),
        "answer": LETTERS[int(r["correct_choice"])], "duration": r.get("duration"), "source": "longvideobench",
        "transcript": find_subtitles(path, videos, [str(r.get("subtitle_path") or "")]),
        "transcript_offset": float(r.get("starting_timestamp_for_subtitles") or 0.0),
        "meta": {"lvb_id": r["id"], **{k: r[k] for k in ("duration_group", "question_category") if k in r}}})


def _lvb_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    truth = read_json_records(gt)
    preds = by_key(read_json_records(pred), "id", pred)
    out = mcq_accuracy("longvideobench", [LETTERS[int(r["correct_choice"])] for r in truth],
                       [str(preds.get(str(r["id"]), {}).get("response", "")) for r in truth], seed=opts.get("seed", 0))
    out.pop("letters")
    return out


register(Benchmark("longvideobench", "mcq", _lvb_load,
                   lambda pairs, out: write_jsonl(out / "submission_longvideobench.jsonl", [
                       {"id": t.meta.get("lvb_id"), "response": letter(p)} for t, p in pairs]),
                   _lvb_score, "no sample file here: built from the documented lvb_val.json fields; an unparsable "
                               "answer is a seeded random guess, as the official scorer does"))


def _lsd_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    records = [{**r, "index": i} for i, r in enumerate(read_json_records(path))]
    return build_tasks(path, records, lambda r: {
        "id": f"lsdbench-{r['index']}", "video_id": str(r["video_id"]),
        "video": str(find_video(videos, str(r["video_id"]))),
        "kind": "mcq", "question": r["question"], "options": [r["options"][k] for k in sorted(r["options"])],
        "answer": r["correct_answer"], "source": "lsdbench",
        "evidence": [span(f"{r['time_range']['start']}-{r['time_range']['end']}")] if r.get("time_range") else [],
        "meta": {"index": r["index"], "segment": r.get("segment")}})


def _lsd_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    truth = read_json_records(gt)
    preds = by_key(read_json_records(pred), "index", pred)
    out = mcq_accuracy("lsdbench", [r["correct_answer"] for r in truth],
                       [str(preds.get(str(i), {}).get("response", "")) for i in range(len(truth))])
    out.pop("letters")
    return out


register(Benchmark("lsdbench", "mcq", _lsd_load,
                   lambda pairs, out: write_jsonl(out / "submission_lsdbench.jsonl", [
                       {"index": t.meta.get("index"), "video_id": t.video_id, "response": letter(p)}
                       for t, p in pairs]),
                   _lsd_score, "the last standalone A-D of the response counts"))


def _holmes_load(path: Path, videos: Path, meta: Path | None) -> list[Task]:
    return build_tasks(path, read_json_records(path), lambda r: {
        "id": f"videoholmes-{r['video ID']}-{r['Question ID']}", "video_id": str(r["video ID"]),
        "video": str(find_video(videos, str(r["video ID"]))), "kind": "mcq", "question": r["Question"],
        "options": [r["Options"][k] for k in sorted(r["Options"])], "answer": r["Answer"], "source": "video-holmes",
        "meta": {"video ID": r["video ID"], "Question ID": r["Question ID"], "type": r.get("Question Type")}})


def _holmes_score(gt: Path, pred: Path, opts: dict[str, Any]) -> dict[str, Any]:
    truth = read_json_records(gt)
    preds = {(str(r.get("video ID")), str(r.get("Question ID"))): r for r in read_json_records(pred)}
    out = mcq_accuracy("video-holmes", [r["Answer"] for r in truth],
                       [str(preds.get((str(r["video ID"]), str(r["Question ID"])), {}).get("response", ""))
                        for r in truth], groups=[str(r.get("Question Type")) for r in truth])
    out.pop("letters")
    return out


register(Benchmark("video-holmes", "mcq", _holmes_load,
                   lambda pairs, out: write_jsonl(out / "submission_video-holmes.jsonl", [
                       {"video ID": t.meta.get("video ID"), "Question ID": t.meta.get("Question ID"),
                        "response": f"<answer>{letter(p)}</answer>" if letter(p) else ""} for t, p in pairs]),
                   _holmes_score, "responses as <answer>X</answer>, read with the official alphabetical precedence"))
