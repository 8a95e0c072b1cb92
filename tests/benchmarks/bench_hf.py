"""The studio against its peers on Hugging Face decoders with their cache, in one invocation.

Speed (interleaved, each run a fresh process; wall seconds, and CPU seconds of the process and the
children it waited for, which a loaded machine distorts less): `onnx-studio export hf:DIR -o OUT`
(no validation; the console script's code, onnx_studio.app.launcher), the same with `--exporter
torchscript` (the faster path, Optimum's own exporter), `optimum-cli export onnx --task
text-generation-with-past` (which validates its file too: one ONNX Runtime run against the model,
always on), and the plain anchors: a `torch.onnx.export` script of the same wrapper the studio
exports, loaded as the studio loads it, by torch.export ("plain") or by the TorchScript tracer
("plain-ts"): what the exporter itself costs. Medians, and the ratios studio/optimum, studio/plain
and torchscript/plain-ts. The models: tiny Gemma, Phi3, OPT and Qwen3 decoders (the issue's), a
corpus decoder by its slug, `depth` (a Qwen2 of hidden 256 at 4, 16 and 28 layers: how the time
grows with depth), `qwen2-0.5b` (Qwen2.5-0.5B's shapes, 553M parameters, 2.2 GB; each run only
with 12 GB available), or `corpus` (every decoder of the corpus, a row that fails with a fix
timed with its fix applied); `--tools` picks the commands (e.g. `--models corpus --tools studio
plain --runs 1`: the studio beside its exporter on every decoder). `--baseline DIR` times the two
studio commands of another checkout too (e.g. `git archive main`), beside this one: before and
after.

Outcomes: for every decoder of the corpus (tests/corpus/architectures.py, read at run time so
its new rows appear here), the studio's `export --validate` beside optimum-cli's result (exit
0 with a validation warning is reported as such); a row that fails with a fix runs again with
the fix. `--catch`: whether each tool's validation catches a broken file (the largest
initializer patched to a constant).

optimum-onnx 0.1.0 pins transformers 4.57, so it runs from a virtual environment of its own
(ONNX_STUDIO_OPTIMUM_VENV, default /work/venvs/optimum; made on first use: python -m venv, pip
install torch==2.13.0 optimum-onnx==0.1.0 onnxruntime). It reads the folders the studio's
transformers (5.x) saved; a config it cannot read is its outcome.

    python tests/benchmarks/bench_hf.py [--runs 2] [--models gemma phi3 opt qwen3 | depth
                                        | qwen2-0.5b | corpus]
                                        [--tools studio studio-ts optimum plain plain-ts]
                                        [--baseline DIR] [--no-speed] [--no-outcomes] [--catch]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

VENV = Path(os.environ.get("ONNX_STUDIO_OPTIMUM_VENV", "/work/venvs/optimum"))
TASK = "text-generation-with-past"
TINY = {"vocab_size": 500, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128}
# the speed set: tiny decoders of four families (the issue's), from their config classes
SPEED = {
    "gemma": ("GemmaConfig", {**TINY, "head_dim": 8}),
    "phi3": ("Phi3Config", {**TINY, "pad_token_id": 0}),
    "opt": ("OPTConfig", {"vocab_size": 500, "hidden_size": 32, "ffn_dim": 64,
                          "num_hidden_layers": 2, "num_attention_heads": 4,
                          "word_embed_proj_dim": 32, "max_position_embeddings": 128}),
    "qwen3": ("Qwen3Config", {**TINY, "head_dim": 8}),
}
# the depth set (`--models depth`): one Qwen2 width (hidden 256) at 4, 16 and 28 layers, how the
# export time grows with depth
def depth_config(layers: int) -> tuple[str, dict[str, Any]]:
    """The depth set's decoder with `layers` layers: (config class, config)."""
    return ("Qwen2Config", {**TINY, "hidden_size": 256, "intermediate_size": 512,
                            "num_hidden_layers": layers})


