"""A folder that reproduces one node's divergence with numpy and onnxruntime alone, to attach
to a bug report: the smallest ONNX model holding the node, PyTorch's values at its inputs and
outputs, and a script that runs it.

- `model.onnx`: the node, its initializers and Constant nodes, and the nodes computing any of
  its inputs that PyTorch has no value for (the exporter's own intermediates, `val_12`), back
  to values PyTorch has, the graph's inputs or weights (`slice_graph`). Opsets and local
  functions are the file's.
- `inputs.npz`: PyTorch's values at the model's inputs (ONNX Runtime's, for the rare input
  beyond `MAX_NODES` of expansion, as `repro.py` says); `expected.npz`: PyTorch's values at
  the node's outputs.
- `repro.py`: runs the model and compares with the tolerance of the recipe; exits 1 printing
  the difference when the node still diverges on its own, 0 when it does not.

The folder is one output of onnx_studio.engine.file_set (`repro`): written whole and committed
as one set, only into a folder that is new, empty or holds what an earlier explain wrote there
(its manifest), never over an input of the command.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.files import FOLDER_MARKER
from onnx_studio.engine.validation.nodes import node_reads

FILES = ("model.onnx", "inputs.npz", "expected.npz", "repro.py")
MAX_NODES = 64  # nodes pulled in for inputs PyTorch has no value for


@dataclass
class Slice:
    """The nodes (graph order) of the repro model, its inputs, and the weights it holds."""

    nodes: list[Any]
    inputs: list[str]
    initializers: list[str]
    # inputs whose value PyTorch does not give (expansion stopped at MAX_NODES)
    unknown: list[str] = field(default_factory=list)
    # the values the slice reads from outside, in the order met: inputs and weights
    reads: list[str] = field(default_factory=list)


def slice_graph(graph: Any, index: int, known: set[str]) -> Slice:
    """The repro of node `index` of `graph`: the node and, for each value it reads that is no
    graph input, weight or value in `known` (PyTorch's), the node computing it, recursively."""
    producer = {out: i for i, n in enumerate(graph.node) for out in n.output if out}
    weights = {t.name for t in graph.initializer}
    graph_inputs = {v.name for v in graph.input}
    chosen = {index}
    inputs: list[str] = []
    used_weights: list[str] = []
    unknown: list[str] = []
    reads: list[str] = []
    pending = list(node_reads(graph.node[index]))
    seen: set[str] = set()
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in weights and name not in graph_inputs:
            used_weights.append(name)
            reads.append(name)
        elif name in graph_inputs or name in known or name not in producer:
            inputs.append(name)
            reads.append(name)
        elif len(chosen) >= MAX_NODES and graph.node[producer[name]].op_type != "Constant":
            inputs.append(name)
            unknown.append(name)
            reads.append(name)
        else:
            chosen.add(producer[name])
            pending = node_reads(graph.node[producer[name]]) + pending
    return Slice([graph.node[i] for i in sorted(chosen)], inputs, used_weights, unknown, reads)


@dataclass
class ReproCase:
    """What the repro reproduces: the node, PyTorch's values, the tolerance, what it means."""

    node: str
    op_type: str
    module: str
    source: str
    rtol: float
    atol: float
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]


def build_model(model_file: Any, piece: Slice, case: ReproCase) -> Any:
    """The repro's ModelProto: the slice's nodes, their weights (read from the file, external
    data included) and the file's opsets and functions; inputs and outputs typed by the
    values given."""
    from onnx import helper, numpy_helper

    proto = model_file.proto
    initializers = model_file.initializers()
    graph = helper.make_graph(
        [_copy(n) for n in piece.nodes], f"repro_{case.node}",
        [_value_info(name, case.inputs[name]) for name in piece.inputs],
        [_value_info(name, value) for name, value in case.expected.items()],
        [numpy_helper.from_array(model_file.array(initializers[name]), name)
         for name in piece.initializers])
    model = helper.make_model(graph, opset_imports=list(proto.opset_import),
                              producer_name="onnx-studio explain")
    model.ir_version = proto.ir_version
    model.functions.extend(proto.functions)
    return model


