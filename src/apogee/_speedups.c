/* Compiled kernels for the innermost loops of the model and the store.
 *
 * Owns: nothing of its own. Each function here is the twin of a named
 * pure-Python function and must give the same result, byte for byte, on
 * every input the twin accepts, and raise the same exception class on
 * every input it refuses (bytes written before a refusal may differ); the
 * Python twin is the specification and the fallback when this module was
 * not built (apogee._util.native decides which one runs).
 *
 *   java_hash            apogee.model.javahash.java_string_hash_python
 *   message_fields       apogee.store.dispatch.message_fields_python
 *   encode_record_into   apogee.model.message_codec.encode_record_into_python
 *   decode_batch         apogee.model.message_codec.decode_batch_python
 *   prepare_batch        apogee.store.commitlog.prepare_batch_python
 *   encode_batch         apogee.store.commitlog.encode_batch_python
 *   write_units          apogee.store.consume_queue.write_units_python
 *   index_work           apogee.store.index_service.index_work_python
 *   index_put            apogee.store.index_file.IndexFile.put_work_python
 *   pwrite_all           apogee.store.segment.pwrite_all_python
 *   GroupSync            apogee.store.group_sync.GroupSyncPython (in _groupsync.c)
 *
 * Layouts (record, index file) are drawn in the docstrings of those modules.
 * Imports: the CPython API, POSIX pwrite (and zlib_ng's crc32 when a caller leaves
 * the body CRC to encode_record_into).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "_groupsync.h"

static PyObject *struct_error; /* struct.error: what struct.pack_into raises */
static PyObject *crc32_func;   /* zlib_ng.zlib_ng.crc32, imported on first use */

/* -- big-endian stores ------------------------------------------------------ */

static inline void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static inline int32_t get32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
}

/* Keep the compiler from moving stores across this point: a record's size and
 * magic must reach the mapping after the rest of it (see encode_record_into). */
#define STORE_BARRIER() __asm__ __volatile__("" ::: "memory")

/* -- integer arguments, checked as struct.pack_into checks them -------------- */

static int as_i32(PyObject *obj, int32_t *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(struct_error,
                        "'i' format requires -2147483648 <= number <= 2147483647");
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int as_i64(PyObject *obj, int64_t *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* base + delta as a 'q' field: struct.error when past int64, as packing the
 * Python twin's unbounded sum would raise. */
static int add_i64(int64_t base, int64_t delta, int64_t *out)
{
    if (__builtin_add_overflow(base, delta, out)) {
        PyErr_SetString(struct_error, "argument out of range");
        return -1;
    }
    return 0;
}

/* flag & 0xC of a sys flag of any size, as Python's `&` gives it: an int is
 * read by its low bits (two's complement, so no overflow and no Python
 * code runs); anything else goes through its own __and__. */
static int tx_bits(PyObject *flag, long *out)
{
    PyObject *bits = NULL;
    if (!PyLong_Check(flag)) {
        PyObject *mask = PyLong_FromLong(0xC);
        if (mask == NULL) {
            return -1;
        }
        bits = PyNumber_And(flag, mask);
        Py_DECREF(mask);
        if (bits == NULL) {
            return -1;
        }
        if (!PyLong_Check(bits)) {
            Py_DECREF(bits);
            PyErr_SetString(PyExc_TypeError, "a sys flag & 0xC must give an int");
            return -1;
        }
        flag = bits;
    }
    unsigned long long v = PyLong_AsUnsignedLongLongMask(flag);
    Py_XDECREF(bits);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (long)(v & 0xCu);
    return 0;
}

/* Whether `extent` bytes from `pos` lie inside a buffer of `len` bytes,
 * without computing pos + extent (which may overflow). */
static inline int fits(int64_t pos, int64_t extent, Py_ssize_t len)
{
    return pos >= 0 && pos <= (int64_t)len && extent <= (int64_t)len - pos;
}

/* -- Java String.hashCode ----------------------------------------------------- */

/* Fold the UTF-16 code units of `text` into `h` (h = 31 * h + unit).
 * Returns -1 (with the UTF-16 encoder's exception set) for a lone surrogate,
 * which the Python twin cannot encode either. */
static int hash_update(PyObject *text, uint32_t *h)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint32_t acc = *h;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            acc = 31u * acc + s[i];
        }
        *h = acc;
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            PyObject *raised = PyUnicode_AsUTF16String(text); /* sets the error */
            Py_XDECREF(raised);
            if (raised != NULL) {
                PyErr_SetString(PyExc_UnicodeEncodeError, "surrogates not allowed");
            }
            return -1;
        }
        if (c > 0xFFFF) {
            c -= 0x10000;
            acc = 31u * acc + (0xD800u + (c >> 10));
            acc = 31u * acc + (0xDC00u + (c & 0x3FFu));
        }
        else {
            acc = 31u * acc + c;
        }
    }
    *h = acc;
    return 0;
}

static PyObject *java_hash(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "java_hash() takes a str");
        return NULL;
    }
    uint32_t h = 0;
    if (hash_update(text, &h) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)h);
}

/* abs(hashCode) with MIN_VALUE -> 0: RocketMQ's index key hash. */
static inline int32_t index_hash_of(uint32_t h)
{
    int32_t s = (int32_t)h;
    if (s >= 0) {
        return s;
    }
    return s == INT32_MIN ? 0 : -s;
}

/* -- property strings ------------------------------------------------------------ */

/* Fold UTF-8 text into a Java hash: bytes straight when ASCII, else through a
 * str (the UTF-16 units of non-ASCII text need decoding). */
static int hash_utf8(const char *text, Py_ssize_t len, uint32_t *h)
{
    const unsigned char *s = (const unsigned char *)text;
    uint32_t acc = *h;
    for (Py_ssize_t i = 0; i < len; i++) {
        if (s[i] >= 0x80) {
            PyObject *str = PyUnicode_DecodeUTF8(text, len, "surrogatepass");
            if (str == NULL) {
                return -1;
            }
            int rc = hash_update(str, h);
            Py_DECREF(str);
            return rc;
        }
        acc = 31u * acc + s[i];
    }
    *h = acc;
    return 0;
}

/* TAGS, KEYS and UNIQ_KEY of a UTF-8 property string, by string_to_properties'
 * rules: pieces split on 0x02, each split at its first 0x01, the last piece
 * with that exact name and a non-empty value wins. (0x01 and 0x02 never occur
 * inside a multi-byte UTF-8 sequence, so bytes split as characters do.)
 * Writes value bounds (start, end), start = -1 when absent. */
