"""What a model source offers, read without running it (`SourceDescription`, the answer to a
describe job): the classes and factories that could be the model, and forward()'s parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_studio.engine.protocol.convert import Wire


@dataclass(kw_only=True)
class ForwardParam(Wire):
    """A forward() parameter as written (onnx_studio.engine.source.describe.ForwardParam)."""

    name: str
    kind: str  # positional | keyword | var_positional | var_keyword
    default: str | None = None  # the default's source text; None: no default
    annotation: str = ""
    # what the file says of a tensor's example (a guess from a .py's first layer; a .pt2's own)
    shape: list[int] | None = None
    dtype: str = ""
    dynamic: dict[str, str] = field(default_factory=dict)  # axis (as text) -> dimension name


@dataclass(kw_only=True)
class Candidate(Wire):
    """A class or factory in a model file that could be the model
    (onnx_studio.engine.source.describe)."""

    name: str
    kind: str  # "class" | "factory"
    params: list[str]  # forward params for a class, the factory's own params for a factory
    doc: str = ""
    # forward() of the class (or of the class a factory returns): kinds, defaults, annotations
    signature: list[ForwardParam] = field(default_factory=list)


@dataclass(kw_only=True)
class SourceDescription(Wire):
    """What a model source offers, read without running it (onnx_studio.engine.source.describe's
    fields)."""

    kind: str
    candidates: list[Candidate] = field(default_factory=list)
    forward_params: list[str] = field(default_factory=list)
    error: str | None = None
    # the chosen class's forward() parameters with kinds, defaults and annotations
    forward_signature: list[ForwardParam] = field(default_factory=list)
