"""The ``apogee`` command: one click group whose sub-commands load lazily.

Owns: the top-level command table and process-wide setup (logging, uvloop).
Each command imports the layers it needs inside its own body, so ``apogee admin``
never loads the store and ``apogee --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from apogee import __version__

# name -> "module:attribute" of a click command; loaded on first use
_COMMANDS: dict[str, str] = {
    "admin": "apogee.cli.admin:admin",
    "bench": "apogee.cli.bench:bench",
    "broker": "apogee.cli.broker:broker",
    "dashboard": "apogee.cli.dashboard:dashboard",
    "namesrv": "apogee.cli.namesrv:namesrv",
    "pipeline": "apogee.cli.pipeline:pipeline",
    "standalone": "apogee.cli.standalone:standalone",
}


class LazyGroup(click.Group):
    """A click group whose commands are imported only when invoked."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy_commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, lazy_commands=_COMMANDS)
@click.version_option(__version__, prog_name="apogee")
def cli() -> None:
    """Apogee: a RocketMQ-compatible message queue."""


def main() -> None:
    cli()
