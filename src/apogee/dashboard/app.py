"""The dashboard's web application: routes, templates, and what every page shares.

Owns: ``create_app`` (the Starlette application: one AdminClient and one
Sampler for its lifetime, the routes of every page, the templates and the
stylesheet) and ``Page``, the helpers a page handler uses: the admin
client, rendering, and turning a cluster fault into a message on the page
instead of an error page. Actions are HTML forms posted to the server,
answered with a redirect back to the page with a one-line outcome
(post/redirect/get), so reloading never repeats them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from apogee.admin.admin_client import AdminClient
from apogee.dashboard.history import History, Sampler
from apogee.errors import ApogeeError

HERE = Path(__file__).parent
T = TypeVar("T")

templates = Jinja2Templates(directory=str(HERE / "templates"))


def _time(ms: int | None) -> str:
    if not ms or ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


templates.env.filters["time"] = _time
templates.env.filters["path"] = lambda text: quote(str(text), safe="")


class Page:
    """One request's view of the dashboard."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.admin: AdminClient = request.app.state.admin
        self.history: History = request.app.state.history
        self.errors: list[str] = []

    @property
    def namesrv(self) -> str:
        return str(self.request.app.state.namesrv)

    async def ask(self, action: Callable[[AdminClient], Awaitable[T]]) -> T | None:
        """``action(admin)``, or None with the fault shown on the page."""
        try:
            return await action(self.admin)
        except ApogeeError as exc:
            self.errors.append(str(exc))
            return None

    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.update(
            request=self.request,
            namesrv=self.namesrv,
            errors=self.errors,
            notice=self.request.query_params.get("notice", ""),
            failure=self.request.query_params.get("failure", ""),
        )
        return templates.TemplateResponse(self.request, name, context, status_code=status_code)

    async def form(self) -> dict[str, str]:
        data = await self.request.form()
        return {k: str(v).strip() for k, v in data.items() if isinstance(v, str)}


def back(url: str, *, notice: str = "", failure: str = "") -> RedirectResponse:
    """303 to ``url`` carrying the outcome of an action."""
    outcome = {k: v for k, v in (("notice", notice), ("failure", failure)) if v}
    sep = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{sep}{urlencode(outcome)}" if outcome else url, 303)


async def act(url: str, action: Awaitable[str]) -> Response:
    """Run a form's action: back to ``url`` saying what happened, or why it did not."""
    try:
        return back(url, notice=await action)
    except ApogeeError as exc:
        return back(url, failure=str(exc))
    except ValueError as exc:  # a form field that is not a number
        return back(url, failure=f"bad input: {exc}")


def create_app(namesrv: str, *, sample_interval_s: float = 10.0) -> Starlette:
    from apogee.dashboard import consumers, messages, overview  # noqa: PLC0415

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.namesrv = namesrv
        app.state.history = History()
        async with AdminClient(namesrv) as admin:
            app.state.admin = admin
            sampler = Sampler(admin, app.state.history, sample_interval_s)
            sampler.start()
            try:
                yield
            finally:
                await sampler.stop()

    routes = [
        *overview.ROUTES,
        *consumers.ROUTES,
        *messages.ROUTES,
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


__all__ = ["Page", "Route", "act", "back", "create_app", "templates"]
