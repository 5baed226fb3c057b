"""Paired statistics of the gate: one-sided tests, confidence bounds and power, on per-question differences.

The gate compares a candidate with its parent on the same selection questions, so everything here takes the
per-question differences ``d = candidate - parent`` (mcq 1/0, grounding IoU in [0, 1]). A gain is tested with the
exact sign-flip (randomization) test: under "the revision does nothing useful" the candidate and the parent are
exchangeable on each question, so every sign pattern of the non-zero differences is equally likely. It is exact on
a few discordant questions, where a t-test is not (three lucky flips and no loss give t p = 0.04, sign-flip 0.125).
Bounds on the mean difference (the non-inferiority margin of a cost cut, what the log shows) are Student t bounds;
the lower one, which decides a cut, with a spread never below the one a loss of exactly the margin would have
(:func:`null_spread`), as a score test takes it.

Questions about one video are not independent: a revision can help on some videos and hurt on others, and the
selection set holds a few videos. What the gate must tell is whether a gain holds on *other* videos (the test split's,
the user's), so the video is the unit a gain is generalized over. :func:`video_t` is the cluster-robust t over videos
(CR2 spread, G - 1 degrees of freedom); a gain must pass it as well as the sign-flip test, and a cut's loss bound is
the lower of the two bounds. On a world of 16 videos with 4 in selection, the sign-flip test alone kept a revision
that gained +0.065 on the selection set (p 0.0065; per video +0.14, +0.01, +0.06, +0.04) and lost -0.049 on the
test split; over its videos that gain has p 0.041.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

EXACT_UP_TO = 16
"""Up to this many non-zero differences the sign-flip test enumerates every sign pattern (2**16)."""
RESAMPLES = 20_000
"""Random sign patterns otherwise (seeded: the same inputs give the same p)."""


def sign_flip_p(d: Sequence[float], seed: int = 0) -> float:
    """One-sided p of "mean(d) > 0" by the paired sign-flip test (1.0 when nothing differs).

    A function of the differences, not of their order: beyond :data:`EXACT_UP_TO` of them the resampled signs fall on
    them sorted, so that multi-fidelity's whole rung (its questions shuffled) and full validation (in the selection
    set's order) reach the same p under the same ``seed``.
    """
    x = np.sort(np.asarray([v for v in d if abs(v) > 1e-12], dtype=np.float64))
    if len(x) == 0:
        return 1.0
    observed = x.sum() - 1e-9
    a = np.abs(x)
    if len(x) <= EXACT_UP_TO:
        signs = ((np.arange(2 ** len(x))[:, None] >> np.arange(len(x))) & 1) * 2 - 1
        return float(np.mean(signs @ a >= observed))
    rng = np.random.default_rng(seed)
    signs = rng.integers(0, 2, size=(RESAMPLES, len(x)), dtype=np.int8) * 2 - 1
    hits = int(np.count_nonzero(signs @ a >= observed))
    return (hits + 1) / (RESAMPLES + 1)


def t_bounds(d: Sequence[float], level: float, margin: float | None = None) -> tuple[float, float]:
    """One-sided (1 - level) lower and upper Student t bounds of the mean difference (floored, see below).

    With ``margin`` the lower bound's spread is at least :func:`null_spread` at ``-margin``, so that "lower >=
    -margin" is a test of "the loss is at least the margin" at ``level``. With the observed spread alone it is not on
    mcq: a cut that loses a few answers and gains none shows a small spread exactly when it shows a small loss (on
    500 questions, a cut losing 2 % of the answers passed a margin of 0.02 at level 0.025 in 6.2 % of samples).
    """
    x = np.asarray(d, dtype=np.float64)
    if len(x) == 0:
        return -math.inf, math.inf
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if len(x) > 1 else math.inf
    t = float(stats.t.ppf(1 - level, len(x) - 1)) if len(x) > 1 else math.inf
    floor = agreement_floor(len(x), level)
    half = max(t * sd / math.sqrt(len(x)) if sd > 0 else 0.0, floor)
    low_sd = max(sd, null_spread(x, -margin)) if margin is not None else sd
    low_half = max(t * low_sd / math.sqrt(len(x)) if low_sd > 0 else 0.0, floor)
    return mean - low_half, mean + half


def null_spread(d: Sequence[float] | np.ndarray, mean: float) -> float:
    """The per-question sd of the differences under the distribution closest to them whose mean is ``mean``.

    The restricted maximum-likelihood weights on the observed values (empirical likelihood: ``1 / (n (1 + lam (d_i -
    mean)))``); on mcq (differences -1, 0, 1) the restricted estimate of Tango's score test for paired proportions.
    0 where no weights on these values have that mean (every difference above it, or every one below).
    """
    z = np.asarray(d, dtype=np.float64) - mean
    values, counts = np.unique(z, return_counts=True)
    if len(z) == 0 or values[0] >= -1e-12 or values[-1] <= 1e-12:
        return 0.0

    def score(lam: float) -> float:  # decreasing in lam; its root sets the restricted weights
        return float(np.sum(counts * values / (1 + lam * values)))

    eps = 1e-9
    lam = float(optimize.brentq(score, -(1 - eps) / values[-1], -(1 - eps) / values[0], xtol=1e-14))
    weights = counts / (len(z) * (1 + lam * values))
    return math.sqrt(float(np.sum(weights * values ** 2) / np.sum(weights)))


def agreement_floor(n: int, level: float) -> float:
    """The least half-width a bound on n paired questions may have: what n questions that all agree can show.

    When no answer changed on n questions, the share of questions a change affects is still up to
    ``1 - level ** (1 / n)`` (the exact one-sided binomial bound for zero events), and each such question can move
    the score by up to 1. Without this floor the t bound of an all-agreeing sample has zero width, and a cut that
    happens to change nothing on 20 questions would look certain.
    """
    return 1 - level ** (1 / n) if 0 < level < 1 else 0.0


TINY_SE = 1e-12
"""A spread over videos below this is none: every video showed the same mean difference."""


@dataclass(frozen=True)
class OverVideos:
    """The cluster-robust comparison over G videos (:func:`video_t`)."""

    videos: int
    p_gain: float
    """One-sided p of a gain (Student t, G - 1 degrees of freedom)."""
    lower: float
    upper: float
    """One-sided bounds of the mean difference at the level they were asked for."""


def cr2_variance(residual_sums: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The CR2 variance of a mean over all questions, from each video's sum of residuals (last axis: the videos)."""
    n = float(sizes.sum())
    return np.sum(residual_sums ** 2 / np.maximum(1 - sizes / n, 1e-12), axis=-1) / n ** 2


