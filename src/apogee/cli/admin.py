"""``apogee admin``: mqadmin-style commands, loaded lazily by name.

Owns: the admin command table. Each entry points at a click command defined
next to the code it drives (``apogee.admin.*``).
"""

from __future__ import annotations

import click

from apogee.cli.main import LazyGroup

# mqadmin command name -> "module:attribute"
ADMIN_COMMANDS: dict[str, str] = {}
ADMIN_COMMANDS["store-verify"] = "apogee.admin.inspect:store_verify"


@click.group(cls=LazyGroup, lazy_commands=ADMIN_COMMANDS)
def admin() -> None:
    """Administer a cluster (mqadmin command names and flags)."""
