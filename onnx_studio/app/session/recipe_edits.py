"""RecipeEdits: the recipe being edited and the file it came from, the form's parse errors, the
problems that keep Export disabled, the dirty flag, and every edit of it.

The base of ExportSession (onnx_studio.app.session.model): a view writes back through `edit` (or one
of the named edits below), and `recipeEdited(part, origin)` tells the other views which part
changed. When the model source changes the session describes it (`describe`, which the session gives
a body) and the output file follows the model's name unless the user typed one. Qt signals, no
widget.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.fingerprints import export_fingerprint, fingerprint, run_fingerprint
from onnx_studio.app.recipes import (
    default_output_dir,
    fallback_recipe,
    file_problems,
    load_example,
    model_stem,
)
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine import shipped
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.paths import check_recipe_target, rebase_recipe_paths
from onnx_studio.engine.recipe import Recipe, recipe_problems, split_source

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import ForwardParam

__all__ = ["PARTS", "RecipeEdits"]

# The parts of a recipe `recipeEdited` names: a form refreshes when another party edits its part.
PARTS = ("model", "inputs", "outputs", "options", "output")
# Parse errors are listed in the order of the forms that show them (the first one is the
# reason Export gives), whatever order they were found in.
_FORM_ORDER = ("model.", "inputs[", "outputs[")


def _now(call: Callable[[], object]) -> None:
    call()


class RecipeEdits(QObject):
    """The recipe, its file, its problems and its dirty flag; every edit goes through here."""

    recipeChanged = Signal()  # another recipe (opened, new, an example): views show it afresh
    recipeEdited = Signal(str, object)  # (part, origin): changed in place; origin None = session
    dirtyChanged = Signal(bool)  # the dirty flag, on every change of it and on every save
    readinessChanged = Signal()  # problems, a job started or ended, or the Validate target
    notice = Signal(str)  # an open, load or save the user asked for did not happen: why

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.recipe = Recipe()
        self.recipe_path: Path | None = None
        self.parse_errors: dict[str, str] = {}  # field -> why the form's text does not parse
        self.problems: dict[str, str] = {}  # field -> sentence; Export is disabled unless empty
        self._fingerprints: tuple[str, str, str] | None = None  # (whole, export, run)
        self._saved_fingerprint = self.fingerprint
        self._dirty = False
        self._output_typed = False  # the user typed the output file: it stops following

    # ----------------------------------------------------------------- what the recipe is

    def _all_fingerprints(self) -> tuple[str, str, str]:
        if self._fingerprints is None:  # computed once per edit
            recipe = self.recipe
            self._fingerprints = (fingerprint(recipe), export_fingerprint(recipe),
                                  run_fingerprint(recipe))
        return self._fingerprints

    @property
    def fingerprint(self) -> str:
        """The recipe's fingerprint (onnx_studio.app.outcomes.fingerprint)."""
        return self._all_fingerprints()[0]

    @property
    def export_fingerprint(self) -> str:
        """What an export reads (onnx_studio.app.outcomes.export_fingerprint): [validate] aside."""
        return self._all_fingerprints()[1]

    @property
    def run_fingerprint(self) -> str:
        """What a validation runs (onnx_studio.app.outcomes.run_fingerprint): all but the
        tolerances."""
        return self._all_fingerprints()[2]

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

    # ----------------------------------------------------------------- hooks the session fills

    def describe(self) -> None:
        """Describe the model source (the session sends a describe job)."""

    def _recipe_replaced(self) -> None:
        """Another recipe was set (the session forgets the old model's description)."""

    def recheck(self) -> None:
        """Check the recipe again (parse errors, its problems, files that are missing);
        `readinessChanged`. The session checks what Validate would check too."""
        self.check_problems()
        self.readinessChanged.emit()

    def check_problems(self) -> None:
        """`problems`: the form's parse errors (in the forms' order), then the recipe's."""
        parse = sorted(self.parse_errors.items(), key=lambda item: next(
            (i for i, prefix in enumerate(_FORM_ORDER) if item[0].startswith(prefix)),
            len(_FORM_ORDER)))
        problems: dict[str, str] = {}
        for field, sentence in [*parse, *recipe_problems(self.recipe), *file_problems(self.recipe)]:
            problems.setdefault(field, sentence)
        self.problems = problems

    def _changed(self) -> None:
        self.recheck()
        if self.dirty != self._dirty:
            self._dirty = self.dirty
            self.dirtyChanged.emit(self._dirty)

    # ----------------------------------------------------------------- edits

    def set_recipe(self, recipe: Recipe, path: Path | None = None) -> None:
        """Make `recipe` the session's (read from `path`, or not saved yet)."""
        self.recipe = recipe
        self.recipe_path = path
        self.parse_errors.clear()
        self._output_typed = False
        self._fingerprints = None
        self._saved_fingerprint = self.fingerprint
        self.recipeChanged.emit()
        self._recipe_replaced()
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
            self._fingerprints = None
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
        self.follow_model(old, clear=other_file)
        self.describe()

    def set_output(self, text: str, origin: object = None) -> None:
        """Write the ONNX file to `text` (relative to the recipe's folder); `origin` not None
        (a form) means the user typed it, and it no longer follows the model."""
        if text != self.recipe.export.output:
            if origin is not None:
                self._output_typed = True
            with self.edit("output", origin) as recipe:
                recipe.export.output = text

    def follow_model(self, old_source: str, clear: bool, arguments: bool = True) -> None:
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
        (onnx_studio.engine.source.arguments.follow_signature: an input of the same name keeps what
        the user set, tensors from the file's shapes, constants from defaults, optional ones left
        out)."""
        from onnx_studio.engine.source.arguments import (
            follow_signature,  # with the first description
        )

        with self.edit("inputs") as recipe:
            recipe.inputs = follow_signature(recipe.inputs, names, signature)
            self.clear_parse_errors("inputs[")

    # ----------------------------------------------------------------- recipe files

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

    def load_default(self, later: Callable[[Callable[[], object]], object] | None = None
                     ) -> None:
        """The recipe a window opens with: the default example (the shipped `default.toml`),
        else a built-in tiny model.

        The example's working copy holds its files at once; its recipe file (what the form
        shows, written with its comments) is written by the call handed to `later` (the
        window: after its first frame), or now."""
        out_dir = default_output_dir()
        default = shipped.default_recipe()
        try:
            if default is None:
                recipe = fallback_recipe(out_dir)
            else:
                recipe, write = shipped.working_recipe(default)
                (later or _now)(functools.partial(self._write_copy, write))
        except (StudioError, OSError) as exc:
            self.notice.emit(f"The example recipe did not load: {exc}")
            recipe = fallback_recipe(out_dir)
        self.set_recipe(recipe, None)

    def _write_copy(self, write: Callable[[], object]) -> None:
        try:
            write()
        except (StudioError, OSError) as exc:
            self.notice.emit(f"The example's recipe was not written to its folder: {exc}")

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
        (onnx_studio.engine.paths.check_recipe_target: a .toml that is no file the recipe names)."""
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
