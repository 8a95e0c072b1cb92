"""Where the time of a Hugging Face decoder's export goes: the studio's stages beside
optimum-cli's, each measured in a fresh process from its start (imports included).

The studio's worker is run in-process the way `onnx-studio export hf:DIR -o OUT` runs it (the
job the CLI sends, engine.worker.job_export), for the default exporter (torch.export) and
`--exporter torchscript`; optimum-cli runs from its own virtual environment (bench_hf.VENV).
Stages are timed by wrapping the functions that do them, once their module is imported (no
profiler overhead): a stage's time is inclusive of the stages listed under it. The CLI's own
process (its imports, the worker's start) is timed apart, as `python -c "import engine.cli"`.

    python tests/benchmarks/profile_hf.py [--models qwen3 ...] [--runs 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_hf  # noqa: E402  (the models, the environment, optimum's venv)

# Run as `python -c STAGES T0 KIND -- ARGS`: wraps each (module, "Owner.attr" or "attr", label)
# as soon as its module is imported, runs the job, prints "label<TAB>seconds" lines.
STAGES = r"""
import builtins, sys, time
T0, KIND = float(sys.argv[1]), sys.argv[2]
ARGS = sys.argv[sys.argv.index("--") + 1:]
spent = {}
order = []
def note(label, seconds):
    if label not in spent:
        order.append(label)
    spent[label] = spent.get(label, 0.0) + seconds
TARGETS = {
    "studio": [
        ("engine.source.hf.loading", "load_hf", "load the model (engine.source.hf.load_hf)"),
        ("engine.source.hf.loading", "load_config",
         "  read the config (imports transformers and its model table)"),
        ("engine.source.hf.loading", "_model_class",
         "  import the model's class (modeling, generation, masks)"),
        ("engine.source.hf.parts", "export_parts", "  example inputs and the cache (model runs)"),
        ("engine.pipeline", "_write_hf_parts", "export and commit the files"),
        ("torch.onnx", "export", "  torch.onnx.export"),
        ("torch.onnx._internal.exporter._registration", "ONNXRegistry.from_torchlib",
         "    the translation table (torchlib)"),
        ("torch.export", "export", "    torch.export"),
        ("torch.export.exported_program", "ExportedProgram.run_decompositions",
         "    decompositions"),
        ("torch.onnx._internal.exporter._core", "_exported_program_to_onnx_program",
         "    translation to ONNX"),
        ("torch.onnx._internal.exporter._onnx_program", "ONNXProgram.optimize",
         "    the ONNX optimizer (onnxscript)"),
        ("torch.onnx._internal.torchscript_exporter.utils", "_model_to_graph",
         "    trace and ONNX graph (TorchScript)"),
        ("engine.export.hf_files", "_output_axes",
         "  output axes: the part run at two sizes (TorchScript)"),
        ("engine.export.hf_files", "_save_program", "  write the file (onnx_ir)"),
        ("engine.file_set", "FolderWrite.commit", "  commit the folder"),
        ("engine.pipeline", "_exported_files", "the report's file summaries"),
    ],
    "optimum": [
        ("optimum.commands.export.onnx", "ONNXExportCommand.run",
         "the export command (imports optimum.exporters.onnx, transformers; main_export)"),
        ("optimum.exporters.tasks", "TasksManager.get_model_from_task",
         "  load the model (TasksManager.get_model_from_task)"),
        ("optimum.exporters.onnx.convert", "export_pytorch", "  export (export_pytorch)"),
        ("torch.onnx", "export", "    torch.onnx.export"),
        ("torch.onnx._internal.torchscript_exporter.utils", "_model_to_graph",
         "      trace and ONNX graph (TorchScript)"),
        ("optimum.exporters.onnx.convert", "validate_models_outputs",
         "  validation (validate_models_outputs)"),
    ],
}[KIND]
pending = list(TARGETS)
def timed(function, label):
    def run(*args, **kwargs):
        if label not in spent:
            order.append(label)
            spent[label] = 0.0
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            note(label, time.perf_counter() - started)
    return run
def wrap_ready():
    for item in list(pending):
        module_name, attr, label = item
        module = sys.modules.get(module_name)
        if module is None:
            continue
        owner_name, _, name = attr.rpartition(".")
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is None or name not in getattr(owner, "__dict__", {}):
            continue
        raw = owner.__dict__[name]
        if isinstance(raw, staticmethod):
            setattr(owner, name, staticmethod(timed(raw.__func__, label)))
        elif isinstance(raw, classmethod):
            setattr(owner, name, classmethod(timed(raw.__func__, label)))
        else:
            setattr(owner, name, timed(raw, label))
        pending.remove(item)
