"""The accmt Callback contract and its dispatcher, usable from any training loop."""

__all__: list[str] = []
