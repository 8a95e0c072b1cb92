"""The converter between protocol dataclasses and JSON-ready dicts, and its rules.

Every protocol class is a dataclass deriving from `Wire`; its field names are the JSON keys and
its field order is the key order. The type hints drive `from_dict` (nested classes, lists,
dicts, `X | None`), so a message that does not fit its class fails as a `ProtocolError` naming
the class and the field, never as a KeyError deep inside a consumer.

Keys, by how the field is declared:

- no default, or a default with `metadata=REQUIRED`: the key must be present when decoding;
- a plain default: the key may be missing when decoding; it is always written (None as null);
- `field(default=None, metadata=OMIT)` ("omit_if_none"): None is left out, for keys that today
  are absent when there is no value;
- `T | Unset | None` with the default `UNSET`: the few keys that today are absent in one case
  and null in another; UNSET is left out, None is written as null (`known()` reads them);
- `metadata=FLATTEN`: a nested class whose keys sit in the parent object (a warning event);
- `metadata=LOCAL`: not part of the JSON (facts kept beside a document by its producer).

Unknown keys are ignored when decoding, so a newer worker's extra field does not break an
older client. A message's `id` is written first, then its tag (`type` or `job`), as the worker
has always written them.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Final, Self, TypeVar, Union, get_args, get_origin

KIND: Final = "worker_protocol"
W = TypeVar("W", bound="Wire")
T = TypeVar("T")



class Unset(enum.Enum):
    """The value of a field that was never set: its key is left out (None is written as null)."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def known(value: T | Unset | None) -> T | None:
    """The value of a `T | Unset | None` field, with UNSET read as None."""
    return None if isinstance(value, Unset) else value


class ProtocolError(ValueError):
    """A line that is not a valid protocol message: which message type, which field, why.

    Carries `kind` "worker_protocol" (and a `hint`), so `Error.from_exception` turns it into
    the error object a client shows.
    """

    kind: ClassVar[str] = KIND
    hint: ClassVar[str] = ("The window and the worker disagree about the protocol (different "
                           "versions?); restart the application, and report it if it persists.")

    def __init__(self, message_type: str, field: str, problem: str) -> None:
        self.message_type = message_type
        self.field = field
        self.problem = problem
        self.message = f"{message_type}: " + (f"field {field!r} " if field else "") + problem
        # the `id` of the line that did not fit, when it had one: the job it ends (decode_reply)
        self.message_id: int | None = None
        super().__init__(self.message)


class Wire:
    """Base of every protocol class: `to_dict` and `from_dict` through the converter.

    A message class sets `TAG_KEY` ("type" for events and results, "job" for requests) and
    `TAG`, the value written under it.
    """

    TAG_KEY: ClassVar[str | None] = None
    TAG: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """This object as a JSON-ready dict, by the omission rules of
        onnx_studio.engine.protocol.convert."""
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Build from a decoded JSON object; ProtocolError when it does not fit."""
        return from_dict(cls, data)


# ---------------------------------------------------------------------------- field metadata

# `dataclasses.field(metadata=...)` values that set a field's rule (see the module docstring):
OMIT: Final = types.MappingProxyType({"omit_if_none": True})  # None: the key is left out
REQUIRED: Final = types.MappingProxyType({"required": True})  # a default, but not on the wire
LOCAL: Final = types.MappingProxyType({"local": True})  # never written nor read
FLATTEN: Final = types.MappingProxyType({"flatten": True})  # keys written into the parent
ENCODE: Final = "encode"  # metadata key: a function applied to the value before writing it


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    hint: Any
    required: bool
    omit_if_none: bool
    local: bool
    flatten: bool
    encode: Callable[[Any], Any] | None


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    """The wire rules of a class's fields, read once from its dataclass fields and hints."""
    if cls in _FIELDS:
        return _FIELDS[cls]
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        rules = f.metadata
        out.append(_Field(f.name, hints[f.name], no_default or bool(rules.get("required")),
                          bool(rules.get("omit_if_none")), bool(rules.get("local")),
                          bool(rules.get("flatten")), rules.get(ENCODE)))
    _FIELDS[cls] = tuple(out)
    return _FIELDS[cls]


