"""The studio against `optimum-cli export onnx` on the same tiny Hugging Face models: seconds,
files, input/output names, and whether each tool's validation catches a broken file (the
largest initializer of the exported model.onnx patched to a constant).

optimum-onnx 0.1.0 pins transformers 4.57, so it runs from a virtual environment of its own
under the cache folder (made on first use: python -m venv + pip install optimum-onnx==0.1.0).

    python tests/benchmarks/bench_hf.py [bert gpt2 llama qwen2 t5 whisper vit]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.engine.hf_models import build, studio_export  # noqa: E402

VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "onnx-studio-bench" \
    / "optimum-venv"
TASKS = {"bert": "text-classification", "gpt2": "text-generation-with-past",
         "llama": "text-generation-with-past", "qwen2": "text-generation-with-past",
         "t5": "text2text-generation-with-past",
         "whisper": "automatic-speech-recognition-with-past", "vit": "image-classification"}

# run by the venv's python: optimum's own validation of one (possibly broken) file
OPTIMUM_VALIDATE = r"""
import sys
from pathlib import Path
from transformers import AutoConfig
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


def optimum_python() -> Path | None:
    """The venv's python with optimum-onnx installed, made once; None if pip cannot get it."""
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "optimum-cli").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q",
                               "optimum-onnx==0.1.0", "onnxruntime"], check=False)
        if done.returncode != 0:
            return None
    return python


def names(path: Path) -> tuple[list[str], list[str]]:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return [i.name for i in model.graph.input], [o.name for o in model.graph.output]


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


def studio_catches(folder: Path, out: Path, name: str) -> str:
    from engine.events import Events
    from engine.source.hf import load_hf
    from engine.validation.hf_checks import check_generation, check_parts

    broken = out.parent / f"{out.name}_broken"
    shutil.copytree(out, broken, dirs_exist_ok=True)
    first = "model.onnx" if (out / "model.onnx").exists() else "decoder_model.onnx"
    broken_copy(out / first, broken / first)
    hf = load_hf(f"hf:{folder}", folder.parent)
    parts = check_parts(hf, broken, 1e-3, 1e-5, Events())
    caught = [] if parts["ok"] else ["outputs"]
    if hf.generates and not check_generation(hf, broken)["tokens_equal"]:
        caught.append("tokens")
    return "caught (" + ", ".join(caught) + ")" if caught else "missed"


def optimum_catches(python: Path, folder: Path, out: Path, task: str) -> str:
    first = "model.onnx" if (out / "model.onnx").exists() else "decoder_model.onnx"
    if not (out / first).exists():
        return "n/a"
    broken = broken_copy(out / first, out.parent / f"{out.name}_broken" / first)
    done = subprocess.run([str(python), "-c", OPTIMUM_VALIDATE, str(folder),
                           task, str(broken)],
                          capture_output=True, text=True, check=False)
    last = (done.stdout.strip().splitlines() or ["error: " + done.stderr.strip()[-150:]])[-1]
    return "caught" if last.startswith("CAUGHT") else "missed" if last == "PASSED" else last


def main(models: list[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench_hf_"))
    python = optimum_python()
    print(f"optimum: {'venv ' + str(VENV) if python else 'not installable here'}", flush=True)
    rows = []
    for name in models:
        folder = build(name, work / "models")
        out = work / f"studio_{name}"
        started = time.perf_counter()
        code, doc, _ = studio_export(f"hf:{folder}", out)
        studio_s = time.perf_counter() - started
        files = sorted(p.name for p in out.glob("*.onnx"))
        first = out / files[0] if files else None
        row = {"model": name, "tool": "studio", "seconds": round(studio_s, 1),
               "ok": code == 0, "files": files,
               "names": names(out / ("model.onnx" if "model.onnx" in files else
                                     "decoder_with_past_model.onnx")) if first else None,
               "broken_file": studio_catches(folder, out, name) if code == 0 else "n/a",
               "generation": (doc.get("validation") or {}).get("generation", {}).get(
                   "tokens_equal")}
        print(json.dumps(row), flush=True)
        rows.append(row)
        if python is None:
            continue
        out_o = work / f"optimum_{name}"
        started = time.perf_counter()
        done = subprocess.run([str(VENV / "bin" / "optimum-cli"), "export", "onnx", "--model",
                               str(folder), "--task", TASKS[name], str(out_o)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        optimum_s = time.perf_counter() - started
        files_o = sorted(p.name for p in out_o.glob("*.onnx"))
        row = {"model": name, "tool": "optimum", "seconds": round(optimum_s, 1),
               "ok": done.returncode == 0, "files": files_o,
               "names": names(out_o / ("model.onnx" if "model.onnx" in files_o else
                                       "decoder_with_past_model.onnx")) if files_o else None,
               "broken_file": optimum_catches(python, folder, out_o, TASKS[name])
               if files_o else "n/a",
               "error": None if done.returncode == 0 else done.stderr.strip()[-300:]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print(f"{'model':8} {'tool':8} {'s':>6}  {'ok':3} {'files':55} broken file")
    for r in rows:
        print(f"{r['model']:8} {r['tool']:8} {r['seconds']:6.1f}  {'yes' if r['ok'] else 'no':3} "
              f"{', '.join(r['files']) or '-':55} {r['broken_file']}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(TASKS))
