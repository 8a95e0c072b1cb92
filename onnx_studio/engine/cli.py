"""`onnx-studio`: the command line face of the engine (export, validate, inspect, gui).

Exit status: 0 success, 1 the export or validation failed, 2 the request itself is wrong.
With --json the last line of standard output is one JSON object on every outcome (a typed
document of onnx_studio.engine.protocol: `ExportReport`, or `InspectDocument` for inspect);
progress, warnings and logs go to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from onnx_studio._version import __version__
from onnx_studio.engine import protocol, torch_private
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.analysis import commands as analysis
from onnx_studio.engine.batch import command as batch_command
from onnx_studio.engine.cli_args import FILL_FORMS, RequestError, recipe_from_args
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.events import Events
from onnx_studio.engine.paths import check_recipe_target, output_folder, rebase_recipe_paths
from onnx_studio.engine.protocol import (
    Error,
    ExportReport,
    ExportRequest,
    ExportResult,
    InspectDocument,
    Request,
    Result,
    ValidateFileRequest,
    WarningItem,
    encode,
)
from onnx_studio.engine.recipe import Recipe, check_recipe, to_toml
from onnx_studio.engine.worker_process import remove_abandoned_temps


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise RequestError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="onnx-studio", description="Export PyTorch models to checked ONNX.")
    parser.add_argument("--version", action="version", version=f"onnx-studio {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    gui = sub.add_parser("gui", help="open the window (optionally on a recipe or .onnx file)")
    gui.add_argument("file", nargs="?", help="a recipe (.toml) or a model (.onnx)")
    gui.add_argument("--exit-after-paint", action="store_true",
                     help="paint once, print timings as JSON and exit (benchmarks, bug reports)")
    gui.add_argument("--expand-all", action="store_true",
                     help="with --exit-after-paint: expand every module of the graph before the "
                     "paint that is timed")

    export = sub.add_parser("export", help="export a model to ONNX")
    export.add_argument("source", nargs="?", help="model source, e.g. net.py:Net or example:lstm")
    export.add_argument("--recipe", help="recipe file (TOML)")
    export.add_argument("-o", "--output", help="output .onnx path")
    export.add_argument("--input", action="append", default=[],
                        metavar="NAME=SHAPE[:DTYPE[:FILL]]",
                        help="an example input, e.g. x=10x3x224x224:float32 or "
                        "attention_mask=2x8:int64:ones (repeat in forward() order); FILL is "
                        f"{FILL_FORMS} (default auto: chosen from the name and dtype)")
    export.add_argument("--dynamic", action="append", default=[],
                        metavar="NAME:AXIS=DIM[:MIN:MAX]",
                        help="a dynamic axis, e.g. x:0=batch (inputs or outputs); x:0=batch:1:64 "
                        "bounds it (either bound may be left empty: batch::64)")
    export.add_argument("--const", action="append", default=[], metavar="NAME=VALUE",
                        help="a constant argument after the inputs: true/false, a number, none "
                        "or text, e.g. use_cache=false (fixed into the file)")
    export.add_argument("--keyword", action="append", default=[], metavar="NAME",
                        help="pass the input or constant NAME to forward() by keyword")
    export.add_argument("--output-name", action="append", default=[], metavar="NAME",
                        help="a name for the file's next output, in the model's output order "
                        "(repeat for several)")
    export.add_argument("--opset", type=int,
                        help="the ONNX opset to write (default: the exporter's own)")
    export.add_argument("--exporter", choices=recipes.EXPORTERS,
                        help="auto (dynamo, falling back to torchscript when dynamo cannot "
                        "capture the model), dynamo or torchscript (default: auto)")
    export.add_argument("--export-type", choices=recipes.OPERATOR_EXPORT_TYPES,
                        help="the TorchScript exporter's operator_export_type (default: ONNX)")
    export.add_argument("--device", help="where the model runs while exported: cpu, cuda, "
                        "cuda:N or mps (default: cpu)")
    export.add_argument("--validate", action="store_true", help="check the result in ONNX Runtime")
    export.add_argument("--task", help="Hugging Face task (Optimum's names), e.g. "
                        "text-generation-with-past; default: the config's")
    export.add_argument("--model-kwarg", action="append", default=[], metavar="NAME=VALUE",
                        help="a model option, recorded in the recipe's model.kwargs: a keyword "
                        "argument of a Python factory; for hf:DIR a config attribute (e.g. "
                        "use_cache=false, text_config.use_cache=false) or attn_implementation, "
                        "experts_implementation, dtype. VALUE: true/false, a number, none or "
                        "text (repeat for several)")
    export.add_argument("--trust-remote-code", action="store_true",
                        help="run a Hugging Face folder's own model code (config.json's "
                        "auto_map); only for folders you trust")
    export.add_argument("--static-dim", action="append", default=[], metavar="DIM=SIZE",
                        help="export the dimension DIM fixed at SIZE instead of dynamic (e.g. "
                        "sequence_length=128 for a model that fixes its own length); for "
                        "hf:DIR recorded as [dims] DIM = { size = SIZE }, otherwise as the "
                        "inputs' shape (repeat for several)")
    export.add_argument("--save-recipe", metavar="R.toml", help="also save the request as a recipe")
    _common(export)

    validate = sub.add_parser("validate", help="compare an .onnx file with its PyTorch model")
    validate.add_argument("model", help="the .onnx file")
    validate.add_argument("--recipe", required=True, help="recipe that rebuilds model and inputs")
    validate.add_argument("--rtol", type=float)
    validate.add_argument("--atol", type=float)
    _common(validate)

    inspect = sub.add_parser("inspect", help="print an .onnx file's inputs, outputs and size")
    inspect.add_argument("model", help="the .onnx file")
    _common(inspect)
    analysis.add_parsers(sub, _common)  # compare, profile, variant (onnx_studio.engine.analysis)
    batch_command.add_parser(sub, _common)  # batch (onnx_studio.engine.batch)
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("-v", "--verbose", action="store_true", help="logs and tracebacks too")


# ---------------------------------------------------------------------------- recipe from flags


def save_recipe_as(recipe: Recipe, path: Path) -> None:
    """Save with every path rewritten for the new recipe file's folder (the rule of
    onnx_studio.engine.paths)."""
    copy = rebase_recipe_paths(recipe, path.resolve().parent)
    try:
        recipes.save(copy, path)
    except OSError as exc:
        raise StudioError("write", f"Cannot save the recipe to {path}: "
                          f"{exc.strerror or exc}; choose another --save-recipe path.",
                          exit_code=2) from None


# ---------------------------------------------------------------------------- progress


class Progress:
    """Stage lines on standard error; a one-line bar when it is a terminal."""

    def __init__(self, stream: TextIO, verbose: bool) -> None:
        self.stream = stream
        self.verbose = verbose
        self.tty = stream.isatty()
        self.stage = ""

    def events(self) -> Events:
        return Events(progress=self.progress, log=self.log, warning=self.warning)

    def progress(self, fraction: float, stage: str) -> None:
        if self.tty:
            filled = int(fraction * 30)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {fraction:4.0%} "
                              f"{stage[:40]:<40}")
            self.stream.flush()
        elif stage != self.stage:
            self.stream.write(f"onnx-studio: {fraction:4.0%} {stage}\n")
        self.stage = stage

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 80 + "\r")
        self.stream.write(text + "\n")

    def log(self, line: str) -> None:
        if self.verbose:
            self._line(line)

    def note(self, line: str) -> None:
        """A line the user reads whether verbose or not."""
        self._line(f"onnx-studio: {line}")

    def warning(self, item: dict[str, Any]) -> None:
        where = f"{item['source']}: " if item.get("source") else ""
        self._line(f"warning: {where}{item['category']}: {item['message'].splitlines()[0]}")
        if item.get("hint"):
            self._line(f"  what to change: {item['hint']}")

    def done(self) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 80 + "\r")


# ---------------------------------------------------------------------------- commands


def _cmd_export(args: argparse.Namespace, progress: Progress) -> ExportReport:
    """Export (and validate) in a worker process; --save-recipe writes the request afterwards,
    every "auto" fill replaced by the fill it resolved to once the model was loaded (as given
    when it was not)."""
    from onnx_studio.engine.source.inputs import ResolvedFill, with_fills

    recipe = recipe_from_args(args)
    if args.save_recipe:  # refused before any work: not over the model, the output, ...
        check_recipe_target(recipe, Path(args.save_recipe), "choose another --save-recipe path")
    result = _export_in_worker(
        ExportRequest(recipe=to_toml(recipe), base_dir=str(recipe.base_dir),
                      validate=True if args.validate else None, plots_beside_onnx=True),
        progress, output_folder(recipe))
    report = _report_of(result)
    resolved: list[list[ResolvedFill]] = [] if result.fills is None else [
        [ResolvedFill(f.fill, f.low, f.high, f.reason) for f in result.fills]]
    if resolved and not progress.verbose:  # verbose: the export's log line says it
        _show_fills(recipe, resolved[0], progress)
    if args.save_recipe:
        try:
            save_recipe_as(with_fills(recipe, resolved[0]) if resolved else recipe,
                           Path(args.save_recipe))
        except StudioError as err:
            if report.ok:  # the export stands; the missing recipe is the failure to report
                err.exit_code = 1
                report.fail(err)
    return report


def _show_fills(recipe: Recipe, fills: list[Any], progress: Progress) -> None:
    """One line on standard error naming the fill each "auto" input got, and why."""
    chosen = [f"{spec.name} {fill.text} ({fill.reason})"
              for spec, fill in zip(recipe.inputs, fills, strict=True)
              if spec.fill == recipes.AUTO_FILL and spec.is_tensor]
    if chosen:
        progress.note("inputs filled automatically: " + "; ".join(chosen))


def _cmd_validate(args: argparse.Namespace, progress: Progress) -> ExportReport:
    recipe = recipes.load(args.recipe)
    if args.rtol is not None:
        recipe.validate.rtol = args.rtol
    if args.atol is not None:
        recipe.validate.atol = args.atol
    check_recipe(recipe)
    model = Path(args.model).resolve()
    result = _export_in_worker(
        ValidateFileRequest(recipe=to_toml(recipe), base_dir=str(recipe.base_dir),
                            onnx=str(model)),
        progress, model if model.is_dir() else model.parent)
    return _report_of(result)


def _export_in_worker(request: ExportRequest | ValidateFileRequest, progress: Progress,
                      folder: Path) -> ExportResult:
    result = _run_in_worker(request, progress, folder)
    assert isinstance(result, ExportResult)
    return result


def _run_in_worker(request: Request, progress: Progress, folder: Path) -> Result:
    """Run the job in a worker process of its own (onnx_studio.engine.job_client), its events
    shown as the in-process export would show them; a crash or a signal is a StudioError."""
    from onnx_studio.engine.job_client import remove_job_folder, run_job

    def show(event: Any) -> None:
        if isinstance(event, protocol.Progress):
            if event.stage != "Starting":  # the worker's first word, for the window's bar
                progress.progress(event.fraction, event.stage)
        elif isinstance(event, protocol.LogLine):
            progress.log(event.line)
        elif isinstance(event, protocol.WarningEvent):
            progress.warning(event.warning.to_dict())

    remove_abandoned_temps([folder, Path.cwd()])  # what killed runs left in these folders
    result = run_job(request, request.TAG, show, folder=folder)
    if isinstance(result, ExportResult):
        remove_job_folder(result.job_dir)
    return result


def _report_of(result: ExportResult) -> ExportReport:
    """The export document as the engine made it in the worker: details and exit status back
    in its error, the file's facts beside it."""
    report = result.report
    report.extra = result.extra
    if report.error is not None:
        report.error = dataclasses.replace(report.error, details=result.details,
                                           exit_code=result.exit_code)
    return report


