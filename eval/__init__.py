"""Evaluation harness: golden sets, retrieval metrics, answer scoring, reports.

The chart (matplotlib) is imported only when a report is saved.
"""

from eval.errors import EvalError
from eval.golden import Question, Tier, load_golden
from eval.metrics import (
    Spent,
    compare,
    hit_all,
    per_question,
    recall,
    reciprocal_rank,
    summarise,
    win_matrix,
    wins,
)
from eval.report import EvalReport
from eval.scoring import AnswerScore, score_answer, summarise_answers

__all__ = [
    "AnswerScore",
    "Spent",
    "EvalError",
    "EvalReport",
    "Question",
    "Tier",
    "compare",
    "hit_all",
    "load_golden",
    "per_question",
    "recall",
    "reciprocal_rank",
    "score_answer",
    "summarise",
    "summarise_answers",
    "win_matrix",
    "wins",
]
