"""accmt 1.x's ``accmt.curriculum`` (now from accmt-trainer): datasets trained on in stages."""

from accmt_trainer import Curriculum, RangeCurriculum, RatioCurriculum, StepsCurriculum

__all__ = ["Curriculum", "RangeCurriculum", "RatioCurriculum", "StepsCurriculum"]
