"""Recipe chores for the session and the forms: examples, paths shown relative to the recipe,
missing-file checks, the kwargs field's text.

Qt-free and torch-free; the Recipe stays the one source of truth, these only read or rewrite it.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from onnx_studio.engine import dirs, shipped
from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.paths import source_path
from onnx_studio.engine.recipe import Recipe, is_folder_source, split_source
from onnx_studio.engine.source.kinds import PICKLE_SUFFIXES, archive_kind

MODEL_SUFFIXES = (".py", ".pt2", ".pt", ".pth")
OPENABLE_SUFFIXES = (*MODEL_SUFFIXES, ".onnx", ".toml")


@dataclass
class ExampleRecipe:
    name: str
    title: str
    path: Path
    description: str = ""


def list_examples() -> list[ExampleRecipe]:
    """The gallery: every shipped example recipe, default first, titled after its example."""
    try:
        from onnx_studio.engine.source.examples import (
            EXAMPLES,  # plain data; the models build lazily
        )
    except Exception:  # the gallery still lists files by name
        EXAMPLES = {}
    found: list[ExampleRecipe] = []
    for path in shipped.recipe_paths():
        try:
            source = recipes.load(path).model.source
        except (OSError, StudioError):
            continue
        example = EXAMPLES.get(source.removeprefix("example:")) if source.startswith(
            "example:") else None
        if example is not None:
            title, description = example.title, example.description
        else:
            title = path.stem.replace("_", " ").capitalize()
            description = source
        if path.stem == "default":
            title = f"{source.rpartition(':')[2] or title} (the starting example)"
        found.append(ExampleRecipe(path.stem, title, path, description))
    found.sort(key=lambda e: (e.name != "default", e.title.lower()))
    return found


def default_output_dir() -> Path:
    """The folder a new, unsaved recipe works in: the user's data folder (`dirs.data_dir`)."""
    return dirs.data_dir()


def fallback_recipe(out_dir: Path) -> Recipe:
    """A recipe for a built-in tiny model, used when no example recipe ships yet."""
    model = out_dir / "tiny_net.py"
    if not model.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        model.write_text(
            "import torch\n\n\n"
            "class TinyNet(torch.nn.Module):\n"
            "    def __init__(self, features: int = 8) -> None:\n"
            "        super().__init__()\n"
            "        self.fc = torch.nn.Linear(4, features)\n\n"
            "    def forward(self, x):\n"
            "        return torch.relu(self.fc(x))\n",
            encoding="utf-8",
        )
    return recipes.loads(
        'version = 1\n[model]\nsource = "tiny_net.py:TinyNet"\n'
        '[[inputs]]\nname = "x"\nshape = [2, 4]\ndynamic = { 0 = "batch" }\n'
        '[[outputs]]\nname = "y"\ndynamic = { 0 = "batch" }\n'
        '[export]\noutput = "tiny_net.onnx"\n',
        base_dir=out_dir,
    )


def load_example(path: Path) -> Recipe:
    """A shipped example recipe, loaded from its copy in the user's data folder (the shipped
    files may be read-only, and an export never lands in the install folder)."""
    return recipes.load(shipped.working_copy(path))


def relative_source(path: Path, base: Path) -> str:
    """Show a path relative to the recipe folder when it is inside it."""
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def model_stem(source: str) -> str:
    """The name an ONNX file of this model is given: the class or factory in snake_case
    (`net.py:TinyCNN` -> "tiny_cnn"), else the file's stem or the example's name; "" for none."""
    file, name = split_source(source)
    if name:
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
        return re.sub(r"\W+", "_", snake).strip("_").lower()
    return Path(file).stem if file else ""


def source_file(recipe: Recipe) -> Path | None:
    """The model file (or a Hugging Face source's folder) the recipe points at, resolved;
    None for built-in sources."""
    located = source_path(recipe.model.source)
    return recipe.resolve(located[1]) if located is not None else None