DEPTH = {f"qwen2-d{n}": depth_config(n) for n in (4, 16, 28)}
# the real-size row (`--models qwen2-0.5b`): Qwen2.5-0.5B's shapes with 28 layers (553M
# parameters, 2.2 GB in float32; tests/engine/hf_models.QWEN2); each of its runs waits for
# BIG_FREE_GB of available memory (the machine is shared) and is left out without it
BIG = {"qwen2-0.5b": ("Qwen2Config", {
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 4096,
    "tie_word_embeddings": True, "num_hidden_layers": 28})}
BIG_FREE_GB = 12

# the plain anchors: the studio's own wrapper of the model (loaded as the studio loads it, from
# the same command-line arguments), exported by torch.onnx.export alone: torch.export
# ("plain", beside the default studio) or the TorchScript tracer with the inputs' dynamic axes
# ("plain-ts", beside --exporter torchscript). What the exporter itself costs.
PLAIN = r"""
import sys
from pathlib import Path
import torch
from onnx_studio.engine.cli import build_parser
from onnx_studio.engine.cli_args import recipe_from_args
from onnx_studio.engine.export.hf_files import _dims
from onnx_studio.engine.source.hf import load_for_recipe
exporter, out, argv = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
hf = load_for_recipe(recipe_from_args(build_parser().parse_args(["export", *argv, "-o", str(out)])))
out.mkdir(parents=True, exist_ok=True)
for part in hf.parts:
    common = dict(input_names=list(part.inputs), output_names=part.output_names,
                  opset_version=18)
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(part.module, tuple(part.inputs.values()), str(out / part.file),
                              dynamo=False, dynamic_axes=part.dynamic, **common)
        else:
            torch.onnx.export(part.module, tuple(part.inputs.values()), str(out / part.file),
                              dynamo=True, dynamic_shapes=_dims(part), **common)
"""

# run by the venv's python: optimum's own validation of one (possibly broken) file
OPTIMUM_VALIDATE = r"""
import sys
from pathlib import Path
from optimum.exporters.tasks import TasksManager
from optimum.exporters.onnx import validate_model_outputs
import onnx
folder, task, onnx_path = sys.argv[1:4]
model = TasksManager.get_model_from_task(task.replace("-with-past", ""), folder)
ctor = TasksManager.get_exporter_config_constructor("onnx", model, task=task)
config = ctor(model.config)
names = [o.name for o in onnx.load(onnx_path).graph.output]
try:
    validate_model_outputs(config=config, reference_model=model, onnx_model=Path(onnx_path),
                           onnx_named_outputs=names, atol=config.ATOL_FOR_VALIDATION)
except Exception as exc:
    print("CAUGHT", type(exc).__name__, str(exc)[:200].replace(chr(10), " "))
else:
    print("PASSED")
"""


def environment(root: Path = ROOT) -> dict[str, str]:
    """This environment with `root` (a checkout of the studio) first on the path."""
    env = dict(os.environ)
    others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != ROOT]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *others])
    env["HF_HUB_OFFLINE"] = "1"
    return env


def optimum_cli() -> Path | None:
    """The venv's optimum-cli, made once; None if pip cannot install it here."""
    cli = VENV / "bin" / "optimum-cli"
    if not cli.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        done = subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q",
                               "torch==2.13.0", "optimum-onnx==0.1.0", "onnxruntime"],
                              check=False)
        if done.returncode != 0:
            return None
    return cli


