"""accmt 1.x's ``accmt.curriculum``: datasets trained on in stages (accmt-trainer's curricula;
``RatioCurriculum`` is the one that takes 1.x's ``-1`` after ratios that add up to 1)."""

from accmt_trainer import Curriculum, RangeCurriculum, StepsCurriculum

from ._one_x import RatioCurriculum

__all__ = ["Curriculum", "RangeCurriculum", "RatioCurriculum", "StepsCurriculum"]
