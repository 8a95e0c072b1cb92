"""Why an export failed, read from the exception chain: a sentence and a fix for the cause.

torch.onnx wraps the real failure in its own ("Failed to export the model with torch.export.
This is step 1/3 ...", coloured for a terminal); the cause is further down the chain
(`__cause__`, `__context__`) or in the wrapper's "Exception summary". `classify` looks at the
whole chain, colour codes stripped, and recognises the common failures:

- an output (or input) of a type the exporter cannot flatten into tensors, such as the
  `DynamicCache` a transformers decoder returns with `use_cache=True`: named, with the fix;
- data-dependent control flow (an `if` on a tensor's value): the user's source line, with
  torch.cond or the TorchScript exporter with `model.script = true` as the fix;
- dynamic-shape constraint violations: torch's "Suggested fixes" passed on, in recipe terms;
- a view that fails inside the exporter's own decomposition of a captured graph (torch.onnx
  decomposes scaled_dot_product_attention into a tensor laid out differently from the one the
  model was captured with): the model line, and for transformers `attn_implementation="eager"`;
- an argument error in forward() (a missing or unexpected argument, or the model's own "You
  have to specify pixel_values"), at whichever stage it was raised: kind `inputs`, naming the
  argument (`argument_error`);
- anything else: the real message, its first meaningful line, never the wrapper's.

Unsupported operators are recognised by the exporter module (they need a scan of the model,
see onnx_studio.engine.export.diagnose). Nothing here imports torch.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path

from onnx_studio.engine.errors import exception_chain, plain
from onnx_studio.engine.source.forward_errors import argument_error

# The first lines of torch.onnx's own wrappers (its three steps) and of the notes it appends:
# never the cause, so never the message.
_WRAPPERS = (
    "Failed to export the model with torch.export",
    "Failed to decompose the FX graph for ONNX compatibility",
    "Failed to convert the exported program to an ONNX model",
)
_NOT_MEANINGFUL = re.compile(
    r"^(?:This is step \d/\d|Next steps|- |## |\(Refer to the full stack trace|Error report has "
    r"been saved|For more information, run with|The error above occurred when calling)")
# "## Exception summary\n\n<class 'X'>: message" in a torch.onnx wrapper
_SUMMARY = re.compile(r"## Exception summary\s*\n\s*<class '([\w.]+)'>: ?(.*)", re.S)

# An object the exporter cannot flatten into tensors (pytree), or the tracer cannot take.
_TYPE_PATTERNS = (
    re.compile(r"Found <class '(?P<type>[\w.]+)'> in (?P<where>output|input), which is not a "
               r"known type"),
    re.compile(r"Unsupported input type <class '(?P<type>[\w.]+)'>"),
    # the TorchScript tracer: "Only tuples, lists and Variables are supported as JIT
    # inputs/outputs. ... Here, received an input of unsupported type: DynamicCache" (it says
    # "input" for what forward() returns too, so `where` stays open)
    re.compile(r"received an? (?:input|output) of unsupported type: (?P<type>[\w.]+)"),
)
# dynamo given a TorchScript module (exporter = "dynamo" named for a scripted model)
_SCRIPT_MODULE = "Exporting a ScriptModule is not supported"

# Control flow or sizes that depend on a tensor's value.
_DATA_DEPENDENT = re.compile(
    r"Could not guard on data-dependent expression|Could not extract specialized integer from "
    r"data-dependent expression|GuardOnDataDependentSymNode|DataDependentOutputException|"
    r"[Dd]ata-dependent (?:branching|control flow|expression)|data dependent operator|"
    r"Dynamic control flow is not supported")
_BRANCH_CODE = re.compile(r"^(?:if|elif|while|assert)\b|\bif\b.+\belse\b")
_RAISED_AT = re.compile(
    r"The following call raised this error:\s*\n\s*File \"(?P<file>[^\"]+)\", line "
    r"(?P<line>\d+), in (?P<func>\S+)\n\s*(?P<code>[^\n]*)")

_CONSTRAINTS = re.compile(r"Constraints violated|Suggested fixes:")

_DECOMPOSITION = "Failed to decompose the FX graph for ONNX compatibility"
_BAD_VIEW = re.compile(r"Cannot view a tensor with shape [^\n]*?(?=\n|$)")
# the model's call stack torch keeps on a graph node ("Original traceback:"), innermost last
_ORIGINAL_FRAME = re.compile(
    r"File \"(?P<file>[^\"]+)\", line (?P<line>\d+), in \S+\n\s*(?P<code>[^\n]*)")
_FIX_LINE = re.compile(r"^\s*(?P<name>\w+)\s*=\s*(?P<value>.+?)\s*$")


@dataclass
class Cause:
    """What the user reads: the error kind, one sentence, and what to change."""

    kind: str
    message: str
    hint: str


def chain_messages(exc: BaseException) -> str:
    """Every message of the chain, colour codes stripped, one after the other."""
    return "\n".join(plain(str(e)) for e in exception_chain(exc))


def classify(exc: BaseException, exporter: str, user_file: Path | str | None = None) -> Cause:
    """The cause of an exporter's exception (unsupported operators excepted: see the module)."""
    text = chain_messages(exc)
    if _SCRIPT_MODULE in text:
        return Cause("export", f"The {exporter} exporter cannot export a TorchScript module: "
                     f"{real_message(exc)}.", 'A TorchScript module exports with the TorchScript '
                     'exporter: set exporter = "torchscript", or "auto" (the default), which '
                     "chooses it for TorchScript sources.")
    return (argument_cause(exc)
            or _unsupported_type(text, exporter)
            or _data_dependent(exc, text, exporter, user_file)
            or _constraint_violation(text, exporter)
            or _view_after_decomposition(text, exporter)
            or _anything_else(exc, exporter))


