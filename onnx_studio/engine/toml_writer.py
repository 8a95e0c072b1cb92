"""TOML written with tomlkit: plain data in the house style, or a file's own text updated in place.

The house style is docs/recipes.md's: top-level values first, every table a `[section]` (a list of
tables `[[sections]]`), and every value inside a section on one line (`{ 0 = "batch" }`,
`[1, 3, 224, 224]`). `update` rewrites the text of a file a person may have edited: keys they
wrote keep their place, comments and spelling (`1e-3` stays `1e-3` while its value is
unchanged), keys no longer in the data go, new keys come after the last key of their table.
The result is checked: when it would not read back as exactly the data, the plain house-style
text is returned instead, so a layout tomlkit cannot edit costs the comments, never a value.
"""

from __future__ import annotations

import contextlib
import math
import tomllib
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.items import AoT, Comment, Item, Table, Whitespace


def dumps(data: dict[str, Any]) -> str:
    """`data` as TOML in the house style; ValueError names a value TOML cannot hold."""
    doc = tomlkit.document()
    for key, value in data.items():
        if not _is_section(value):
            doc.add(key, _item(value))
    for key, value in data.items():
        if _is_section(value):
            doc.add(key, _section(value))
    return doc.as_string()


def update(text: str | None, data: dict[str, Any]) -> str:
    """`text` (a TOML document, or None) changed to hold exactly `data`, comments kept."""
    fresh = dumps(data)  # first: it raises for a value TOML cannot hold
    if text is None:
        return fresh
    # keeping the comments is a courtesy, the values must be right: any trouble, the plain text
    with contextlib.suppress(Exception):
        doc = tomlkit.parse(text)
        _merge(doc, data, top=True)
        edited = doc.as_string()
        if _same(tomllib.loads(edited), tomllib.loads(fresh)):
            return edited
    return fresh


# ---------------------------------------------------------------------------- new items


def _is_section(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value))


def _section(value: dict[str, Any] | list[dict[str, Any]]) -> Table | AoT:
    """A `[section]` for a dict, `[[sections]]` for a list of dicts; values inside on one line."""
    if isinstance(value, dict):
        return _table(value)
    tables = tomlkit.aot()
    for entry in value:
        tables.append(_table(entry))
    return tables


def _table(value: dict[str, Any]) -> Table:
    table = tomlkit.table()
    for key, item in value.items():
        table.add(key, _item(item))
    return table


def _item(value: Any) -> Item:
    """A one-line TOML value: dicts become inline tables, at any depth."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, item in value.items():
            table.append(str(key), _item(item))
        body = [v for k, v in table.value.body if k is not None]
        if body:  # `{ a = 1 }` with a space inside the braces, as the documentation writes it
            body[0].trivia.indent = " "
            body[-1].trivia.trail = " "
        return table
    if isinstance(value, list | tuple):
        array = tomlkit.array()
        for item in value:
            array.append(_item(item))
        return array
    try:
        return tomlkit.item(value)
    except (TypeError, ValueError):  # tomlkit's ConvertError is both
        raise ValueError(f"cannot write {value!r} in TOML") from None


# ---------------------------------------------------------------------------- updating


def _merge(table: Container | Table, data: dict[str, Any], *, top: bool) -> None:
    """Make `table` (the document when `top`) hold `data`, editing as little as possible."""
    for key in [k for k in table if k not in data]:
        del table[key]
    for key, value in data.items():
        new = _section(value) if top and _is_section(value) else None
        if key not in table:
            _add(table, key, new if new is not None else _item(value), data, top=top)
            continue
        current = table[key]
        if isinstance(current, Table) and isinstance(value, dict):
            _merge(current, value, top=False)
        elif isinstance(current, AoT) and isinstance(new, AoT):
            _merge_tables(table, key, current, value)
        elif not _same(current.unwrap() if isinstance(current, Item) else current, value):
            table[key] = new if new is not None else _item(value)


def _merge_tables(parent: Container | Table, key: str, current: AoT,
                  values: list[dict[str, Any]]) -> None:
    """`[[key]]` tables: merged one by one while their count holds; otherwise rebuilt, and a
    table whose `name` is still there is kept (with its comments) in its new place."""
    old = list(current)
    if len(old) == len(values):
        for table, value in zip(old, values, strict=True):
            _merge(table, value, top=False)
        return
    by_name: dict[Any, list[Table]] = {}
    for table in old:
        by_name.setdefault(_plain(table.get("name")), []).append(table)
    tables = []
    for value in values:
        reuse = by_name.get(value.get("name"))
        if reuse:
            tables.append(reuse.pop(0))
            _merge(tables[-1], value, top=False)
        else:
            tables.append(_table(value))
    rebuilt = tomlkit.aot()
    for table in tables:
        rebuilt.append(table)
    _space(rebuilt)
    parent[key] = rebuilt


def _add(table: Container | Table, key: str, item: Item, data: dict[str, Any], *,
         top: bool) -> None:
    """A new key after the last key of its table (not after comments that lead into the next
    header); a new section before the first present section that follows it in `data`."""
    body = table.body if isinstance(table, Container) else table.value.body
    container = table if isinstance(table, Container) else table.value
    if top and isinstance(item, Table | AoT):
        later = list(data)[list(data).index(key) + 1:]
        before = [i for i, (k, _) in enumerate(body) if k is not None and k.key in later]
        _space(item)
        if before:
            container._insert_at(before[0], key, item)
            return
        if not container.as_string().endswith("\n\n"):
            (item[0] if isinstance(item, AoT) else item).trivia.indent = "\n"
        container.append(key, item)
        return
    keys = [k for k, v in body if k is not None and not isinstance(v, Table | AoT)]
    if keys and keys[-1] != body[-1][0]:
        # after the last plain key (tomlkit's private `_insert_at`: its `_insert_after` is gone
        # since 0.15)
        after = next(i for i, (k, _) in enumerate(body) if k == keys[-1])
        container._insert_at(after + 1, key, item)
    else:
        container.append(key, item)


def _space(item: Table | AoT) -> None:
    """Every table of `item` ends with a blank line (or a comment that leads into the next
    header), and its header has nothing before it."""
    for table in item if isinstance(item, AoT) else [item]:
        body = table.value.body
        if not body or not isinstance(body[-1][1], Whitespace | Comment):
            table.add(tomlkit.nl())
        table.trivia.indent = ""


def _plain(value: Any) -> Any:
    return value.unwrap() if isinstance(value, Item) else value


def _same(a: Any, b: Any) -> bool:
    """Equal as TOML values: 1, 1.0 and true differ, NaN equals NaN, table key order is free."""
    a, b = _plain(a), _plain(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)