def _copy(message: Any) -> Any:
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _value_info(name: str, value: np.ndarray) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(
        name, helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype), list(np.shape(value)))


def write(staging: Path, model: Any, case: ReproCase, unknown: list[str]) -> list[str]:
    """Write the repro's files into `staging` (a folder of the repro's FolderWrite, which
    commits them); the names of its files."""
    import onnx

    staging.mkdir(exist_ok=True)
    big = model.ByteSize() > 2**31 - 1
    onnx.save_model(model, str(staging / "model.onnx"), save_as_external_data=big,
                    location="model.onnx.data")
    _savez(staging / "inputs.npz", case.inputs)
    _savez(staging / "expected.npz", case.expected)
    (staging / "repro.py").write_text(script(case, unknown), encoding="utf-8")
    return sorted(p.name for p in staging.iterdir() if p.name != FOLDER_MARKER)


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    save: Any = np.savez  # (its keyword arguments are the arrays' names)
    save(path, **arrays)


def command(folder: Path) -> str:
    """The command that runs the repro."""
    python = "python" if os.name != "nt" else "py"
    return f"{python} {shlex.quote(str(folder / 'repro.py'))}"


def script(case: ReproCase, unknown: list[str]) -> str:
    """repro.py: numpy and onnxruntime only."""
    where = ", ".join(p for p in (f"module {case.module}" if case.module else "",
                                  case.source) if p)
    note = ("" if not unknown else
            f"\nThe inputs {', '.join(unknown)} hold ONNX Runtime's values (PyTorch has no "
            "value of that name).\n")
    where = f" ({where})" if where else ""
    return f'''"""Reproduce: ONNX Runtime's {case.op_type} node {case.node!r}{where}
differs from PyTorch on PyTorch's own inputs.

model.onnx holds the node (and the exporter's nodes feeding it that PyTorch has no value
for); inputs.npz holds PyTorch's values at its inputs, expected.npz PyTorch's values at its
outputs. Exit status 1 (the difference printed) when ONNX Runtime's outputs are outside
atol + rtol * |expected| (atol {case.atol:g}, rtol {case.rtol:g}), 0 when they are within.
Needs numpy and onnxruntime only. Written by onnx-studio explain.
{note}"""

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

HERE = Path(__file__).resolve().parent
RTOL = {case.rtol!r}
ATOL = {case.atol!r}


def main() -> int:
    session = ort.InferenceSession(str(HERE / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    with np.load(HERE / "inputs.npz") as stored:
        feeds = {{name: stored[name] for name in stored.files}}
    with np.load(HERE / "expected.npz") as stored:
        expected = {{name: stored[name] for name in stored.files}}
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(names, feeds)))
    reproduced = False
    for name in names:
        ref = expected[name].astype(np.float64)
        out = np.asarray(got[name]).astype(np.float64)
        if ref.shape != out.shape:
            print(f"{{name}}: shape {{list(out.shape)}} from ONNX Runtime, "
                  f"{{list(ref.shape)}} from PyTorch")
            reproduced = True
            continue
        diff = np.abs(out - ref)
        allowed = ATOL + RTOL * np.abs(ref)
        outside = (diff > allowed) | (np.isnan(out) != np.isnan(ref))
        worst = float(np.nanmax(diff)) if diff.size else 0.0
        print(f"{{name}}: max abs diff {{worst:.6g}}, {{int(outside.sum())}} of {{out.size}} "
              f"values outside atol {{ATOL:g}} + rtol {{RTOL:g}} * |expected|")
        reproduced = reproduced or bool(outside.any())
    print("reproduced: ONNX Runtime differs from PyTorch" if reproduced
          else "not reproduced: ONNX Runtime agrees with PyTorch here")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
'''
