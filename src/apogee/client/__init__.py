"""Asyncio Python client: producer, consumers, admin calls."""
