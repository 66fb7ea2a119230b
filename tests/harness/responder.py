"""A stand-in for a connection where handlers answer (a ``Responder``), named so: no socket."""

from __future__ import annotations

from apogee.protocol.command import RemotingCommand


class FakeResponder:
    """Keeps every answer written; holds writes like a connection does."""

    def __init__(self) -> None:
        self.peer_address = ("10.0.0.7", 40123)
        self.closed = False
        self.sent: list[RemotingCommand] = []
        self._held: list[RemotingCommand] | None = None

    def send_response(self, response: RemotingCommand) -> bool:
        if self.closed:
            return False
        if self._held is not None:
            self._held.append(response)
        else:
            self.sent.append(response)
        return True

    def hold_writes(self) -> bool:
        if self._held is not None:
            return False
        self._held = []
        return True

    def release_writes(self) -> None:
        held, self._held = self._held or [], None
        self.sent += held
