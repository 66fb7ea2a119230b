"""The repository stands on its own: what its text points at is in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = [
    p
    for pattern in (
        "*.md",
        "docs/**/*.md",
        "src/**/*.py",
        "tests/**/*.py",
        "conf/*",
        "Makefile",
        "pyproject.toml",
    )
    for p in ROOT.glob(pattern)
    if p.is_file() and ".venv" not in p.parts
]
#: documents that live outside the repository and must not be pointed at
OUTSIDE = ("DESIGN.md", "rocketmq-protocol.md", "ecosystem.md", "/shared/")


def test_no_file_points_at_documents_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    offenders = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in TEXT
        if p.resolve() != this
        for name in OUTSIDE
        if name in p.read_text("utf-8", "replace")
    ]
    assert offenders == []


def test_every_relative_link_of_the_docs_exists() -> None:
    missing = []
    for doc in [p for p in TEXT if p.suffix == ".md"]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target and not (doc.parent / target).exists():
                missing.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert missing == []