static void scan_properties(const char *text, Py_ssize_t n, Py_ssize_t bounds[3][2])
{
    for (int k = 0; k < 3; k++) {
        bounds[k][0] = -1;
    }
    Py_ssize_t start = 0;
    while (start <= n) {
        const char *stop = memchr(text + start, 0x02, (size_t)(n - start));
        Py_ssize_t end = stop != NULL ? stop - text : n;
        const char *sep = memchr(text + start, 0x01, (size_t)(end - start));
        if (sep != NULL) {
            Py_ssize_t at = sep - text;
            Py_ssize_t name_len = at - start;
            if (name_len > 0 && end > at + 1) { /* non-empty name and value */
                const char *name = text + start;
                int which = -1;
                if (name_len == 4 && memcmp(name, "TAGS", 4) == 0) {
                    which = 0;
                }
                else if (name_len == 4 && memcmp(name, "KEYS", 4) == 0) {
                    which = 1;
                }
                else if (name_len == 8 && memcmp(name, "UNIQ_KEY", 8) == 0) {
                    which = 2;
                }
                if (which >= 0) {
                    bounds[which][0] = at + 1;
                    bounds[which][1] = end;
                }
            }
        }
        start = end + 1;
    }
}

static PyObject *utf8_value(const char *text, Py_ssize_t bounds[2])
{
    if (bounds[0] < 0) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8(text + bounds[0], bounds[1] - bounds[0], "surrogatepass");
}

/* (tag code, keys, unique key) of a UTF-8 property string, as a new tuple. */
static PyObject *fields_of_utf8(const char *text, Py_ssize_t n)
{
    Py_ssize_t bounds[3][2];
    scan_properties(text, n, bounds);
    uint32_t h = 0;
    if (bounds[0][0] >= 0 && hash_utf8(text + bounds[0][0], bounds[0][1] - bounds[0][0], &h) < 0) {
        return NULL;
    }
    PyObject *code = PyLong_FromLong((long)(int32_t)h);
    PyObject *keys = utf8_value(text, bounds[1]);
    PyObject *uniq = utf8_value(text, bounds[2]);
    if (code == NULL || keys == NULL || uniq == NULL) {
        Py_XDECREF(code);
        Py_XDECREF(keys);
        Py_XDECREF(uniq);
        return NULL;
    }
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        Py_DECREF(code);
        Py_DECREF(keys);
        Py_DECREF(uniq);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, code);
    PyTuple_SET_ITEM(out, 1, keys);
    PyTuple_SET_ITEM(out, 2, uniq);
    return out;
}

static PyObject *message_fields(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "message_fields() takes a str");
        return NULL;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n); /* no copy for ASCII */
    if (utf8 != NULL) {
        return fields_of_utf8(utf8, n);
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        return NULL;
    }
    /* Lone surrogates: scan their surrogatepass bytes, which decode back to
     * the same characters (only a tag holding one fails, in the hash, as the
     * Python twin does). */
    PyErr_Clear();
    PyObject *raw = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (raw == NULL) {
        return NULL;
    }
    PyObject *out = fields_of_utf8(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
    Py_DECREF(raw);
    return out;
}

/* -- commit-log records ----------------------------------------------------------- */

#define MAGIC_V1 0xDAA320A7u

/* The fields of a record other than body, topic and properties. */
typedef struct {
    int32_t queue_id, flag, sys_flag, reconsume, crc;
    int64_t qoff, phys, born_ts, store_ts, prepared;
    const char *born, *store;
    Py_ssize_t born_len, store_len;
} record_head;

/* Size of a record by the Python twin's formula (host lengths as given). */
static inline int64_t record_size(const record_head *h, Py_ssize_t blen, Py_ssize_t tlen,
                                  Py_ssize_t plen)
{
    return 90 + (int64_t)blen + tlen + plen + h->born_len + h->store_len - 16;
}

/* Bytes from the record start to the end of its properties, as written (and
 * the TOTALSIZE a batch record gets: encode_batch_records_into counts it so). */
static inline int64_t record_extent(const record_head *h, Py_ssize_t blen, Py_ssize_t tlen,
                                    Py_ssize_t plen)
{
    Py_ssize_t born_field = h->born_len == 20 ? 20 : 8, store_field = h->store_len == 20 ? 20 : 8;
    return 72 + born_field + store_field + (int64_t)blen + tlen + 2 + plen;
}

/* Write one v1 record at `out` (the caller checked that it fits): the
 * fields, body, topic field and properties, then TOTALSIZE (`size`) and
 * MAGICCODE last, so that a writer killed part-way leaves no magic behind. */
static void write_record(unsigned char *out, const record_head *h, const void *body,
                         Py_ssize_t blen, const char *topic, Py_ssize_t tlen, const char *props,
                         Py_ssize_t plen, int64_t size)
{
    Py_ssize_t born_field = h->born_len == 20 ? 20 : 8, store_field = h->store_len == 20 ? 20 : 8;
    unsigned char *p = out + 8;
    put32(p, (uint32_t)h->crc);
    put32(p + 4, (uint32_t)h->queue_id);
    put32(p + 8, (uint32_t)h->flag);
    put64(p + 12, (uint64_t)h->qoff);
    put64(p + 20, (uint64_t)h->phys);
    put32(p + 28, (uint32_t)h->sys_flag);
    put64(p + 32, (uint64_t)h->born_ts);
    p += 40;
    memset(p, 0, (size_t)born_field);
    memcpy(p, h->born, (size_t)(h->born_len < born_field ? h->born_len : born_field));
    p += born_field;
    put64(p, (uint64_t)h->store_ts);
    p += 8;
    memset(p, 0, (size_t)store_field);
    memcpy(p, h->store, (size_t)(h->store_len < store_field ? h->store_len : store_field));
    p += store_field;
    put32(p, (uint32_t)h->reconsume);
    put64(p + 4, (uint64_t)h->prepared);
    put32(p + 12, (uint32_t)blen);
    p += 16;
    memcpy(p, body, (size_t)blen);
    p += blen;
    memcpy(p, topic, (size_t)tlen);
    p += tlen;
    p[0] = (unsigned char)((uint32_t)plen >> 8);
    p[1] = (unsigned char)plen;
    p += 2;
    memcpy(p, props, (size_t)plen);
    STORE_BARRIER();
    put32(out, (uint32_t)size);
    put32(out + 4, MAGIC_V1);
}

static int check_props_len(Py_ssize_t plen)
{
    if (plen > 0x7FFF) {
        PyErr_SetString(struct_error, "'h' format requires -32768 <= number <= 32767");
        return -1;
    }
    return 0;
}

