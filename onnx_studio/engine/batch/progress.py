"""A batch's progress on standard error: a line when an item starts, when its stage changes
and when it ends (its verdict, and the count so far), from any thread.

Lines, never a redrawn bar: several items run at once, and a log file reads them the same.

    batch: 2 items to run, 2 at a time (local); 1 recorded by an earlier run (--resume)
    batch: bert: started                (on Ray: "submitted as a Ray task")
    batch: bert: 40% Exporting
    batch: [1/2] bert: passed in 12.3 s (1 running)
    batch: [2/2] gpt2: FAILED in 8.1 s: export: forward() returns a DynamicCache —
           use_cache=False
"""

from __future__ import annotations

import threading
from typing import TextIO

from onnx_studio.engine.batch.items import ItemJob
from onnx_studio.engine.protocol import BatchRecord, Event, LogLine, Progress, WarningEvent


class BatchProgress:
    """What a batch says on `stream` while it runs; `verbose` adds the workers' logs."""

    def __init__(self, stream: TextIO, total: int, verbose: bool = False) -> None:
        self.stream = stream
        self.total = total  # items to run (the resumed ones not counted)
        self.verbose = verbose
        self.done = 0
        self.failed = 0
        self.running: set[str] = set()
        self._stages: dict[str, str] = {}
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self._write(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(f"batch: {text}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not end the batch
            pass

    def started(self, job: ItemJob, how: str = "started") -> None:
        """The item is running (or, on Ray, submitted: `how` says which)."""
        with self._lock:
            self.running.add(job.key)
            self._write(f"{job.label}: {how}")

    def event(self, job: ItemJob, event: Event) -> None:
        """An event of the item's worker: a new stage is shown; logs and warnings when
        verbose."""
        with self._lock:
            if isinstance(event, Progress):
                if event.stage != self._stages.get(job.key) and event.stage != "Starting":
                    self._stages[job.key] = event.stage
                    self._write(f"{job.label}: {event.fraction:4.0%} {event.stage}")
            elif self.verbose and isinstance(event, LogLine):
                self._write(f"{job.label}: {event.line}")
            elif self.verbose and isinstance(event, WarningEvent):
                first = (event.warning.message.splitlines() or [""])[0]
                self._write(f"{job.label}: warning: {event.warning.category}: {first}")

    def finished(self, job: ItemJob, record: BatchRecord) -> None:
        with self._lock:
            self.running.discard(job.key)
            self._stages.pop(job.key, None)
            self.done += 1
            report = record.report
            if record.verdict == "inconclusive":
                verdict = f"INCONCLUSIVE in {record.seconds:.1f} s (passed, but its outputs " \
                          "cannot tell a right file from a wrong one)"
            elif report.ok:
                verdict = f"passed in {record.seconds:.1f} s"
            else:
                self.failed += 1
                error = report.error
                cause = f"{error.kind}: {error.message}" if error is not None else "failed"
                hint = f" — {error.hint}" if error is not None and error.hint else ""
                verdict = f"FAILED in {record.seconds:.1f} s: {cause}{hint}"
            running = f" ({len(self.running)} running)" if self.running else ""
            self._write(f"[{self.done}/{self.total}] {job.label}: {verdict}{running}")
