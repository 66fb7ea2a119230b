"""Asyncio transport for remoting frames: server, client, connections.

The hot path is an asyncio.Protocol (no streams).
"""

from apogee.remoting.client import RemotingClient
from apogee.remoting.config import ClientConfig, ServerConfig
from apogee.remoting.connection import Connection
from apogee.remoting.dispatch import HandlerTable, RequestContext, Responder, ResponseBatch
from apogee.remoting.runner import run
from apogee.remoting.server import RemotingServer

__all__ = [
    "ClientConfig",
    "Connection",
    "HandlerTable",
    "RemotingClient",
    "RemotingServer",
    "RequestContext",
    "Responder",
    "ResponseBatch",
    "ServerConfig",
    "run",
]