static int hosts(PyObject *born, PyObject *store, record_head *h)
{
    if (!PyBytes_Check(born) || !PyBytes_Check(store)) {
        PyErr_SetString(PyExc_TypeError, "hosts must be bytes");
        return -1;
    }
    h->born = PyBytes_AS_STRING(born);
    h->born_len = PyBytes_GET_SIZE(born);
    h->store = PyBytes_AS_STRING(store);
    h->store_len = PyBytes_GET_SIZE(store);
    return 0;
}

/* crc32(body) & 0x7FFFFFFF through zlib_ng (what the Python twins call). */
static int body_crc(PyObject *body, int32_t *out)
{
    if (crc32_func == NULL) {
        PyObject *mod = PyImport_ImportModule("zlib_ng.zlib_ng");
        if (mod == NULL) {
            return -1;
        }
        crc32_func = PyObject_GetAttrString(mod, "crc32");
        Py_DECREF(mod);
        if (crc32_func == NULL) {
            return -1;
        }
    }
    PyObject *value = PyObject_CallOneArg(crc32_func, body);
    if (value == NULL) {
        return -1;
    }
    unsigned long raw = PyLong_AsUnsignedLongMask(value);
    Py_DECREF(value);
    if (raw == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int32_t)(raw & 0x7FFFFFFFul);
    return 0;
}

static PyObject *encode_record_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 16 || nargs > 17) {
        PyErr_SetString(PyExc_TypeError, "encode_record_into() takes 16 or 17 arguments");
        return NULL;
    }
    record_head h;
    int64_t pos;
    h.crc = 0;
    if (as_i64(args[1], &pos) || as_i32(args[2], &h.queue_id) || as_i32(args[3], &h.flag) ||
        as_i64(args[4], &h.qoff) || as_i64(args[5], &h.phys) || as_i32(args[6], &h.sys_flag) ||
        as_i64(args[7], &h.born_ts) || as_i64(args[9], &h.store_ts) ||
        as_i32(args[11], &h.reconsume) || as_i64(args[12], &h.prepared) ||
        hosts(args[8], args[10], &h)) {
        return NULL;
    }
    PyObject *topic = args[14], *props = args[15];
    if (!PyBytes_Check(topic) || !PyBytes_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "the topic field and properties must be bytes");
        return NULL;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(args[13], &body, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_buffer out;
    out.obj = NULL;
    if (nargs == 17 && args[16] != Py_None ? as_i32(args[16], &h.crc) : body_crc(args[13], &h.crc)) {
        goto done;
    }
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        out.obj = NULL;
        goto done;
    }
    Py_ssize_t tlen = PyBytes_GET_SIZE(topic), plen = PyBytes_GET_SIZE(props);
    if (check_props_len(plen)) {
        goto done;
    }
    if (!fits(pos, record_extent(&h, body.len, tlen, plen), out.len)) {
        PyErr_SetString(PyExc_ValueError, "the record does not fit the buffer");
        goto done;
    }
    int64_t size = record_size(&h, body.len, tlen, plen);
    write_record((unsigned char *)out.buf + pos, &h, body.buf, body.len, PyBytes_AS_STRING(topic),
                 tlen, PyBytes_AS_STRING(props), plen, size);
    result = PyLong_FromLongLong(size);
done:
    if (out.obj != NULL) {
        PyBuffer_Release(&out);
    }
    PyBuffer_Release(&body);
    return result;
}

/* -- batches --------------------------------------------------------------------- */

static PyObject *batch_item_type; /* apogee.model.message.BatchItem */
static PyObject *protocol_error;  /* apogee.errors.ProtocolError */

static int load_batch_types(void)
{
    if (batch_item_type != NULL) {
        return 0;
    }
    PyObject *message = PyImport_ImportModule("apogee.model.message");
    if (message == NULL) {
        return -1;
    }
    PyObject *errors = PyImport_ImportModule("apogee.errors");
    if (errors == NULL) {
        Py_DECREF(message);
        return -1;
    }
    protocol_error = PyObject_GetAttrString(errors, "ProtocolError");
    batch_item_type = PyObject_GetAttrString(message, "BatchItem");
    Py_DECREF(errors);
    Py_DECREF(message);
    if (protocol_error == NULL || batch_item_type == NULL || !PyType_Check(batch_item_type) ||
        !PyType_IsSubtype((PyTypeObject *)batch_item_type, &PyTuple_Type)) {
        Py_CLEAR(protocol_error);
        Py_CLEAR(batch_item_type);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "BatchItem must be a tuple type");
        }
        return -1;
    }
    return 0;
}

/* A BatchItem (a NamedTuple: a tuple subclass without fields of its own)
 * holding the three references given. */
static PyObject *new_batch_item(PyObject *flag, PyObject *body, PyObject *props)
{
    PyTypeObject *type = (PyTypeObject *)batch_item_type;
    PyObject *item = type->tp_alloc(type, 3);
    if (item == NULL) {
        Py_DECREF(flag);
        Py_DECREF(body);
        Py_DECREF(props);
        return NULL;
    }
    PyTuple_SET_ITEM(item, 0, flag);
    PyTuple_SET_ITEM(item, 1, body);
    PyTuple_SET_ITEM(item, 2, props);
#if PY_VERSION_HEX >= 0x030E00A7
    /* tuples cache their hash from 3.14 on; -1 is "not computed" (tp_alloc
     * zero-fills, and a cached 0 would be every item's hash) */
    ((PyTupleObject *)item)->ob_hash = -1;
#endif
    return item;
}

