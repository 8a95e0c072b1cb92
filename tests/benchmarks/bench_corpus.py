"""The corpus of real architectures, as a table: the README's "Real architectures" section.

Every architecture of tests/corpus/architectures.py (tiny random-weight Hugging Face
transformers models built from their config classes, no download) is exported with the
defaults, and, when that fails, again with each hint applied (the fix added to model.kwargs):
all of them in one `onnx-studio batch R1.toml R2.toml ... -o REPORT --workers N --json` (in
process; each recipe validated, each item in a worker of its own, its row read from
REPORT/results.jsonl). Beside it, in the same process run, a plain
`torch.onnx.export(model, args, dynamo=True)` of the same model, written to a file: the
ratio is the studio's export (its whole run minus the validation) over that plain export.
Medians of --runs N (default 1).

    python tests/benchmarks/bench_corpus.py [--runs 3] [--only GPT-2 T5] [--workers 1]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from tests.corpus.architectures import ARCHITECTURES, VOCAB, Architecture  # noqa: E402


def write_validated(arch: Architecture, folder: Path, attempt: int) -> Path:
    """The attempt's recipe, validated (what `export --validate` did)."""
    recipe = arch.write(folder, attempt)
    recipe.write_text(recipe.read_text(encoding="utf-8") + "\n[validate]\nenabled = true\n",
                      encoding="utf-8")
    return recipe.resolve()


def studio_batch(recipes: list[Path], report: Path, workers: int) -> dict[Path, dict[str, Any]]:
    """Every recipe through one `onnx-studio batch`; each item's document and seconds (its
    whole run, its worker's start included), by recipe."""
    from engine import cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli.main(["batch", *map(str, recipes), "-o", str(report), "--workers", str(workers),
                  "--json"])
    found = {}
    for line in (report / "results.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        doc, seconds = record["report"], record["seconds"]
        found[Path(record["recipe"])] = {"status": 0 if doc["ok"] else 1, "doc": doc,
                                         "seconds": seconds,
                                         "export": seconds - doc["seconds"].get("validate", 0.0)}
    return found


def studio(arch: Architecture, folder: Path, attempt: int) -> dict[str, Any]:
    recipe = write_validated(arch, folder, attempt)
    return studio_batch([recipe], folder / "report", 1)[recipe]


def plain(arch: Architecture, folder: Path, attempt: int) -> float:
    """The same model through a hand-written torch.onnx.export(..., dynamo=True) and save."""
    import torch

    spec = importlib.util.spec_from_file_location(f"plain_{arch.slug}",
                                                  folder / f"{arch.slug}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    started = time.perf_counter()
    spec.loader.exec_module(module)
    model = module.build(**arch.attempts()[attempt])
    generator = torch.Generator().manual_seed(0)
    args = []
    for item in arch.inputs:
        if item["fill"] == "ones":
            args.append(torch.ones(item["shape"], dtype=torch.int64))
        elif item["dtype"] == "int64":
            args.append(torch.randint(0, VOCAB, item["shape"], generator=generator))
        else:
            args.append(torch.randn(item["shape"], generator=generator))
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            program = torch.onnx.export(model, tuple(args), dynamo=True)
            assert program is not None
            program.save(str(folder / f"plain_{arch.slug}_{attempt}.onnx"))
        except Exception:  # it fails where the studio fails; the time to fail is the measure
            pass
    return time.perf_counter() - started


def verdict(doc: dict[str, Any]) -> str:
    if doc["ok"]:
        return "exported and validated"
    error = doc["error"]
    return f"failed: {error['message']} — {error['hint']}"


def short_cause(doc: dict[str, Any]) -> str:
    """The table's cell: the cause in a few words, and its fix."""
    if doc["ok"]:
        return "exported and validated"
    message, hint = doc["error"]["message"], doc["error"]["hint"]
    returns = re.search(r"returns (an? \w+)", message)
    if returns and "use_cache=False" in hint:
        return f"failed: forward() returns {returns[1]} — use_cache=False"
    if "Cannot view" in message and 'attn_implementation="eager"' in hint:
        return ("failed: a view after the exporter's decomposition of scaled_dot_product_"
                'attention — attn_implementation="eager"')
    return f"failed: {message} — {hint}"


def warmup(folder: Path) -> None:
    """Imports and first-call costs (torch.onnx, onnxscript, onnxruntime, transformers) paid
    once before anything is timed: the first architecture would carry them otherwise."""
    arch = next(a for a in ARCHITECTURES if a.name == "ResNet")
    studio(arch, folder / "warmup", 0)
    plain(arch, folder / "warmup", 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", nargs="*", help="architecture names (default: all)")
    parser.add_argument("--workers", type=int, default=1,
                        help="the batch's items at a time (1: each item's time alone)")
    args = parser.parse_args()
    chosen = [a for a in ARCHITECTURES if not args.only or a.name in args.only]
    rows = []
    total = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        warmup(folder)
        batches = []
        for run in range(args.runs):
            where = folder / f"run{run}"
            recipes = [write_validated(arch, where, attempt) for arch in chosen
                       for attempt in range(len(arch.attempts()))]
            batches.append(studio_batch(recipes, where / "report", args.workers))
        for arch in chosen:
            for attempt, kwargs in enumerate(arch.attempts()):
                runs, plains = [], []
                for run in range(args.runs):
                    where = folder / f"run{run}"
                    runs.append(batches[run][(where / f"{arch.slug}_{attempt}.toml").resolve()])
                    plains.append(plain(arch, where, attempt))
                doc = runs[-1]["doc"]
                validation = doc["validation"] or {}
                warnings_count = len(doc["warnings"]) + len(validation.get("warnings") or [])
                export = statistics.median(r["export"] for r in runs)
                reference = statistics.median(plains)
                label = arch.name + (" (" + ", ".join(f"{k}={v!r}" if isinstance(v, str)
                                                      else f"{k}={v}"
                                                      for k, v in kwargs.items()) + ")"
                                     if kwargs else "")
                rows.append((label, arch.family, "yes" if doc["ok"] else "no",
                             "yes" if validation.get("ok") else "—", warnings_count,
                             statistics.median(r["seconds"] for r in runs), export, reference,
                             export / reference, short_cause(doc)))
                print(f"{label}: {verdict(doc)}", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - total
    print("| architecture | family | exported | validated | warnings | seconds | export s "
          "| plain torch.onnx.export s | ratio | verdict |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, family, exported, validated, count, seconds, export, reference, ratio, cell \
            in rows:
        print(f"| {label} | {family} | {exported} | {validated} | {count} | {seconds:.1f} "
              f"| {export:.1f} | {reference:.1f} | {ratio:.2f} | {cell} |")
    ratios = [r[8] for r in rows]
    print(f"\n{len(chosen)} architectures, {len(rows)} exports; median ratio "
          f"{statistics.median(ratios):.2f}; {args.runs} run(s), {elapsed:.0f} s in all "
          "(warm-up included).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