def _cmd_inspect(args: argparse.Namespace) -> InspectDocument:
    from onnx_studio.engine.graph.file_check import check_file, refuse_unusable
    from onnx_studio.engine.graph.summary import summarize
    from onnx_studio.engine.protocol.documents import FileProblem

    # The contract prints `graph` plus `opset_imports`: the fields sit at the top level, and
    # under "graph" as in the export document, so either reading of it works.
    path = Path(args.model)
    # a folder export a kill cut short is completed before it is read, its leftovers removed
    remove_abandoned_temps([path.parent])
    doc = InspectDocument.from_summary(summarize(path))
    problems = check_file(path)
    doc.problems = [FileProblem.from_dict(p.to_dict()) for p in problems]
    try:  # an unusable file: its facts and problems still printed, then exit status 1
        refuse_unusable(path, problems)
    except StudioError as err:
        doc.ok, doc.error = False, Error.from_exception(err)
    return doc


def _print_inspect(doc: InspectDocument, out: TextIO) -> None:
    out.write(f"nodes: {doc.nodes}\n")
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in doc.opset_imports.items())
    out.write(f"opsets: {opsets}\n")
    for role, values in (("input", doc.inputs), ("output", doc.outputs)):
        for v in values:
            shape = "x".join(str(d) for d in v.shape) if v.shape is not None else "?"
            out.write(f"{role:6} {v.name}: {v.dtype}[{shape}]\n")
    for problem in doc.problems:
        out.write(f"{problem.severity}: {problem.message}\n")


