"""The Qt window of ONNX Export Studio. Never imports torch: the worker process does."""

from app import qt_compat as _qt_compat  # noqa: F401  (guards a PySide6 6.12.0 refcount bug)
