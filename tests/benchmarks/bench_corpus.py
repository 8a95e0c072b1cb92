"""The corpus of real architectures, as a table: docs/hugging-face.md, "Architectures".

Every row of tests/corpus/architectures.py (a tiny random-weight transformers model saved with
save_pretrained, no download) is exported as a user would, `onnx-studio export hf:DIR -o OUT
--validate` (its recipe, as `--save-recipe` writes it), and a failing row again with its fix
applied: every export in one `onnx-studio batch ... --workers N` (each in a worker of its own,
its row read from results.jsonl); every row of tests/corpus/model_files.py (the same models
written as a model file) with the defaults, then with its hint applied. Each ok verdict is
checked again apart from the studio (tests/corpus/independent.py: ONNX Runtime against eager
PyTorch at another batch and other lengths). Medians of --runs N (default 1) for the seconds.

    python tests/benchmarks/bench_corpus.py [--runs 3] [--only GPT-2 T5] [--workers 2]

With --workers above 1 the seconds are those of exports sharing the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from tests.corpus.architectures import ARCHITECTURES, Architecture  # noqa: E402
from tests.corpus.independent import check_folder, static_dims  # noqa: E402
from tests.corpus.model_files import MODEL_FILES, ModelFile  # noqa: E402


def recipe_of(argv: list[str], path: Path) -> Path:
    """The recipe `onnx-studio ARGV --save-recipe PATH` would write (the CLI's own parse),
    written without running the export; its absolute path."""
    from onnx_studio.engine.cli import build_parser, save_recipe_as
    from onnx_studio.engine.cli_args import recipe_from_args

    save_recipe_as(recipe_from_args(build_parser().parse_args(argv)), path)
    return path.resolve()


def batch_run(recipes: list[Path], report: Path, workers: int, resume: bool = False
              ) -> dict[Path, tuple[int, dict[str, Any], float]]:
    """Every recipe through one `onnx-studio batch ... --workers N` (a process; each item in a
    worker of its own): by recipe, (exit status the item's export would have, its document,
    its seconds), read from REPORT/results.jsonl; `resume`: the items it holds already are
    not run again (batch --resume)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "onnx_studio.engine.cli", "batch", *map(str, recipes),
                    "-o",
                    str(report), "--workers", str(workers), "--json",
                    *(["--resume"] if resume else [])], capture_output=True,
                   text=True, env=env, check=False)
    found: dict[Path, tuple[int, dict[str, Any], float]] = {}
    results = report / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines() if results.is_file() else []
    for line in lines:
        record = json.loads(line)
        doc = record.get("report") or {"ok": False, "error": record.get("error") or {
            "kind": "crash", "message": "no report", "hint": None}}
        found[Path(record["recipe"]).resolve()] = (0 if doc["ok"] else 1, doc,
                                                   float(record.get("seconds") or 0.0))
    missing = {"ok": False, "error": {"kind": "crash", "hint": None,
                                      "message": "the batch wrote no record for it"}}
    return {recipe: found.get(recipe, (1, missing, 0.0)) for recipe in recipes}


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdict(doc: dict[str, Any], source: Path | None,
            static: dict[str, int] | None = None) -> tuple[str, str, str, str]:
    """(exported, validated, warnings, cause — hint) of one run; an ok verdict checked apart."""
    validation = doc.get("validation") or {}
    warnings = doc.get("warnings", []) + (validation.get("warnings") or [])
    exported = "yes" if doc.get("files") or (doc["ok"] and doc.get("output")) else "no"
    if doc["ok"]:
        confirmed = ""
        if source is not None:
            files = [f["name"] for f in doc["files"]]
            problems = check_folder(source, Path(doc["output"]), doc["task"], files, static)
            confirmed = " (confirmed)" if not problems else f" (NOT confirmed: {problems[0]})"
        generation = validation.get("generation")
        tokens = f"; {generation['steps']} tokens equal" if generation else ""
        return exported, "yes" + confirmed + tokens, str(len(warnings)), ""
    error = doc["error"]
    validated = "no" if error["kind"] == "validation" else "—"
    return (exported, validated, str(len(warnings)),
            cell(f"{error['kind']}: {error['message']} — {error.get('hint') or '(no hint)'}"))


