"""Where the time of a Hugging Face decoder's export goes: the studio's stages beside
optimum-cli's, each measured in a fresh process from its start (imports included).

The studio's worker is run in-process the way `onnx-studio export hf:DIR -o OUT` runs it (the job
the CLI sends, onnx_studio.engine.worker.job_export), for the default exporter (torch.export) and
`--exporter torchscript`; optimum-cli runs from its own virtual environment (bench_hf.VENV). Stages
are timed by wrapping the functions that do them once their module is imported (no profiler
overhead); a stage's time includes the stages indented under it. Each stage has its CPU seconds (the
process's, every thread; what a loaded machine distorts least) and its wall seconds. Apart: the
CLI's own process before it starts the worker, and each environment's libraries (python, torch,
transformers and the model's class imported, nothing done).

    python tests/benchmarks/profile_hf.py [--models qwen3 ...] [--runs 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
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

# Run as `python -c STAGES KIND -- ARGS`: wraps each (depth, module, "Owner.attr" or "attr",
# label) as soon as its module is imported, runs the job, prints one JSON list of
# [depth, label, cpu seconds, wall seconds] in the order the stages started.
STAGES = r"""
import builtins, json, sys, time
KIND = sys.argv[1]
ARGS = sys.argv[sys.argv.index("--") + 1:]
stages = {}  # label: [depth, cpu, wall], in the order they started
def note(depth, label, cpu, wall):
    entry = stages.setdefault(label, [depth, 0.0, 0.0])
    entry[1] += cpu
    entry[2] += wall
TARGETS = {
    "studio": [
        (1, "onnx_studio.engine.source.hf.loading", "load_hf",
         "load the model (onnx_studio.engine.source.hf.load_hf)"),
        (2, "onnx_studio.engine.source.hf.loading", "load_config",
         "read the config (imports transformers and its model table)"),
        (2, "onnx_studio.engine.source.hf.loading", "_model_class",
         "import the model's class (modeling, generation, masks)"),
        (2, "onnx_studio.engine.source.hf.parts", "export_parts",
         "example inputs and the cache (model runs)"),
        (1, "onnx_studio.engine.pipeline", "_write_hf_parts", "export and commit the files"),
        (2, "torch.onnx", "export", "torch.onnx.export"),
        (3, "torch.onnx._internal.exporter._registration", "ONNXRegistry.from_torchlib",
         "the translation table (torchlib)"),
        (3, "torch.export", "export", "torch.export"),
        (3, "torch.export.exported_program", "ExportedProgram.run_decompositions",
         "decompositions"),
        (3, "torch.onnx._internal.exporter._core", "_exported_program_to_onnx_program",
         "translation to ONNX"),
        (3, "torch.onnx._internal.exporter._onnx_program", "ONNXProgram.optimize",
         "the ONNX optimizer (onnxscript)"),
        (3, "torch.onnx._internal.torchscript_exporter.utils", "_model_to_graph",
         "trace and ONNX graph (TorchScript)"),
        (2, "onnx_studio.engine.export.hf_files", "_output_axes",
         "output axes: the part run at two sizes (TorchScript)"),
        (2, "onnx_studio.engine.export.hf_files", "_save_program", "write the file (onnx_ir)"),
        (2, "onnx_studio.engine.file_set", "FolderWrite.commit", "commit the folder"),
        (1, "onnx_studio.engine.pipeline", "_exported_files", "the report's file summaries"),
    ],
    "optimum": [
        (0, "optimum.commands.export.onnx", "ONNXExportCommand.run",
         "the export command (imports optimum.exporters.onnx, transformers; main_export)"),
        (1, "optimum.exporters.tasks", "TasksManager.get_model_from_task",
         "load the model (TasksManager.get_model_from_task)"),
        (1, "optimum.exporters.onnx.convert", "export_pytorch", "export (export_pytorch)"),
        (2, "torch.onnx", "export", "torch.onnx.export"),
        (3, "torch.onnx._internal.torchscript_exporter.utils", "_model_to_graph",
         "trace and ONNX graph (TorchScript)"),
        (1, "optimum.exporters.onnx.convert", "validate_models_outputs",
         "validation (validate_models_outputs)"),
    ],
}[KIND]
pending = list(TARGETS)
def timed(function, depth, label):
    def run(*args, **kwargs):
        stages.setdefault(label, [depth, 0.0, 0.0])
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            note(depth, label, time.process_time() - cpu, time.perf_counter() - wall)
    return run
def wrap_ready():
    for item in list(pending):
        depth, module_name, attr, label = item
        module = sys.modules.get(module_name)
        if module is None:
            continue
        owner_name, _, name = attr.rpartition(".")
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is None or name not in getattr(owner, "__dict__", {}):
            continue
        raw = owner.__dict__[name]
        if isinstance(raw, staticmethod):
            setattr(owner, name, staticmethod(timed(raw.__func__, depth, label)))
        elif isinstance(raw, classmethod):
            setattr(owner, name, classmethod(timed(raw.__func__, depth, label)))
        else:
            setattr(owner, name, timed(raw, depth, label))
        pending.remove(item)
original_import = builtins.__import__
def hooked(*args, **kwargs):
    module = original_import(*args, **kwargs)
    if pending:
        wrap_ready()
    return module
builtins.__import__ = hooked
def step(label, run):
    cpu, wall = time.process_time(), time.perf_counter()
    stages.setdefault(label, [0, 0.0, 0.0])
    value = run()
    note(0, label, time.process_time() - cpu, time.perf_counter() - wall)
    return value
