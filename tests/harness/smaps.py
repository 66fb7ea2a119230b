"""What the kernel says of this process's mappings (Linux ``/proc/self/smaps``)."""

from __future__ import annotations

from pathlib import Path


def _fields(path: Path) -> dict[str, str]:
    """The smaps fields of this process's mapping of ``path`` ({} when it is not mapped)."""
    found, fields = False, {}
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isalnum() and "-" in line.split(" ", 1)[0]:  # a mapping's first line
            found = line.endswith(str(path))
        elif found:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return fields


def vm_flags(path: Path) -> list[str]:
    """The VmFlags of this process's mapping of ``path`` ([] when it is not mapped).

    "rr" is the random-read hint (``MADV_RANDOM``): faults read nothing around them.
    """
    return _fields(path).get("VmFlags", "").split()


def resident_kib(path: Path) -> int:
    """KiB of the mapping of ``path`` that are in this process's page tables (Rss)."""
    return int(_fields(path).get("Rss", "0 kB").split()[0])


def dirty_kib(path: Path) -> int:
    """KiB of the mapping of ``path`` that this process's page tables hold dirty."""
    fields = _fields(path)
    names = ("Private_Dirty", "Shared_Dirty")
    return sum(int(fields.get(name, "0 kB").split()[0]) for name in names)