def video_t(d: Sequence[float], videos: Sequence[str], level: float) -> OverVideos | None:
    """The mean difference's one-sided test and bounds with its spread taken over videos; None under two videos.

    The mean over all questions, with the CR2 cluster-robust variance (Bell & McCaffrey 2002): each video's sum of
    residuals, scaled by ``1 / sqrt(1 - n_g / n)``, squared and summed over videos, over n squared; Student t with
    G - 1 degrees of freedom (Imbens & Kolesar 2016 for few clusters). A gain one or two videos carry has a wide
    spread here, however many questions those videos hold.
    """
    x = np.asarray(d, dtype=np.float64)
    n = len(x)
    if n != len(videos):
        raise ValueError(f"{n} differences but {len(videos)} video ids")
    ids = sorted(set(videos))
    if len(ids) < 2:
        return None
    mean = float(x.mean())
    index = {v: i for i, v in enumerate(ids)}
    where = np.asarray([index[v] for v in videos])
    sums = np.bincount(where, weights=x - mean, minlength=len(ids))
    var = float(cr2_variance(sums, np.bincount(where, minlength=len(ids)).astype(np.float64)))
    se = math.sqrt(max(var, 0.0))
    df = len(ids) - 1
    p = (0.0 if mean > TINY_SE else 1.0) if se <= TINY_SE else float(stats.t.sf(mean / se, df))
    half = float(stats.t.ppf(1 - level, df)) * se if 0 < level < 1 else 0.0
    return OverVideos(videos=len(ids), p_gain=p, lower=mean - half, upper=mean + half)