# ---------------------------------------------------------------------------- arguments


def argument_cause(exc: BaseException) -> Cause | None:
    """Kind `inputs` naming the argument forward() missed or did not take; None when the
    failure is no argument error (onnx_studio.engine.source.forward_errors)."""
    found = argument_error(exc)
    if found is None:
        return None
    if found.missing:
        return Cause("inputs", f"forward() needs the argument {found.name!r}, which the inputs "
                     f"do not give ({found.message}).",
                     f"Add {found.name!r} to the inputs (an [[inputs]] entry named "
                     f"{found.name}, or --input {found.name}=SHAPE:DTYPE), in forward() order "
                     "or by keyword.")
    return Cause("inputs", f"forward() does not take the argument {found.name!r} the inputs "
                 f"give ({found.message}).",
                 f"Remove {found.name!r} from the inputs, or rename it to one of forward()'s "
                 "arguments.")


# ---------------------------------------------------------------------------- unsupported types


def _unsupported_type(text: str, exporter: str) -> Cause | None:
    for pattern in _TYPE_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        qualified = match["type"]
        name = qualified.rpartition(".")[2]
        where = match.groupdict().get("where") or "either"
        is_cache = "transformers" in qualified and name.endswith("Cache")
        shown = name if qualified == name else f"{name} ({qualified})"
        article = "an" if name[:1].lower() in "aeiou" else "a"
        if where == "output":
            message = (f"forward() returns {article} {shown}, which the {exporter} exporter "
                       "cannot write into an ONNX file: an ONNX model's outputs are tensors.")
        elif where == "input":
            message = (f"forward() takes {article} {shown}, which the {exporter} exporter "
                       "cannot pass into an ONNX file: an ONNX model's inputs are tensors.")
        else:
            message = (f"forward() takes or returns {article} {shown}, which the {exporter} "
                       "exporter cannot put into an ONNX file: an ONNX model's inputs and "
                       "outputs are tensors.")
        if is_cache:
            hint = ("This is the transformers key/value cache: build the model with "
                    "use_cache=False (in its config, or model.kwargs = { use_cache = false } "
                    "when the factory passes it to the config; on the command line "
                    "--model-kwarg use_cache=false), so forward() returns tensors only.")
        elif where != "input":
            hint = (f"Make forward() return tensors (or tuples, lists or dicts of tensors), "
                    f"e.g. a wrapper module that returns the tensors inside the {name}; or "
                    "register the class with torch.utils._pytree.register_pytree_node "
                    "(torch.export.register_dataclass for a dataclass).")
        else:
            hint = ("Give forward() tensors (or tuples, lists or dicts of tensors), e.g. a "
                    f"wrapper module that builds the {name} inside forward().")
        return Cause("export", message, hint)
    return None


# ---------------------------------------------------------------------------- data-dependent


def is_data_dependent(text: str) -> bool:
    """Whether an exporter's failure text says forward() reads a tensor's value (a branch, a
    size): a TorchScript trace would bake the value it saw into the file."""
    return bool(_DATA_DEPENDENT.search(text))