/* Split a batch send body into BatchItems (message_codec.decode_batch). */
static PyObject *decode_batch(PyObject *module, PyObject *body)
{
    if (load_batch_types() < 0) {
        return NULL;
    }
    PyObject *view = PyMemoryView_FromObject(body);
    if (view == NULL) {
        return NULL;
    }
    Py_buffer *buf = PyMemoryView_GET_BUFFER(view);
    if (!PyBuffer_IsContiguous(buf, 'C') || buf->itemsize != 1) {
        Py_DECREF(view);
        PyErr_SetString(PyExc_TypeError, "a batch body is contiguous bytes");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)buf->buf;
    int64_t end = buf->len, pos = 0;
    PyObject *items = PyList_New(0);
    if (items == NULL) {
        Py_DECREF(view);
        return NULL;
    }
    while (pos < end) {
        if (end - pos < 22) {
            PyErr_Format(protocol_error, "batch message at byte %lld: cut short", (long long)pos);
            goto fail;
        }
        int32_t total = get32(data + pos), body_len = get32(data + pos + 16);
        int32_t flag = get32(data + pos + 12);
        int64_t body_at = pos + 20, props_at = body_at + body_len + 2;
        if (body_len < 0 || total < 22 || props_at > end || pos + total > end) {
            PyErr_Format(protocol_error, "batch message at byte %lld: bad length fields",
                         (long long)pos);
            goto fail;
        }
        int16_t props_len = (int16_t)(((uint16_t)data[props_at - 2] << 8) | data[props_at - 1]);
        if (props_len < 0 || props_at + props_len != pos + total) {
            PyErr_Format(protocol_error, "batch message at byte %lld: total size disagrees",
                         (long long)pos);
            goto fail;
        }
        PyObject *props = PyUnicode_DecodeUTF8((const char *)data + props_at, props_len, "strict");
        if (props == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                goto fail;
            }
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (tb != NULL) {
                PyException_SetTraceback(value, tb);
            }
            PyErr_Format(protocol_error, "batch message at byte %lld: properties not UTF-8",
                         (long long)pos);
            PyObject *type2, *value2, *tb2;
            PyErr_Fetch(&type2, &value2, &tb2);
            PyErr_NormalizeException(&type2, &value2, &tb2);
            PyException_SetCause(value2, value); /* steals value */
            PyException_SetContext(value2, Py_NewRef(value));
            Py_DECREF(type);
            Py_XDECREF(tb);
            PyErr_Restore(type2, value2, tb2);
            goto fail;
        }
        PyObject *part = PySequence_GetSlice(view, (Py_ssize_t)body_at,
                                             (Py_ssize_t)(body_at + body_len));
        PyObject *flag_obj = part != NULL ? PyLong_FromLong(flag) : NULL;
        if (flag_obj == NULL) {
            Py_XDECREF(part);
            Py_DECREF(props);
            goto fail;
        }
        PyObject *item = new_batch_item(flag_obj, part, props);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        pos += total;
    }
    Py_DECREF(view);
    return items;
fail:
    Py_DECREF(items);
    Py_DECREF(view);
    return NULL;
}

/* UTF-8 of a str: a borrowed pointer (no copy for ASCII). */
static const char *utf8_of(PyObject *text, Py_ssize_t *len)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "properties must be str");
        return NULL;
    }
    return PyUnicode_AsUTF8AndSize(text, len);
}

static PyObject *error_pair(int kind, int64_t size)
{
    return Py_BuildValue("(iL)", kind, (long long)size);
}

/* items[i] if it is a (flag, body, str) tuple, as a new reference. */
static PyObject *batch_item_at(PyObject *items, Py_ssize_t i)
{
    PyObject *item = PyList_GET_ITEM(items, i);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(item, 2))) {
        PyErr_SetString(PyExc_TypeError, "batch items are (flag, body, properties)");
        return NULL;
    }
    return Py_NewRef(item);
}

static int overflowed(void)
{
    PyErr_SetString(PyExc_OverflowError, "batch sizes past int64");
    return -1;
}

/* What a batch needs before the lock (commitlog.prepare_batch_python): the
 * batch body limit, then per item its merged properties, size, CRC and
 * index fields. Returns (total, records, index) or (kind, size) for a
 * refusal: 0 batch body over max_body, 1 properties too long, 2 item too big.
 * len(body) and the CRC may run Python code that changes `items`: each item
 * is held while in use and the list is read as it is at each step, as the
 * twin's for loops read it. */
static PyObject *prepare_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "prepare_batch() takes 5 arguments");
        return NULL;
    }
    PyObject *items = args[0], *extra = args[1];
    int64_t max_body, fixed, max_record;
    if (!PyList_Check(items) || !PyUnicode_Check(extra) || as_i64(args[2], &max_body) ||
        as_i64(args[3], &fixed) || as_i64(args[4], &max_record)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "prepare_batch(list, str, int, int, int)");
        }
        return NULL;
    }
    int64_t total_body = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = batch_item_at(items, i);
        if (item == NULL) {
            return NULL;
        }
        Py_ssize_t blen = PyObject_Length(PyTuple_GET_ITEM(item, 1));
        Py_ssize_t slen = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 2));
        Py_DECREF(item);
        if (blen < 0) {
            return NULL;
        }
        if (__builtin_add_overflow(total_body, (int64_t)blen, &total_body) ||
            __builtin_add_overflow(total_body, (int64_t)slen + 22, &total_body)) {
            overflowed();
            return NULL;
        }
    }
    if (total_body > max_body) {
        return error_pair(0, total_body);
    }
    /* the batch's own properties are encoded with the first item's, as the
     * twin encodes each merged string (none at all for an empty batch) */
    const char *extra_utf8 = NULL;
    Py_ssize_t elen = 0;
    PyObject *records = PyList_New(0), *index = PyList_New(0);
    if (records == NULL || index == NULL) {
        goto fail;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = batch_item_at(items, i);
        if (item == NULL) {
            goto fail;
        }
        PyObject *flag = PyTuple_GET_ITEM(item, 0), *body = PyTuple_GET_ITEM(item, 1);
        PyObject *props = NULL, *fields = NULL, *record = NULL, *facts = NULL;
        Py_ssize_t ilen;
        const char *inner = utf8_of(PyTuple_GET_ITEM(item, 2), &ilen);
        if (inner == NULL) {
            goto item_fail;
        }
        if (extra_utf8 == NULL && PyUnicode_GET_LENGTH(extra) > 0 &&
            (extra_utf8 = utf8_of(extra, &elen)) == NULL) {
            goto item_fail;
        }
        /* merge_batch_properties: a 0x02 between them unless inner ends with one */
        int sep = elen > 0 && ilen > 0 && inner[ilen - 1] != 0x02;
        Py_ssize_t plen = ilen + sep + elen;
        props = PyBytes_FromStringAndSize(NULL, plen);
        if (props == NULL) {
            goto item_fail;
        }
        char *pp = PyBytes_AS_STRING(props);
        memcpy(pp, inner, (size_t)ilen);
        if (sep) {
            pp[ilen] = 0x02;
        }
        if (elen > 0) {
            memcpy(pp + ilen + sep, extra_utf8, (size_t)elen);
        }
        Py_ssize_t blen = PyObject_Length(body);
        if (blen < 0) {
            goto item_fail;
        }
        int64_t size;
        if (__builtin_add_overflow(fixed, (int64_t)blen, &size) ||
            __builtin_add_overflow(size, (int64_t)plen, &size)) {
            overflowed();
            goto item_fail;
        }
        if (size > max_record || plen > 0x7FFF) {
            Py_DECREF(props);
            Py_DECREF(item);
            Py_DECREF(records);
            Py_DECREF(index);
            return error_pair(plen > 0x7FFF ? 1 : 2, size);
        }
        int32_t crc;
        fields = fields_of_utf8(pp, plen);
        if (fields == NULL || body_crc(body, &crc) < 0) {
            goto item_fail;
        }
        record = Py_BuildValue("(OONi)", flag, body, props, (int)crc);
        props = NULL; /* the record took it, or Py_BuildValue released it */
        if (record == NULL) {
            goto item_fail;
        }
        facts = Py_BuildValue("(LOOO)", (long long)size, PyTuple_GET_ITEM(fields, 0),
                              PyTuple_GET_ITEM(fields, 1), PyTuple_GET_ITEM(fields, 2));
        if (facts == NULL || PyList_Append(records, record) < 0 ||
            PyList_Append(index, facts) < 0) {
            goto item_fail;
        }
        Py_DECREF(facts);
        Py_DECREF(record);
        Py_DECREF(fields);
        Py_DECREF(item);
        if (__builtin_add_overflow(total, size, &total)) {
            overflowed();
            goto fail;
        }
        continue;
    item_fail:
        Py_XDECREF(facts);
        Py_XDECREF(record);
        Py_XDECREF(fields);
        Py_XDECREF(props);
        Py_DECREF(item);
        goto fail;
    }
    return Py_BuildValue("(LNN)", (long long)total, records, index);
