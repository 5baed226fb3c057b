"""Multiple-choice answer parsing as each benchmark's official scorer does it, and accuracy with its denominator.

| benchmark | parsing | unparsed answers |
|---|---|---|
| lvbench | ``polish_answer``: cut at ")", after "(", first token, first char | left out of the denominator |
| mlvu | the char before the first ")", else the whole string | wrong |
| videomme | strip prefixes, first A-D anywhere (none in >10 words -> "") | left out ("answered" only) |
| longvideobench | strip prefixes, first A-E; none -> a random letter | random guess |
| lsdbench | the last A-D not next to another letter | wrong |
| video-holmes | last <answer>, then the first of A-F seen as "X ", "X:" or "[X", else any | wrong |
| videvolve | one bare letter (what our harnesses emit), else the last standalone letter | wrong |
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

_VIDEOMME_PREFIXES = [
    "The best answer is", "The correct answer is", "The answer is", "The answer",
    "The best option is" "The correct option is",
    "Best answer:" "Best option:",
    "Answer:", "Option:", "The correct answer", "The correct option",
]
_LVB_PREFIXES = [
    "The best answer is", "The correct answer is", "The answer is", "The answer", "The best option is",
    "The correct option is", "Best answer:", "Best option:",
]


def parse_lvbench(text: str) -> str:
    """LVBench ``polish_answer``."""
    s = text.strip()
    if ")" in s:
        s = s[: s.index(")")]
    if "(" in s:
        s = s[s.index("(") + 1 :]
    tokens = s.split()
    return tokens[0][0] if tokens else ""


def parse_mlvu(text: str) -> str:
    """MLVU ``check_ans``: the character before the first ')' if any, else the whole (stripped) string."""
    return text[text.index(")") - 1] if ")" in text and text.index(")") > 0 else text.strip()


def parse_videomme(text: str) -> str:
    """Video-MME ``extract_characters_regex`` (with the official list's two missing commas)."""
    s = text.strip()
    for prefix in _VIDEOMME_PREFIXES:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not re.search("[ABCD]", s):
        return ""
    m = re.search(r"[ABCD]", s)
    return m[0] if m else ""


def parse_longvideobench(text: str, letters: str = "ABCDE", rng: random.Random | None = None) -> tuple[str, bool]:
    """LongVideoBench (lmms-eval): the first A-E after stripping prefixes, else a random letter.

    Returns ``(letter, guessed)``.
    """
    s = text.strip()
    for prefix in _LVB_PREFIXES:
        s = s.replace(prefix, "")
    m = re.search(r"[ABCDE]", s)
    if (len(s.split()) > 10 and m is None) or m is None:
        return (rng or random.Random(0)).choice(letters), True
    return m[0], False


def parse_lsdbench(text: str) -> str:
    """LSDBench: the last A-D that is not adjacent to another letter."""
    found = re.findall(r"(?<![a-zA-Z])[ABCD](?![a-zA-Z])", text)
    return found[-1] if found else ""


def parse_video_holmes(text: str) -> str:
    """Video-Holmes ``evaluate.py``: alphabetical precedence inside the last <answer>...</answer>."""
    blocks = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    s = blocks[-1] if blocks else text
    for x in "ABCDEF":
        if f"{x} " in s or f"{x}:" in s or f"[{x}" in s:
            return x
    for x in "ABCDEF":
        if x in s:
            return x
    return "WRONG"


def parse_videvolve(text: str, n_options: int = 26) -> str:
    """Our harnesses' format: a bare letter; tolerantly the last standalone capital letter within the options."""
    s = re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n_options]
    if len(s) == 1 and s in letters:
        return s
    found = re.findall(rf"(?<![A-Za-z])[{letters}](?![A-Za-z])", s)
    return found[-1] if found else ""


PARSERS = {
    "lvbench": parse_lvbench, "mlvu": parse_mlvu, "videomme": parse_videomme, "lsdbench": parse_lsdbench,
    "video-holmes": parse_video_holmes, "videvolve": parse_videvolve,
}
EXCLUDE_UNPARSED = {"lvbench", "videomme"}


def mcq_accuracy(benchmark: str, golds: Sequence[str], responses: Sequence[str], seed: int = 0,
                 groups: Sequence[str] | None = None) -> dict[str, Any]:
    """Accuracy of raw responses under ``benchmark``'s parser and denominator (and per group, if given)."""
    rng = random.Random(seed)
    letters: list[str] = []
    guessed = 0
    for r in responses:
        if benchmark == "longvideobench":
            letter, was_guess = parse_longvideobench(r, rng=rng)
            guessed += was_guess
        else:
            letter = PARSERS[benchmark](r)
        letters.append(letter)
    unparsed = sum(1 for x in letters if x in ("", "WRONG"))
    counted = [(g, p) for g, p in zip(golds, letters, strict=True)
               if not (benchmark in EXCLUDE_UNPARSED and p == "")]
    acc = float(np.mean([g == p for g, p in counted])) if counted else 0.0
    out: dict[str, Any] = {"benchmark": benchmark, "accuracy": acc, "n": len(golds), "counted": len(counted),
                           "unparsed": unparsed, "random_guesses": guessed, "letters": letters}
    if groups is not None:
        per: dict[str, list[bool]] = defaultdict(list)
        for g, p, grp in zip(golds, letters, groups, strict=True):
            if not (benchmark in EXCLUDE_UNPARSED and p == ""):
                per[grp].append(g == p)
        out["by_group"] = {k: float(np.mean(v)) for k, v in sorted(per.items())}
    return out


MLVU_MC_TASKS = ("plotQA", "needle", "ego", "count", "order", "anomaly_reco", "topic_reasoning")


def mlvu_m_avg(per_task_accuracy: dict[str, float]) -> float:
    """MLVU's M-Avg: the unweighted mean of the seven multiple-choice task accuracies present."""
    values = [per_task_accuracy[t] for t in MLVU_MC_TASKS if t in per_task_accuracy]
    return float(np.mean(values)) if values else 0.0
