"""Samples of the analysis jobs' messages for tests/engine/test_protocol.py's round trips."""

from __future__ import annotations

from engine.protocol import (
    CompareDocument,
    CompareRequest,
    CompareResult,
    ProfileDocument,
    ProfileRequest,
    ProfileResult,
    VariantReport,
    VariantRequest,
    VariantResult,
    Wire,
)

COMPARISON = CompareDocument.from_dict({
    "ok": False, "ops": {"a": {"Conv": 5, "Reshape": 1}, "b": {"Conv": 5, "Flatten": 1}},
    "nodes": {"a": 6, "b": 6}, "size_bytes": {"a": 100, "b": 98},
    "initializers": {"added": ["b.0"], "removed": [],
                     "changed": [{"name": "w", "max_abs_diff": 0.5},
                                 {"name": "v", "max_abs_diff": None, "reason": "shape"}]},
    "parity": {"ok": False, "max_abs_diff": 0.1, "rtol": 1e-3, "atol": 1e-5,
               "torch": {"ok": True, "a": {"ok": True, "max_abs_diff": 0.0},
                         "b": {"ok": True, "max_abs_diff": 1e-7}},
               "outputs": [{"name": "y", "max_abs_diff": 0.1, "passed": False}]},
    "latency_ms": {"a": {"p50": 1.0, "p90": 1.5}, "b": {"p50": 1.1, "p90": 1.2}},
    "matching": {"matched": 5, "by_name": 0, "by_structure": 5, "unmatched_a": ["r"],
                 "unmatched_b": ["f"], "pairs": [[0, 0], [1, 1]]},
    "error": {"kind": "validation", "message": "The two files disagree."}})
PROFILE = ProfileDocument.from_dict({
    "ok": True, "latency_ms": {"p50": 2.0, "p90": 3.0}, "torch_latency_ms": {"p50": 4.0,
                                                                            "p90": 5.0},
    "nodes": [{"name": "n", "op_type": "MatMul", "group": "h.0.attn", "ms": 1.5}],
    "ops": [{"op_type": "MatMul", "ms": 1.5, "count": 1}],
    "groups": [{"name": "h.0.attn", "ms": 1.5}], "runs": 20, "coverage": 0.9})
VARIANT = VariantReport.from_dict({
    "ok": True, "output": "/dir/v.onnx", "exporter": None, "opset": 18, "seconds": {},
    "graph": None, "warnings": [], "error": None, "validation": None,
    "variant": {"kind": "int8", "source": "/dir/m.onnx", "settings": {"method": "dynamic"},
                "rtol": 0.1, "atol": 0.1, "size_bytes": 30, "source_size_bytes": 100,
                "size_ratio": 0.3, "latency_ms": {"p50": 1.0, "p90": 1.0},
                "max_abs_diff": 0.01}})

ANALYSIS_SAMPLES: list[Wire] = [
    CompareRequest(id=20, a="/dir/a.onnx", b="/dir/b.onnx", recipe="version = 1",
                   base_dir="/dir", dims={"batch": 2}),
    CompareResult(id=20, comparison=COMPARISON),
    ProfileRequest(id=21, onnx="/dir/a.onnx", threads=1),
    ProfileResult(id=21, profile=PROFILE),
    VariantRequest(id=22, onnx="/dir/a.onnx", recipe="version = 1", kind="int8",
                   output="/dir/v.onnx"),
    VariantResult(id=22, variant_report=VARIANT),
    COMPARISON, PROFILE, VARIANT,
]