def _print_report(report: ExportReport, out: TextIO, wrote: bool = True) -> None:
    """The text report of an export (`wrote`: its first line names the file written) or of a
    validation, which writes nothing: its first line is the verdict and the rule it applied."""
    validation = report.validation
    if wrote and report.ok:
        nodes = report.graph.nodes if report.graph else "?"
        seconds = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
        out.write(f"wrote {report.output} ({nodes} nodes, opset {report.opset}; {seconds})\n")
    elif not wrote and validation is not None:
        passed = sum(1 for t in validation.trials if t.ok)
        out.write(f"validated {report.output}: {'passed' if validation.ok else 'FAILED'}, "
                  f"{passed} of {len(validation.trials)} trials with |diff| <= atol + "
                  f"rtol*|ref| (rtol {validation.rtol:g}, atol {validation.atol:g})\n")
    if report.validation:
        for o in report.validation.outputs:
            verdict = ("FAILED" if not o.passed else "ok within rounding of its scale"
                       if o.rule == "scale" else "ok")
            out.write(f"  {o.name}: max abs {_metric(o.max_abs_diff)}, "
                      f"max rel {_metric(o.max_rel_diff)} {verdict}\n")
        if report.validation.verdict == "inconclusive":
            out.write(f"  validation INCONCLUSIVE: {report.validation.message} "
                      f"{report.validation.hint or ''}\n")
        for t in report.validation.trials:
            if not t.ok:
                out.write(f"  trial {t.kind} {t.sizes if t.sizes is not None else ''} failed: "
                          f"{t.message or ''}\n")
        if report.validation.generation is not None:
            out.write(f"  {report.validation.generation.summary()}\n")



