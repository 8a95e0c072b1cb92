"""How the dynamo exporter's time grows with a decoder's depth, and whether marking each decoder
layer as a nested compile region (`torch.compiler.nested_compile_region`, the `invoke_subgraph`
higher-order op that torch 2.13's ONNX exporter translates into an ONNX function) makes it
nearly independent of depth (issue 37).

One Qwen2 width (hidden 256, the studio's own wrapper with its flat key/value cache, as
`onnx-studio export hf:DIR` exports it) at several depths; each (depth, mode) a fresh process,
interleaved, `--runs` times; medians of the stages: capture (torch.export), decompositions,
translation to ONNX, the ONNX optimizer, the whole torch.onnx.export; the file's node count
(and its functions'), the largest difference from the model in ONNX Runtime at three other
sizes, and ONNX Runtime's time for one decoding step (past 64).

Modes:
  plain      torch.onnx.export(dynamo=True) as the studio runs it
  region     each decoder layer a nested compile region (see `Region`); the optimizer then
             inlines the functions (onnxscript's default), so the file has plain nodes
  functions  region, the optimizer told to keep the functions (inline=False); where the file
             keeps them, the cost of onnx.inliner.inline_local_functions on it and ONNX Runtime
             on both forms. With torch 2.13 it never does: torch.onnx.export always passes an
             opset to onnxscript's version converter, which inlines every function first
             (measured: 0 functions, 351 nodes at 4 layers)

Why the layer needs a wrapper: transformers' decoder layers update the key/value cache object
in place (DynamicLayer.update), a side effect dynamo will not keep inside a region (it inlines
the region instead: "While compiling, we found certain side effects happened"); `Region` moves
the cache update out (the layer sees a one-step cache of its own) and passes tensors only.
Non-strict export compiles each call of a region separately and inlines a subgraph used once,
so `torch._dynamo.config.inline_single_use_invoke_subgraph` is turned off for the region modes.

    python tests/benchmarks/bench_depth.py [--layers 4 16 28] [--modes plain region functions]
                                           [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, statistics, sys, time
import torch
from pathlib import Path
from torch import nn
sys.path.insert(0, HERE)
import bench_hf
from onnx_studio.engine.export.hf_files import _dims
from onnx_studio.engine.source.hf import load_hf

layers, mode, work = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
folder = bench_hf.build(f"qwen2-d{layers}", *bench_hf.depth_config(layers), work / "models")
part = load_hf(f"hf:{folder}", folder.parent).parts[0]


class _Step:
    # the cache of one layer for one step, local to the region
    def __init__(self, keys, values):
        self.keys, self.values = keys, values

    def update(self, k, v, *args, **kwargs):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=-2)
        return self.keys, self.values


@torch.compiler.nested_compile_region
def _run(layer, hidden, mask, cos, sin, keys, values):
    step = _Step(keys, values)
    out = layer(hidden, attention_mask=mask, cache=step, use_cache=True,
                position_embeddings=(cos, sin))
    return out, step.keys, step.values


class Region(nn.Module):
    # a decoder layer whose work is one region of tensors in, tensors out; the cache object
    # is updated outside it
    def __init__(self, layer, index):
        super().__init__()
        self.layer, self.index = layer, index

    def forward(self, hidden_states, attention_mask=None, position_ids=None, cache=None,
                use_cache=False, position_embeddings=None, **kwargs):
        entry = cache.layers[self.index]
        cos, sin = position_embeddings
        out, entry.keys, entry.values = _run(self.layer, hidden_states, attention_mask, cos,
                                             sin, entry.keys, entry.values)
        return out


times = {}
def wrap(owner, attr, label):
    function = getattr(owner, attr)
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            times[label] = times.get(label, 0.0) + time.perf_counter() - started
    setattr(owner, attr, timed)

import torch.export
from torch.onnx._internal.exporter import _core, _onnx_program
wrap(torch.export, "export", "capture")
wrap(torch.export.ExportedProgram, "run_decompositions", "decompose")
wrap(_core, "_exported_program_to_onnx_program", "translate")
wrap(_onnx_program.ONNXProgram, "optimize", "optimize")
if mode != "plain":
    import torch._dynamo.config
    torch._dynamo.config.inline_single_use_invoke_subgraph = False
    stack = part.module.model.model.layers
    for i in range(len(stack)):
        stack[i] = Region(stack[i], i)
started = time.perf_counter()
with torch.no_grad():
    program = torch.onnx.export(
        part.module, tuple(part.inputs.values()), dynamo=True, input_names=list(part.inputs),
        output_names=part.output_names, dynamic_shapes=_dims(part), opset_version=18,
        optimize=mode != "functions", verbose=False)
if mode == "functions":  # the optimizer, functions kept
    import onnxscript.optimizer
    from onnxscript.rewriter import onnx_fusions
    started_optimize = time.perf_counter()
    onnxscript.optimizer.optimize_ir(program.model, inline=False)
    onnx_fusions.fuse(program.model)
    times["optimize"] = time.perf_counter() - started_optimize
times["export"] = time.perf_counter() - started
model = program.model
times["nodes"] = len(list(model.graph))
times["functions"] = len(model.functions)
times["function nodes"] = sum(len(list(f)) for f in model.functions.values())
path = work / f"d{layers}_{mode}.onnx"
program.save(str(path))
import numpy as np
import onnx
import onnx.inliner
import onnxruntime as ort

def ort_check(file):
    session = ort.InferenceSession(str(file), providers=["CPUExecutionProvider"])
    worst = 0.0
    for seed, sizes in ((3, (2, 3, 4)), (5, (1, 1, 9)), (7, (3, 5, 1))):
        inputs = part.make_inputs(seed, *sizes)
        with torch.no_grad():
            expected = part.module(*inputs.values())
        got = session.run(None, {k: v.numpy() for k, v in inputs.items()})
        worst = max(worst, max(float(np.abs(g - e.numpy()).max())
                               for g, e in zip(got, expected, strict=True)))
    feed = {k: v.numpy() for k, v in part.make_inputs(3, 1, 1, 64).items()}
    session.run(None, feed)
    steps = []
    for _ in range(20):
        started = time.perf_counter()
        session.run(None, feed)
        steps.append(time.perf_counter() - started)
    return worst, statistics.median(steps) * 1000

times["max diff"], times["ORT step ms"] = ort_check(path)
if model.functions:
    started = time.perf_counter()
    inlined = onnx.inliner.inline_local_functions(onnx.load(str(path)))
    times["inline s"] = time.perf_counter() - started
    onnx.save(inlined, str(path.with_suffix(".inlined.onnx")))
    times["inlined nodes"] = len(inlined.graph.node)
    times["inlined max diff"], times["inlined ORT step ms"] = ort_check(
        path.with_suffix(".inlined.onnx"))
print("RESULT " + json.dumps(times))
"""

