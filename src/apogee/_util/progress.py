"""Progress of long work, for a person watching a terminal.

Owns: ``Progress``, a bar on stderr (rich) while work that takes seconds goes
on: store verification, recovery at start, benchmarks, admin commands that
walk many queues. When stderr is not a terminal nothing is drawn (logs and
pipes stay clean); a ``log`` given to ``Progress`` then gets a line at each
tenth of the work instead. ``summary_table`` makes the table such work ends
with (``print_table`` when it has rows of several columns). Both sides of a
thread may call ``update``: rich draws from its own thread.
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichProgress
from rich.table import Table


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class Progress:
    """``with Progress("verifying", total) as p: p.update(done)`` (or ``p.advance(n)``)."""

    def __init__(
        self,
        description: str,
        total: float | None,
        *,
        unit: str = "",
        log: logging.Logger | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.description = description
        self.total = total
        self.unit = unit
        self.done = 0.0
        self._log = log
        self._enabled = stderr_is_terminal() if enabled is None else enabled
        self._bar: RichProgress | None = None
        self._task: object = None
        self._next_tenth = 1
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        if self._enabled:
            count = (
                TextColumn(f"{{task.completed:,.0f}} {self.unit}")
                if self.unit
                else MofNCompleteColumn()
            )
            columns = [
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                count,
                TimeElapsedColumn(),
                TimeRemainingColumn(),
            ]
            self._bar = RichProgress(*columns, console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def set_total(self, total: float) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)  # type: ignore[arg-type]

    def describe(self, description: str) -> None:
        """Name the step the work is on now (benchmarks go phase by phase)."""
        with self._lock:
            self.description = description
            if self._bar is not None:
                self._bar.update(self._task, description=description)  # type: ignore[arg-type]

    def advance(self, amount: float = 1) -> None:
        self.update(self.done + amount)

    def update(self, done: float, total: float | None = None) -> None:
        with self._lock:
            if total is not None and total != self.total:
                self.set_total(total)
            self.done = done
            if self._bar is not None:
                self._bar.update(self._task, completed=done)  # type: ignore[arg-type]
            elif self._log is not None and self.total:
                tenth = int(10 * done / self.total)
                if tenth >= self._next_tenth:
                    self._next_tenth = tenth + 1
                    self._log.info("%s: %d%% done", self.description, min(tenth * 10, 100))


def summary_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """Two columns, what was measured and its value: how long work ends."""
    table = Table("", "", box=box.SIMPLE_HEAD, show_header=False, title=title,
                  title_justify="left")  # fmt: skip
    for name, value in rows:
        table.add_row(name, value)
    return table


def print_summary(title: str, rows: list[tuple[str, str]], *, stderr: bool = False) -> None:
    Console(stderr=stderr, highlight=False).print(summary_table(title, rows))


def print_table(title: str, header: list[str], rows: list[list[str]], caption: str = "") -> None:
    """A table with a header row (one row per round of a benchmark, say)."""
    table = Table(*header, box=box.SIMPLE_HEAD, title=title, title_justify="left",
                  caption=caption or None, caption_justify="left")  # fmt: skip
    for row in rows:
        table.add_row(*row)
    Console(highlight=False).print(table)
