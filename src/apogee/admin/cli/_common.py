"""What every mqadmin-style command shares: options, running, errors, output.

Owns: AdminCommand (one-line usage errors, ``-h``), the ``-n``, ``--json``
and connection options, ``run_admin`` (one AdminClient per invocation on a
fresh event loop, faults turned into one-line messages and exit code 1),
and the output helpers (a rich console, JSON on stdout).

Connection options of every command: ``--access-key``/``--secret-key``
(or $APOGEE_ACCESS_KEY/$APOGEE_SECRET_KEY) sign every request; without
them the keys of ``$ROCKETMQ_HOME/conf/tools.yml`` are used when that file
exists, as mqadmin does. ``--tls`` connects over TLS without checking the
server's certificate, ``--tls-trust-cert CA.pem`` checks it.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
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
from apogee.protocol.signing import SessionCredentials
from apogee.remoting.runner import run
from apogee.remoting.tls import client_ssl_context

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
        fn = connection_options(json_option(namesrv_option(fn)))
        return click.command(name, cls=AdminCommand)(fn)

    return wrap


def _require_namesrv(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if not value or not value.strip():
        raise click.UsageError(
            "no name server given: pass -n HOST:PORT (e.g. -n 127.0.0.1:9876) or set NAMESRV_ADDR"
        )
    return value


def namesrv_option(fn: F) -> F:
    return click.option(
        "-n",
        "--namesrvAddr",
        "namesrv",
        envvar="NAMESRV_ADDR",
        callback=_require_namesrv,
        metavar="HOST:PORT[;HOST:PORT]",
        help="Name server addresses (default: $NAMESRV_ADDR).",
    )(fn)


def json_option(fn: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document instead of tables."
    )(fn)


_CONNECTION = "apogee.admin.connection"


def _remember(ctx: click.Context, param: click.Parameter, value: object) -> object:
    assert param.name is not None
    ctx.meta.setdefault(_CONNECTION, {})[param.name.removeprefix("connect_")] = value
    return value


def connection_options(fn: F) -> F:
    """--access-key/--secret-key and --tls/--tls-trust-cert, kept for ``run_admin``."""
    for option in (
        click.option(
            "--access-key",
            "connect_access_key",  # not "access_key": the ACL commands have their own
            envvar="APOGEE_ACCESS_KEY",
            expose_value=False,
            callback=_remember,
            help="Sign requests with this ACL account (default: $ROCKETMQ_HOME/conf/tools.yml).",
        ),
        click.option(
            "--secret-key",
            "connect_secret_key",
            envvar="APOGEE_SECRET_KEY",
            expose_value=False,
            callback=_remember,
            help="The account's secret key.",
        ),
        click.option(
            "--tls",
            "connect_tls",
            is_flag=True,
            expose_value=False,
            callback=_remember,
            help="Connect over TLS (the server's certificate is not checked).",
        ),
        click.option(
            "--tls-trust-cert",
            "connect_tls_trust_cert",
            type=click.Path(dir_okay=False, exists=True),
            expose_value=False,
            callback=_remember,
            help="Connect over TLS, checking the server against this CA file.",
        ),
    ):
        fn = option(fn)
    return fn


def tools_credentials(home: str | None) -> SessionCredentials | None:
    """The accessKey/secretKey of ``<home>/conf/tools.yml``, mqadmin's credentials file."""
    if not home:
        return None
    import yaml  # noqa: PLC0415 - only a command given a home reads YAML (30 ms to import)

    path = Path(home).expanduser() / "conf" / "tools.yml"
    try:
        doc = yaml.safe_load(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError) as exc:
        raise fail(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict) or not doc.get("accessKey") or not doc.get("secretKey"):
        raise fail(f"{path} must hold accessKey and secretKey")
    return SessionCredentials(str(doc["accessKey"]), str(doc["secretKey"]))


def _connection(ctx: click.Context) -> dict[str, Any]:
    """AdminClient's credentials and tls arguments from the command's options."""
    given = ctx.meta.get(_CONNECTION, {})
    access_key, secret_key = given.get("access_key"), given.get("secret_key")
    if bool(access_key) != bool(secret_key):
        raise fail("--access-key and --secret-key go together")
    credentials = (
        SessionCredentials(access_key, secret_key)
        if access_key
        else tools_credentials(os.environ.get("ROCKETMQ_HOME"))
    )
    trust = given.get("tls_trust_cert")
    tls = client_ssl_context(trust if trust else bool(given.get("tls")))
    return {"credentials": credentials, "tls": tls}


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
    ctx = click.get_current_context()
    command = ctx.info_name or "admin"
    options = _connection(ctx)

    async def main() -> T:
        async with AdminClient(namesrv, **options) as admin:
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


def parse_time(value: str, flag: str) -> int:
    """mqadmin's times: ``now``, milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time)."""
    text = value.strip()
    if text.lower() == "now":
        return int(dt.datetime.now().timestamp() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise fail(
            f"{flag} must be now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS, not {value!r}"
        ) from None
    return int(when.timestamp() * 1000)