def file_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """(field, sentence) for every file the recipe names that does not exist."""
    found: list[tuple[str, str]] = []
    src = source_file(recipe)
    if is_folder_source(recipe.model.source):  # hf:DIR names a folder, written into a folder
        folder = recipe.resolve(recipe.model.source.split(":", 1)[1].strip())
        if not (folder / "config.json").is_file():
            found.append(("model.source", f"{folder} has no config.json; pick a folder written "
                          "by save_pretrained."))
        return found
    if src is not None and not src.is_file():
        found.append(("model.source", f"{src} does not exist; pick the model file again."))
    if recipe.model.checkpoint and not recipe.resolve(recipe.model.checkpoint).is_file():
        found.append(("model.checkpoint", f"{recipe.resolve(recipe.model.checkpoint)} does "
                      "not exist; pick the checkpoint again or clear the field."))
    if recipe.model.workdir and not recipe.resolve(recipe.model.workdir).is_dir():
        found.append(("model.workdir", f"{recipe.resolve(recipe.model.workdir)} is not a "
                      "folder; pick the folder the model imports from, or clear the field."))
    for i, spec in enumerate(recipe.inputs):
        if spec.fill == "file" and spec.file and not recipe.resolve(spec.file).is_file():
            found.append((f"inputs[{i}].file", f"{recipe.resolve(spec.file)} does not exist."))
    for ext in recipe.export.extensions:
        if not recipe.resolve(ext).is_file():
            found.append(("export.extensions", f"{recipe.resolve(ext)} does not exist."))
    if needs_trust(recipe):
        found.append(("model.trust_pickle", f"{src.name if src else 'the file'} is a pickled "
                      "module: loading it runs code stored in the file. Tick \"Trust this "
                      "pickle file\" only if you trust where it came from."))
    if recipe.output_path.is_dir():
        found.append(("export.output", f"{recipe.output_path} is a folder; name an .onnx file "
                      "in it."))
    out_parent = recipe.output_path.parent
    while not out_parent.exists() and out_parent != out_parent.parent:
        out_parent = out_parent.parent
    if out_parent.exists() and not out_parent.is_dir():
        found.append(("export.output", f"{out_parent} is a file, so the output cannot be "
                      "written below it; choose another folder."))
    return found


def needs_trust(recipe: Recipe) -> bool:
    """True when the source is a pickled whole module the user has not yet trusted."""
    src = source_file(recipe)
    if recipe.model.trust_pickle or src is None or src.suffix.lower() not in PICKLE_SUFFIXES:
        return False
    return src.is_file() and archive_kind(src) == "pickle"


def implied_exporter(recipe: Recipe) -> tuple[str, str]:
    """The exporter an export of `recipe` runs, and why: the engine's own rule
    (`choose_exporter`), which reads the source file without loading it or importing torch."""
    from onnx_studio.engine.export.choice import choose_exporter

    return choose_exporter(recipe)


def format_table(values: dict[str, object]) -> str:
    """`a = 1, b = "x"`: an inline TOML table's inside, as the kwargs field shows it.

    Plain values (true/false, numbers, printable strings, lists of them under bare keys) are
    written here, as the recipe writer writes them (a test compares the two): showing the
    example's kwargs loads no tomlkit while the window opens. Anything else is the writer's.
    """
    if not values:
        return ""
    plain = [(key, _plain_toml(value)) for key, value in values.items()]
    if all(_BARE_KEY.fullmatch(key) and text is not None for key, text in plain):
        return ", ".join(f"{key} = {text}" for key, text in plain)
    return written_table(values)


def written_table(values: dict[str, object]) -> str:
    """`format_table` by the recipe writer (tomlkit), for any value a recipe holds."""
    text = recipes.dumps({"t": values}).strip()  # "[t]\na = 1\n..." for a table
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("[")]
    return ", ".join(lines)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _plain_toml(value: object) -> str | None:
    """A plain value as TOML writes it inline; None for any other."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        if not value.isprintable():  # control characters and separators: the writer's
            return None
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        items = [_plain_toml(item) for item in value]
        texts = [text for text in items if text is not None]
        return "[" + ", ".join(texts) + "]" if len(texts) == len(items) else None
    return None


def parse_table(text: str) -> dict[str, object]:
    """Parse `a = 1, b = "x"` (a table of a recipe section: model.kwargs, export.custom_opsets)
    into a dict; raises ValueError with a readable reason."""
    text = text.strip()
    if not text:
        return {}
    deep = f"nest lists and tables at most {recipes.MAX_NESTING} levels deep"
    try:
        values = dict(tomllib.loads(f"t = {{ {text} }}")["t"])
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"write it as name = value, separated by commas ({exc})") from None
    except RecursionError:
        raise ValueError(f"the values are nested too deeply to read; {deep}") from None
    if (where := recipes.too_deep(values, depth=2)) is not None:  # model.kwargs and the like
        raise ValueError(f"{where} is nested too deeply; {deep}")
    return values
