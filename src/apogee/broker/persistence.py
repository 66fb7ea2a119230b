"""The broker's four JSON files under ``<store>/config``: loaded at start, kept written.

Owns: which manager lives in which file (``topics.json``,
``subscriptionGroup.json``, ``consumerOffset.json``, ``delayOffset.json``),
loading them (or their ``.bak``), writing topics and groups soon after each
change, the periodic writes of the two offset tables when they changed, and
the final write at stop. The writes themselves (atomic, off the loop, kept for
later when the disk refuses them) are ``ConfigFiles``'.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from apogee.broker.services import ConfigFiles

log = logging.getLogger(__name__)


class _Table(Protocol):
    def load(self, data: bytes) -> None: ...
    def encode(self) -> bytes: ...


class _DirtyTable(_Table, Protocol):
    @property
    def dirty(self) -> bool: ...


class _Listened(_Table, Protocol):
    def add_listener(self, listener: Callable[[], None], /) -> None: ...


class ManagerFiles:
    """The managers' files in one directory."""

    def __init__(
        self,
        directory: Path,
        files: ConfigFiles,
        *,
        topics: _Listened,
        groups: _Listened,
        offsets: _DirtyTable,
        delay_offsets: _DirtyTable,
    ) -> None:
        self.directory = directory
        self.files = files
        self._listened = {"topics.json": topics, "subscriptionGroup.json": groups}
        self._tables: dict[str, _Table] = {
            "topics.json": topics,
            "subscriptionGroup.json": groups,
            "consumerOffset.json": offsets,
            "delayOffset.json": delay_offsets,
        }
        self._offsets = offsets
        self._delay_offsets = delay_offsets

    def load(self) -> None:
        """Apply each file that exists; from then on write topics and groups on change."""
        for name, table in self._tables.items():
            self.files.load(self.directory / name, table.load)
        for name, table in self._listened.items():
            table.add_listener(functools.partial(self._save_soon, name, table))

    def _save_soon(self, name: str, table: _Table) -> None:
        self.files.save_soon(self.directory / name, table.encode())

    async def persist_offsets(self) -> None:
        if self._offsets.dirty:
            await self.files.save(self.directory / "consumerOffset.json", self._offsets.encode())

    async def persist_delay_offsets(self) -> None:
        if self._delay_offsets.dirty:
            path = self.directory / "delayOffset.json"
            await self.files.save(path, self._delay_offsets.encode())

    async def save_all(self) -> list[str]:
        """Wait for the writes under way, then write every file once more (stop).

        Returns the names of the files that could not be written. Each file is
        tried whatever happened to the ones before it: one that cannot be
        written (or encoded) must not cost the others their last state.
        """
        await self.files.flush()
        failed: list[str] = []
        for name, table in self._tables.items():
            try:
                saved = await self.files.save(self.directory / name, table.encode())
            except Exception:
                log.exception("cannot write %s at stop", self.directory / name)
                saved = False
            if not saved:
                failed.append(name)
        return failed