def transformers_version(python: str) -> str:
    """The transformers version `python` imports."""
    done = subprocess.run([python, "-c", "import transformers; print(transformers.__version__)"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


def build(name: str, config_class: str, config: dict[str, Any], folder: Path) -> Path:
    """A random-weight causal LM of `config_class` saved into folder/name (weights included:
    optimum loads them)."""
    import torch
    import transformers

    target = folder / name
    if not (target / "config.json").exists():
        torch.manual_seed(0)
        made = getattr(transformers, config_class)(**config)
        transformers.AutoModelForCausalLM.from_config(made).save_pretrained(target)
    return target


def corpus_decoders() -> list[Any]:
    """The corpus's decoder rows (tests/corpus/architectures.py, family "decoder"), read at
    run time so new rows appear here."""
    from tests.corpus import architectures

    return [arch for arch in architectures.ARCHITECTURES if arch.family == "decoder"]


def timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    seconds, _, done = timed_cpu(command, cwd)
    return seconds, done


def timed_cpu(command: list[str], cwd: Path,
              root: Path = ROOT) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall seconds, CPU seconds of the process and the children it waited for, the run),
    with the studio of `root` on the path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment(root),
                          cwd=cwd, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


# what the `onnx-studio` console script runs (onnx_studio.app.launcher), without pyenv's shim in
# front
LAUNCHER = "import sys; from onnx_studio.app.launcher import main; sys.exit(main())"


def studio(folder: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", LAUNCHER, "export", f"hf:{folder}", "-o", str(out), "--json",
            *extra]


def optimum(cli: Path, folder: Path, out: Path) -> list[str]:
    return [str(cli), "export", "onnx", "--model", str(folder), "--task", TASK, str(out)]


TOOLS = ("studio", "studio-ts", "optimum", "plain", "plain-ts")
# --baseline DIR: the same two studio commands with another checkout of the studio (before)
BASE_TOOLS = ("base", "base-ts")
# (numerator, denominator, what the ratio says)
RATIOS = (("studio", "optimum", "studio / optimum"),
          ("studio-ts", "optimum", "torchscript / optimum"),
          ("studio", "plain", "studio / plain"),
          ("studio-ts", "plain-ts", "torchscript / plain-ts"),
          ("base-ts", "optimum", "before: torchscript / optimum"),
          ("studio", "base", "studio / before"),
          ("studio-ts", "base-ts", "torchscript / before"))


def speed_models(names: list[str], work: Path) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """{name: (folder, the studio's extra arguments)}: the issue's four (SPEED), or a corpus
    row by its slug, or every corpus decoder ("corpus"); a corpus row that fails with a fix
    is timed with its fix applied (what a user runs)."""
    corpus = {arch.slug: arch for arch in corpus_decoders()}
    chosen: dict[str, tuple[Path, tuple[str, ...]]] = {}
    for name in names:
        for slug in (list(corpus) if name == "corpus" else [name]):
            if slug == "depth":
                chosen.update({d: (build(d, *DEPTH[d], work / "models"), ()) for d in DEPTH})
            elif slug in {**SPEED, **DEPTH, **BIG}:
                chosen[slug] = (build(slug, *{**SPEED, **DEPTH, **BIG}[slug], work / "models"),
                                ())
            else:
                arch = corpus[slug]
                fix = arch.fails.fix if arch.fails is not None and arch.fails.fix else ()
                chosen[slug] = (arch.build(work / "corpus"), (*arch.args, *fix))
    return chosen


def available_gb() -> float:
    """The memory available now (/proc/meminfo's MemAvailable), in GB; infinite elsewhere."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def speed(names: list[str], tools: list[str], runs: int, work: Path, cli: Path | None,
          baseline: Path | None = None) -> None:
    """Interleaved wall (and CPU) times of each tool's command on each model, every run a fresh
    process; medians and the ratios of the tools that ran. `baseline`: another checkout of the
    studio, timed as "base" and "base-ts" beside this one."""
    script = work / "plain.py"
    script.write_text(PLAIN, encoding="utf-8")
    models = speed_models(names, work)
    if cli is None:
        tools = [t for t in tools if t != "optimum"]
    if baseline is not None:  # beside the studio commands asked for
        tools = [*tools, *(b for b, t in zip(BASE_TOOLS, ("studio", "studio-ts"), strict=True)
                           if t in tools)]
    walls: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    loads = [os.getloadavg()[0]]
    for run in range(runs):
        for model, (folder, extra) in models.items():
            out = work / f"{model}_{run}"
            commands = {
                "studio": studio(folder, out / "s", *extra),
                "studio-ts": studio(folder, out / "t", *extra, "--exporter", "torchscript"),
                "optimum": optimum(cli, folder, out / "o") if cli is not None else [],
                "plain": [sys.executable, str(script), "dynamo", str(out / "p"), f"hf:{folder}",
                          *extra],
                "plain-ts": [sys.executable, str(script), "torchscript", str(out / "pt"),
                             f"hf:{folder}", *extra],
                "base": studio(folder, out / "b", *extra),
                "base-ts": studio(folder, out / "bt", *extra, "--exporter", "torchscript")}
            for tool in tools:
                if model in BIG and available_gb() < BIG_FREE_GB:
                    print(json.dumps({"model": model, "tool": tool, "run": run,
                                      "skipped": f"{available_gb():.1f} GB available"}))
                    walls.setdefault((model, tool), []).append(float("nan"))
                    cpus.setdefault((model, tool), []).append(float("nan"))
                    continue
                root = baseline if tool in BASE_TOOLS and baseline is not None else ROOT
                wall, cpu, done = timed_cpu(commands[tool], work, root)
                ok = done.returncode == 0
                print(json.dumps({"model": model, "tool": tool, "run": run,
                                  "seconds": round(wall, 2), "cpu": round(cpu, 2), "ok": ok,
                                  "load": round(os.getloadavg()[0], 2),
                                  **({} if ok else {"error": done.stderr.strip()[-300:]})}),
                      flush=True)
                walls.setdefault((model, tool), []).append(wall if ok else float("nan"))
                cpus.setdefault((model, tool), []).append(cpu if ok else float("nan"))
            shutil.rmtree(out, ignore_errors=True)
            loads.append(os.getloadavg()[0])
    print(f"\nload average (1 min) over the runs: median {statistics.median(loads):.1f}, "
          f"{min(loads):.1f} to {max(loads):.1f} (2 cores here: {os.cpu_count()})")
    ratios = [r for r in RATIOS if r[0] in tools and r[1] in tools]
    for title, times in (("wall seconds", walls), ("CPU seconds (the process and its worker)",
                                                   cpus)):
        print(f"\n{title}, median of {runs} interleaved run(s):\n")
        print("| decoder | " + " | ".join(f"{t} s" for t in tools) + " | " +
              " | ".join(r[2] for r in ratios) + " |")
        print("|---|" + "---:|" * (len(tools) + len(ratios)))
        medians: dict[str, list[float]] = {r[2]: [] for r in ratios}
        for model in models:
            med = {t: statistics.median(times[(model, t)]) for t in tools}
            for num, den, name in ratios:
                medians[name].append(med[num] / med[den])
            print(f"| {model} | " + " | ".join(f"{med[t]:.1f}" for t in tools) + " | " +
                  " | ".join(f"{med[num] / med[den]:.2f}" for num, den, _ in ratios) + " |")
        print("\nmedian ratios: " + ", ".join(
            f"{name} {statistics.median(values):.2f}" for name, values in medians.items()),
            flush=True)


def outcome_of_studio(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stdout.strip().splitlines()
    doc = json.loads(lines[-1]) if lines else {}
    if doc.get("ok"):
        generation = (doc.get("validation") or {}).get("generation") or {}
        return "exported, validated" + (", tokens equal" if generation.get("tokens_equal")
                                        else "")
    error = doc.get("error") or {}
    return f"{error.get('kind', 'no document')}: {str(error.get('message', ''))[:90]}"


def outcome_of_optimum(done: subprocess.CompletedProcess[str]) -> str:
    """optimum-cli's result: it exits 0 when its validation finds a difference too (a
    warning: "The ONNX export succeeded with the warning: ...")."""
    said = done.stdout + done.stderr
    if done.returncode == 0 and "succeeded with the warning" in said:
        warning = said.split("succeeded with the warning:", 1)[1].strip().splitlines()[0]
        return "exported, validation warned: " + warning[:90]
    if done.returncode == 0:
        return "exported, validated"
    last = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return "failed: " + (last[-1][:90] if last else f"exit {done.returncode}")


def outcomes(work: Path, cli: Path | None) -> None:
    """The studio's export --validate beside optimum-cli on every decoder of the corpus; where
    the corpus row fails with a cause whose hint has command-line arguments, the studio runs
    again with them (the hint applied)."""
    print("\n| corpus decoder | studio (export --validate) | s | optimum-cli | s |")
    print("|---|---|---:|---|---:|")
    for arch in corpus_decoders():
        folder = arch.build(work / "corpus")
        s_seconds, s_done = timed(studio(folder, work / f"cs_{arch.slug}", "--validate",
                                         *arch.args), work)
        s_text = outcome_of_studio(s_done)
        if arch.fails is not None and arch.fails.fix and s_done.returncode != 0:
            f_seconds, f_done = timed(studio(folder, work / f"cf_{arch.slug}", "--validate",
                                             *arch.args, *arch.fails.fix), work)
            s_text += f"; with `{' '.join(arch.fails.fix)}`: {outcome_of_studio(f_done)}"
            s_seconds += f_seconds
        o_text, o_seconds = "not installed", float("nan")
        if cli is not None:
            o_seconds, o_done = timed(optimum(cli, folder, work / f"co_{arch.slug}"), work)
            o_text = outcome_of_optimum(o_done)
        print(f"| {arch.name} | {s_text} | {s_seconds:.1f} | {o_text} | {o_seconds:.1f} |",
              flush=True)


def broken_copy(source: Path, target: Path) -> Path:
    """A copy of the file with its largest initializer set to 0.5 everywhere."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    biggest = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    values = numpy_helper.to_array(biggest).copy()
    values[...] = 0.5
    biggest.CopyFrom(numpy_helper.from_array(values, biggest.name))
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return target


