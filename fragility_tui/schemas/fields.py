"""Reading a JSON object into a frozen dataclass, tolerantly: the rules every schema of this
package follows.

- A missing key (a document older than the field) or a null reads as the field's default:
  None, or an empty tuple or mapping for collections.
- A key the dataclass does not declare (a document newer than this code) is kept in the
  record's `extra`, never an error, so newer runners' records still open.
- An object or list field holding another JSON type raises SchemaError naming the field's
  path (`provenance.models.m.gguf`), and so does a field a reader computes with (an event's
  counts and rates) that is not a number; other scalars are kept as recorded (the card
  prints them).
- A field declared required (`required(read)`: what the record is shown by, e.g. a retry
  event's attempt and reason) that is missing or null is a SchemaError too: a reader skips
  such a record rather than show half of it.
- `schema`: the document's version; absent means 1 (documents written before it existed),
  a version above the reader's is read as far as it is known, anything but a whole number
  is a SchemaError.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import fields
from typing import Any, Callable, Mapping


class SchemaError(ValueError):
    """A recorded document whose field has the wrong JSON type; the message names it."""

    def __init__(self, where: str, expected: str, value: Any):
        self.where = where
        super().__init__(f"{where}: expected {expected}, got {type(value).__name__} "
                         f"{_preview(value)}")


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_object(value: Any, where: str) -> dict:
    """A JSON object field ({} when absent)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SchemaError(where, "an object", value)
    return dict(value)


def as_list(value: Any, where: str) -> tuple:
    """A JSON array field (() when absent)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise SchemaError(where, "a list", value)
    return tuple(value)


def as_number(value: Any, where: str) -> int | float | None:
    """A JSON number field (None when absent): what a reader computes with. A writer's
    numpy scalar counts (it is written as a number)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                              or not math.isfinite(value)):
        raise SchemaError(where, "a finite number", value)  # NaN once crashed the Runs pane
    return value


def as_text(value: Any, where: str) -> str | None:
    """A JSON string field (None when absent): text a reader shows or matches on."""
    if value is not None and not isinstance(value, str):
        raise SchemaError(where, "a string", value)
    return value


def required(read: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """`read`, refusing a missing or null value (SchemaError naming the field)."""
    def read_required(value: Any, where: str) -> Any:
        if value is None:
            raise SchemaError(where, "a value (the field is required)", value)
        return read(value, where)
    return read_required


def as_version(value: Any, where: str) -> int:
    """The document's `schema` number: 1 when absent (written before it was recorded)."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SchemaError(where, "a whole number from 1", value)
    return value


def object_or_none(read: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """A reader of an optional nested record: None when absent, empty or null."""
    return lambda value, where: read(value, where) if value else None


def mapping_of(read: Callable[[Any, str], Any]) -> Callable[[Any, str], dict]:
    """A reader of {name: record}: each value read at `where.name`."""
    return lambda value, where: {name: read(item, f"{where}.{name}")
                                 for name, item in as_object(value, where).items()}


def list_of(read: Callable[[Any, str], Any]) -> Callable[[Any, str], tuple]:
    """A reader of [record, ...]: each read at `where[k]`."""
    return lambda value, where: tuple(read(item, f"{where}[{k}]")
                                      for k, item in enumerate(as_list(value, where)))


def read_record(cls, value: Any, where: str, readers: Mapping[str, Callable] = ()):
    """`cls` (a dataclass with an `extra` field) from the JSON object `value`: `readers`
    maps field names to `read(value, where)`; other declared fields are taken as recorded,
    missing or null ones keep their default, undeclared keys go to `extra`."""
    doc = as_object(value, where)
    readers = dict(readers)
    values, declared = {}, set()
    for f in fields(cls):
        if f.name == "extra":
            continue
        declared.add(f.name)
        item = doc.get(f.name)
        if f.name in readers:
            values[f.name] = readers[f.name](item, f"{where}.{f.name}")
        elif item is not None:
            values[f.name] = item
    return cls(**values, extra={k: v for k, v in doc.items() if k not in declared})
