"""Shared pytest configuration: every test gets real files under tmp_path."""

from __future__ import annotations