def _metric(value: float | None) -> str:
    """A metric for the text report: "—" when it was not computed (never 0)."""
    return "—" if value is None else f"{value:.3g}"


def _error_document(err: StudioError, warnings: list[WarningItem]) -> ExportReport:
    """The document of a command that failed before it had a report: the error, the warnings,
    and the file when a cancel came after it was written (it is there: never claim it is not)."""
    from onnx_studio.engine.job_client import CancelledAfterWrite

    report = ExportReport(warnings=list(warnings)).fail(err)
    if isinstance(err, CancelledAfterWrite):
        report.output = err.written
    return report


def _environment_warnings(progress: Progress) -> list[WarningItem]:
    """A warning (shown now, on one line, and kept for the document) when the installed torch
    lies outside the range this release is tested with."""
    sentence = torch_private.untested_torch_sentence()
    if sentence is None:
        return []
    item = WarningItem(category="Environment", message=sentence, source="")
    progress.warning(item.to_dict())
    return [item]


OpenWindow = Callable[[str | None, bool, bool], int]


def main(argv: Sequence[str] | None = None, open_window: OpenWindow | None = None) -> int:
    """Run one `onnx-studio` command; `open_window(file, exit_after_paint, expand_all)` serves
    `gui`.

    The window lives in `app`, which depends on the engine and not the other way round, so the
    console script (onnx_studio.app.launcher) passes it in.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except RequestError:
        args = None
    if args is not None and args.command in (None, "gui"):
        if open_window is None:
            sys.stderr.write("error: the window opens with `onnx-studio` or "
                             "`python -m onnx_studio`, "
                             "not from onnx_studio.engine.cli\n")
            return 2
        return open_window(getattr(args, "file", None), getattr(args, "exit_after_paint", False),
                           getattr(args, "expand_all", False))
    with _stdout_kept_for_results() as out, _stopped_by_signals():
        return _run_command(parser, argv, out)


class _Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the command outside a job (a job's run ends its worker and
    answers `cancelled` itself): the command ends with the JSON line all the same."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise `_Stopped` for the whole command (on the main thread; a job's
    run puts its own handlers in while it runs, and these back after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _stdout_kept_for_results() -> Iterator[TextIO]:
    """Yield the stream the results go to; meanwhile anything else written to stdout goes to
    stderr, so the JSON line is always alone.

    At the file-descriptor level when stdout is a real file (a model's print, torch's C++
    logging, an extension's printf all land on stderr); an in-process caller whose stdout is a
    Python object (a test's capture) gets the Python-level redirect only.
    """
    original = sys.stdout
    original.flush()
    try:
        fd = original.fileno()
        sys.stderr.flush()
        err_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        with contextlib.redirect_stdout(sys.stderr):
            yield original
        return
    saved = os.dup(fd)
    results = os.fdopen(os.dup(saved), "w", encoding="utf-8", closefd=True)
    os.dup2(err_fd, fd)
    sys.stdout = sys.stderr
    try:
        yield results
    finally:
        results.flush()
        results.close()
        sys.stdout = original
        with contextlib.suppress(OSError):
            sys.stderr.flush()
        os.dup2(saved, fd)
        os.close(saved)


def _run_command(parser: argparse.ArgumentParser, argv: list[str], out: TextIO) -> int:
    want_json = "--json" in argv
    verbose = "-v" in argv or "--verbose" in argv
    environment: list[WarningItem] = []
    doc: ExportReport | InspectDocument | analysis.AnalysisDocument
    try:
        args = parser.parse_args(argv)
        progress = Progress(sys.stderr, verbose)
        if args.command == "batch":  # its own summary document and exit status
            return batch_command.run(args, out, want_json)
        if args.command == "inspect":
            doc = _cmd_inspect(args)
            if not want_json:
                _print_inspect(doc, out)
        elif args.command in analysis.COMMANDS:
            doc = analysis.run(args, progress.events(),
                               lambda request, folder: _run_in_worker(request, progress, folder))
            progress.done()
            if not want_json:
                analysis.print_text(doc, out)
        else:
            environment = _environment_warnings(progress)
            report = (_cmd_export if args.command == "export" else _cmd_validate)(args, progress)
            progress.done()
            report.warnings[:0] = environment
            doc = report
            if not want_json:
                _print_report(report, out, wrote=args.command == "export")
    except RequestError as exc:
        doc = _error_document(StudioError("recipe", str(exc)[0].upper() + str(exc)[1:],
                                          exc.hint), environment)
    except StudioError as err:
        doc = _error_document(err, environment)
    except KeyboardInterrupt as interrupt:
        signum = getattr(interrupt, "signum", signal.SIGINT)
        doc = _error_document(StudioError(
            "cancelled", f"Stopped by {signal.Signals(signum).name}; nothing was written (a "
            "file already committed stays as it is).", "Run the command again.",
            exit_code=128 + int(signum)), environment)
    except Exception as exc:  # our own bug: still one sentence and the JSON line
        doc = _error_document(StudioError(
            "export", f"onnx-studio failed unexpectedly: {exc}.",
            "Run with --verbose and report the traceback.", details=traceback.format_exc()),
            environment)
    if doc.error is not None:
        _report_error(doc.error, verbose)
    if want_json:
        out.write(encode(doc) + "\n")
    out.flush()
    return doc.error.exit_status() if doc.error is not None else 0


def _report_error(err: Error, verbose: bool) -> None:
    sys.stderr.write(f"error: {err.message}\n")
    if err.hint:
        sys.stderr.write(f"hint: {err.hint}\n")
    if verbose and err.details:
        sys.stderr.write(err.details.rstrip() + "\n")
    elif err.details:
        sys.stderr.write("(run with --verbose for the full details)\n")


# every command but gui; `onnx-studio` itself is onnx_studio.app.launcher
if __name__ == "__main__":
    sys.exit(main())