def hf_jobs(arch: Architecture, folder: Path, runs: int) -> list[tuple[str, list[Path]]]:
    """Each attempt of a row (the defaults, then its fix) with its recipes, one a run."""
    source = arch.build(folder)
    fix = arch.fails.fix if arch.fails else None  # None: no argument fixes the row
    attempts = [list(arch.args)] + ([[*arch.args, *fix]] if fix is not None else [])
    jobs = []
    for index, args in enumerate(attempts):
        label = arch.name + (f" ({' '.join(args)})" if args else "")
        stem = f"{arch.slug}_{index}"
        jobs.append((label, [recipe_of(["export", f"hf:{source}", "-o",
                                        str(folder / f"out_{stem}_{run}"), "--validate",
                                        *args], folder / f"{stem}_{run}.toml")
                             for run in range(runs)]))
    return jobs


def hf_row(arch: Architecture, folder: Path, label: str,
           results: list[tuple[int, dict[str, Any], float]]) -> list[str]:
    status, doc, _ = results[-1]
    seconds = statistics.median(r[2] for r in results)
    files = ", ".join(f["name"] for f in doc.get("files") or []) or "—"
    static = static_dims(label.replace("(", " ").replace(")", " ").split())  # the fix's
    exported, validated, warnings, cause = verdict(doc, folder / arch.slug, static)
    expected = "expected to fail for now: " + arch.pending if arch.pending else ""
    print(f"{label}: exit {status}, {validated if doc['ok'] else cause}", file=sys.stderr,
          flush=True)
    return [label, arch.family, arch.model_class, doc.get("task") or "—", files, exported,
            validated, warnings, f"{seconds:.1f}", cause or expected or arch.notes]


def file_jobs(row: ModelFile, folder: Path, runs: int) -> list[tuple[str, list[Path]]]:
    """Each attempt of a model-file row (the defaults, then the hint applied) with its recipes,
    one a run."""
    jobs = []
    for attempt, kwargs in enumerate(row.attempts()):
        label = row.name + (" (" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"
                            if kwargs else "")
        jobs.append((label, [row.write(folder / f"run{run}", attempt).resolve()
                             for run in range(runs)]))
    return jobs


def file_row(row: ModelFile, label: str, results: list[tuple[int, dict[str, Any], float]]
             ) -> list[str]:
    _, doc, _ = results[-1]
    exported, validated, warnings, cause = verdict(doc, None)
    return [label, "model file", row.model_class, "—", "—", exported, validated, warnings,
            f"{statistics.median(r[2] for r in results):.1f}", cause]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="architecture names (default: all)")
    parser.add_argument("--workers", type=int, default=1,
                        help="exports at a time (1: each export's time alone)")
    args = parser.parse_args()
    chosen = [a for a in ARCHITECTURES if not args.only or a.name in args.only]
    files = [m for m in MODEL_FILES if not args.only or m.name in args.only]
    rows: list[list[str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hf = [(arch, label, recipes) for arch in chosen
              for label, recipes in hf_jobs(arch, folder, args.runs)]
        model_files = [(row, label, recipes) for row in files
                       for label, recipes in file_jobs(row, folder, args.runs)]
        every = [r for _, _, recipes in hf + model_files for r in recipes]
        done = batch_run(every, folder / "report", args.workers)
        for arch, label, recipes in hf:
            rows.append(hf_row(arch, folder, label, [done[r] for r in recipes]))
        for model_file, label, recipes in model_files:
            rows.append(file_row(model_file, label, [done[r] for r in recipes]))
    elapsed = time.perf_counter() - started
    header = ["architecture", "family", "class", "task", "files", "exported", "validated",
              "warnings", "seconds", "cause — hint, or notes"]
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---:" if h in ("warnings", "seconds") else "---"
                            for h in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    passed = sum(1 for r in rows if r[6].startswith("yes"))
    print(f"\n{len(chosen) + len(files)} architectures, {len(rows)} exports, {passed} exported "
          f"and validated; {args.runs} run(s), {elapsed:.0f} s in all.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
