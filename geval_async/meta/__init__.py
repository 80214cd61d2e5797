"""Meta-evaluation: how closely a judge's scores follow human ratings (summary, system, dataset)."""

from ..study.settings import JudgeFile
from .correlations import (
    LEVELS,
    METHODS,
    Correlation,
    bootstrap_interval,
    correlate,
    correlation,
    correlations_frame,
    dataset_level,
    document_correlations,
    format_correlations,
    summary_level,
    system_level,
)
from .evaluate import MetaEvaluation, meta_evaluate, meta_paths, write_meta
from .findings import MIN_UNITS
from .inputs import PAIR_COLUMNS, field_value, human_scores, judge_scores, pair_scores
from .judge_files import JudgeFileScores, read_judge_file

__all__ = [
    "LEVELS",
    "METHODS",
    "MIN_UNITS",
    "PAIR_COLUMNS",
    "Correlation",
    "JudgeFile",
    "JudgeFileScores",
    "MetaEvaluation",
    "bootstrap_interval",
    "correlate",
    "correlation",
    "correlations_frame",
    "dataset_level",
    "document_correlations",
    "field_value",
    "format_correlations",
    "human_scores",
    "judge_scores",
    "meta_evaluate",
    "meta_paths",
    "pair_scores",
    "read_judge_file",
    "summary_level",
    "system_level",
    "write_meta",
]
