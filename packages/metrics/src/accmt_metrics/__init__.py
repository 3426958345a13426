"""Evaluation metrics that are exact across processes."""

__all__: list[str] = []
