"""Reading JSON-lines files (prompt sets, saved events) with errors a user can act on."""

from __future__ import annotations

import json
from pathlib import Path

from spec_core.core.errors import SpecScopeError


def read_objects(path: str | Path, what: str) -> list[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line; ``what`` names the file in messages ("prompt file")."""
    path = Path(path)
    if not path.is_file():
        raise SpecScopeError(f"{what} {str(path)!r} does not exist")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise SpecScopeError(
            f"{what} {path.name} is not UTF-8 text (byte {err.object[err.start]:#04x} at position {err.start}); "
            "save it as UTF-8"
        ) from err
    except OSError as err:
        raise SpecScopeError(f"cannot read {what} {path.name}: {err}") from err
    objects = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise SpecScopeError(f"{what} {path.name}, line {n}: not JSON ({err.msg})") from err
        if not isinstance(obj, dict):
            raise SpecScopeError(f"{what} {path.name}, line {n}: expected a JSON object")
        objects.append((n, obj))
    if not objects:
        raise SpecScopeError(f"{what} {path.name} is empty: no JSON line in it")
    return objects
