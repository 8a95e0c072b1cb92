"""`onnx-studio export` against a hand-written `torch.onnx.export` script, same models, same run.

Both sides run as fresh processes (interpreter start, imports, model build, export, write), so
the ratio is what a user sees. Prints a table; target ratio <= 1.05.

    python tests/benchmarks/bench_export.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = '''
import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.MaxPool2d(2))
        self.features = nn.Sequential(block(3, 16), block(16, 32), block(32, 64))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class SmallTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 256, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(128, 1000)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))
'''

GPT2_4 = '''

class GPT2Four(GPT2):
    """Issue 16's anchor: bench_graph's GPT-2, 4 layers."""

    def __init__(self):
        super().__init__(n_layer=4)
'''

CASES = {
    "cnn": ("SmallCNN", "x", [1, 3, 64, 64], "float32", "randn", 1000),
    "transformer": ("SmallTransformer", "tokens", [2, 16], "int64", "randint", 1000),
    "gpt2 4 layers": ("GPT2Four", "input_ids", [2, 16], "int64", "randint", 64),
}

HAND_WRITTEN = '''
import sys, torch
sys.path.insert(0, {folder!r})
import models
torch.manual_seed(0)
model = models.{cls}().eval()
if {dtype!r} == "int64":
    x = torch.randint(0, {high}, {shape!r})
else:
    x = torch.randn({shape!r})
batch = torch.export.Dim("batch")
torch.onnx.export(model, (x,), {out!r}, dynamo=True, input_names=[{name!r}],
                  output_names=["out"], dynamic_shapes=({{0: batch}},))
'''

RECIPE = '''
version = 1
[model]
source = "models.py:{cls}"
[[inputs]]
name = "{name}"
shape = {shape}
dtype = "{dtype}"
fill = "{fill}"
{extra}
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "out"
dynamic = {{ 0 = "batch" }}
[export]
output = "{out}"
'''


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=list(CASES), action="append")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_export_"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.benchmarks.bench_graph import GPT2_SOURCE

    (folder / "models.py").write_text(MODELS + GPT2_SOURCE + GPT2_4)
    rows = []
    for case, (cls, name, shape, dtype, fill, high) in CASES.items():
        if args.only and case not in args.only:
            continue
        script = folder / f"hand_{case.replace(' ', '_')}.py"
        script.write_text(HAND_WRITTEN.format(folder=str(folder), cls=cls, dtype=dtype,
                                              shape=shape, name=name, high=high,
                                              out=str(folder / f"hand_{cls}.onnx")))
        recipe = folder / f"{cls}.toml"
        bounds = f"low = 0\nhigh = {high}" if fill == "randint" else ""
        recipe.write_text(RECIPE.format(cls=cls, name=name, shape=shape, dtype=dtype, fill=fill,
                                        extra=bounds,
                                        out=f"studio_{cls}.onnx"))
        hand, studio = [], []
        for _ in range(args.runs):  # interleaved so machine noise hits both sides alike
            hand.append(timed([sys.executable, str(script)]))
            studio.append(timed([sys.executable, "-m", "onnx_studio.engine.cli", "export",
                                 "--recipe",
                                 str(recipe)]))
        h, s = statistics.median(hand), statistics.median(studio)
        rows.append((case, h, s, s / h))
    print(f"\nexport wall time, median of {args.runs} runs (dynamo exporter, fresh processes)")
    print("| model | torch.onnx.export script | onnx-studio export | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for case, h, s, r in rows:
        print(f"| {case} | {h:.2f} s | {s:.2f} s | {r:.3f} |")


if __name__ == "__main__":
    main()
