"""The part of Cython's pure-Python-mode API that Apogee's compiled modules use.

Cython ships no type information for its ``cython`` shadow module; at type
check time every C type is the Python type it converts to.
"""

import builtins
from collections.abc import Callable
from typing import Any, TypeAlias, TypeVar

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

compiled: builtins.bool

bint: TypeAlias = builtins.bool
char: TypeAlias = builtins.int
schar: TypeAlias = builtins.int
uchar: TypeAlias = builtins.int
short: TypeAlias = builtins.int
ushort: TypeAlias = builtins.int
int: TypeAlias = builtins.int
uint: TypeAlias = builtins.int
long: TypeAlias = builtins.int
ulong: TypeAlias = builtins.int
longlong: TypeAlias = builtins.int
ulonglong: TypeAlias = builtins.int
Py_ssize_t: TypeAlias = builtins.int
size_t: TypeAlias = builtins.int
double: TypeAlias = builtins.float
void: TypeAlias = None
# a pointer into a buffer when compiled; the bytes, bytearray or memoryview it
# points into when interpreted (see apogee.model.kernels)
p_uchar: TypeAlias = Any
p_char: TypeAlias = Any
# a pointer to one C long long when compiled (cython.address of a local)
p_longlong: TypeAlias = Any

Py_UCS4: TypeAlias = builtins.str
NULL: Any

class Py_buffer:  # the C struct a buffer export fills in (compiled code only)
    buf: Any
    len: builtins.int

class _NoGil:
    def __enter__(self) -> None: ...
    def __exit__(self, *exc: object) -> None: ...

nogil: _NoGil

def address(value: Any) -> Any: ...
def cclass(cls: _T) -> _T: ...
def final(obj: _T) -> _T: ...
def cfunc(func: _F) -> _F: ...
def ccall(func: _F) -> _F: ...
def inline(func: _F) -> _F: ...
def exceptval(value: Any = ..., *, check: builtins.bool = ...) -> Callable[[_F], _F]: ...
def locals(**types: Any) -> Callable[[_F], _F]: ...
def boundscheck(on: builtins.bool) -> Callable[[_F], _F]: ...
def wraparound(on: builtins.bool) -> Callable[[_F], _F]: ...
def cast(t: type[_T], value: Any, *, typecheck: builtins.bool = ...) -> _T: ...
def declare(t: type[_T], value: Any = ..., *, visibility: builtins.str = ...) -> _T: ...
