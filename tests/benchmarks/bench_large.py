"""Multi-GB models: `onnx-studio export` against a plain `torch.onnx.export` script.

A stack of Linear(4096, 4096) layers (64 MiB each), 1 GB and about 2.5 GB of weights. Each
command runs as a fresh process; wall time and peak resident memory (the largest process of
the command's tree, from getrusage) are printed side by side, with the ratio. Rows:

- external data on both sides (`external_data = "always"` / `external_data=True`);
- the default: the studio's `external_data = "auto"` against the plain script's inline write
  (`external_data=False`, what a user who wants one file writes) and its external write;
- export + validate with external data (no anchor: validation has no plain-script twin).

`--hf LAYERS`: instead, a Qwen2 decoder with its cache built from a config with random weights
(`hf-config:`, Qwen2.5-0.5B's shapes with LAYERS layers; 28 give 553M parameters, 2.2 GB in
float32): `export` and `export --validate` (external_data "auto": a data file per .onnx), with
the peak as a multiple of the weights (the issue's bound: 3x).

`--decoders`: export + validate (every trial, 20 greedy tokens) of real-size decoders built
from their configs: the 0.5B Qwen2 above, Llama-3.2-1B's shapes (1.24B, 4.9 GB) and
Llama-3.2-3B's (3.2B, 12.8 GB, skipped when the machine has not 1.25x its weights + 2 GiB
free), the peak as the largest sum of the command's process tree (issue 37's bound: 1.5x).

    python tests/benchmarks/bench_large.py [--runs 3] [--sizes 1 2.5] [--keep DIR]
    python tests/benchmarks/bench_large.py --hf 28 [--runs 1]
    python tests/benchmarks/bench_large.py --decoders qwen2-0.5b llama-1b llama-3b [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine.hf_models import llama_folder, qwen2_folder, tree_peak

MODEL = '''
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self, layers: int = {layers}):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4096, 4096) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x
'''

PLAIN = '''
import sys, torch
sys.path.insert(0, {folder!r})
import big
torch.manual_seed(0)
model = big.Stack().eval()
x = torch.randn(2, 4096)
torch.onnx.export(model, (x,), {out!r}, dynamo=True, input_names=["x"], output_names=["y"],
                  opset_version=18, external_data={external})
'''

RECIPE = '''
version = 1
[model]
source = "big.py:Stack"
[[inputs]]
name = "x"
shape = [2, 4096]
dtype = "float32"
fill = "randn"
[[outputs]]
name = "y"
[export]
output = "{out}"
exporter = "dynamo"
opset = 18
external_data = "{external}"
[validate]
enabled = {validate}
random_trials = 1
'''

# Runs `cmd` and prints {"seconds", "peak_mib"} for it: the largest resident set of any process
# in its tree that was waited for (the CLI and its worker).
MEASURE = '''
import json, resource, subprocess, sys, time
cmd = json.loads(sys.argv[1])
started = time.perf_counter()
result = subprocess.run(cmd, capture_output=True, text=True)
seconds = time.perf_counter() - started
if result.returncode != 0:
    sys.stderr.write(result.stderr[-3000:])
    sys.exit(result.returncode)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak}))
'''


def measure(cmd: list[str]) -> tuple[float, float]:
    result = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(cmd)],
                            capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures["seconds"], figures["peak_mib"]


def hf_rows(layers: int, runs: int, folder: Path) -> None:
    """Export, and export + validate, of a Qwen2 built from its config: time, peak, factor."""
    model, weight_bytes = qwen2_folder(folder, layers)
    print(f"\nQwen2 decoder with its cache, {layers} layers: {weight_bytes / 1e9:.2f} GB of "
          f"float32 weights; median of {runs} runs (fresh processes; peak = largest process)")
    print("| case | seconds | peak MiB | peak / weights |")
    print("| --- | ---: | ---: | ---: |")
    for what, extra in (("export", []), ("export + validate", ["--validate"])):
        out = folder / f"out_{layers}_{len(extra)}"
        found = [measure([sys.executable, "-m", "onnx_studio.engine.cli", "export",
                          f"hf-config:{model}",
                          "-o", str(out), *extra]) for _ in range(runs)]
        seconds, peak = _median(found) or (0.0, 0.0)
        print(f"| {what} | {seconds:.0f} | {peak:.0f} | {peak * 2**20 / weight_bytes:.2f} |",
              flush=True)


def decoder_rows(names: list[str], runs: int, folder: Path) -> None:
    """Export + validate of each named decoder: seconds, peak of the process tree, factor."""
    import psutil

    print(f"\nexport + validate (--validate: every trial, 20 greedy tokens), median of {runs} "
          "run(s); peak = largest sum of the command's process tree")
    print("| model | parameters | weights GB | seconds | peak GiB | peak / weights |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        model, weight_bytes = (qwen2_folder(folder, 28) if name == "qwen2-0.5b"
                               else llama_folder(folder, name.removeprefix("llama-")))
        if psutil.virtual_memory().available < 1.25 * weight_bytes + 2 * 2**30:
            print(f"| {name} | — | {weight_bytes / 1e9:.2f} | skipped: not enough free memory "
                  "| — | — |", flush=True)
            continue
        found = []
        for _ in range(runs):
            out = folder / f"out_{name}"
            code, _, stderr, peak, seconds = tree_peak(
                [sys.executable, "-m", "onnx_studio.engine.cli", "export", f"hf-config:{model}",
                 "-o", str(out), "--validate", "--json"], folder)
            if code != 0:
                raise SystemExit(f"{name} failed:\n{stderr[-3000:]}")
            found.append((seconds, peak / 2**20))
        seconds, peak = _median(found) or (0.0, 0.0)
        print(f"| {name} | {weight_bytes / 4e9:.2f}B | {weight_bytes / 1e9:.2f} | {seconds:.0f} "
              f"| {peak / 1024:.2f} | {peak * 2**20 / weight_bytes:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hf", type=int, metavar="LAYERS",
                        help="a Qwen2 decoder of LAYERS layers instead (28: 2.2 GB)")
    parser.add_argument("--sizes", type=float, nargs="*", default=[1.0, 2.5],
                        help="weights in GB (1 GB = 16 layers of 64 MiB)")
    parser.add_argument("--keep", type=Path, help="a folder to keep the files in")
    parser.add_argument("--decoders", nargs="+", metavar="NAME",
                        choices=["qwen2-0.5b", "llama-1b", "llama-3b"],
                        help="export + validate of these real-size decoders instead")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench_large_"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.decoders or args.hf:  # the decoders' or the Qwen2's table instead of the sizes'
        try:
            if args.decoders:
                decoder_rows(args.decoders, args.runs, folder)
            else:
                hf_rows(args.hf, args.runs, folder)
        finally:
            if args.keep is None:
                shutil.rmtree(folder, ignore_errors=True)
        return
    rows = []
    try:
        for size in args.sizes:
            layers = round(size * 16)
            case = folder / f"{layers}"
            case.mkdir(exist_ok=True)
            (case / "big.py").write_text(MODEL.format(layers=layers))
            label = f"{layers * 64 / 1024:.2f} GiB"

            def plain(external: bool, case: Path = case) -> list[str]:
                script = case / f"plain_{external}.py"
                script.write_text(PLAIN.format(folder=str(case), external=external,
                                               out=str(case / f"plain_{external}.onnx")))
                return [sys.executable, str(script)]

            def studio(external: str, validate: bool, case: Path = case) -> list[str]:
                recipe = case / f"studio_{external}_{validate}.toml"
                recipe.write_text(RECIPE.format(out=f"studio_{external}_{validate}.onnx",
                                                external=external,
                                                validate=str(validate).lower()))
                return [sys.executable, "-m", "onnx_studio.engine.cli", "export", "--recipe",
                        str(recipe)]

            pairs = [
                ("external data", plain(True), studio("always", False)),
                ("default (studio auto / plain inline)", plain(False), studio("auto", False)),
                ("default (studio auto / plain external)", plain(True), studio("auto", False)),
                ("export + validate, external", None, studio("always", True)),
            ]
            for what, anchor, ours in pairs:
                a_runs: list[tuple[float, float]] = []
                o_runs: list[tuple[float, float]] = []
                for _ in range(args.runs):  # interleaved: machine noise hits both sides
                    if anchor is not None:
                        a_runs.append(measure(anchor))
                    o_runs.append(measure(ours))
                rows.append((label, what, _median(a_runs), _median(o_runs)))
                print(f"  {_row(*rows[-1])}", file=sys.stderr, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\nmulti-GB export, median of {args.runs} runs (fresh processes; peak = largest "
          "process)")
    print("| weights | case | plain script | onnx-studio | time ratio | memory ratio |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(_row(*row))


def _row(label: str, what: str, anchor: tuple[float, float] | None,
         ours: tuple[float, float] | None) -> str:
    assert ours is not None
    if anchor is None:
        return f"| {label} | {what} | — | {ours[0]:.1f} s, {ours[1]:.0f} MiB | — | — |"
    return (f"| {label} | {what} | {anchor[0]:.1f} s, {anchor[1]:.0f} MiB | "
            f"{ours[0]:.1f} s, {ours[1]:.0f} MiB | {ours[0] / anchor[0]:.2f} | "
            f"{ours[1] / anchor[1]:.2f} |")


def _median(runs: list[tuple[float, float]]) -> tuple[float, float] | None:
    if not runs:
        return None
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


if __name__ == "__main__":
    main()
