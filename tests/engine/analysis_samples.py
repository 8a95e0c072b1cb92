"""Samples of the analysis jobs' messages for tests/engine/test_protocol.py's round trips."""

from __future__ import annotations

from onnx_studio.engine.protocol import (
    CompareDocument,
    CompareRequest,
    CompareResult,
    ExplainDocument,
    ExplainRequest,
    ExplainResult,
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
HALF = VariantReport.from_dict({
    "ok": False, "output": "/dir/h.onnx", "exporter": None, "opset": 18, "seconds": {},
    "graph": None, "warnings": [], "error": {"kind": "validation", "message": "overflows"},
    "validation": None,
    "variant": {"kind": "fp16", "source": "/dir/m.onnx", "settings": {}, "rtol": 0.01,
                "atol": 0.01, "size_bytes": 50, "source_size_bytes": 100, "size_ratio": 0.5,
                "max_abs_diff": 0.01, "kept_fp32": ["node_mul"],
                "fp16_overflows": [{"node": "node_add", "op_type": "Add", "value": "add",
                                    "max_abs": 70000.0}]}})
EXPLAINED = ExplainDocument.from_dict({
    "ok": True, "diverges": True,
    "first_divergence": {"node": "node_linear_1", "op_type": "Gemm", "module": "layers.1.lin",
                         "source": "net.py:6", "max_abs_diff": 1.2, "tolerance_ratio": 5e4,
                         "inputs": [{"name": "mul", "max_abs_diff": 2e-7},
                                    {"name": "layers.1.lin.weight", "max_abs_diff": 0.5,
                                     "kind": "initializer"}],
                         "module_type": "torch.nn.modules.linear.Linear",
                         "outputs": ["linear_1"]},
    "downstream": 5,
    "repro": {"folder": "/dir/m.repro", "files": ["model.onnx", "repro.py"],
              "command": "python /dir/m.repro/repro.py"},
    "model": "/dir/m.onnx", "rtol": 1e-3, "atol": 1e-5, "compared": 9,
    "files": [{"file": "model.onnx", "diverges": False, "compared": 3}]})

ANALYSIS_SAMPLES: list[Wire] = [
    CompareRequest(id=20, a="/dir/a.onnx", b="/dir/b.onnx", recipe="version = 1",
                   base_dir="/dir", dims={"batch": 2}),
    CompareResult(id=20, comparison=COMPARISON),
    ProfileRequest(id=21, onnx="/dir/a.onnx", threads=1),
    ProfileResult(id=21, profile=PROFILE),
    VariantRequest(id=22, onnx="/dir/a.onnx", recipe="version = 1", kind="int8",
                   output="/dir/v.onnx"),
    VariantResult(id=22, variant_report=VARIANT),
    VariantRequest(id=23, onnx="/dir/a.onnx", recipe="version = 1", kind="fp16",
                   output="/dir/h.onnx", keep_fp32="auto"),
    VariantResult(id=23, variant_report=HALF),
    ExplainRequest(id=24, onnx="/dir/m.onnx", recipe="version = 1", repro_dir="/dir/r"),
    ExplainRequest(id=25, onnx="/dir/m.onnx", recipe="version = 1", write_repro=False),
    ExplainResult(id=24, explanation=EXPLAINED),
    COMPARISON, PROFILE, VARIANT, HALF, EXPLAINED,
]