def catch(work: Path, cli: Path | None) -> None:
    """Whether each tool's validation catches a broken model.onnx of each speed decoder."""
    from onnx_studio.engine.events import Events
    from onnx_studio.engine.source.hf import load_hf
    from onnx_studio.engine.validation.hf_checks import check_generation, check_parts

    print("\n| decoder | studio catches | optimum catches |")
    print("|---|---|---|")
    for name, (config_class, config) in SPEED.items():
        folder = build(name, config_class, config, work / "models")
        out = work / f"catch_{name}"
        timed(studio(folder, out), work)
        broken = out.parent / f"{out.name}_broken"
        shutil.copytree(out, broken, dirs_exist_ok=True)
        broken_copy(out / "model.onnx", broken / "model.onnx")
        hf = load_hf(f"hf:{folder}", folder.parent)
        caught = [] if check_parts(hf, broken, 1e-3, 1e-5, Events())["ok"] else ["outputs"]
        if not check_generation(hf, broken)["tokens_equal"]:
            caught.append("tokens")
        theirs = "not installed"
        if cli is not None:
            out_o = work / f"catch_o_{name}"
            timed(optimum(cli, folder, out_o), work)
            target = broken_copy(out_o / "model.onnx", work / f"catch_ob_{name}" / "model.onnx")
            done = subprocess.run([str(VENV / "bin" / "python"), "-c", OPTIMUM_VALIDATE,
                                   str(folder), TASK, str(target)], capture_output=True,
                                  text=True, check=False)
            last = (done.stdout.strip().splitlines() or ["error"])[-1]
            theirs = "caught" if last.startswith("CAUGHT") else "missed" \
                if last == "PASSED" else last[:60]
        print(f"| {name} | {'caught (' + ', '.join(caught) + ')' if caught else 'missed'} "
              f"| {theirs} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--models", nargs="*", default=list(SPEED),
                        help=f"speed set: {', '.join(SPEED)}; depth ({', '.join(DEPTH)}); "
                        f"{', '.join(BIG)}; a corpus decoder's slug, or corpus (every corpus "
                        "decoder)")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--no-outcomes", action="store_true")
    parser.add_argument("--catch", action="store_true")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of the studio (e.g. `git archive main`), timed "
                        "beside this one")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_hf_"))
    cli = optimum_cli() if "optimum" in args.tools or not args.no_outcomes or args.catch \
        else None
    print(f"optimum: {cli or 'not installable here'}; work folder {work}", flush=True)
    if not args.no_speed:
        speed(args.models, args.tools, args.runs, work, cli, args.baseline)
    if not args.no_outcomes:
        outcomes(work, cli)
    if args.catch:
        catch(work, cli)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