@dataclass(frozen=True)
class Paired:
    """The paired comparison of a candidate with its parent on n questions."""

    n: int
    diff: float
    """Mean per-question difference (candidate - parent)."""
    p_gain: float
    """One-sided sign-flip p of a gain."""
    p_loss: float
    """One-sided sign-flip p of a loss."""
    lower: float
    upper: float
    """One-sided t bounds of the mean difference at the level they were asked for."""
    discordant: int
    """Questions whose score differs."""
    over_videos: OverVideos | None = None
    """The same comparison over videos, where the questions' videos were given and are at least two."""

    @property
    def p_gate(self) -> float:
        """The p a gain is judged by: the larger of the sign-flip test's and the test over videos'."""
        return max(self.p_gain, self.over_videos.p_gain) if self.over_videos else self.p_gain

    @property
    def lower_gate(self) -> float:
        """The lower bound a cut is judged by: the lower of the question-level and the over-videos bound."""
        return min(self.lower, self.over_videos.lower) if self.over_videos else self.lower


def paired(parent: Sequence[float], candidate: Sequence[float], level: float, seed: int = 0,
           margin: float | None = None, videos: Sequence[str] | None = None) -> Paired:
    """Tests and bounds of ``candidate - parent`` on the same questions (``margin``: see :func:`t_bounds`).

    ``videos``: each question's video id; with them the comparison is also made over videos (:func:`video_t`).
    """
    d = [y - x for x, y in zip(parent, candidate, strict=True)]
    lower, upper = t_bounds(d, level, margin)
    return Paired(n=len(d), diff=float(np.mean(d)) if d else 0.0, p_gain=sign_flip_p(d, seed),
                  p_loss=sign_flip_p([-v for v in d], seed), lower=lower, upper=upper,
                  discordant=sum(1 for v in d if abs(v) > 1e-12),
                  over_videos=video_t(d, videos, level) if videos is not None and d else None)


SD_DIFF_DEFAULT = 0.35
"""Standard deviation of a per-question difference assumed before any paired data exist: a revision that changes
about an eighth of mcq answers and moves grounding IoU as much (measured on SynthWorld's first decisions)."""


def _quantiles(level: float, power: float, videos: int | None) -> float:
    """z_(1-level) + z_power; Student's with G - 1 degrees of freedom where the gain must hold over G videos too."""
    if videos is not None and videos >= 2:
        return float(stats.t.ppf(1 - level, videos - 1) + stats.t.ppf(power, videos - 1))
    return float(stats.norm.ppf(1 - level) + stats.norm.ppf(power))


def min_detectable_gain(n: int, level: float, power: float = 0.8, sd: float = SD_DIFF_DEFAULT,
                        videos: int | None = None) -> float:
    """The smallest mean gain a one-sided paired test at ``level`` detects with ``power`` on ``n`` questions.

    With ``videos`` (how many the questions come from) the test over videos is the binding one: its t with G - 1
    degrees of freedom, the videos alike (a gain that varies from video to video needs more).
    """
    if n < 2:
        return math.inf
    return _quantiles(level, power, videos) * sd / math.sqrt(n)


def questions_for_gain(gain: float, level: float, power: float = 0.8, sd: float = SD_DIFF_DEFAULT,
                       videos: int | None = None) -> int:
    """Selection questions needed to detect ``gain`` (the inverse of :func:`min_detectable_gain`)."""
    return math.ceil((_quantiles(level, power, videos) * sd / gain) ** 2)