def _data_dependent(exc: BaseException, text: str, exporter: str,
                    user_file: Path | str | None) -> Cause | None:
    if exporter != "dynamo" or not _DATA_DEPENDENT.search(text):
        return None
    where, code = _user_location(exc, text, user_file)
    at = f" at {where}" if where else ""
    shown = f" (`{code}`)" if code else ""
    if not code or _BRANCH_CODE.search(code):
        message = (f"forward() branches on a tensor's value{at}{shown}: the dynamo exporter "
                   "captures one graph for every input and cannot follow an `if` that depends "
                   "on the data.")
        hint = ("Write the branch with torch.cond (or torch.where for an element-wise choice), "
                'or export with the TorchScript exporter and model.script = true (exporter = '
                '"torchscript"), which keeps the `if` as an ONNX If.')
    else:
        message = (f"forward() uses a tensor's value as a Python number{at}{shown}: the dynamo "
                   "exporter cannot know it when it captures the graph.")
        hint = ("Keep the value a tensor (no .item(), int() or .tolist()), or tell the exporter "
                "its range with torch._check(...); with a branch on it, use torch.cond, or the "
                'TorchScript exporter and model.script = true (exporter = "torchscript").')
    return Cause("export", message, hint)


def _user_location(exc: BaseException, text: str,
                   user_file: Path | str | None) -> tuple[str, str]:
    """("net.py:41", "if x.sum() > 0:") for the line of the model's code that failed: in the
    user's own file when a frame is there, else where torch says the call was, else the
    innermost frame outside torch; ("", "") when none is known."""
    frames = [frame for e in exception_chain(exc)
              for frame in traceback.extract_tb(e.__traceback__)]
    if user_file is not None:
        wanted = str(Path(user_file).resolve())
        own = [f for f in frames if _same_file(f.filename, wanted)]
        if own:
            return f"{Path(own[-1].filename).name}:{own[-1].lineno}", (own[-1].line or "").strip()
    match = _RAISED_AT.search(text)
    if match:
        return f"{Path(match['file']).name}:{match['line']}", match["code"].strip()
    outside = [f for f in frames if not _in_tooling(f.filename)]
    if outside:
        last = outside[-1]
        return f"{Path(last.filename).name}:{last.lineno}", (last.line or "").strip()
    return "", ""


def _same_file(name: str, wanted: str) -> bool:
    try:
        return str(Path(name).resolve()) == wanted
    except OSError:
        return False


def _in_tooling(filename: str) -> bool:
    parts = Path(filename).parts
    return filename.startswith("<") or any(
        p in ("torch", "onnxscript", "onnx", "onnx_studio", "functorch", "sympy") for p in parts)


# ---------------------------------------------------------------------------- dynamic shapes


def _constraint_violation(text: str, exporter: str) -> Cause | None:
    if not _CONSTRAINTS.search(text):
        return None
    reasons = [line.strip().removeprefix("- ").strip() for line in text.splitlines()
               if line.strip().startswith("- ") and ("marked" in line or "Not all values" in line
                                                      or "inferred" in line)]
    first = reasons[0] if reasons else "torch found a relation between the axes the recipe "\
        "does not declare"
    first = first.split(" If you're using")[0].rstrip(".")
    message = f"The recipe's dynamic axes do not fit the model: {first}."
    fixes = _suggested_fixes(text)
    if fixes:
        advice = "; ".join(_fix_in_recipe_terms(name, value) for name, value in fixes)
        listed = "\n".join(f"  {name} = {value}" for name, value in fixes)
        hint = f"torch suggests:\n{listed}\nIn the recipe: {advice}."
    else:
        hint = ("Make the axis static (remove it from the input's dynamic axes), or change the "
                "code that fixes its size.")
    return Cause("export", message, hint)


def _suggested_fixes(text: str) -> list[tuple[str, str]]:
    block = text.partition("Suggested fixes:")[2]
    fixes: list[tuple[str, str]] = []
    for line in block.splitlines()[1:] if block.startswith("\n") else block.splitlines():
        if not line.strip():
            if fixes:
                break
            continue
        match = _FIX_LINE.match(line)
        if match is None:
            break
        fixes.append((match["name"], match["value"]))
    return fixes