# ---------------------------------------------------------------------------- writing


def to_dict(obj: Wire) -> dict[str, Any]:
    """`obj` as a dict of JSON values: keys in field order, the message's id and tag first."""
    body: dict[str, Any] = {}
    for f in _fields(type(obj)):
        if f.local:
            continue
        value = getattr(obj, f.name)
        if f.flatten:
            body.update(to_dict(value))
            continue
        if value is UNSET or (value is None and f.omit_if_none):
            continue
        if f.encode is not None:
            value = f.encode(value)
        body[f.name] = _unstructure(value)
    if obj.TAG_KEY is None:
        return body
    head = {"id": body.pop("id")} if "id" in body else {}
    return {**head, obj.TAG_KEY: obj.TAG, **body}


def _unstructure(value: Any) -> Any:
    if isinstance(value, Wire):
        return to_dict(value)
    if isinstance(value, list | tuple):
        return [_unstructure(v) for v in value]
    if isinstance(value, dict):
        return {k: _unstructure(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- reading


def from_dict(cls: type[W], data: Any, message_type: str | None = None) -> W:
    """An instance of `cls` from a decoded JSON object; ProtocolError naming the bad field."""
    return _build(cls, data, message_type or cls.__name__, "")


def _build(cls: type[W], data: Any, root: str, path: str) -> W:
    if not isinstance(data, dict):
        raise ProtocolError(root, path, f"must be a JSON object, not {_json_type(data)}")
    kwargs: dict[str, Any] = {}
    for f in _fields(cls):
        if f.local:
            continue
        if f.flatten:
            kwargs[f.name] = _build(f.hint, data, root, path)
            continue
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _structure(f.hint, data[f.name], root, where)
        elif f.required:
            raise ProtocolError(root, where, "is missing")
    return cls(**kwargs)


_PRIMITIVE_NAMES: dict[Any, str] = {
    str: "a string", int: "an integer", float: "a number", bool: "true or false",
}


def _fits(tp: Any, value: Any) -> bool:
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:  # an integral number stays an int, so it is written back as it came
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, tp)


def _structure(tp: Any, value: Any, root: str, where: str) -> Any:
    if tp is Any:
        return value
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = [a for a in get_args(tp) if a is not Unset]
        if value is None and type(None) in options:
            return None
        options = [a for a in options if a is not type(None)]
        if len(options) == 1:
            return _structure(options[0], value, root, where)
        for option in options:  # unions of primitives only, e.g. a shape's int | str
            if option in _PRIMITIVE_NAMES and _fits(option, value):
                return value
        expected = " or ".join(_PRIMITIVE_NAMES.get(o, getattr(o, "__name__", str(o)))
                               for o in options)
        raise ProtocolError(root, where, f"must be {expected}, not {_json_type(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(root, where, f"must be a list, not {_json_type(value)}")
        (item,) = get_args(tp)
        return [_structure(item, v, root, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(root, where, f"must be a JSON object, not {_json_type(value)}")
        _, item = get_args(tp)
        return {k: _structure(item, v, root, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and issubclass(tp, Wire):
        return _build(tp, value, root, where)
    if tp in _PRIMITIVE_NAMES:
        if _fits(tp, value):
            return value
        raise ProtocolError(root, where, f"must be {_PRIMITIVE_NAMES[tp]}, "
                                         f"not {_json_type(value)}")
    raise TypeError(f"the protocol converter cannot read the type {tp!r}")  # a bug of ours


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for tp in (bool, int, float, str):
        if _fits(tp, value) and (tp is not float or isinstance(value, float)):
            return _PRIMITIVE_NAMES[tp]
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a JSON object"
    return type(value).__name__
