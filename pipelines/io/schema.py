"""The score stream's schema contract: the columns a run needs and their types.

Schema problems (a missing column, a column of the wrong type) are not row problems: they raise
:class:`SchemaError` naming the file and column, and stop the run. Checked on every file's footer
before a run (:func:`costlib_pipelines.io.preflight.preflight`) and on every batch
(:func:`costlib_pipelines.io.batches.validate_batch`).
"""

from __future__ import annotations

import difflib

import pyarrow as pa

from costlib_pipelines.config import RunConfig

__all__ = ["SchemaError", "check_schema", "is_string_type", "label_type_problem",
           "required_columns"]

class SchemaError(ValueError):
    """A file does not match the score-stream contract (message names file and column)."""


def _is_float_or_int(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_integer(t)


def is_string_type(t: pa.DataType) -> bool:
    """Strings, plain, large or dictionary-encoded."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_id(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or is_string_type(t)


#: How labels may be given, for messages (how they are read: :mod:`.labels`).
LABELS_ACCEPTED = ("bool, 0/1 integers or 0.0/1.0 floats (null or NaN: not rated), or strings "
                   "with columns.label_positive")


def label_type_problem(t: pa.DataType, column: str, positive: object) -> str | None:
    """Why a label column of type ``t`` cannot be read (None: it can), with the fix.

    ``positive`` is ``columns.label_positive``: strings need it, other types refuse it. A
    column of nulls only (a file of unrated rows) is readable under either.
    """
    if is_string_type(t):
        if positive is None:
            return (f"column '{column}' (label) holds strings ({t}); set "
                    "columns.label_positive to the value that means positive (e.g. "
                    "label_positive: fraud; every other value is a negative, null is not "
                    "rated), or write the labels as bool or 0/1")
        return None
    if pa.types.is_null(t):
        return None
    if positive is not None:
        return (f"column '{column}' (label) has type {t}, but columns.label_positive "
                f"({positive!r}) applies to string labels only; remove it")
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return None
    return f"column '{column}' (label) has type {t}; expected {LABELS_ACCEPTED}"


def required_columns(
    config: RunConfig, *, windowed: bool, for_decisions: bool
) -> dict[str, tuple[str, callable, str]]:
    """Physical column -> (logical name, type check, expected type text)."""
    cols = config.columns
    needed = {
        cols["group"]: ("group", _is_id, "string or integer"),
        cols["item_id"]: ("item_id", _is_id, "int64 or string"),
    }
    if not for_decisions:  # the type is checked by check_schema (labels.label_type_problem)
        needed[cols["label"]] = ("label", lambda t: True, "")
    for name in config.classifiers:
        needed[name] = ("classifier score", _is_float_or_int, "float")
    if windowed:
        needed[cols["event_time"]] = ("event_time", pa.types.is_timestamp, "timestamp")
    if cols.get("weight") and not for_decisions:
        needed[cols["weight"]] = ("weight", _is_float_or_int, "float")
    if cols.get("audit_probability") and not for_decisions:
        needed[cols["audit_probability"]] = (
            "audit_probability", lambda t: _is_float_or_int(t) or pa.types.is_null(t), "float")
    if for_decisions:
        if cols.get("probability"):
            needed[cols["probability"]] = ("probability", _is_float_or_int, "float")
        if cols.get("set_id"):
            needed[cols["set_id"]] = ("set_id", _is_id, "int64 or string")
    return needed


def check_schema(
    schema: pa.Schema, source: str, config: RunConfig, *, windowed: bool = False,
    for_decisions: bool = False,
) -> None:
    """Raise :class:`SchemaError` if a file's schema breaks the contract."""
    for column, (logical, ok, expected) in required_columns(
        config, windowed=windowed, for_decisions=for_decisions
    ).items():
        index = schema.get_field_index(column)
        if index < 0:
            raise SchemaError(
                f"{source}: missing column '{column}' (the {logical} column of the run config)"
                + _near_match(column, schema.names)
            )
        actual = schema.field(index).type
        if logical == "label":
            problem = label_type_problem(actual, column, config.columns.get("label_positive"))
            if problem:
                raise SchemaError(f"{source}: {problem}")
        if not ok(actual):
            raise SchemaError(
                f"{source}: column '{column}' ({logical}) has type {actual}; expected {expected}"
            )


def _near_match(column: str, names: list[str]) -> str:
    """``"; did you mean 'X'? ..."`` for the closest column name, or ``""``."""
    same_case = [n for n in names if n.lower() == column.lower()]
    close = same_case or difflib.get_close_matches(column, names, n=1, cutoff=0.75)
    if not close:
        shown = ", ".join(names[:MAX_NAMES_SHOWN]) or "none"
        more = f" and {len(names) - MAX_NAMES_SHOWN} more" if len(names) > MAX_NAMES_SHOWN else ""
        return (f"; the file's columns: {shown}{more} (set columns.<name> or classifiers in "
                "the run config to the file's names)")
    hint = "column names are case-sensitive" if same_case else "the names differ"
    return f"; did you mean '{close[0]}'? ({hint})"


#: Columns a missing-column message lists at most.
MAX_NAMES_SHOWN = 30