def _fix_in_recipe_terms(name: str, value: str) -> str:
    if value.isdigit():
        return (f"the model fixes {name!r} at {value}: remove {name!r} from the dynamic axes "
                "(a static axis)")
    if value.startswith("Dim("):
        return f"{name!r} only works in the range torch names ({value})"
    if value.isidentifier():
        return f"{name!r} is always equal to {value!r}: give both axes the name {value!r}"
    return (f"{name!r} is derived from another axis ({value}): give it that axis' name or "
            "make it static")


# ---------------------------------------------------------------------------- exporter's own views


def _view_after_decomposition(text: str, exporter: str) -> Cause | None:
    """torch.onnx re-runs the captured graph after decomposing it; a `view` recorded where the
    captured tensor was contiguous fails when the decomposed operator (typically
    scaled_dot_product_attention) lays its result out differently. The model code is fine:
    eager attention, or a .contiguous() before the reshape, avoids the view."""
    bad_view = _BAD_VIEW.search(text)
    if exporter != "dynamo" or _DECOMPOSITION not in text or bad_view is None:
        return None
    line = _original_line(text)
    where = f" at {line[0]} (`{line[1]}`)" if line else ""
    transformers = "/transformers/" in text.partition("Original traceback:")[2].replace("\\", "/")
    message = (f"The dynamo exporter captured the model but failed while decomposing it for "
               f"ONNX (step 2 of 3): a reshape{where} became a view of a tensor that the "
               "decomposed attention lays out differently in memory "
               f"(ValueError: {bad_view[0].rstrip('!.')}).")
    if transformers:
        hint = ('Build the model with attn_implementation="eager" (in its config, or '
                'model.kwargs = { attn_implementation = "eager" } when the factory passes it '
                "to the config; on the command line --model-kwarg attn_implementation=eager): "
                "the eager attention exports; scaled_dot_product_attention's decomposition is "
                "what trips the exporter here.")
    else:
        hint = ("Call .contiguous() before that reshape (or use an explicit attention instead "
                'of scaled_dot_product_attention), or try exporter = "torchscript".')
    return Cause("export", message, hint)


# ---------------------------------------------------------------------------- everything else


def _anything_else(exc: BaseException, exporter: str) -> Cause:
    where = _original_line(chain_messages(exc))
    at = f" at {where[0]} (`{where[1]}`)" if where else ""
    return Cause("export", f"The {exporter} export failed{at}: {real_message(exc)}.",
                 _generic_hint(exporter))


def _original_line(text: str) -> tuple[str, str] | None:
    """("modeling_xlnet.py:1078", "input_mask = 1.0 - attention_mask"): the innermost line of
    the model's code in the call stack torch keeps on the graph node that failed ("Original
    traceback:"), past the studio's and torch's own frames; None when there is none."""
    original = text.partition("Original traceback:")[2]
    frames = [f for f in _ORIGINAL_FRAME.finditer(original.partition("\n\n")[0] or original)
              if not _in_tooling(f["file"])]
    if not frames:
        return None
    return f"{Path(frames[-1]['file']).name}:{frames[-1]['line']}", frames[-1]["code"].strip()


def _generic_hint(exporter: str) -> str:
    if exporter == "dynamo":
        return ("Open the details for the full cause; if the exporter cannot capture this "
                'model, try exporter = "torchscript" (with model.script = true when forward '
                "has control flow).")
    return ('Open the details for the full cause; check the inputs match forward(), or try '
            'exporter = "dynamo".')


def real_message(exc: BaseException, limit: int = 300) -> str:
    """The cause's first meaningful line, named by its exception type: the outermost exception
    of the chain that is not a torch.onnx wrapper (whose own text is a list of next steps)."""
    for e in exception_chain(exc):
        text = plain(str(e)).strip()
        if text.startswith(_WRAPPERS):
            summary = _SUMMARY.search(text)
            if summary and e.__cause__ is None:
                return _shorten(f"{summary[1].rpartition('.')[2]}: "
                                f"{_first_line(summary[2])}", limit)
            continue
        line = _first_line(text)
        name = type(e).__name__
        return _shorten(f"{name}: {line}" if line else name, limit)
    return _shorten(_first_line(plain(str(exc))) or type(exc).__name__, limit)


def _first_line(text: str) -> str:
    """The first meaningful line; one that announces what follows ("The following
    inconsistencies were found:") with the line it announces."""
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not _NOT_MEANINGFUL.match(line.strip())]
    if not lines:
        return ""
    first = lines[0]
    if first.endswith(":") and len(lines) > 1 and not lines[1].endswith(":"):
        first = f"{first} {lines[1]}"
    return first.rstrip(".:")


def _shorten(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."