fail:
    Py_XDECREF(records);
    Py_XDECREF(index);
    return NULL;
}

/* Write a prepared batch from buf[pos] (commitlog.write_batch_python) and
 * build its hand-off entries. Returns (offsets, entries). Converting a flag
 * or CRC, or taking a body's buffer, may run Python code that changes the
 * lists: records and facts are held while in use and the lists read as they
 * are at each step (the twin loops over the records, then zips them with the
 * index, strictly). */
static PyObject *encode_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "encode_batch() takes 15 arguments");
        return NULL;
    }
    record_head h;
    int64_t pos, base, first;
    h.prepared = 0;
    if (as_i64(args[1], &pos) || as_i64(args[2], &base) || as_i32(args[3], &h.queue_id) ||
        as_i64(args[4], &first) || as_i32(args[5], &h.sys_flag) ||
        as_i64(args[6], &h.born_ts) || as_i64(args[8], &h.store_ts) ||
        as_i32(args[10], &h.reconsume) || hosts(args[7], args[9], &h)) {
        return NULL;
    }
    PyObject *tfield = args[11], *records = args[12], *index = args[13], *topic = args[14];
    if (!PyBytes_Check(tfield) || !PyList_Check(records) || !PyList_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(): bad topic field, records or index");
        return NULL;
    }
    if (PyList_GET_SIZE(records) != PyList_GET_SIZE(index)) {
        PyErr_SetString(PyExc_ValueError, "encode_batch(): records and index differ in length");
        return NULL;
    }
    Py_ssize_t tlen = PyBytes_GET_SIZE(tfield);
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    PyObject *offsets = PyList_New(0), *entries = PyList_New(0);
    PyObject *store_ts = PyLong_FromLongLong(h.store_ts), *sys_flag = PyLong_FromLong(h.sys_flag);
    PyObject *zero = PyLong_FromLong(0);
    PyObject *result = NULL;
    if (offsets == NULL || entries == NULL || store_ts == NULL || sys_flag == NULL || zero == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        if (i >= PyList_GET_SIZE(index)) {
            break; /* refused below */
        }
        PyObject *record = Py_NewRef(PyList_GET_ITEM(records, i));
        PyObject *facts = Py_NewRef(PyList_GET_ITEM(index, i));
        PyObject *phys = NULL, *entry = NULL;
        Py_buffer body;
        body.obj = NULL;
        if (!PyTuple_Check(record) || PyTuple_GET_SIZE(record) != 4 || !PyTuple_Check(facts) ||
            PyTuple_GET_SIZE(facts) != 4 || !PyBytes_Check(PyTuple_GET_ITEM(record, 2))) {
            PyErr_SetString(PyExc_TypeError, "batch records are (flag, body, props, crc)");
            goto record_fail;
        }
        if (as_i32(PyTuple_GET_ITEM(record, 0), &h.flag) ||
            as_i32(PyTuple_GET_ITEM(record, 3), &h.crc)) {
            goto record_fail;
        }
        PyObject *props = PyTuple_GET_ITEM(record, 2);
        Py_ssize_t plen = PyBytes_GET_SIZE(props);
        if (check_props_len(plen)) {
            goto record_fail;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(record, 1), &body, PyBUF_SIMPLE) < 0) {
            body.obj = NULL;
            goto record_fail;
        }
        int64_t extent = record_extent(&h, body.len, tlen, plen);
        if (!fits(pos, extent, out.len)) {
            PyErr_SetString(PyExc_ValueError, "the batch does not fit the buffer");
            goto record_fail;
        }
        if (add_i64(base, pos, &h.phys) || add_i64(first, i, &h.qoff)) {
            goto record_fail;
        }
        write_record((unsigned char *)out.buf + pos, &h, body.buf, body.len,
                     PyBytes_AS_STRING(tfield), tlen, PyBytes_AS_STRING(props), plen, extent);
        PyBuffer_Release(&body);
        phys = PyLong_FromLongLong(h.phys);
        if (phys == NULL || PyList_Append(offsets, phys) < 0) {
            goto record_fail;
        }
        entry = Py_BuildValue("(OOOOOOLOOOO)", topic, args[3], phys, PyTuple_GET_ITEM(facts, 0),
                              PyTuple_GET_ITEM(facts, 1), store_ts, (long long)h.qoff,
                              PyTuple_GET_ITEM(facts, 2), PyTuple_GET_ITEM(facts, 3), sys_flag,
                              zero);
        if (entry == NULL || PyList_Append(entries, entry) < 0) {
            goto record_fail;
        }
        Py_DECREF(entry);
        Py_DECREF(phys);
        Py_DECREF(facts);
        Py_DECREF(record);
        pos += extent;
        continue;
    record_fail:
        if (body.obj != NULL) {
            PyBuffer_Release(&body);
        }
        Py_XDECREF(entry);
        Py_XDECREF(phys);
        Py_DECREF(facts);
        Py_DECREF(record);
        goto done;
    }
    if (PyList_GET_SIZE(offsets) != PyList_GET_SIZE(index)) {
        PyErr_SetString(PyExc_ValueError, "encode_batch(): records and index differ in length");
        goto done;
    }
    result = PyTuple_Pack(2, offsets, entries);
done:
    PyBuffer_Release(&out);
    Py_XDECREF(offsets);
    Py_XDECREF(entries);
    Py_XDECREF(store_ts);
    Py_XDECREF(sys_flag);
    Py_XDECREF(zero);
    return result;
}

