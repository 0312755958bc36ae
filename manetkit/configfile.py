"""Reading YAML config files into pydantic models, with errors a user can act on.

Every config of manetkit (daemon, proxy, scenario) is refused the same way: one
``UserError`` naming the file, then one line per problem with the field's dotted path
and the reason, e.g. ``  send_buffer.packets: Input should be greater than or equal to 1``.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from manetkit.errors import UserError

M = TypeVar("M", bound=BaseModel)


def read_yaml_mapping(path: str | Path, what: str = "config") -> dict[str, Any]:
    """The YAML mapping in ``path`` (an empty file is an empty mapping)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UserError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"{p}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(
            f"{p}: a {what} must be a YAML mapping of fields, got {type(data).__name__}"
        )
    return data


def field_path(loc: tuple, tags: Collection[str] = ()) -> str:
    """``mobility.positions.n1[0]`` from pydantic's ``loc``, without union ``tags``.

    Pydantic inserts the discriminator of a tagged union (``random-waypoint``) into the
    location; it is not a field the user wrote, so it is left out.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in tags:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def error_lines(exc: ValidationError, tags: Collection[str] = (), prefix: str = "") -> list[str]:
    """One ``  field.path: reason`` line per problem pydantic found (paths under ``prefix``)."""
    head = (prefix,) if prefix else ()
    return [
        f"  {field_path(head + tuple(err['loc']), tags)}: {err['msg'].removeprefix('Value error, ')}"
        for err in exc.errors()
    ]


def validate(
    model: type[M],
    data: Any,
    source: str,
    what: str = "configuration",
    tags: Collection[str] = (),
) -> M:
    """``model.model_validate(data)``, refusing bad input with field and reason."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = error_lines(exc, tags)
        raise UserError(f"{source}: invalid {what}\n" + "\n".join(lines)) from None