COLUMNS = ("capture", "decompose", "translate", "optimize", "export", "nodes", "functions",
           "function nodes", "max diff", "ORT step ms", "inline s", "inlined nodes",
           "inlined max diff", "inlined ORT step ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="*", type=int, default=[4, 16, 28])
    parser.add_argument("--modes", nargs="*", default=["plain", "region", "functions"],
                        choices=["plain", "region", "functions"])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_depth_"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
    code = CHILD.replace("HERE", repr(str(HERE)))
    found: dict[tuple[int, str], list[dict[str, float]]] = {}
    loads = []
    for _ in range(args.runs):  # interleaved
        for layers in args.layers:
            for mode in args.modes:
                loads.append(os.getloadavg()[0])
                done = subprocess.run([sys.executable, "-c", code, str(layers), mode, str(work)],
                                      capture_output=True, text=True, env=env, check=False)
                line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                result = json.loads(line[-1][7:]) if line else {}
                print(json.dumps({"layers": layers, "mode": mode, **result,
                                  **({} if line else {"error": done.stderr[-400:]})}),
                      flush=True)
                found.setdefault((layers, mode), []).append(result)
    print(f"\nwall seconds and counts, medians of {args.runs} run(s); load average (1 min) "
          f"median {statistics.median(loads):.1f} ({min(loads):.1f} to {max(loads):.1f}), "
          f"{os.cpu_count()} cores\n")
    print("| layers | mode | " + " | ".join(COLUMNS) + " |")
    print("|---:|---|" + "---:|" * len(COLUMNS))
    for (layers, mode), runs in found.items():
        cells = []
        for column in COLUMNS:
            values = [r[column] for r in runs if column in r]
            cells.append("" if not values else f"{statistics.median(values):.3g}")
        print(f"| {layers} | {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