original_import = builtins.__import__
def hooked(*args, **kwargs):
    module = original_import(*args, **kwargs)
    if pending:
        wrap_ready()
    return module
builtins.__import__ = hooked
def since_start():
    return time.time() - T0
if KIND == "studio":
    started = time.perf_counter()
    import torch
    note("import torch", time.perf_counter() - started)
    started = time.perf_counter()
    import engine.worker as worker
    from engine.cli import build_parser
    from engine.cli_args import recipe_from_args
    from engine.protocol import ExportRequest
    note("engine imports (worker, protocol)", time.perf_counter() - started)
    recipe = recipe_from_args(build_parser().parse_args(["export", *ARGS]))
    started = time.perf_counter()
    result = worker.job_export(ExportRequest(id=1, recipe=recipe.to_toml(),
                                             base_dir=str(recipe.base_dir)), lambda e: None)
    note("the job (engine.worker.job_export)", time.perf_counter() - started)
    assert result.report.ok, result.report.error
else:
    from optimum.commands.optimum_cli import main
    sys.argv = ["optimum-cli", *ARGS]
    try:
        main()
    except SystemExit:
        pass
total = since_start()
top = sum(spent[label] for label in order if not label.startswith(" "))
note("the rest (python start, imports, arguments)", total - top)
note("total (process start to end)", total)
for label in order:
    print(f"{label}\t{spent[label]:.3f}")
"""

KINDS = {  # name: (kind, python, extra arguments after the folder)
    "studio (dynamo)": ("studio", sys.executable, ()),
    "studio --exporter torchscript": ("studio", sys.executable, ("--exporter", "torchscript")),
    "optimum-cli": ("optimum", str(bench_hf.VENV / "bin" / "python"), ()),
}


def profile(kind: str, python: str, folder: Path, out: Path, extra: tuple[str, ...],
            work: Path) -> dict[str, float]:
    if kind == "studio":
        args = [f"hf:{folder}", "-o", str(out), *extra]
    else:
        args = ["export", "onnx", "--model", str(folder), "--task", bench_hf.TASK, str(out)]
    done = subprocess.run([python, "-c", STAGES, repr(time.time()), kind, "--", *args],
                          capture_output=True, text=True, env=bench_hf.environment(), cwd=work,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed: {done.stderr.strip()[-2000:]}")
    return {label: float(value) for label, value in
            (line.split("\t") for line in done.stdout.splitlines() if "\t" in line)}


def library_imports(python: str, model: str, runs: int) -> float:
    """Median wall seconds of a python start that imports torch, transformers and the model's
    class (as both tools do before any work): what each environment's libraries cost."""
    code = ("import torch, transformers; transformers.AutoConfig; "
            f"getattr(transformers, {bench_hf.SPEED[model][0]!r}.replace('Config', "
            "'ForCausalLM'))")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([python, "-c", code], env=bench_hf.environment(), check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cli_imports(runs: int) -> float:
    """Median wall seconds of the CLI process's own start: python and `import engine.cli`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import engine.cli"], env=bench_hf.environment(),
                       check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=["qwen3"], choices=list(bench_hf.SPEED))
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile_hf_"))
    kinds = dict(KINDS)
    if bench_hf.optimum_cli() is None:
        del kinds["optimum-cli"]
    for model in args.models:
        folder = bench_hf.build(model, *bench_hf.SPEED[model], work / "models")
        found: dict[str, list[dict[str, float]]] = {name: [] for name in kinds}
        for run in range(args.runs):  # interleaved
            for name, (kind, python, extra) in kinds.items():
                found[name].append(profile(kind, python, folder, work / f"{model}_{run}_{kind}",
                                           extra, work))
        print(f"\n{model}: seconds (median of {args.runs} run(s), wall)\n")
        for name, runs in found.items():
            labels = list(dict.fromkeys(label for run in runs for label in run))
            print(f"| {name} | s |\n|---|---:|")
            for label in labels:
                values = [run.get(label, 0.0) for run in runs]
                shown = label.replace("  ", "&nbsp;&nbsp;")
                print(f"| {shown} | {statistics.median(values):.2f} |")
            print()
    print(f"the CLI's own process before it starts the worker (python, import engine.cli): "
          f"{cli_imports(max(args.runs, 3)):.2f} s")
    for name, (_, python, _) in kinds.items():
        if name != "studio (dynamo)":
            print(f"{name}'s libraries: python, import torch, transformers and "
                  f"{args.models[0]}'s class: "
                  f"{library_imports(python, args.models[0], max(args.runs, 3)):.2f} s")


if __name__ == "__main__":
    main()
