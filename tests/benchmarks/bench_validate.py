"""Validation wall time next to its bare cost, for a small transformer.

Bare cost = what a hand-written check would pay for the same trials: per trial, make the
inputs, one torch forward, one onnxruntime session creation and one run. validate() creates
its session once and reuses it across trials (dynamic axes take any size), so it should come
in under the bare cost despite computing metrics, checking weights and saving plot data.
Target ratio <= 1.2. Prints a table; asserts nothing.

    cd /work/main && python tests/benchmarks/bench_validate.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

MODEL = textwrap.dedent('''
    import torch
    from torch import nn


    class TinyTransformer(nn.Module):
        def __init__(self, vocab=1000, d_model=128, heads=4, layers=4):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))
''')

RECIPE = '''version = 1

[model]
source = "model.py:TinyTransformer"

[[inputs]]
name = "tokens"
shape = [4, 32]
dtype = "int64"
fill = "randint"
low = 0
high = 1000
dynamic = { 0 = "batch", 1 = "sequence" }

[[outputs]]
name = "logits"
dynamic = { 0 = "batch", 1 = "sequence" }

[export]
output = "tiny_transformer.onnx"

[validate]
random_trials = 3
dynamic_sizes = true
'''


def bare(recipe: Any, path: Path, module: Any, plan: list[Any], *, reuse: bool = False
         ) -> float:
    """One torch forward plus one session creation and run per trial, nothing else.

    With `reuse`, one session for all trials: the floor no validation can go under.
    """
    import onnxruntime as ort
    import torch

    from onnx_studio.engine.source.inputs import make_inputs

    started = time.perf_counter()
    session = None
    for trial in plan:
        tensors = make_inputs(recipe, seed=trial.seed, sizes=trial.sizes)
        with torch.no_grad():
            module(*tensors)
        if session is None or not reuse:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
        session.run(None, {s.name: t.numpy() for s, t in zip(recipe.inputs, tensors,
                                                              strict=True)})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import torch

    from onnx_studio.engine import recipe as recipe_mod
    from onnx_studio.engine.source.inputs import dynamic_shapes, make_inputs
    from onnx_studio.engine.source.load import load_model
    from onnx_studio.engine.validation.validator import plan_trials, validate

    torch.set_num_threads(1)  # two shared cores: keep the numbers from fighting each other
    folder = Path(tempfile.mkdtemp(prefix="bench_validate_"))
    (folder / "model.py").write_text(MODEL, encoding="utf-8")
    (folder / "recipe.toml").write_text(RECIPE, encoding="utf-8")
    recipe = recipe_mod.load(folder / "recipe.toml")
    torch.manual_seed(recipe.export.seed)
    loaded = load_model(recipe)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(loaded.module, make_inputs(recipe), str(recipe.output_path),
                          dynamo=True, input_names=["tokens"], output_names=["logits"],
                          dynamic_shapes=dynamic_shapes(recipe), verbose=False)
    path = recipe.output_path
    plan = plan_trials(recipe, {"batch": 4, "sequence": 32})

    validate(recipe, path, loaded=loaded)  # warm-up: first-call imports and caches
    bare(recipe, path, loaded.module, plan)
    ours, theirs, floors = [], [], []
    result = {}
    for _ in range(args.runs):  # interleaved so all three see the same machine load
        started = time.perf_counter()
        result = validate(recipe, path, loaded=loaded)
        ours.append(time.perf_counter() - started)
        theirs.append(bare(recipe, path, loaded.module, plan))
        floors.append(bare(recipe, path, loaded.module, plan, reuse=True))
    assert result["ok"], [t["message"] for t in result["trials"]]
    v, b, f = (statistics.median(x) for x in (ours, theirs, floors))
    nodes = len(__import__("onnx").load(str(path)).graph.node)
    print(f"\nvalidation of a small transformer ({nodes} ONNX nodes, {len(plan)} trials, "
          f"median of {args.runs} runs, torch 1 thread)")
    print(f"{'model':<18} {'trials':>6} {'validate s':>11} {'bare s':>8} {'ratio':>6} "
          f"{'floor s':>8} {'vs floor':>8}")
    print(f"{'tiny-transformer':<18} {len(plan):>6} {v:>11.3f} {b:>8.3f} {v / b:>6.2f} "
          f"{f:>8.3f} {v / f:>8.2f}")
    print("bare = per trial: inputs, torch forward, ORT session creation + run; "
          "floor = the same with one session reused. Target ratio (validate / bare) <= 1.2")


if __name__ == "__main__":
    main()
