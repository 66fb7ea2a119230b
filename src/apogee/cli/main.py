"""The ``apogee`` command: one click group whose sub-commands load lazily.

Owns: the top-level command table and process-wide setup (logging, uvloop).
Imports: any Apogee layer, but only inside the command that needs it, so
``apogee admin`` never loads the store and ``apogee --help`` stays fast.
"""

from __future__ import annotations

import importlib

import click

from apogee import __version__

# name -> "module:attribute" of a click command; loaded on first use
_COMMANDS: dict[str, str] = {}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="apogee")
def cli() -> None:
    """Apogee: a RocketMQ-compatible message queue."""


def main() -> None:
    cli()
