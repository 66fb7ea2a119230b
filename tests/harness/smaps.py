"""What the kernel says of this process's mappings (Linux ``/proc/self/smaps``)."""

from __future__ import annotations

from pathlib import Path


def vm_flags(path: Path) -> list[str]:
    """The VmFlags of this process's mapping of ``path`` ([] when it is not mapped).

    "rr" is the random-read hint (``MADV_RANDOM``): faults read nothing around them.
    """
    found, flags = False, []
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isalnum() and "-" in line.split(" ", 1)[0]:  # a mapping's first line
            found = line.endswith(str(path))
        elif found and line.startswith("VmFlags:"):
            flags = line.split()[1:]
    return flags
