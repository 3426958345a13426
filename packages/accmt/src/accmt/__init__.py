"""A PyTorch training framework on HuggingFace Accelerate: the Trainer and all its parts."""

__all__: list[str] = []
