"""RocketMQ-style ``key=value`` config files bound onto frozen dataclasses.

Owns: reading Java properties text (``broker.conf``, ``namesrv.conf``, the body of
GET/UPDATE_BROKER_CONFIG), the one conversion of a value to a config field's type, and
the binding of keys onto one or more config dataclasses.

The text is read by ``javaproperties``, which follows ``java.util.Properties.load``:
``#``/``!`` comments, ``=``, ``:`` or whitespace between key and value, ``\\`` line
continuations, ``\\uXXXX`` escapes and escaped separators in keys. Values are then
stripped at both ends, as RocketMQ trims the settings it reads (``MixAll.properties2Object``).

A dataclass field's file key is its name in camelCase (``listen_port`` ->
``listenPort``) unless the field sets ``metadata={"key": "..."}``; a field may
also list ``"aliases"`` (older RocketMQ spellings such as ``mapedFileSize...``).
Values are converted by the field's annotated type (str, int, float, bool, Path, a
str-valued Enum, and ``X | None`` of those). A key no config claims is an error that
names it, unless the caller lists it as known-and-ignored.

Booleans follow Java's ``Boolean.parseBoolean`` for what is true ("true" in any letter
case), but a value that is neither "true" nor "false" is refused with the key named
instead of read as false: a config file here fails loudly on a mistake (as it does on
an unknown key), and ``flase`` or ``yes`` silently turning a setting off is such a mistake.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from apogee.errors import ConfigError

T = TypeVar("T")


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text -> key -> value (stripped); a later duplicate key wins.

    Raises:
        ConfigError: a malformed ``\\u`` escape.
    """
    # imported here: javaproperties loads its XML form's modules (urllib, http.client),
    # tens of milliseconds in every process that imports the client, most never parse
    import javaproperties  # noqa: PLC0415

    try:
        raw: dict[str, str] = javaproperties.loads(text)
    except javaproperties.InvalidUEscapeError as exc:
        raise ConfigError(f"bad \\u escape in properties text: {exc.escape!r}") from None
    return {key: value.strip() for key, value in raw.items()}


def parse_bool(key: str, raw: str) -> bool:
    """True for "true", False for "false", in any letter case (Java ``Boolean.parseBoolean``).

    Raises:
        ConfigError: anything else, naming the key.
    """
    low = raw.strip().lower()
    if low == "true":
        return True
    if low == "false":
        return False
    raise ConfigError(f"config key {key!r}: {raw!r} is not a valid bool (true or false)")


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


def convert(key: str, raw: str, annotation: Any) -> Any:
    """``raw`` as a value of ``annotation`` (a resolved type hint); ``key`` names errors.

    Raises:
        ConfigError: the value does not convert, or the type cannot come from a file.
    """
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if raw.strip() == "" and len(args) < len(typing.get_args(annotation)):
            return None
        annotation = args[0]
    if annotation is bool:
        return parse_bool(key, raw)
    try:
        if annotation in (int, float, str):
            return annotation(raw.strip())
        if annotation is Path:
            return Path(raw.strip()).expanduser()
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
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
        changes[name] = convert(key, raw, hints[name])
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
