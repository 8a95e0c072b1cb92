"""`onnx-studio batch`: its flags, its run and its text output. onnx_studio.engine.cli adds the
parser and hands the parsed arguments here.

    onnx-studio batch ITEM... [--from LIST] [--workers N] [--executor local|ray]
                      [--ray-address ADDR] [--timeout S] -o REPORT_DIR [--resume] [--json]

Exit status 0 every item passed, 1 one failed, 2 a wrong request (nothing runs), 130/143 the
batch was stopped by SIGINT/SIGTERM (what finished is recorded). With --json the last line of
standard output is the summary (`BatchSummary`) on every outcome.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import BatchSummary, encode


def add_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add `batch` to `onnx-studio`'s subparsers (`common`: --json, -v)."""
    batch = sub.add_parser("batch", help="export and validate many recipes, N at a time, "
                           "here or on a Ray cluster")
    batch.add_argument("items", nargs="*", metavar="ITEM",
                       help="a recipe (.toml) or a Hugging Face folder as hf:DIR or "
                       "hf-config:DIR")
    batch.add_argument("--from", dest="from_list", metavar="LIST",
                       help="a text file naming more items, one a line (# comments)")
    batch.add_argument("--workers", type=int, metavar="N",
                       help="items at a time (default: the cores; with ray, the cluster's)")
    batch.add_argument("--executor", choices=("local", "ray"), default="local")
    batch.add_argument("--ray-address", metavar="ADDR",
                       help="a running Ray cluster (default: start a local instance)")
    batch.add_argument("--timeout", type=float, metavar="S",
                       help="end an item that runs longer than S seconds (kind timeout)")
    batch.add_argument("-o", "--output", required=True, metavar="REPORT_DIR",
                       help="where results.jsonl, report.html and the exports of "
                       "hf: items go")
    batch.add_argument("--resume", action="store_true",
                       help="skip the items results.jsonl already holds with the same "
                       "fingerprint and whose files are on disk as recorded (a timed-out "
                       "item runs again under a longer --timeout)")
    batch.add_argument("--retry-failed", action="store_true",
                       help="with --resume: run the recorded failures again too")
    batch.add_argument("--wait", action="store_true",
                       help="when another batch is writing into REPORT_DIR, wait for it to "
                       "end instead of refusing")
    common(batch)


def run(args: argparse.Namespace, out: TextIO, want_json: bool) -> int:
    """Run the batch the command line asks for; print the summary (JSON with --json, else a
    line per item); the exit status."""
    from onnx_studio.engine.batch.items import read_items
    from onnx_studio.engine.batch.runner import BatchOptions, run_batch

    report_dir = Path(args.output)
    options = BatchOptions(workers=args.workers, executor=args.executor,
                           ray_address=args.ray_address, timeout=args.timeout,
                           resume=args.resume, verbose=args.verbose,
                           retry_failed=args.retry_failed, wait=args.wait)
    try:
        options.check()
        jobs = read_items(list(args.items), args.from_list, report_dir)
        summary = run_batch(jobs, report_dir, options, sys.stderr)
    except StudioError as err:
        summary = BatchSummary().fail(err)
    except Exception as exc:  # our own bug: still one sentence and the summary
        summary = BatchSummary().fail(StudioError(
            "export", f"onnx-studio batch failed unexpectedly: {exc}.",
            "Run with --verbose and report the traceback.", details=traceback.format_exc()))
    if summary.error is not None and summary.error.kind != "cancelled":
        sys.stderr.write(f"error: {summary.error.message}\n")
        if summary.error.hint:
            sys.stderr.write(f"hint: {summary.error.hint}\n")
        if args.verbose and summary.error.details:
            sys.stderr.write(summary.error.details.rstrip() + "\n")
    if want_json:
        out.write(encode(summary) + "\n")
    else:
        print_text(summary, out)
    out.flush()
    return summary.exit_status()


def print_text(summary: BatchSummary, out: TextIO) -> None:
    """A line per item that ran, then the counts."""
    for row in summary.results:
        verdict = "passed" if row.ok else "FAILED"
        cause = f"  {row.error.kind}: {row.error.message}" if row.error is not None else ""
        earlier = " (recorded earlier)" if row.resumed else ""
        out.write(f"{verdict:7} {row.seconds:7.1f} s  {row.recipe}{earlier}{cause}\n")
    if summary.total:
        out.write(f"{summary.passed} passed, {summary.failed} failed of {summary.total}\n")