if KIND == "studio":
    step("import torch", lambda: __import__("torch"))
    def engine_imports():
        import onnx_studio.engine.worker
        from onnx_studio.engine.cli import build_parser
        from onnx_studio.engine.cli_args import recipe_from_args
        from onnx_studio.engine.protocol import ExportRequest
        from onnx_studio.engine.recipe.writing import to_toml
        return (onnx_studio.engine.worker, build_parser, recipe_from_args, ExportRequest,
                to_toml)
    worker, build_parser, recipe_from_args, ExportRequest, to_toml = step(
        "engine imports (worker, protocol)", engine_imports)
    recipe = recipe_from_args(build_parser().parse_args(["export", *ARGS]))
    result = step("the job (onnx_studio.engine.worker.job_export)", lambda: worker.job_export(
        ExportRequest(id=1, recipe=to_toml(recipe), base_dir=str(recipe.base_dir)),
        lambda event: None))
    assert result.report.ok, result.report.error
else:
    from optimum.commands.optimum_cli import main
    sys.argv = ["optimum-cli", *ARGS]
    try:
        main()
    except SystemExit:
        pass
print(json.dumps([[depth, label, cpu, wall] for label, (depth, cpu, wall) in stages.items()]))
if KIND == "studio":  # the worker skips the interpreter's teardown (onnx_studio.engine.worker):
    # so here
    sys.stdout.flush()
    import os
    os._exit(0)
"""

KINDS = {  # name: (kind, python, extra arguments after the folder)
    "studio (dynamo)": ("studio", sys.executable, ()),
    "studio --exporter torchscript": ("studio", sys.executable, ("--exporter", "torchscript")),
    "optimum-cli": ("optimum", str(bench_hf.VENV / "bin" / "python"), ()),
}
TOTAL = "total (process start to end)"
REST = "the rest (python start, other imports, arguments)"


def run_timed(command: list[str], work: Path) -> tuple[float, float, str]:
    """(CPU seconds of the child, wall seconds, its standard output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=bench_hf.environment(),
                          cwd=work, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command[:3]} failed: {done.stderr.strip()[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, wall, done.stdout


def profile(kind: str, python: str, folder: Path, out: Path, extra: tuple[str, ...],
            work: Path) -> dict[str, tuple[int, float, float]]:
    """{label: (depth, cpu, wall)} of one fresh process, with its total and the rest."""
    if kind == "studio":
        args = [f"hf:{folder}", "-o", str(out), *extra]
    else:
        args = ["export", "onnx", "--model", str(folder), "--task", bench_hf.TASK, str(out)]
    cpu, wall, stdout = run_timed([python, "-c", STAGES, kind, "--", *args], work)
    found = {label: (depth, c, w) for depth, label, c, w in json.loads(stdout.splitlines()[-1])}
    top = [v for v in found.values() if v[0] == 0]
    found[REST] = (0, cpu - sum(v[1] for v in top), wall - sum(v[2] for v in top))
    found[TOTAL] = (0, cpu, wall)
    return found


def imports_only(python: str, code: str, runs: int, work: Path) -> tuple[float, float]:
    """Median (CPU, wall) seconds of `python -c code`, over `runs` fresh processes."""
    times = [run_timed([python, "-c", code], work)[:2] for _ in range(runs)]
    return (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))


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
        found: dict[str, list[dict[str, tuple[int, float, float]]]] = {n: [] for n in kinds}
        for run in range(args.runs):  # interleaved
            for name, (kind, python, extra) in kinds.items():
                found[name].append(profile(kind, python, folder,
                                           work / f"{model}_{run}_{len(found[name])}_{kind}",
                                           extra, work))
        print(f"\n{model}: medians of {args.runs} run(s)")
        for name, runs in found.items():
            print(f"\n| {name} | CPU s | wall s |\n|---|---:|---:|")
            for label in dict.fromkeys(label for run in runs for label in run):
                depth = next(run[label][0] for run in runs if label in run)
                cpu = statistics.median(run.get(label, (0, 0.0, 0.0))[1] for run in runs)
                wall = statistics.median(run.get(label, (0, 0.0, 0.0))[2] for run in runs)
                print(f"| {'&nbsp;' * 4 * depth}{label} | {cpu:.2f} | {wall:.2f} |")
        class_name = bench_hf.SPEED[model][0].replace("Config", "ForCausalLM")
        libraries = ("import torch, transformers; transformers.AutoConfig; "
                     f"transformers.{class_name}")
        print("\n| a fresh process that only imports | CPU s | wall s |\n|---|---:|---:|")
        runs = max(args.runs, 3)
        for what, python, code in (
                ("python, onnx_studio.engine.cli (the CLI's process before the worker starts)",
                 sys.executable, "import onnx_studio.engine.cli"),
                (f"python, torch, transformers {bench_hf.transformers_version(sys.executable)}"
                 f" and {class_name} (the studio's worker)", sys.executable, libraries),
                (f"python, torch, transformers "
                 f"{bench_hf.transformers_version(kinds['optimum-cli'][1])} and {class_name} "
                 "(optimum-cli)", kinds["optimum-cli"][1], libraries)
                if "optimum-cli" in kinds else ("", "", "")):
            if what:
                cpu, wall = imports_only(python, code, runs, work)
                print(f"| {what} | {cpu:.2f} | {wall:.2f} |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
