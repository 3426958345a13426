"""The accmt TrainingState and its versioned, atomic JSON checkpoint serialisation."""

__all__: list[str] = []
