"""An ONNX file read once for analysis: the graph without external data, its facts, and
initializer values read one at a time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.graph.summary import all_nodes


@dataclass
class ModelFile:
    """A .onnx file's ModelProto (external data not loaded) and where it lives."""

    path: Path
    proto: Any

    @classmethod
    def read(cls, path: Path, role: str = "") -> ModelFile:
        """Read `path`; a `source` error (exit 2) naming it when it is missing or not ONNX."""
        import onnx

        path = Path(path)
        what = f"{role} {path}" if role else str(path)
        if not path.is_file():
            raise StudioError("source", f"The file {what} does not exist; check the path.")
        try:
            proto = onnx.load(str(path), load_external_data=False)
        except Exception as exc:
            raise StudioError("source", f"{path.name} is not a readable ONNX file "
                              f"({one_line(exc)}); choose another file.",
                              details=str(exc)) from None
        if not proto.graph.node and not proto.graph.output:
            raise StudioError("source", f"{path.name} holds no ONNX graph; choose another "
                              "file.")
        return cls(path, proto)

    @property
    def size_bytes(self) -> int:
        """The file's size plus that of every external data file it names."""
        total = self.path.stat().st_size
        for location in sorted(self.external_files()):
            data = self.path.parent / location
            if data.is_file():
                total += data.stat().st_size
        return total

    def external_files(self) -> set[str]:
        found = set()
        for t in self.proto.graph.initializer:
            for entry in t.external_data:
                if entry.key == "location":
                    found.add(entry.value)
        return found

    def op_histogram(self) -> dict[str, int]:
        """Operator -> count over the graph and its subgraphs ("domain::Op" outside ai.onnx),
        most frequent first."""
        counts: Counter[str] = Counter()
        for node in all_nodes(self.proto.graph):
            counts[f"{node.domain}::{node.op_type}" if node.domain not in ("", "ai.onnx")
                   else node.op_type] += 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def opset_imports(self) -> dict[str, int]:
        return {o.domain: o.version for o in self.proto.opset_import}

    def tensors(self, which: str) -> list[dict[str, Any]]:
        """The graph's inputs (initializers excluded) or outputs as {"name", "dtype", "shape"}."""
        from onnx_studio.engine.graph.model import dtype_name

        inits = {t.name for t in self.proto.graph.initializer}
        values = self.proto.graph.input if which == "inputs" else self.proto.graph.output
        out = []
        for v in values:
            if v.name in inits:
                continue
            t = v.type.tensor_type
            shape: list[int | str] | None = None
            if t.HasField("shape"):
                shape = [d.dim_param if d.HasField("dim_param") else
                         d.dim_value if d.HasField("dim_value") else "?" for d in t.shape.dim]
            out.append({"name": v.name, "dtype": dtype_name(t.elem_type), "shape": shape})
        return out

    def initializers(self) -> dict[str, Any]:
        return {t.name: t for t in self.proto.graph.initializer}

    def array(self, tensor: Any) -> np.ndarray:
        """One initializer's values (its external data read from beside the file)."""
        from onnx import numpy_helper

        return numpy_helper.to_array(tensor, base_dir=str(self.path.parent))


def initializer_diff(a: ModelFile, b: ModelFile) -> dict[str, Any]:
    """{"added": names only in B, "removed": names only in A, "changed": [{"name",
    "max_abs_diff"}]} over initializers of the same name; a changed shape or dtype has
    max_abs_diff None and a "reason". Equal bytes are not decoded."""
    ia, ib = a.initializers(), b.initializers()
    changed: list[dict[str, Any]] = []
    for name in ia.keys() & ib.keys():
        ta, tb = ia[name], ib[name]
        if (ta.data_type == tb.data_type and list(ta.dims) == list(tb.dims)
                and not ta.external_data and not tb.external_data
                and ta.raw_data and ta.raw_data == tb.raw_data):
            continue
        va, vb = a.array(ta), b.array(tb)
        if va.shape != vb.shape or va.dtype != vb.dtype:
            changed.append({"name": name, "max_abs_diff": None,
                            "reason": f"{va.dtype}{list(va.shape)} became "
                                      f"{vb.dtype}{list(vb.shape)}"})
            continue
        if va.dtype.kind in "fc":
            diff = np.abs(va.astype(np.float64) - vb.astype(np.float64))
            both_nan = np.isnan(va) & np.isnan(vb)
            worst = float(np.nanmax(np.where(both_nan, 0.0, diff))) if diff.size else 0.0
            if np.isnan(diff[~both_nan]).any():
                worst = float("inf")
        elif va.dtype.kind in "iub":
            worst = float(np.abs(va.astype(np.int64) - vb.astype(np.int64)).max()) \
                if va.size else 0.0
        else:
            worst = 0.0 if np.array_equal(va, vb) else float("inf")
        if worst != 0.0:
            changed.append({"name": name, "max_abs_diff": worst})
    changed.sort(key=lambda c: (-(c["max_abs_diff"] if c["max_abs_diff"] is not None
                                  else float("inf")), c["name"]))
    return {"added": sorted(ib.keys() - ia.keys()), "removed": sorted(ia.keys() - ib.keys()),
            "changed": changed}
