# The compiled side of apogee/_util/bytes_be.py: big-endian integers read from and
# written to an unsigned char pointer. The bodies live here, not in the .py, because
# only a .pxd body is inlined into the module that cimports it; a function defined in
# a .py would be called through a pointer table imported at run time.

from libc.string cimport memchr, memcmp, memcpy

cdef inline short get16(const unsigned char *p, Py_ssize_t at) noexcept nogil:
    return <short>((p[at] << 8) | p[at + 1])

cdef inline int get32(const unsigned char *p, Py_ssize_t at) noexcept nogil:
    return <int>((<unsigned int>p[at] << 24) | (<unsigned int>p[at + 1] << 16)
                 | (<unsigned int>p[at + 2] << 8) | <unsigned int>p[at + 3])

cdef inline long long get64(const unsigned char *p, Py_ssize_t at) noexcept nogil:
    return <long long>((<unsigned long long><unsigned int>get32(p, at) << 32)
                       | <unsigned long long><unsigned int>get32(p, at + 4))

cdef inline void put16(unsigned char *p, Py_ssize_t at, int v) noexcept nogil:
    p[at] = <unsigned char>(v >> 8)
    p[at + 1] = <unsigned char>v

cdef inline void put32(unsigned char *p, Py_ssize_t at, int v) noexcept nogil:
    cdef unsigned int u = <unsigned int>v
    p[at] = <unsigned char>(u >> 24)
    p[at + 1] = <unsigned char>(u >> 16)
    p[at + 2] = <unsigned char>(u >> 8)
    p[at + 3] = <unsigned char>u

cdef inline void put64(unsigned char *p, Py_ssize_t at, long long v) noexcept nogil:
    cdef unsigned long long u = <unsigned long long>v
    put32(p, at, <int><unsigned int>(u >> 32))
    put32(p, at + 4, <int><unsigned int>u)

cdef inline void put_hex4(unsigned char *p, Py_ssize_t at, unsigned int v) noexcept nogil:
    cdef const char *digits = b"0123456789ABCDEF"
    p[at] = digits[(v >> 12) & 0xF]
    p[at + 1] = digits[(v >> 8) & 0xF]
    p[at + 2] = digits[(v >> 4) & 0xF]
    p[at + 3] = digits[v & 0xF]

cdef inline void copy_bytes(unsigned char *out, Py_ssize_t at, const unsigned char *src,
                            Py_ssize_t src_at, Py_ssize_t n) noexcept nogil:
    memcpy(out + at, src + src_at, n)

cdef inline bint same_at(const unsigned char *p, Py_ssize_t at, const char *name,
                         Py_ssize_t n) noexcept nogil:
    return memcmp(p + at, name, n) == 0

cdef inline Py_ssize_t find_byte(const unsigned char *p, Py_ssize_t start, Py_ssize_t end,
                                 unsigned char byte) noexcept nogil:
    cdef const unsigned char *hit = <const unsigned char *>memchr(p + start, byte, end - start)
    return hit - p if hit != NULL else -1

cdef inline bint digits_at(const unsigned char *p, Py_ssize_t start, Py_ssize_t end,
                           long long *out) noexcept nogil:
    # -?[0-9]{1,18} in p[start:end] into out[0]; False if not that
    cdef Py_ssize_t i = start
    cdef bint negative = i < end and p[i] == 0x2D
    cdef long long value = 0
    if negative:
        i += 1
    if end - i < 1 or end - i > 18:
        return False
    while i < end:
        if p[i] < 0x30 or p[i] > 0x39:
            return False
        value = value * 10 + (p[i] - 0x30)
        i += 1
    out[0] = -value if negative else value
    return True