/* -- consume queues ----------------------------------------------------------------- */

#define CQ_UNIT 20

/* Whether entry field `value` * CQ_UNIT is `expect` (the segment's next
 * unit), as Python's unbounded ints compare them: 1, 0 or -1 on error. */
static int is_next_unit(PyObject *value, int64_t seg_start, int64_t wrote)
{
    int overflow = 0;
    long long logical = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (logical == -1 && PyErr_Occurred()) {
        return -1;
    }
    int64_t expect, at;
    if (overflow || __builtin_add_overflow(seg_start, wrote, &expect) ||
        __builtin_mul_overflow((int64_t)logical, (int64_t)CQ_UNIT, &at)) {
        /* logical * 20 past int64 never equals seg_start + wrote, which
         * the kernel only takes in int64 and wrote keeps within the view */
        return 0;
    }
    return at == expect;
}

/* `a != b` as Python evaluates it (no identity shortcut but for exact str
 * and int, whose == is reflexive): 1, 0 or -1 on error. */
static int not_equal(PyObject *a, PyObject *b)
{
    if (a == b && (PyUnicode_CheckExact(a) || PyLong_CheckExact(a))) {
        return 0;
    }
    PyObject *ne = PyObject_RichCompare(a, b, Py_NE);
    if (ne == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(ne);
    Py_DECREF(ne);
    return rc;
}

/* Write the consume-queue units of entries[i:j] into one segment
 * (consume_queue.write_units_python): from entries[i] on, while an entry is
 * of (topic, queue_id), of a queued transaction type (not PREPARED or
 * ROLLBACK), its logical offset is the segment's next unit and there is
 * room. Returns how many were written. The fields are read in the twin's
 * order (an entry that ends the run is never packed); entries[i] is indexed
 * as a list is (negative from the end), afresh each time, since comparing a
 * field may run Python code that changes the list. */
static PyObject *write_units(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "write_units() takes 9 arguments");
        return NULL;
    }
    int64_t seg_start, wrote, seg_size, i, j;
    if (as_i64(args[1], &seg_start) || as_i64(args[2], &wrote) || as_i64(args[3], &seg_size) ||
        as_i64(args[5], &i) || as_i64(args[6], &j)) {
        return NULL;
    }
    PyObject *entries = args[4], *topic = args[7], *queue_id = args[8];
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "write_units() takes the entries as a list");
        return NULL;
    }
    if (j > PyList_GET_SIZE(entries)) {
        j = PyList_GET_SIZE(entries);
    }
    Py_buffer out;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    int64_t count = 0;
    int failed = 0;
    for (; i < j && wrote < seg_size; i++) {
        Py_ssize_t len = PyList_GET_SIZE(entries);
        int64_t at = i < 0 ? i + len : i;
        if (at < 0 || at >= len) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            failed = 1;
            break;
        }
        PyObject *entry = Py_NewRef(PyList_GET_ITEM(entries, at));
        int stop = 0;
        long bits;
        int64_t phys, size, code;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 11) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is an 11-tuple");
            goto entry_fail;
        }
        if (tx_bits(PyTuple_GET_ITEM(entry, 9), &bits) < 0) {
            goto entry_fail;
        }
        if (bits == 0x4 || bits == 0xC) {
            stop = 1;
        }
        else {
            int next = is_next_unit(PyTuple_GET_ITEM(entry, 6), seg_start, wrote);
            if (next < 0) {
                goto entry_fail;
            }
            stop = !next;
        }
        if (!stop) {
            stop = not_equal(PyTuple_GET_ITEM(entry, 1), queue_id);
            if (stop == 0) {
                stop = not_equal(PyTuple_GET_ITEM(entry, 0), topic);
            }
            if (stop < 0) {
                goto entry_fail;
            }
        }
        if (stop) {
            Py_DECREF(entry);
            break;
        }
        if (as_i64(PyTuple_GET_ITEM(entry, 2), &phys) || as_i64(PyTuple_GET_ITEM(entry, 3), &size) ||
            as_i64(PyTuple_GET_ITEM(entry, 4), &code)) {
            goto entry_fail;
        }
        Py_DECREF(entry);
        if (size < INT32_MIN || size > INT32_MAX || !fits(wrote, CQ_UNIT, out.len)) {
            PyErr_SetString(struct_error, "a unit does not fit");
            failed = 1;
            break;
        }
        unsigned char *u = (unsigned char *)out.buf + wrote;
        put64(u, (uint64_t)phys);
        put32(u + 8, (uint32_t)size);
        put64(u + 12, (uint64_t)code);
        wrote += CQ_UNIT;
        count++;
        continue;
    entry_fail:
        Py_DECREF(entry);
        failed = 1;
        break;
    }
    PyBuffer_Release(&out);
    if (failed) {
        return NULL;
    }
    return PyLong_FromLongLong(count);
}

/* -- index files ---------------------------------------------------------------- */

#define INDEX_HEADER 40
#define INDEX_SLOT 4
#define INDEX_ENTRY 20

/* "topic#" folded, once: only with a key to hash, as the twin hashes the
 * topic only as part of one (a topic it cannot encode fails then only). */
typedef struct {
    PyObject *topic;
    int ready;
    uint32_t h;
} key_prefix;

/* Hash "topic#key" without building it: fold topic, '#', then key. */
static int key_hash(key_prefix *prefix, PyObject *key, int32_t *out)
{
    if (!prefix->ready) {
        uint32_t h = 0;
        if (hash_update(prefix->topic, &h) < 0) {
            return -1;
        }
        prefix->h = 31u * h + '#';
        prefix->ready = 1;
    }
    uint32_t h = prefix->h;
    if (hash_update(key, &h) < 0) {
        return -1;
    }
    *out = index_hash_of(h);
    return 0;
}

static int append_hash(PyObject *list, int32_t value)
{
    PyObject *obj = PyLong_FromLong(value);
    if (obj == NULL) {
        return -1;
    }
    int rc = PyList_Append(list, obj);
    Py_DECREF(obj);
    return rc;
}

/* The hashes of topic#UNIQ_KEY and topic#token for each distinct non-empty
 * space-separated token of KEYS (index_service.key_hashes). */
