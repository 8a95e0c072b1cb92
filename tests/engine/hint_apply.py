"""A hint is a claim: apply it. `concrete_changes` reads every concrete change a hint names (an
exporter, a tolerance, a recipe key, a dynamic axis to drop, a model keyword, a size) and
`apply_hint` makes them on a copy of the recipe, so a test can run it again and see it pass or
fail further on. A hint that looks like it names a change but that no reader understands is
reported (`unreadable`), so a hint cannot drift into prose a machine cannot apply.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from typing import Any

from onnx_studio.engine.recipe import DimSpec, Recipe

Change = Callable[[Recipe], None]

_EXPORTER = re.compile(r'exporter = "(?P<value>auto|dynamo|torchscript)"')
_VALIDATE = re.compile(r"validate\.(?P<key>atol|rtol|random_trials|dynamic_sizes) = "
                       r"(?P<value>[-+0-9.e]+|true|false)")
_EXPORT_KEY = re.compile(r"(?<![\w.])(?:export\.)?(?P<key>opset|do_constant_folding|optimize) = "
                         r"(?P<value>\d+|true|false)")
_DROP_AXIS = re.compile(r"remove '(?P<name>\w+)' from the dynamic axes")
_MODEL_KWARG = re.compile(r"--model-kwarg (?P<key>\w+)=(?P<value>[\w.\-]+)")
_DIM_MAX = re.compile(r"\[dims\] (?P<name>\w+) max = (?P<value>\d+)")
_SCRIPT = re.compile(r"model\.script = true")
_KWARGS_TABLE = re.compile(r"model\.kwargs = \{ (?P<key>\w+) = (?P<value>\"[^\"]*\"|[\w.\-]+) \}")
# words that say a hint names a change (a recipe key set to a value, an option, an axis)
_LOOKS_CONCRETE = re.compile(r'(?:\w+\.)?\w+ = (?:"[^"]*"|[-+0-9.e]+|true|false)\b|'
                             r"--model-kwarg|from the dynamic axes")


def _value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    return ast.literal_eval(text)


def concrete_changes(hint: str) -> list[tuple[str, Change]]:
    """(what, change) for every concrete change `hint` names; first alternative of each kind
    only (a hint offering `exporter = "torchscript"` or `"dynamo"` is applied as the first)."""
    found: list[tuple[str, Change]] = []
    if (m := _EXPORTER.search(hint)):
        value = m["value"]
        found.append((m[0], lambda r, v=value: setattr(r.export, "exporter", v)))
    for m in _VALIDATE.finditer(hint):
        key, value = m["key"], _value(m["value"])
        found.append((m[0], lambda r, k=key, v=value: setattr(r.validate, k, v)))
    for m in _EXPORT_KEY.finditer(hint):
        key, value = m["key"], _value(m["value"])
        found.append((m[0], lambda r, k=key, v=value: setattr(r.export, k, v)))
    for m in _DROP_AXIS.finditer(hint):
        found.append((m[0], lambda r, n=m["name"]: _drop_axis(r, n)))
    for m in _MODEL_KWARG.finditer(hint):
        found.append((m[0], lambda r, k=m["key"], v=m["value"]: r.model.kwargs.update({k: v})))
    if _SCRIPT.search(hint):
        found.append(("model.script = true", lambda r: setattr(r.model, "script", True)))
    for m in _KWARGS_TABLE.finditer(hint):
        value = _value(m["value"]) if m["value"].startswith('"') else m["value"]
        found.append((m[0], lambda r, k=m["key"], v=value: r.model.kwargs.update({k: v})))
    for m in _DIM_MAX.finditer(hint):
        found.append((m[0], lambda r, n=m["name"], v=int(m["value"]): r.dims.__setitem__(
            n, DimSpec(min=(r.dims.get(n) or DimSpec()).min, max=v))))
    return found


def unreadable(hint: str) -> list[str]:
    """The parts of `hint` that look like a concrete change but no reader of
    `concrete_changes` understands."""
    read = " ".join(what for what, _ in concrete_changes(hint))
    return [m[0] for m in _LOOKS_CONCRETE.finditer(hint) if m[0] not in read
            and not any(m[0] in what or what in m[0] for what, _ in concrete_changes(hint))]


def apply_hint(recipe: Recipe, hint: str) -> Recipe | None:
    """A copy of `recipe` with every concrete change of `hint` made; None when it names none."""
    changes = concrete_changes(hint)
    if not changes:
        return None
    out = copy.deepcopy(recipe)
    for _, change in changes:
        change(out)
    return out


def _drop_axis(recipe: Recipe, name: str) -> None:
    for spec in [*recipe.inputs, *recipe.outputs]:
        spec.dynamic = {axis: dim for axis, dim in spec.dynamic.items() if dim != name}
    recipe.dims.pop(name, None)


def moved_on(before: Any, after: Any) -> bool:
    """Whether a run `after` applying a hint passed or failed further on than `before` (an
    ExportReport each): it passed, or its error is another one."""
    if after.ok:
        return True
    if before.error is None or after.error is None:
        return False
    return (after.error.kind, after.error.message) != (before.error.kind, before.error.message)
