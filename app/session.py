"""ExportSession: the state of one window's session, and the worker jobs that change it.

It owns the recipe and the file it came from, what the form shows but cannot parse, the problems
that keep Export disabled, the model's description, the worker's capabilities, the warnings, and
the last export and validation results, each stamped with the recipe and the ONNX file that
produced it (app.outcomes), so `is_current` can tell a stale result; the dirty flag compares
fingerprints. It owns the JobRunner that runs the jobs, unless it was handed one to share.

Views receive the session, subscribe to its signals and write back only through its methods
(`edit` for a form's fields); the session never imports a view (an import contract checks it).
Worker messages are decoded here with engine.protocol's classes; the outcomes keep the dicts
the worker sent too, which the Summary and Validation tabs render.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.jobs import JobRunner
from app.outcomes import (
    ExportOutcome,
    FileStamp,
    JobStart,
    OpenedFile,
    Stamp,
    ValidationOutcome,
    decode_event,
    fingerprint,
    protocol_error,
)
from app.recipes import (
    ExampleRecipe,
    default_output_dir,
    fallback_recipe,
    file_problems,
    load_example,
    model_stem,
)
from engine import recipe as recipes
from engine import shipped
from engine.errors import StudioError
from engine.paths import check_recipe_target, rebase_recipe_paths
from engine.protocol import (
    Candidate,
    DescribeResult,
    DevicesResult,
    ErrorEvent,
    ExportResult,
    ForwardParam,
    LogLine,
    Progress,
    ProtocolError,
    Ready,
    SourceDescription,
    ValidateResult,
    WarningEvent,
    WarningItem,
)
from engine.recipe import Recipe, is_folder_source, split_source
from engine.source.arguments import follow_signature
from engine.source.describe import PICKLE_SUFFIXES
from engine.torch_private import untested_torch_sentence

__all__ = ["PARTS", "ExportSession"]

# The parts of a recipe `recipeEdited` names: a form refreshes when another party edits its part.
PARTS = ("model", "inputs", "outputs", "options", "output")
# Parse errors are listed in the order of the forms that show them (the first one is the
# reason Export gives), whatever order they were found in.
_FORM_ORDER = ("model.", "inputs[", "outputs[")


@dataclasses.dataclass(frozen=True)
class _Sent:
    """What a running export or validation was sent with."""

    started: float
    recipe: str  # fingerprint
    model: str  # the model source and its folder (`ExportSession.model_key`)
    validates: bool
    onnx: Path
    file: FileStamp | None  # the file a validation checks, as it was when sent
    label: str = ""  # `ExportSession.recipe_label()` when sent


class ExportSession(QObject):
    """The recipe, the results and the jobs of one window; views subscribe to its signals."""

    recipeChanged = Signal()  # another recipe (opened, new, an example): views show it afresh
    recipeEdited = Signal(str, object)  # (part, origin): changed in place; origin None = session
    dirtyChanged = Signal(bool)  # the dirty flag, on every change of it and on every save
    readinessChanged = Signal()  # problems, a job started or ended, or the Validate target
    descriptionChanged = Signal(object)  # SourceDescription of the model file, or None
    capabilitiesChanged = Signal(object)  # DevicesResult: devices, opsets, onnxruntime's max
    warningsChanged = Signal()  # `warnings` was cleared, replaced or grew
    aboutToRun = Signal()  # before a job reads the recipe: views commit text being edited
    exportStarted = Signal(object)  # JobStart
    exportProgress = Signal(float, str)  # (fraction of the job, stage)
    exportFinished = Signal(object)  # ExportOutcome
    validationStarted = Signal(object)  # JobStart
    validationProgress = Signal(float, str)
    validationFinished = Signal(object)  # ValidationOutcome
    workerReady = Signal(object)  # Ready: a worker has imported torch (again after a restart)
    workerLost = Signal(str)  # the sentence that says how the worker died
    logLine = Signal(str)  # a line for the Log: the worker's stderr, a job's log, our own
    notice = Signal(str)  # an open, load or save the user asked for did not happen: why
    fileOpened = Signal(object)  # OpenedFile: an .onnx the user opened is the session's file
    refused = Signal(str)  # an action cannot run now: why

    def __init__(self, parent: QObject | None = None, runner: JobRunner | None = None,
                 use_worker: bool = True) -> None:
        """`runner`: a JobRunner to share (never shut down here); None: the session's own.
        `use_worker` False: no worker is started, describe runs in this process."""
        super().__init__(parent)
        self.owns_runner = runner is None
        self.runner = runner if runner is not None else JobRunner(self)
        self.use_worker = use_worker
        self.recipe = Recipe()
        self.recipe_path: Path | None = None
        self.parse_errors: dict[str, str] = {}  # field -> why the form's text does not parse
        self.problems: dict[str, str] = {}  # field -> sentence; Export is disabled unless empty
        self.worker_torch: str | None = None  # the torch version of the worker, once ready
        self.description: SourceDescription | None = None
        self.capabilities: DevicesResult | None = None
        self.warnings: list[WarningItem] = []  # replaced, never cleared in place
        self.export_job: int | None = None
        self.validate_job: int | None = None
        self.export_result: ExportOutcome | None = None
        self.validation_result: ValidationOutcome | None = None
        self.validate_target: Path | None = None  # the file Validate checks now
        self.validate_reason = ""  # why Validate is disabled ("" when it is not)
        self._fingerprint: str | None = None
        self._saved_fingerprint = self.fingerprint
        self._dirty = False
        self._last_written: tuple[Path, str] | None = None  # (file, model_key) of an export
        self._output_typed = False  # the user typed the output file: it stops following
        self.opened: OpenedFile | None = None  # an .onnx opened since the last export
        self._name_after_describe = False  # a factory was chosen: name the inputs after it
        self._export: _Sent | None = None
        self._validation: _Sent | None = None
        self._listening = False
        self._listen(True)

    # ================================================================= the worker

    def _listen(self, on: bool) -> None:
        if on == self._listening:
            return
        pairs = ((self.runner.workerReady, self._on_ready),
                 (self.runner.workerLost, self._on_lost), (self.runner.log, self._on_log))
        for signal, slot in pairs:
            if on:
                signal.connect(slot)
            else:
                signal.disconnect(slot)
        self._listening = on

    def start_worker(self) -> None:
        """Start the worker (torch imports in the background); one that is ready already
        is announced again (`workerReady`), as a new one would be. Nothing after `shutdown`."""
        if not self._listening:
            return
        ready = self.runner.ready_info
        self.runner.start()
        if ready is not None:
            self._on_ready(ready)

    def shutdown(self) -> None:
        """Stop hearing the worker; end it too when the session owns it (the window closes)."""
        self._listen(False)
        if self.owns_runner:
            self.runner.shutdown()

    def _on_ready(self, info: dict[str, Any]) -> None:
        try:
            ready = Ready.from_dict(info)
        except ProtocolError:  # another version's worker: show what it said
            ready = Ready(protocol=0, pid=int(info.get("pid") or 0),
                          torch=str(info.get("torch")), import_s=0.0)
        self.worker_torch = ready.torch
        self.workerReady.emit(ready)
        sentence = untested_torch_sentence(ready.torch) if ready.torch_tested is False else None
        if sentence:  # torch_tested is absent (UNSET) from workers that predate the field
            self.notice.emit(sentence)
        self.runner.submit({"job": "devices"}, self._on_devices)

    def _on_devices(self, message: dict[str, Any]) -> None:
        if message.get("type") != "result":
            return
        try:
            result = DevicesResult.from_dict(message)
        except ProtocolError as exc:
            self.logLine.emit(f"!! {exc.message}")
            return
        self.capabilities = result
        self.capabilitiesChanged.emit(result)
        self.recheck()

    def _on_lost(self, sentence: str) -> None:
        self.logLine.emit(f"!! {sentence}")
        self.workerLost.emit(sentence)

    def _on_log(self, text: str) -> None:
        self.logLine.emit(text)  # the worker's stderr

    # ================================================================= the recipe

    @property
    def fingerprint(self) -> str:
        """The recipe's fingerprint (app.outcomes.fingerprint), computed once per edit."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.recipe)
        return self._fingerprint

    @property
    def dirty(self) -> bool:
        """True when the recipe differs from the one opened or last saved."""
        return self.fingerprint != self._saved_fingerprint

    def recipe_label(self) -> str:
        """The recipe as the user knows it: its file's name (or "unsaved recipe") and model."""
        name = self.recipe_path.name if self.recipe_path is not None else "unsaved recipe"
        return f"{name} ({self.recipe.model.source or 'no model'})"

    def model_key(self) -> str:
        """The model source as written plus the folder it is relative to."""
        return f"{self.recipe.base_dir.resolve()}|{self.recipe.model.source}"

    def set_recipe(self, recipe: Recipe, path: Path | None = None) -> None:
        """Make `recipe` the session's (read from `path`, or not saved yet)."""
        self.recipe = recipe
        self.recipe_path = path
        self.parse_errors.clear()
        self._output_typed = False
        self._fingerprint = None
        self._saved_fingerprint = self.fingerprint
        self.recipeChanged.emit()
        self._set_description(None)
        self._changed()
        self.describe()

    @contextlib.contextmanager
    def edit(self, part: str, origin: object = None) -> Iterator[Recipe]:
        """Change the recipe in place inside the block (and `set_parse_error` for fields that
        do not parse); then the problems are checked again and `recipeEdited(part, origin)`
        tells the views which part changed and who changed it (None: the session)."""
        assert part in PARTS, part
        try:
            yield self.recipe
        finally:
            self._fingerprint = None
            self.recipeEdited.emit(part, origin)
            self._changed()

    def set_parse_error(self, field: str, sentence: str | None) -> None:
        """Say why the text of a form's `field` does not parse (None: it does now)."""
        if sentence is None:
            self.parse_errors.pop(field, None)
        else:
            self.parse_errors[field] = sentence

    def clear_parse_errors(self, prefix: str) -> None:
        """Forget the parse errors of every field that starts with `prefix` ("inputs[")."""
        for field in [f for f in self.parse_errors if f.startswith(prefix)]:
            del self.parse_errors[field]

    def set_source(self, text: str, origin: object = None) -> None:
        """Use `text` as the model source and describe it; another model file starts its
        inputs and output names afresh (the describe job names the inputs again), and the
        output file follows the model unless the user typed one."""
        old = self.recipe.model.source
        if text == old:
            return
        other_file = split_source(text)[0] != split_source(old)[0] or not text.strip()
        with self.edit("model", origin) as recipe:
            recipe.model.source = text
        self._follow_model(old, clear=other_file)
        self.describe()

    def set_output(self, text: str, origin: object = None) -> None:
        """Write the ONNX file to `text` (relative to the recipe's folder); `origin` not None
        (a form) means the user typed it, and it no longer follows the model."""
        if text != self.recipe.export.output:
            if origin is not None:
                self._output_typed = True
            with self.edit("output", origin) as recipe:
                recipe.export.output = text

    def _follow_model(self, old_source: str, clear: bool, arguments: bool = True) -> None:
        """After the model changed from `old_source`: the output file follows the model's name
        when it followed the old one (or is the bare default) and the user did not type it;
        `clear`: the old model's inputs and output names do not apply any more; `arguments`:
        nor do its constructor arguments and checkpoint (False: the old source named a file
        and no model in it yet)."""
        if arguments and (self.recipe.model.kwargs or self.recipe.model.checkpoint):
            with self.edit("model") as recipe:
                recipe.model.kwargs = {}
                recipe.model.checkpoint = None
                self.set_parse_error("model.kwargs", None)
        output = self.recipe.export.output
        stem = model_stem(self.recipe.model.source)
        follows = Path(output).stem in (model_stem(old_source), "model")
        if stem and follows and not self._output_typed:
            new = str(Path(output).with_name(f"{stem}.onnx"))
            if new != output:
                with self.edit("output") as recipe:
                    recipe.export.output = new
        if clear and (self.recipe.inputs or self.recipe.outputs):
            with self.edit("inputs") as recipe:
                recipe.inputs = []
                self.clear_parse_errors("inputs[")
            with self.edit("outputs") as recipe:
                recipe.outputs = []
                self.clear_parse_errors("outputs[")

    def name_inputs(self, names: list[str], signature: Sequence[ForwardParam] = ()) -> None:
        """The inputs of a forward(`names`) read from the file as `signature`
        (engine.source.arguments.follow_signature: an input of the same name keeps what the
        user set, tensors from the file's shapes, constants from defaults, optional ones left
        out)."""
        with self.edit("inputs") as recipe:
            recipe.inputs = follow_signature(recipe.inputs, names, signature)
            self.clear_parse_errors("inputs[")

    def open_hf_folder(self, path: Path) -> str | None:
        """Export the folder `path` (written by save_pretrained) as `hf:PATH` into a folder
        beside it, NAME_onnx; its tasks are described for the task picker. Why not, or None."""
        if not (path / "config.json").is_file():
            return f"{path} has no config.json; open a folder written by save_pretrained."
        path = path.resolve()
        self.set_source(f"hf:{path}")
        self.set_output(str(path.with_name(f"{path.name}_onnx")))
        return None

    def set_task(self, task: str) -> None:
        """Export a Hugging Face source for `task` (written into the model's kwargs)."""
        if self.recipe.model.kwargs.get("task") != task:
            with self.edit("model") as recipe:
                recipe.model.kwargs = {**recipe.model.kwargs, "task": task}

    def choose_candidate(self, candidate: Candidate) -> None:
        """Use a class or factory of the model file, and name the inputs after forward()."""
        source = self.recipe.model.source
        file = source.rpartition(":")[0] if ".py:" in source else source
        if f"{file}:{candidate.name}" == source:
            return
        with self.edit("model") as recipe:
            recipe.model.source = f"{file}:{candidate.name}"
        named = ".py:" in source
        self._follow_model(source, clear=False, arguments=named)
        if named and self.recipe.outputs:  # another model of the file: its own output names
            with self.edit("outputs") as recipe:
                recipe.outputs = []
                self.clear_parse_errors("outputs[")
        if candidate.kind != "class":
            # a factory's own parameters are not the inputs: the model it returns names them
            self._name_after_describe = True
            self.describe()
            return
        if self.description is not None:  # forward() shown is the chosen class's
            self._set_description(dataclasses.replace(
                self.description, forward_params=list(candidate.params), error=None))
        if candidate.params:
            self.name_inputs(list(candidate.params), candidate.signature)

    def recheck(self) -> None:
        """Check the recipe again (parse errors, its problems, files that are missing) and
        what Validate would check; `readinessChanged`."""
        parse = sorted(self.parse_errors.items(), key=lambda item: next(
            (i for i, prefix in enumerate(_FORM_ORDER) if item[0].startswith(prefix)),
            len(_FORM_ORDER)))
        problems: dict[str, str] = {}
        for field, sentence in [*parse, *self.recipe.problems(), *file_problems(self.recipe)]:
            problems.setdefault(field, sentence)
        self.problems = problems
        self.validate_target, missing = self._validation_target()
        self.validate_reason = self._validate_disabled_reason(missing)
        self.readinessChanged.emit()

    def _changed(self) -> None:
        self.recheck()
        if self.dirty != self._dirty:
            self._dirty = self.dirty
            self.dirtyChanged.emit(self._dirty)

    # ================================================================= files

    def open_recipe(self, path: Path) -> bool:
        """Open a recipe file (a shipped example opens as its working copy, never in the
        install tree); False, and a `notice`, when it does not load."""
        try:
            path = shipped.runnable(path)
            recipe = recipes.load(path)
        except StudioError as exc:
            self.notice.emit(f"The recipe did not open: {exc.message}")
            return False
        self.set_recipe(recipe, path.resolve())
        return True

    def load_example(self, path: Path) -> bool:
        """Load a shipped example recipe (from its working copy); False when it does not."""
        try:
            recipe = load_example(path)
        except (StudioError, OSError) as exc:
            self.notice.emit(f"The example did not load: {exc}")
            return False
        self.set_recipe(recipe, None)
        return True

    def load_default(self, examples: list[ExampleRecipe]) -> None:
        """The recipe a window opens with: the default example, else a built-in tiny model."""
        out_dir = default_output_dir()
        default = next((e for e in examples if e.name == "default"), None)
        try:
            recipe = load_example(default.path) if default else fallback_recipe(out_dir)
        except (StudioError, OSError) as exc:
            self.notice.emit(f"The example recipe did not load: {exc}")
            recipe = fallback_recipe(out_dir)
        self.set_recipe(recipe, None)

    def restore(self, recipe: Recipe, path: Path | None) -> None:
        """Take back unsaved edits (a recovery file) to the recipe at `path` (None: never
        saved): the form shows them, and they stay unsaved until the user saves."""
        self.set_recipe(recipe, path)
        saved = None
        if path is not None and path.is_file():
            with contextlib.suppress(StudioError):
                saved = fingerprint(recipes.load(path))
        self._saved_fingerprint = saved or ""
        self._changed()

    def new_recipe(self) -> None:
        """An empty recipe in the user's data folder."""
        self.set_recipe(Recipe(base_dir=default_output_dir()), None)

    def save(self, path: Path) -> bool:
        """Write the recipe to `path` (its paths rewritten relative to the new folder when it
        moves); False, and a `notice`, when it cannot be written or `path` is no place for it
        (engine.paths.check_recipe_target: a .toml that is no file the recipe names)."""
        try:
            path = check_recipe_target(self.recipe, path, "choose another name or folder")
        except StudioError as exc:
            self.notice.emit(f"The recipe was not saved. {exc.message}")
            return False
        moved = path.parent != self.recipe.base_dir.resolve()
        # a copy is rebased and written: the form keeps its recipe when the write fails
        recipe = rebase_recipe_paths(self.recipe, path.parent) if moved else self.recipe
        try:
            recipes.save(recipe, path)
        except (OSError, StudioError) as exc:
            self.notice.emit(f"The recipe was not saved: {exc}")
            return False
        if moved:
            self.set_recipe(recipe, path)
        self.recipe_path = path
        self._saved_fingerprint = self.fingerprint
        self._dirty = False
        self.dirtyChanged.emit(False)
        return True

    def open_onnx(self, path: Path) -> OpenedFile:
        """Make an existing .onnx the session's file: Summary shows what it holds (read here,
        without its weights) and Validate checks it with the recipe's inputs, until the next
        export writes another."""
        from engine.graph.summary import summarize

        path = path.resolve()
        try:
            opened = OpenedFile(path, FileStamp.of(path), summarize(path), None)
        except StudioError as exc:
            opened = OpenedFile(path, FileStamp.of(path), None, exc.message)
        self.opened = opened if opened.error is None else None
        self.logLine.emit(f"=== Opened {path}" + (f": {opened.error}" if opened.error else ""))
        self.recheck()
        self.fileOpened.emit(opened)
        return opened

    # ================================================================= describe

    def describe(self) -> None:
        """Describe the model file when the source names a .py, or a Hugging Face folder's
        tasks (`descriptionChanged`)."""
        text = self.recipe.model.source
        file = text.rpartition(":")[0] if ".py:" in text else text
        if is_folder_source(text):  # hf:DIR: its tasks, read from config.json by the worker
            file = text.strip()
            if not self.use_worker:
                self._set_description(None)
                return
        elif not file.endswith((".py", ".pt2", *PICKLE_SUFFIXES)):
            self._set_description(None)  # a .pt2 and a TorchScript archive record forward()
            return
        if self.use_worker:
            request: dict[str, Any] = {"job": "describe", "source": file,
                                       "base_dir": str(self.recipe.base_dir)}
            if self.recipe.model.trust_remote_code and is_folder_source(text):
                request["trust_remote_code"] = True  # the folder's own code may run
            self.runner.submit(request, functools.partial(self._on_describe, file))
            return
        # No worker (exit-after-paint, form tests): describe only reads the file (ast), so it
        # runs here without importing torch.
        from engine.source.describe import describe

        found = describe(file, self.recipe.base_dir)
        self._described(file, SourceDescription.from_dict(dataclasses.asdict(found)))

    def _on_describe(self, file: str, message: dict[str, Any]) -> None:
        if message.get("type") not in ("result", "error"):
            return
        try:
            event = decode_event("describe", message)
        except ProtocolError as exc:
            event = protocol_error(0, exc)
        if isinstance(event, DescribeResult):
            self._described(file, event.description)
        else:
            error = event.error.message if isinstance(event, ErrorEvent) else str(event)
            self._described(file, SourceDescription(kind="unknown", error=error))

    def _described(self, file: str, description: SourceDescription) -> None:
        current = self.recipe.model.source
        if not current.startswith(file):
            return  # the source changed meanwhile
        self._set_description(description)
        if is_folder_source(current):  # its files' inputs come from the task, not the form
            return
        name_inputs, self._name_after_describe = self._name_after_describe, False
        if ".py:" not in current and len(description.candidates) == 1:
            # One class in the file: pick it, and name the inputs after its forward().
            self.choose_candidate(description.candidates[0])
        elif (name_inputs or not self.recipe.inputs) \
                and (params := _named_params(current, description))[0]:
            # a new model (a .pt2's signature, a named class): its inputs, named as it names them
            self.name_inputs(*params)

    def _set_description(self, description: SourceDescription | None) -> None:
        self.description = description
        self.descriptionChanged.emit(description)

    # ================================================================= warnings

    def add_warnings(self, items: list[WarningItem]) -> None:
        """Add the warnings not listed yet (events and reports repeat them)."""
        shown = {(w.category, w.message.strip()) for w in self.warnings}
        for item in items:
            if (item.category, item.message.strip()) not in shown:
                shown.add((item.category, item.message.strip()))
                self.warnings.append(item)
        self.warningsChanged.emit()

    def _set_warnings(self, items: list[WarningItem]) -> None:
        self.warnings = items
        self.warningsChanged.emit()

    # ================================================================= results

    def is_current(self, result: ExportOutcome | ValidationOutcome) -> bool:
        """True while `result` still describes what the session holds: the recipe has the
        fingerprint it was made with and its ONNX file is unchanged (size, mtime)."""
        stamp = result.stamp
        if stamp.recipe != self.fingerprint:
            return False
        return stamp.onnx is None or FileStamp.of(stamp.onnx.path) == stamp.onnx

    @property
    def busy(self) -> bool:
        """True while an export or a validation runs."""
        return self.export_job is not None or self.validate_job is not None

    def _validation_target(self) -> tuple[Path | None, str]:
        """An .onnx the user opened (since the last export), else the last export when it
        came from the model now in the form (the recipe says how to rebuild that model's
        inputs), else the recipe's output file if it exists; None and why when there is none."""
        if self.opened is not None and self.opened.path.is_file():
            return self.opened.path, ""
        # a Hugging Face recipe exports (and validates) a folder of files
        written = Path.is_dir if is_folder_source(self.recipe.model.source) else Path.is_file
        if self._last_written is not None:
            path, model = self._last_written
            if model == self.model_key() and written(path):
                return path, ""
        output = self.recipe.output_path
        if written(output):
            return output, ""
        return None, f"there is no ONNX file to validate yet ({output.name}); export first."

    def _validate_disabled_reason(self, missing: str) -> str:
        if self.busy:
            return "a job is running."
        # the output path does not matter for validating an existing file
        problems = {k: v for k, v in self.problems.items() if not k.startswith("export.output")}
        if problems:
            field, sentence = next(iter(problems.items()))
            return f"{field}: {sentence}"
        return missing

    def validate_tip(self) -> str:
        """What Validate does now, or why it is disabled (its buttons' tooltip)."""
        if self.validate_reason:
            return f"Validate is disabled: {self.validate_reason}"
        name = self.validate_target.name if self.validate_target else "the export"
        return f"Validate {name} with ONNX Runtime (Ctrl+Shift+V)"

    # ================================================================= export

    def start_export(self) -> int | None:
        """Send the recipe to the worker to export (and validate, if it says so); the job id,
        or None when Export is disabled (a problem, or a job running)."""
        self.aboutToRun.emit()
        self.recheck()
        if self.busy or self.problems:
            return None
        recipe = self.recipe
        ready = self.runner.ready_info is not None
        self.export_result = None
        self.opened = None  # the export's file becomes the session's file
        self._set_warnings([])
        self.logLine.emit(f"=== Export started {time.strftime('%H:%M:%S')}: "
                          f"{recipe.model.source} -> {recipe.output_path}")
        self._export = _Sent(time.perf_counter(), self.fingerprint, self.model_key(),
                             recipe.validate.enabled, recipe.output_path, None,
                             self.recipe_label())
        self.export_job = self.runner.export(recipe.to_toml(), recipe.base_dir,
                                             self._on_export_event)
        self.exportStarted.emit(JobStart(self.export_job, recipe.output_path, ready,
                                         recipe.validate.enabled,
                                         self.runner.ahead_of(self.export_job)))
        self.recheck()
        return self.export_job

    def cancel(self) -> None:
        """Cancel the running export or validation (a Compare-tab job goes on)."""
        if self.busy:
            self.runner.cancel([j for j in (self.export_job, self.validate_job) if j is not None])

    def _on_export_event(self, message: dict[str, Any]) -> None:
        try:
            event = decode_event("export", message)
        except ProtocolError as exc:
            if message.get("type") in ("result", "error"):
                self._export_done(protocol_error(int(message.get("id") or 0), exc), message)
            else:
                self.logLine.emit(f"!! {exc.message}")
            return
        if isinstance(event, Progress):
            self.exportProgress.emit(event.fraction, event.stage)
        elif isinstance(event, LogLine):
            self.logLine.emit(event.line)
        elif isinstance(event, WarningEvent):
            self.warnings.append(event.warning)
            self.warningsChanged.emit()
        elif isinstance(event, ExportResult | ErrorEvent):
            self._export_done(event, message)

    def _export_done(self, final: ExportResult | ErrorEvent, message: dict[str, Any]) -> None:
        sent, self._export = self._export, None
        assert sent is not None
        job, self.export_job = self.export_job or 0, None
        seconds = time.perf_counter() - sent.started
        outcome = ExportOutcome(job, final, message, Stamp(sent.recipe, None, sent.label), seconds,
                                sent.validates)
        output = outcome.output
        if outcome.written and output is not None:  # stamp the file it wrote
            outcome = dataclasses.replace(outcome, stamp=Stamp(sent.recipe, FileStamp.of(output),
                                                               sent.label))
            self._last_written = (output, sent.model)
        self.export_result = outcome
        report = outcome.report
        if report is not None and report.warnings:
            self._set_warnings(list(report.warnings))
        if report is not None and report.validation is not None:
            self.add_warnings(report.validation.warnings or [])
            data = (message.get("report") or {}).get("validation")
            self.validation_result = ValidationOutcome(
                job, outcome.output, report.validation, message, data, report.error, final.details,
                message.get("job_dir"), outcome.stamp, seconds, from_export=True)
        if report is not None and report.ok:
            self.logLine.emit(f"=== Export finished in {seconds:.1f} s: {report.output}")
        else:
            error = outcome.error
            self.logLine.emit(f"=== {error.kind if error else 'export'}: "
                              f"{error.message if error else 'Export failed.'}")
        self.recheck()
        self.exportFinished.emit(outcome)
        written = message.get("written")
        if isinstance(final, ErrorEvent) and isinstance(written, str):
            # Cancel came after the new file was renamed into place: it is there, so it is the
            # session's file (Summary, Graph, Validate), never a "nothing changed"
            self.open_onnx(Path(written))

    # ================================================================= validation

    def start_validation(self) -> int | None:
        """Validate the target file with the recipe's [validate] settings in the worker; the
        job id, or None when Validate is disabled (`refused` says why)."""
        self.aboutToRun.emit()
        self.recheck()
        target, reason = self.validate_target, self.validate_reason
        if reason or target is None:
            self.refused.emit(f"Validate is disabled: {reason}")
            return None
        ready = self.runner.ready_info is not None
        self.logLine.emit(f"=== Validation started {time.strftime('%H:%M:%S')}: {target} "
                          f"against {self.recipe.model.source}")
        self._validation = _Sent(time.perf_counter(), self.fingerprint, self.model_key(), True,
                                 target, FileStamp.of(target), self.recipe_label())
        self.validate_job = self.runner.validate(self.recipe.to_toml(), self.recipe.base_dir,
                                                 target, self._on_validation_event)
        self.validationStarted.emit(JobStart(self.validate_job, target, ready, True,
                                             self.runner.ahead_of(self.validate_job)))
        self.recheck()
        return self.validate_job

    def _on_validation_event(self, message: dict[str, Any]) -> None:
        try:
            event = decode_event("validate", message)
        except ProtocolError as exc:
            if message.get("type") in ("result", "error"):
                self._validation_done(protocol_error(int(message.get("id") or 0), exc), message)
            else:
                self.logLine.emit(f"!! {exc.message}")
            return
        if isinstance(event, Progress):
            self.validationProgress.emit(event.fraction, event.stage)
        elif isinstance(event, LogLine):
            self.logLine.emit(event.line)
        elif isinstance(event, WarningEvent):
            self.add_warnings([event.warning])
        elif isinstance(event, ValidateResult | ErrorEvent):
            self._validation_done(event, message)

    def _validation_done(self, final: ValidateResult | ErrorEvent, message: dict[str, Any]
                         ) -> None:
        sent, self._validation = self._validation, None
        assert sent is not None
        job, self.validate_job = self.validate_job or 0, None
        seconds = time.perf_counter() - sent.started
        stamp = Stamp(sent.recipe, sent.file, sent.label)
        if isinstance(final, ValidateResult):
            validation = final.validation
            # the result lists its warnings too: any the events did not bring (repeats skipped)
            self.add_warnings(list(validation.warnings or []))
            outcome = ValidationOutcome(job, Path(final.onnx), validation, message,
                                        message.get("validation") or {}, None, "",
                                        final.job_dir, stamp, seconds, from_export=False)
            self.logLine.emit(f"=== Validation {'passed' if validation.ok else 'failed'} in "
                              f"{seconds:.1f} s"
                              + ("" if validation.ok else f": {validation.message or ''}"))
        else:
            outcome = ValidationOutcome(job, sent.onnx, None, message, None, final.error,
                                        final.details, None, stamp, seconds, from_export=False)
            self.logLine.emit(f"=== {final.error.kind}: {final.error.message}")
        self.validation_result = outcome
        self.recheck()
        self.validationFinished.emit(outcome)


def _named_params(source: str, description: SourceDescription
                  ) -> tuple[list[str], list[ForwardParam]]:
    """forward()'s parameters of the model `source` names (`net.py:Beta`), and as the file
    writes them: the file was described whole, so its description's own are the first
    class's."""
    _, _, name = source.rpartition(":") if ".py:" in source else ("", "", "")
    named = next((c for c in description.candidates if c.name == name and c.kind == "class"),
                 None)
    if named is not None:
        return list(named.params), list(named.signature)
    return list(description.forward_params), list(description.forward_signature)
