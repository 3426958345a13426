"""AcceleratorModule, HyperParameters and the Trainer, on HuggingFace Accelerate."""

__all__: list[str] = []
