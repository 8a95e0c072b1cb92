"""The batch documents: one item's record (a line of results.jsonl) and the summary that
`onnx-studio batch --json` prints, with its rows.

The summary's keys and the keys of its rows are issue 27's, in its order; what the batch adds
(`skipped`, `report_dir`, `error`, a row's `resumed`) follows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol.convert import LOCAL, OMIT, REQUIRED, Wire
from onnx_studio.engine.protocol.documents import ExportReport
from onnx_studio.engine.protocol.parts import Error


@dataclass(kw_only=True)
class ItemError(Wire):
    """A row's error: the export document's `error` without its details (they are in the
    item's record)."""

    kind: str
    message: str
    hint: str = ""


@dataclass(kw_only=True)
class OutputStamp(Wire):
    """A file an item wrote, as it was when the item ended (--resume runs the item again when
    it is missing or changed)."""

    path: str
    size: int
    mtime_ns: int


@dataclass(kw_only=True)
class BatchRecord(Wire):
    """One item's run, written as one line of REPORT_DIR/results.jsonl as it finishes."""

    recipe: str  # the item: a recipe file's absolute path, or hf:/hf-config: and a folder's
    # "sha256:...": what the item exports (onnx_studio.engine.batch.items.fingerprint)
    fingerprint: str
    seconds: float  # the item's wall time, its worker's start included
    executor: str  # local | ray
    node: str  # the host it ran on
    finished: str  # when it ended, ISO 8601 in UTC
    report: ExportReport  # the item's full document: what `export --json` prints for it
    outputs: list[OutputStamp] = field(default_factory=list)  # the files it wrote
    timeout: float | None = field(default=None, metadata=OMIT)  # the --timeout it ran under

    @property
    def ok(self) -> bool:
        return self.report.ok


@dataclass(kw_only=True)
class BatchResult(Wire):
    """One row of the summary: an item's verdict, its file and, when it failed, why."""

    recipe: str
    ok: bool
    output: str | None
    seconds: float
    validation_ok: bool | None  # None: no validation ran
    error: ItemError | None
    # recorded by an earlier run with the same fingerprint, not run again (--resume)
    resumed: bool | None = field(default=None, metadata=OMIT)

    @classmethod
    def of(cls, record: BatchRecord, resumed: bool = False) -> BatchResult:
        """The row of an item's record."""
        report = record.report
        error = report.error
        return cls(recipe=record.recipe, ok=report.ok, output=report.output,
                   seconds=round(record.seconds, 3),
                   validation_ok=None if report.validation is None else report.validation.ok,
                   error=None if error is None else ItemError(kind=error.kind,
                                                              message=error.message,
                                                              hint=error.hint),
                   resumed=True if resumed else None)


@dataclass(kw_only=True)
class BatchSummary(Wire):
    """What `onnx-studio batch --json` prints: the counts and a row per item that finished
    (in the order the items were given).

    `error` is None when every item ran; a wrong request (exit 2) or a cancelled batch sets it
    (the rows are then the items that had finished). `records` are the items' full documents,
    for a Python caller (not in the JSON: they are the lines of results.jsonl).
    """

    ok: bool = field(default=False, metadata=REQUIRED)
    total: int = 0
    passed: int = 0
    failed: int = 0
    seconds: float = 0.0
    results: list[BatchResult] = field(default_factory=list)
    skipped: int = 0  # rows taken from results.jsonl (--resume) instead of run
    report_dir: str | None = None
    error: Error | None = None
    records: list[BatchRecord] = field(default_factory=list, compare=False, metadata=LOCAL)

    def fail(self, error: Error | StudioError) -> BatchSummary:
        """Mark the summary failed with `error`; returns it."""
        self.ok = False
        self.error = error if isinstance(error, Error) else Error.from_exception(error)
        return self

    def exit_status(self) -> int:
        """0 every item passed, 1 one failed, the error's status otherwise (2 a wrong request,
        130/143 a batch ended by SIGINT/SIGTERM)."""
        if self.error is not None:
            return self.error.exit_status()
        return 0 if self.ok else 1
