"""The version of ONNX Export Studio (the distribution's, read by pyproject.toml)."""

__version__ = "0.1.0"
