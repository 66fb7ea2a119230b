"""Asyncio transport for remoting frames: server, client, connections."""
