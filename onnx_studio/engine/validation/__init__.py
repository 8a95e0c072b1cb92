"""Validation: ONNX Runtime against eager PyTorch over the export inputs, random draws and
other sizes of every dynamic axis (`validate`), with per-output, per-trial and per-node
metrics and plot data (`metrics.load_plots`)."""

from onnx_studio.engine.validation.validator import validate

__all__ = ["validate"]
