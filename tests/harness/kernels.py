"""Switching between the compiled kernels and their pure-Python twins.

Owns: the list of places that bind a kernel of ``apogee._speedups`` and
``python_kernels``, a context manager that points every one of them at its
Python twin for a while (tests run the store both ways and compare bytes);
:func:`module_build`, either build of a module compiled by Cython.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from apogee._util.compiled import is_compiled, load_interpreted
from apogee._util.native import speedups
from apogee.broker.handlers import send
from apogee.model import javahash, message_codec
from apogee.store import (
    commitlog,
    consume_queue,
    dispatch,
    group_sync,
    index_file,
    index_service,
    segment,
)
from apogee.store.index_file import IndexFile

#: (owner, attribute, Python twin) of every binding of a compiled kernel.
KERNEL_SITES: list[tuple[Any, str, Any]] = [
    (javahash, "java_string_hash_uncached", javahash.java_string_hash_python),
    (index_file, "java_string_hash_uncached", javahash.java_string_hash_python),
    (dispatch, "message_fields", dispatch.message_fields_python),
    (commitlog, "_message_fields", dispatch.message_fields_python),
    (message_codec, "encode_record_into", message_codec.encode_record_into_python),
    (commitlog, "_encode", message_codec.encode_record_into_python),
    (message_codec, "decode_batch", message_codec.decode_batch_python),
    (send, "decode_batch", message_codec.decode_batch_python),
    (commitlog, "_prepare_batch", commitlog.prepare_batch_python),
    (commitlog, "_encode_batch", commitlog.encode_batch_python),
    (consume_queue, "_write_units", consume_queue.write_units_python),
    (index_service, "index_work", index_service.index_work_python),
    (IndexFile, "put_kernel", None),
    (commitlog, "_pwrite", segment.pwrite_all_python),
    (group_sync, "GroupSync", group_sync.GroupSyncPython),
]

#: Whether the compiled kernels are in use (built and not switched off).
COMPILED = speedups is not None


@contextmanager
def python_kernels() -> Iterator[None]:
    """Run the pure-Python twins in place of the compiled kernels, then restore."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in KERNEL_SITES]
    try:
        for owner, name, twin in KERNEL_SITES:
            setattr(owner, name, twin)
        javahash.java_string_hash.cache_clear()
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        javahash.java_string_hash.cache_clear()


#: The two builds of a Cython module that tests compare.
BUILDS = ("compiled", "interpreted")


class NotCompiledError(RuntimeError):
    """The compiled build of a module was asked for but is not in use."""


def module_build(name: str, build: str) -> ModuleType:
    """Module ``name`` as compiled by Cython, or its source run interpreted.

    Raises:
        NotCompiledError: ``build`` is "compiled" and the import of ``name``
            gave its source (no C compiler at install, or APOGEE_PURE_PYTHON).
    """
    if build == "interpreted":
        return load_interpreted(name)
    module = importlib.import_module(name)
    if not is_compiled(module):
        raise NotCompiledError(f"{name} runs from its source here, not compiled")
    return module
