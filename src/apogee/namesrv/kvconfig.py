"""Namespaced key/value configuration kept by the name server.

Owns: the KV table and its file (``kvConfig.json``, shape
``{"configTable": {namespace: {key: value}}}`` as RocketMQ writes it).

Every change is persisted atomically before the call returns, so an
acknowledged PUT_KV_CONFIG survives a crash of the name server.
"""

from __future__ import annotations

from pathlib import Path

from apogee._util.fileio import read_json, write_json


class KVConfig:
    def __init__(self, path: Path | None) -> None:
        """Load the table from ``path``; ``None`` keeps it in memory only."""
        self._path = path
        self._table: dict[str, dict[str, str]] = {}
        if path is not None:
            raw = read_json(path, {})
            table = raw.get("configTable", {}) if isinstance(raw, dict) else {}
            for namespace, entries in table.items():
                if isinstance(entries, dict):
                    self._table[str(namespace)] = {str(k): str(v) for k, v in entries.items()}

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value
        self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        entries = self._table.get(namespace)
        if entries is None or key not in entries:
            return
        del entries[key]
        if not entries:
            del self._table[namespace]
        self._persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        entries = self._table.get(namespace)
        return dict(entries) if entries else None

    def _persist(self) -> None:
        if self._path is not None:
            write_json(self._path, {"configTable": self._table})
