"""Official benchmark metrics (reproduced with their quirks), our per-task score, and paired statistics."""

from videvolve.metrics.grounding import (
    parse_extremewhen,
    render_extremewhen,
    score_charades,
    score_comet,
    score_extremewhen,
    single_interval_scores,
)
from videvolve.metrics.intervals import hull_iou, merge, normalize, set_iou
from videvolve.metrics.mcq import PARSERS, mcq_accuracy, mlvu_m_avg
from videvolve.metrics.qvhighlights import score_qvhighlights
from videvolve.metrics.stats import (
    ClusterComparison,
    McNemar,
    PairedComparison,
    cluster_sign_flip,
    mcnemar,
    paired_bootstrap,
    wilson,
)
from videvolve.metrics.tasks_score import summarize_scores, task_score
from videvolve.metrics.vue_tr import score_vue_tr

__all__ = [
    "PARSERS",
    "ClusterComparison",
    "McNemar",
    "PairedComparison",
    "cluster_sign_flip",
    "hull_iou",
    "mcnemar",
    "mcq_accuracy",
    "merge",
    "mlvu_m_avg",
    "normalize",
    "paired_bootstrap",
    "parse_extremewhen",
    "render_extremewhen",
    "score_charades",
    "score_comet",
    "score_extremewhen",
    "score_qvhighlights",
    "score_vue_tr",
    "set_iou",
    "single_interval_scores",
    "summarize_scores",
    "task_score",
    "wilson",
]