static PyObject *record_key_hashes(PyObject *topic, PyObject *keys, PyObject *uniq)
{
    key_prefix prefix = {topic, 0, 0};
    PyObject *hashes = PyList_New(0);
    if (hashes == NULL) {
        return NULL;
    }
    int32_t h;
    int has_uniq = uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0;
    if (has_uniq) {
        if (key_hash(&prefix, uniq, &h) < 0 || append_hash(hashes, h) < 0) {
            goto fail;
        }
    }
    if (keys != Py_None && PyUnicode_GET_LENGTH(keys) > 0) {
        PyObject *sep = PyUnicode_FromOrdinal(' ');
        if (sep == NULL) {
            goto fail;
        }
        PyObject *tokens = PyUnicode_Split(keys, sep, -1);
        Py_DECREF(sep);
        if (tokens == NULL) {
            goto fail;
        }
        PyObject *seen = PyList_New(0); /* tokens taken, to skip repeats */
        if (seen == NULL) {
            Py_DECREF(tokens);
            goto fail;
        }
        if (has_uniq && PyList_Append(seen, uniq) < 0) {
            goto fail_tokens;
        }
        Py_ssize_t count = PyList_GET_SIZE(tokens);
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *token = PyList_GET_ITEM(tokens, i);
            if (PyUnicode_GET_LENGTH(token) == 0) {
                continue;
            }
            int found = PySequence_Contains(seen, token);
            if (found < 0) {
                goto fail_tokens;
            }
            if (found) {
                continue;
            }
            if (PyList_Append(seen, token) < 0 || key_hash(&prefix, token, &h) < 0 ||
                append_hash(hashes, h) < 0) {
                goto fail_tokens;
            }
        }
        Py_DECREF(seen);
        Py_DECREF(tokens);
        return hashes;
    fail_tokens:
        Py_DECREF(seen);
        Py_DECREF(tokens);
        goto fail;
    }
    return hashes;
fail:
    Py_DECREF(hashes);
    return NULL;
}

static int str_or_none(PyObject *obj)
{
    if (obj != Py_None && !PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "keys and unique key must be str or None");
        return -1;
    }
    return 0;
}

/* (offset, store time, hashes) of every entry that has keys to index and is
 * not a ROLLBACK record, in order (index_service.index_work). A sys flag
 * that is not an int runs Python code, which may change a list of entries:
 * each entry is held while in use and the length read afresh, as a for
 * loop over the list does. */
static PyObject *index_work(PyObject *module, PyObject *entries)
{
    PyObject *seq = PySequence_Fast(entries, "index_work() takes a sequence of entries");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *work = PyList_New(0);
    if (work == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *entry = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *hashes = NULL;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 11) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is an 11-tuple");
            goto entry_fail;
        }
        PyObject *keys = PyTuple_GET_ITEM(entry, 7), *uniq = PyTuple_GET_ITEM(entry, 8);
        if (str_or_none(keys) < 0 || str_or_none(uniq) < 0) {
            goto entry_fail;
        }
        int has_keys = keys != Py_None && PyUnicode_GET_LENGTH(keys) > 0;
        int has_uniq = uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0;
        long bits;
        if (!has_keys && !has_uniq) {
            Py_DECREF(entry);
            continue;
        }
        if (tx_bits(PyTuple_GET_ITEM(entry, 9), &bits) < 0) {
            goto entry_fail;
        }
        if (bits == 0xC) {
            Py_DECREF(entry);
            continue; /* ROLLBACK */
        }
        PyObject *topic = PyTuple_GET_ITEM(entry, 0);
        if (!PyUnicode_Check(topic)) {
            PyErr_SetString(PyExc_TypeError, "the topic must be a str");
            goto entry_fail;
        }
        hashes = record_key_hashes(topic, keys, uniq);
        if (hashes == NULL) {
            goto entry_fail;
        }
        if (PyList_GET_SIZE(hashes) > 0) {
            PyObject *item = PyTuple_Pack(3, PyTuple_GET_ITEM(entry, 2),
                                          PyTuple_GET_ITEM(entry, 5), hashes);
            int rc = item != NULL ? PyList_Append(work, item) : -1;
            Py_XDECREF(item);
            if (rc < 0) {
                goto entry_fail;
            }
        }
        Py_DECREF(hashes);
        Py_DECREF(entry);
        continue;
    entry_fail:
        Py_XDECREF(hashes);
        Py_DECREF(entry);
        goto fail;
    }
    Py_DECREF(seq);
    return work;
fail:
    Py_DECREF(seq);
    Py_DECREF(work);
    return NULL;
}

/* Put records of `work` into one mapped index file (index_file.put_work):
 * from record `rec`, key `key`; a record at or below the file's end offset
 * was indexed already and is skipped (only checked before its first key);
 * stops when the file is full. Returns (rec, key, beginTimestamp,
 * endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount),
 * key 0 once all the work is in. Converting a field may run Python code
 * that changes the lists: the record in hand is held, and the lengths read
 * afresh, as the twin's while loops read them. */
