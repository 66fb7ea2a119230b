"""What every mqadmin-style command shares: options, running, errors, output.

Owns: AdminCommand (one-line usage errors, ``-h``), the ``-n`` and ``--json``
options, ``run_admin`` (one AdminClient per invocation on a fresh event
loop, faults turned into one-line messages and exit code 1), and the output
helpers (a rich console, JSON on stdout). Imports: click, rich, orjson,
``apogee.admin.admin_client``, ``apogee.errors``, ``apogee.remoting.runner``.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import click
import orjson
from rich import box
from rich.console import Console
from rich.table import Table

from apogee.admin.admin_client import AdminClient
from apogee.errors import (
    ApogeeError,
    BrokerResponseError,
    ClientError,
    ProtocolError,
    TopicNotExistError,
)
from apogee.remoting.runner import run

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: Width of tables when stdout is not a terminal, so piped output is never folded.
_PIPE_WIDTH = 250


class AdminCommand(click.Command):
    """A click command whose usage errors are one line, with ``-h`` for help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise click.ClickException(exc.format_message()) from None


def admin_command(name: str) -> Callable[[F], click.Command]:
    """``@click.command(name)`` with the options every admin command has."""

    def wrap(fn: F) -> click.Command:
        fn = json_option(namesrv_option(fn))
        return click.command(name, cls=AdminCommand)(fn)

    return wrap


def namesrv_option(fn: F) -> F:
    return click.option(
        "-n",
        "--namesrvAddr",
        "namesrv",
        envvar="NAMESRV_ADDR",
        required=True,
        metavar="HOST:PORT[;HOST:PORT]",
        help="Name server addresses (default: $NAMESRV_ADDR).",
    )(fn)


def json_option(fn: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document instead of tables."
    )(fn)


def fail(message: str) -> click.ClickException:
    """The exception that ends a command with ``Error: message`` and exit code 1.

    Whitespace runs (a broker remark may hold newlines) become single spaces,
    so the message stays on one line.
    """
    return click.ClickException(" ".join(message.split()))


def run_admin(
    namesrv: str,
    action: Callable[[AdminClient], Awaitable[T]],
    *,
    not_found: str | None = None,
) -> T:
    """Run ``action`` against the cluster; every fault becomes a one-line error.

    ``not_found`` is the message for TOPIC_NOT_EXIST (e.g. "topic T does not exist").
    """
    command = click.get_current_context().info_name or "admin"

    async def main() -> T:
        async with AdminClient(namesrv) as admin:
            return await action(admin)

    try:
        return run(main())
    except TopicNotExistError as exc:
        raise fail(not_found or f"{command} failed: {exc}") from None
    except ClientError as exc:
        raise fail(str(exc)) from None
    except BrokerResponseError as exc:
        raise fail(f"{command} failed: {exc}") from None
    except ProtocolError as exc:
        raise fail(f"{command} failed: malformed answer: {exc}") from None
    except ApogeeError as exc:  # transport faults: unreachable, timed out, closed
        raise fail(f"{command} failed: {exc}") from None


# -- output -------------------------------------------------------------------


def console() -> Console:
    width = None if sys.stdout.isatty() else _PIPE_WIDTH
    return Console(width=width, highlight=False, soft_wrap=False)


def table(*columns: str, title: str | None = None) -> Table:
    t = Table(
        *columns,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title=title,
        title_justify="left",
    )
    for column in t.columns:
        column.no_wrap = True
    return t


def print_table(t: Table) -> None:
    console().print(t)


def print_lines(lines: Sequence[str]) -> None:
    for line in lines:
        click.echo(line)


def emit_json(doc: Any) -> None:
    """One JSON document on stdout."""
    click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())


def human_time(ms: int) -> str:
    """Local time with milliseconds, or "-" for 0 (never happened)."""
    if ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def parse_bool(value: str | None, flag: str) -> bool | None:
    """mqadmin's ``-x true|false`` values (Boolean.parseBoolean, but strict)."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise fail(f"{flag} must be true or false, not {value!r}")
    return lowered == "true"
