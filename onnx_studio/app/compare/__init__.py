"""The Compare tab: two ONNX files side by side (static diff, matched graphs, parity and
latency), a profile of one in ONNX Runtime shown as a heat overlay on the Graph tab, and its
fp16/int8/optimized variants with their verdicts — each a job in the worker
(onnx_studio.engine.analysis)."""

from onnx_studio.app.compare.tab import CompareTab

__all__ = ["CompareTab"]