static PyObject *index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "index_put() takes 12 arguments");
        return NULL;
    }
    int64_t slot_num, index_num, begin_ts, end_ts, begin_phy, end_phy, slot_count, count, rec,
        key;
    if (as_i64(args[1], &slot_num) || as_i64(args[2], &index_num) ||
        as_i64(args[3], &begin_ts) || as_i64(args[4], &end_ts) || as_i64(args[5], &begin_phy) ||
        as_i64(args[6], &end_phy) || as_i64(args[7], &slot_count) || as_i64(args[8], &count) ||
        as_i64(args[10], &rec) || as_i64(args[11], &key)) {
        return NULL;
    }
    if (!PyList_Check(args[9])) {
        PyErr_SetString(PyExc_TypeError, "index_put() takes the work as a list");
        return NULL;
    }
    /* the sizes IndexFile allows (so the layout below cannot overflow), and
     * an entry count that numbers an entry of the file */
    if (slot_num <= 0 || slot_num > INT32_MAX || index_num <= 0 || index_num > INT32_MAX ||
        count < 0 || rec < 0 || key < 0) {
        PyErr_SetString(PyExc_ValueError, "bad index_put() arguments");
        return NULL;
    }
    Py_buffer mm;
    if (PyObject_GetBuffer(args[0], &mm, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    unsigned char *base = (unsigned char *)mm.buf;
    int64_t entries_pos = INDEX_HEADER + slot_num * INDEX_SLOT;
    if (entries_pos + index_num * INDEX_ENTRY > mm.len) {
        PyBuffer_Release(&mm);
        PyErr_SetString(PyExc_ValueError, "the buffer is smaller than the index file");
        return NULL;
    }
    PyObject *work = args[9];
    int failed = 0;
    for (;; rec++, key = 0) {
        if (rec >= PyList_GET_SIZE(work)) {
            key = 0;
            break;
        }
        PyObject *item = Py_NewRef(PyList_GET_ITEM(work, rec));
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyList_Check(PyTuple_GET_ITEM(item, 2))) {
            PyErr_SetString(PyExc_TypeError, "index work items are (offset, time, hashes)");
            goto item_fail;
        }
        int64_t phy, ts;
        if (as_i64(PyTuple_GET_ITEM(item, 0), &phy) || as_i64(PyTuple_GET_ITEM(item, 1), &ts)) {
            goto item_fail;
        }
        PyObject *hashes = PyTuple_GET_ITEM(item, 2);
        if (key == 0 && (phy < end_phy || (phy == end_phy && count > 1) ||
                         PyList_GET_SIZE(hashes) == 0)) {
            Py_DECREF(item);
            continue; /* indexed already, or nothing to index */
        }
        for (; key < PyList_GET_SIZE(hashes); key++) {
            if (count >= index_num) {
                Py_DECREF(item);
                goto out; /* full */
            }
            PyObject *hash_obj = Py_NewRef(PyList_GET_ITEM(hashes, key));
            int64_t hash;
            int rc = as_i64(hash_obj, &hash);
            Py_DECREF(hash_obj);
            if (rc < 0) {
                goto item_fail;
            }
            if (hash < INT32_MIN || hash > INT32_MAX) {
                PyErr_SetString(struct_error,
                                "'i' format requires -2147483648 <= number <= 2147483647");
                goto item_fail;
            }
            int64_t slot = hash % slot_num; /* Python's %: never negative */
            if (slot < 0) {
                slot += slot_num;
            }
            int64_t slot_pos = INDEX_HEADER + slot * INDEX_SLOT;
            int32_t prev = get32(base + slot_pos);
            if (prev <= 0 || prev >= count) {
                prev = 0;
                slot_count++;
            }
            if (count == 1) {
                begin_ts = ts;
                begin_phy = phy;
            }
            int64_t diff = 0, elapsed;
            if (begin_ts > 0) {
                if (__builtin_sub_overflow(ts, begin_ts, &elapsed)) {
                    diff = ts > begin_ts ? INT32_MAX : 0;
                }
                else {
                    diff = elapsed / 1000;
                }
            }
            if (diff < 0) {
                diff = 0;
            }
            else if (diff > INT32_MAX) {
                diff = INT32_MAX;
            }
            unsigned char *e = base + entries_pos + count * INDEX_ENTRY;
            put32(e, (uint32_t)hash);
            put64(e + 4, (uint64_t)phy);
            put32(e + 12, (uint32_t)diff);
            put32(e + 16, (uint32_t)prev);
            count++;
            end_phy = phy;
            if (ts > end_ts) {
                end_ts = ts;
            }
            /* entry, then header, then slot: a torn put stays unreachable */
            STORE_BARRIER();
            put64(base, (uint64_t)begin_ts);
            put64(base + 8, (uint64_t)end_ts);
            put64(base + 16, (uint64_t)begin_phy);
            put64(base + 24, (uint64_t)phy);
            put32(base + 32, (uint32_t)slot_count);
            put32(base + 36, (uint32_t)count);
            STORE_BARRIER();
            put32(base + slot_pos, (uint32_t)(count - 1));
        }
        Py_DECREF(item);
        continue;
    item_fail:
        Py_DECREF(item);
        failed = 1;
        break;
    }
out:
    PyBuffer_Release(&mm);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(LLLLLLLL)", (long long)rec, (long long)key, (long long)begin_ts,
                         (long long)end_ts, (long long)begin_phy, (long long)end_phy,
                         (long long)slot_count, (long long)count);
}

/* -- writing a file --------------------------------------------------------------- */

/* Writes below this size keep the GIL: the system call copies a record into
 * the page cache in about a microsecond, less than a GIL hand-over costs, and
 * a caller holding the GIL keeps other threads from slipping in between an
 * append and the request that follows it. */
#define PWRITE_KEEP_GIL 65536

static PyObject *pwrite_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pwrite_all() takes 4 arguments");
        return NULL;
    }
    int32_t fd;
    int64_t length, offset;
    if (as_i32(args[0], &fd) || as_i64(args[2], &length) || as_i64(args[3], &offset)) {
        return NULL;
    }
    Py_buffer data;
    if (PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (length < 0 || length > data.len || offset < 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "length or offset out of range");
        return NULL;
    }
    const char *p = data.buf;
    int64_t done = 0;
    int err = 0;
    while (done < length) {
        ssize_t n;
        if (length - done < PWRITE_KEEP_GIL) {
            n = pwrite(fd, p + done, (size_t)(length - done), (off_t)(offset + done));
        } else {
            Py_BEGIN_ALLOW_THREADS
            n = pwrite(fd, p + done, (size_t)(length - done), (off_t)(offset + done));
            Py_END_ALLOW_THREADS
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            err = errno;
            break;
        }
        if (n == 0) {
            err = EIO;
            break;
        }
        done += n;
    }
    PyBuffer_Release(&data);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* -- module ----------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"java_hash", (PyCFunction)java_hash, METH_O, "Java String.hashCode of a str."},
    {"message_fields", (PyCFunction)message_fields, METH_O,
     "(tag code, KEYS, UNIQ_KEY) of a property string."},
    {"encode_record_into", (PyCFunction)(void (*)(void))encode_record_into, METH_FASTCALL,
     "Write one v1 commit-log record into a buffer; return its size."},
    {"decode_batch", (PyCFunction)decode_batch, METH_O,
     "Split a batch send body into BatchItems."},
    {"prepare_batch", (PyCFunction)(void (*)(void))prepare_batch, METH_FASTCALL,
     "Merged properties, sizes, CRCs and index fields of a batch's items."},
    {"encode_batch", (PyCFunction)(void (*)(void))encode_batch, METH_FASTCALL,
     "Write a prepared batch and build its hand-off entries."},
    {"write_units", (PyCFunction)(void (*)(void))write_units, METH_FASTCALL,
     "Write a run of consume-queue units into one segment."},
    {"index_work", (PyCFunction)index_work, METH_O,
     "(offset, store time, key hashes) of the dispatch entries the index takes."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "Put index work into one mapped index file until done or full."},
    {"pwrite_all", (PyCFunction)(void (*)(void))pwrite_all, METH_FASTCALL,
     "Write buf[:length] to a file at offset, all of it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "apogee._speedups", "Compiled kernels (see _speedups.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    PyObject *struct_mod = PyImport_ImportModule("struct");
    if (struct_mod == NULL) {
        return NULL;
    }
    struct_error = PyObject_GetAttrString(struct_mod, "error");
    Py_DECREF(struct_mod);
    if (struct_error == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && add_group_sync(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
