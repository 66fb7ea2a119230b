"""RocketMQ-style ``key=value`` config files bound onto frozen dataclasses.

Owns: the properties-file parser and the binding of its keys onto one or more
config dataclasses.

A dataclass field's file key is its name in camelCase (``listen_port`` ->
``listenPort``) unless the field sets ``metadata={"key": "..."}``; a field may
also list ``"aliases"`` (older RocketMQ spellings such as ``mapedFileSize...``).
Values are converted by the field's annotated type (str, int, float, bool,
and ``X | None`` of those). A key no config claims is an error that names it,
unless the caller lists it as known-and-ignored.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from apogee.errors import ConfigError

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``#``/``!`` comments, ``=`` or ``:``, ``\\`` continuation."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        key, value = _split_pair(line)
        result[key] = value
    if pending:
        key, value = _split_pair(pending)
        result[key] = value
    return result


def _split_pair(line: str) -> tuple[str, str]:
    cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if cut < 0:
        return line.strip(), ""
    return line[:cut].strip(), line[cut + 1 :].strip()


def load_properties(path: Path) -> dict[str, str]:
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def field_keys(cls: type[Any]) -> dict[str, str]:
    """File key (and alias) -> field name for a config dataclass."""
    keys: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        keys[f.metadata.get("key", camel(f.name))] = f.name
        for alias in f.metadata.get("aliases", ()):
            keys[alias] = f.name
    return keys


def _convert(key: str, raw: str, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if raw == "" and len(args) < len(typing.get_args(annotation)):
            return None
        annotation = args[0]
    try:
        if annotation is bool:
            low = raw.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(raw)
        if annotation in (int, float, str):
            return annotation(raw.strip())
    except ValueError:
        raise ConfigError(
            f"config key {key!r}: {raw!r} is not a valid {annotation.__name__}"
        ) from None
    raise ConfigError(f"config key {key!r} cannot be set from a file")


def bind(
    base: T, props: Mapping[str, str], extra: Mapping[str, Any] | None = None
) -> tuple[T, set[str]]:
    """Return ``base`` with the keys it owns applied, and the keys it used.

    ``extra`` field values are applied in the same step, so the config is
    checked once, with everything in place.
    """
    cls = type(base)
    hints = typing.get_type_hints(cls)
    keys = field_keys(cls)
    changes: dict[str, Any] = {}
    used: set[str] = set()
    for key, raw in props.items():
        name = keys.get(key)
        if name is None:
            continue
        changes[name] = _convert(key, raw, hints[name])
        used.add(key)
    changes.update(extra or {})
    return dataclasses.replace(base, **changes), used  # type: ignore[type-var]


def reject_unknown(
    props: Mapping[str, str], used: Iterable[str], ignored: Iterable[str] = (), source: str = ""
) -> None:
    """Raise ConfigError naming the first key nobody claimed."""
    claimed = set(used) | set(ignored)
    for key in props:
        if key not in claimed:
            where = f" in {source}" if source else ""
            raise ConfigError(f"unknown config key {key!r}{where}")
