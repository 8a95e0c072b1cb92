"""The vision zoo through `onnx-studio batch`, each file checked independently: timm image
classifiers drawn by a fixed seed (tests/zoo/vision_zoo.py: not picked by hand) plus
torchvision's classifiers of the same size, each recipe as a user writes it (a batch-1 example
of the model's own size, a dynamic batch, validation on). After the batch, every written file is
run by ONNX Runtime at batch 3 against eager PyTorch (numpy's allclose, nothing of the studio's
validation). Prints a row per model and the counts: exported, confirmed at batch 3, and for the
others their verdict, error kind and hint.

    python tests/benchmarks/bench_vision_zoo.py [--count 40] [--seed 35] [--workers 2]
        [--timeout 900] [--no-torchvision] [--folder DIR]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.zoo import vision_zoo  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=vision_zoo.COUNT)
    parser.add_argument("--seed", type=int, default=vision_zoo.SEED)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per item")
    parser.add_argument("--no-torchvision", action="store_true")
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()

    from onnx_studio.engine.source.vision import import_timm

    import_timm()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="vision-zoo-"))
    started = time.perf_counter()
    rows = vision_zoo.run_zoo(folder, args.count, args.seed, workers=args.workers,
                              timeout=args.timeout, with_torchvision=not args.no_torchvision)
    print()
    print("| model | exporter | verdict | studio max abs diff | batch 3 check | seconds |")
    print("|---|---|---|---|---|---|")
    for name, record, check in rows:
        report = record.report
        exporter = (report.exporter or "—") + (" (fallback)" if report.fallback else "")
        verdict = record.verdict if report.ok else f"failed: {report.error.kind}"  # type: ignore
        worst = max((o.max_abs_diff or 0.0 for o in report.validation.outputs), default=0.0) \
            if report.validation else None
        confirmed = "—" if check is None else ("confirmed" if check["ok"]
                                              else f"WRONG: {check['message']}")
        print(f"| {name} | {exporter} | {verdict} | "
              f"{'—' if worst is None else f'{worst:.2g}'} | {confirmed} | "
              f"{record.seconds:.0f} |")
    counts = collections.Counter(record.verdict for _, record, _ in rows)
    confirmed = sum(1 for _, _, c in rows if c is not None and c["ok"])
    wrong = sum(1 for _, _, c in rows if c is not None and not c["ok"])
    total = len(rows)
    print()
    print(f"{total} models: {counts['passed']} passed, {counts['inconclusive']} inconclusive, "
          f"{counts['failed']} failed; {confirmed} confirmed at batch 3 by ONNX Runtime against "
          f"eager PyTorch ({confirmed / max(total, 1):.0%}), {wrong} wrong; "
          f"{sum(1 for _, r, _ in rows if r.report.fallback)} fell back to TorchScript; "
          f"{time.perf_counter() - started:.0f} s in all")
    failures = [(n, r.report.error) for n, r, _ in rows if r.report.error is not None]
    for name, error in failures:
        print(f"- {name}: {error.kind}: {error.message[:300]}\n  hint: {error.hint[:300]}")
    print(f"report: {folder / 'report' / 'report.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
