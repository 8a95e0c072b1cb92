"""`onnx-studio batch` timed: the same items with --workers 1 and --workers 2 (the wall-time
ratio), and the Ray executor against the local one (the overhead per item).

The items are tiny recipes (a 4->3 linear layer exported with TorchScript and validated: each
item's time is mostly its worker's start, torch's import) or, with --corpus, the Hugging Face
architectures of tests/corpus (their first attempt each). Runs alternate (workers 1, workers 2,
local, ray, then again) so a change in the machine's load falls on all of them alike; medians
of --runs. The Ray instance (num_cpus = 2, like the local executor's 2 workers) is started once
before anything is timed; its start is printed apart.

    python tests/benchmarks/bench_batch.py [--runs 3] [--items 6] [--corpus [NAMES ...]]
        [--no-ray]
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from onnx_studio.engine.batch import BatchOptions, read_items, run_batch  # noqa: E402
from onnx_studio.engine.protocol import BatchSummary  # noqa: E402
from tests.zoo.zoo_models import write_recipe  # noqa: E402


def tiny_items(folder: Path, count: int) -> list[Path]:
    return [write_recipe(folder, f"net{i}", validate=True) for i in range(count)]


def corpus_items(folder: Path, names: list[str]) -> list[Path]:
    from tests.corpus.architectures import ARCHITECTURES

    chosen = [a for a in ARCHITECTURES if not names or a.name in names]
    paths = []
    for arch in chosen:
        path = arch.write(folder, len(arch.attempts()) - 1)  # the attempt that exports
        path.write_text(path.read_text() + "\n[validate]\nenabled = true\n")
        paths.append(path)
    return paths


def run(items: list[Path], report: Path, executor: str, workers: int | None) -> BatchSummary:
    jobs = read_items([str(p) for p in items], None, report)
    summary = run_batch(jobs, report, BatchOptions(workers=workers, executor=executor),
                        io.StringIO())
    if summary.error is not None or summary.failed:
        failed = [r.error.message for r in summary.results if r.error is not None]
        raise SystemExit(f"{executor} x{workers}: {summary.error or failed}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--items", type=int, default=6, help="tiny recipes (default 6)")
    parser.add_argument("--corpus", nargs="*", help="the corpus architectures instead "
                        "(names; none: all)")
    parser.add_argument("--no-ray", action="store_true", help="leave the Ray executor out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        items = (corpus_items(folder, args.corpus) if args.corpus is not None
                 else tiny_items(folder, args.items))
        ray_start = None
        if not args.no_ray:
            import ray

            started = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=80 * 1024 * 1024, logging_level=logging.WARNING)
            ray_start = time.perf_counter() - started
        configs = [("local", 1), ("local", 2)] + ([] if args.no_ray else [("ray", None)])
        walls: dict[tuple[str, int | None], list[float]] = {c: [] for c in configs}
        per_item: dict[tuple[str, int | None], list[float]] = {c: [] for c in configs}
        run(items[:1], folder / "warmup", "local", 1)  # the OS's file cache, the imports
        for n in range(args.runs):
            for executor, workers in configs:
                report = folder / f"report-{executor}-{workers}-{n}"
                started = time.perf_counter()
                summary = run(items, report, executor, workers)
                walls[(executor, workers)].append(time.perf_counter() - started)
                per_item[(executor, workers)] += [r.seconds for r in summary.results]
                print(f"run {n}: {executor} x{workers or 'cluster'}: "
                      f"{walls[(executor, workers)][-1]:.1f} s", file=sys.stderr, flush=True)
        if not args.no_ray:
            ray.shutdown()
    anchor = statistics.median(walls[("local", 1)])
    print(f"{len(items)} items ({'corpus' if args.corpus is not None else 'tiny recipes'}), "
          f"{args.runs} runs, {os.cpu_count()} cores; medians\n")
    print("| executor | at a time | wall s | ratio to local x1 | item s (median) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for (executor, workers), times in walls.items():
        wall = statistics.median(times)
        print(f"| {executor} | {workers or 'cluster (2 CPUs)'} | {wall:.1f} | "
              f"{wall / anchor:.2f} | {statistics.median(per_item[(executor, workers)]):.1f} |")
    if not args.no_ray:
        local2 = statistics.median(walls[("local", 2)])
        ray_wall = statistics.median(walls[("ray", None)])
        item_gap = (statistics.median(per_item[("ray", None)])
                    - statistics.median(per_item[("local", 2)]))
        print(f"\nRay executor overhead per item against local x2: "
              f"{(ray_wall - local2) / len(items):+.2f} s (wall), {item_gap:+.2f} s (item "
              f"time); the local Ray instance took {ray_start:.1f} s to start (not counted "
              "above).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
