"""A broker table with a DataVersion: what the topic and group managers share.

Owns: :class:`VersionedTable`: the DataVersion bumped at each change, the
change listeners (persistence, name-server registration) told of it, and
the version rules of loading a saved file and adopting a master's copy.
A listener that raises is logged and the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from apogee._util.clock import Clock
from apogee.model.route import DataVersion

log = logging.getLogger(__name__)

ChangeListener = Callable[[], None]


class VersionedTable:
    def __init__(self, clock: Clock, what: str) -> None:
        self._clock = clock
        self._what = what  # names the table in the listener's failure log
        self.data_version = DataVersion(timestamp=clock.now_ms())
        self._listeners: list[ChangeListener] = []

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        self.data_version = self.data_version.next(self._clock.now_ms())
        self._notify()

    def _notify(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:
                log.exception("%s change listener failed", self._what)

    def _loaded(self, version: DataVersion) -> None:
        """A saved file's version is kept unless it is blank (a file without one)."""
        if version.counter or version.timestamp:
            self.data_version = version

    def _adopting(self, version: DataVersion) -> bool:
        """Whether a master's copy at ``version`` is news; if so its version is taken
        (the caller replaces the table, then calls ``_notify``)."""
        if version == self.data_version:
            return False
        self.data_version = version
        return True