POWER_TARGET = 0.05
"""The gain a selection set should let the gate detect (80 % power); smaller sets are warned about."""
FEW_VIDEOS = 8
"""Below this many selection videos the power note says that the gate's test over videos has little power."""


def changed_share_for_margin(n: int, level: float, margin: float, power: float = 0.8) -> float:
    """The largest share of answers a cost cut with no mean loss may change and still be shown within ``margin``.

    A cut that flips a share f of answers each way (mcq: +1 or -1) has a per-question sd of about sqrt(f); the bound
    of :func:`t_bounds` takes at least the spread of a loss of exactly the margin (about sqrt(max(f, margin))) and is
    never narrower than :func:`agreement_floor`. Its loss bound falls within ``margin`` with ``power`` when
    z_power sqrt(f / n) + max(z_level sqrt(max(f, margin - margin^2) / n), floor) <= margin; 0 where no share can.
    """
    za, zb = float(stats.norm.ppf(1 - level)), float(stats.norm.ppf(power))
    floor = agreement_floor(n, level)

    def passes(f: float) -> bool:
        half = max(za * math.sqrt(max(f, margin - margin * margin) / n), floor)
        return zb * math.sqrt(f / n) + half <= margin

    if not passes(0.0):
        return 0.0
    low, high = 0.0, 1.0
    if passes(high):
        return 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if passes(mid) else (low, mid)
    return low


def power_note(n_selection: int, level: float, margin: float | None = None,
               videos: int | None = None, min_videos: int = FEW_VIDEOS) -> tuple[str, bool]:
    """What the selection set can detect at the gate's level, and whether that is too coarse (a warning).

    With ``margin`` (the gate's non-inferiority margin) it also says how few answers a cost cut may change to be
    kept: a cut that reshuffles more of them cannot be told from a loss of ``margin``. With ``videos`` (how many the
    selection questions come from) it says whether a gain must hold over them (from ``min_videos`` on, the gate's
    ``--gate-min-videos``) and, below that, that the gate counts the questions as independent.
    """
    if n_selection < 2:
        return f"the selection set has {n_selection} question(s): the gate cannot detect any gain", True
    tested = videos if videos is not None and videos >= min_videos else None
    mdg = min_detectable_gain(n_selection, level, videos=tested)
    need = questions_for_gain(POWER_TARGET, level, videos=tested)
    text = (f"selection set: {n_selection} questions; the smallest gain the gate detects with 80 % power at its first "
            f"decision's level ({level:g}) is {mdg:+.3f} in mean score per question")
    if margin is not None:
        share = changed_share_for_margin(n_selection, level, margin)
        needs = (f"needs a cut that changes at most about {share:.1%} of the answers" if share > 0 else
                 "is out of reach of any cut, even one that changes no answer")
        text += (f"; a cost cut is kept when its loss is bounded within {margin:g}, which at this size {needs} (a "
                 "larger --gate-margin, or more selection questions, lets cuts that reshuffle more through)")
    if tested is not None:
        text += (f"; a gain must also hold over the {tested} selection videos (a t test with {tested - 1} degrees of "
                 "freedom)")
    elif videos is not None:
        text += (f"; the questions come from only {videos} selection video(s), too few for the gate to ask that a "
                 f"gain hold over them (it does from --gate-min-videos {min_videos} on), so it counts the questions "
                 "as independent: a gain that one or two videos carry can pass and not hold on other videos (more "
                 "selection videos, `tasks split --fractions`, make that less likely)")
    if mdg > POWER_TARGET:
        return (text + f"; the gain is coarser than {POWER_TARGET:+.2f}: about {need} selection questions are needed "
                "(more questions per video, e.g. `synth --questions`, or more selection videos); smaller real "
                "gains will be rejected as noise"), True
    return text, False
