/* Compiled kernels for the innermost loops of the model and the store.
 *
 * Owns: nothing of its own. Each function here is the twin of a named
 * pure-Python function and must give the same result, byte for byte, on
 * every input; the Python twin is the specification and the fallback when
 * this module was not built (apogee._util.native decides which one runs).
 *
 *   java_hash            apogee.model.javahash.java_string_hash_python
 *   message_fields       apogee.store.dispatch.message_fields_python
 *   encode_record_into   apogee.model.message_codec.encode_record_into_python
 *   index_work           apogee.store.index_service.index_work_python
 *   index_put            apogee.store.index_file.IndexFile.put_work_python
 *
 * Layouts (record, index file) are drawn in the docstrings of those modules.
 * Imports: the CPython API only (and zlib_ng's crc32 when a caller leaves
 * the body CRC to encode_record_into).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* Does text[start:start+len] equal the ASCII `name`? */
static int piece_is(int kind, const void *data, Py_ssize_t start, Py_ssize_t len, const char *name,
                    Py_ssize_t name_len)
{
    if (len != name_len) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (PyUnicode_READ(kind, data, start + i) != (Py_UCS4)(unsigned char)name[i]) {
            return 0;
        }
    }
    return 1;
}

/* TAGS, KEYS and UNIQ_KEY of a property string, by string_to_properties'
 * rules: pieces split on 0x02, each split at its first 0x01, the last piece
 * with that exact name and a non-empty value wins. Writes value bounds
 * (start, end) or start = -1 for absent. */
static void scan_properties(PyObject *text, Py_ssize_t bounds[3][2])
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (int k = 0; k < 3; k++) {
        bounds[k][0] = -1;
    }
    Py_ssize_t start = 0;
    while (start <= n) {
        Py_ssize_t end = start;
        Py_ssize_t sep = -1;
        while (end < n) {
            Py_UCS4 c = PyUnicode_READ(kind, data, end);
            if (c == 0x02) {
                break;
            }
            if (c == 0x01 && sep < 0) {
                sep = end;
            }
            end++;
        }
        if (sep > start && end > sep + 1) { /* non-empty name and value */
            Py_ssize_t name_len = sep - start;
            int which = -1;
            if (piece_is(kind, data, start, name_len, "TAGS", 4)) {
                which = 0;
            }
            else if (piece_is(kind, data, start, name_len, "KEYS", 4)) {
                which = 1;
            }
            else if (piece_is(kind, data, start, name_len, "UNIQ_KEY", 8)) {
                which = 2;
            }
            if (which >= 0) {
                bounds[which][0] = sep + 1;
                bounds[which][1] = end;
            }
        }
        start = end + 1;
    }
}

static PyObject *substring_or_none(PyObject *text, Py_ssize_t bounds[2])
{
    if (bounds[0] < 0) {
        Py_RETURN_NONE;
    }
    return PyUnicode_Substring(text, bounds[0], bounds[1]);
}

static PyObject *message_fields(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "message_fields() takes a str");
        return NULL;
    }
    Py_ssize_t bounds[3][2];
    scan_properties(text, bounds);
    long code = 0;
    PyObject *tags = NULL, *keys = NULL, *uniq = NULL, *code_obj = NULL;
    if (bounds[0][0] >= 0) {
        tags = substring_or_none(text, bounds[0]);
        if (tags == NULL) {
            return NULL;
        }
        uint32_t h = 0;
        int failed = hash_update(tags, &h);
        Py_DECREF(tags);
        if (failed) {
            return NULL;
        }
        code = (long)(int32_t)h;
    }
    code_obj = PyLong_FromLong(code);
    keys = substring_or_none(text, bounds[1]);
    uniq = substring_or_none(text, bounds[2]);
    if (code_obj == NULL || keys == NULL || uniq == NULL) {
        Py_XDECREF(code_obj);
        Py_XDECREF(keys);
        Py_XDECREF(uniq);
        return NULL;
    }
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        Py_DECREF(code_obj);
        Py_DECREF(keys);
        Py_DECREF(uniq);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, code_obj);
    PyTuple_SET_ITEM(out, 1, keys);
    PyTuple_SET_ITEM(out, 2, uniq);
    return out;
}

/* -- commit-log records ----------------------------------------------------------- */

#define MAGIC_V1 0xDAA320A7u

static PyObject *encode_record_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 16 || nargs > 17) {
        PyErr_SetString(PyExc_TypeError, "encode_record_into() takes 16 or 17 arguments");
        return NULL;
    }
    int32_t queue_id, flag, sys_flag, reconsume, crc = 0;
    int64_t pos64, qoff, phys, born_ts, store_ts, prepared;
    if (as_i64(args[1], &pos64) || as_i32(args[2], &queue_id) || as_i32(args[3], &flag) ||
        as_i64(args[4], &qoff) || as_i64(args[5], &phys) || as_i32(args[6], &sys_flag) ||
        as_i64(args[7], &born_ts) || as_i64(args[9], &store_ts) ||
        as_i32(args[11], &reconsume) || as_i64(args[12], &prepared)) {
        return NULL;
    }
    PyObject *born = args[8], *store = args[10], *topic = args[14], *props = args[15];
    if (!PyBytes_Check(born) || !PyBytes_Check(store) || !PyBytes_Check(topic) ||
        !PyBytes_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "hosts, topic field and properties must be bytes");
        return NULL;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(args[13], &body, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_buffer out;
    out.obj = NULL;
    if (nargs == 17 && args[16] != Py_None) {
        if (as_i32(args[16], &crc)) {
            goto done;
        }
    }
    else {
        if (crc32_func == NULL) {
            PyObject *mod = PyImport_ImportModule("zlib_ng.zlib_ng");
            if (mod == NULL) {
                goto done;
            }
            crc32_func = PyObject_GetAttrString(mod, "crc32");
            Py_DECREF(mod);
            if (crc32_func == NULL) {
                goto done;
            }
        }
        PyObject *value = PyObject_CallOneArg(crc32_func, args[13]);
        if (value == NULL) {
            goto done;
        }
        unsigned long raw = PyLong_AsUnsignedLongMask(value);
        Py_DECREF(value);
        if (raw == (unsigned long)-1 && PyErr_Occurred()) {
            goto done;
        }
        crc = (int32_t)(raw & 0x7FFFFFFFul);
    }
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0) {
        out.obj = NULL;
        goto done;
    }
    Py_ssize_t born_len = PyBytes_GET_SIZE(born), store_len = PyBytes_GET_SIZE(store);
    Py_ssize_t born_field = born_len == 20 ? 20 : 8, store_field = store_len == 20 ? 20 : 8;
    Py_ssize_t tlen = PyBytes_GET_SIZE(topic), plen = PyBytes_GET_SIZE(props);
    Py_ssize_t blen = body.len;
    /* the Python twin's size formula and layout, exactly */
    int64_t size = 90 + (int64_t)blen + tlen + plen + born_len + store_len - 16;
    Py_ssize_t header = 8 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_field + 8 + store_field + 4 + 8 + 4;
    if (plen > 0x7FFF) {
        PyErr_SetString(struct_error, "'h' format requires -32768 <= number <= 32767");
        goto done;
    }
    if (pos64 < 0 || pos64 + header + blen + tlen + 2 + plen > out.len ||
        pos64 + 8 > out.len) {
        PyErr_SetString(PyExc_ValueError, "the record does not fit the buffer");
        goto done;
    }
    unsigned char *p = (unsigned char *)out.buf + pos64 + 8;
    put32(p, (uint32_t)crc);
    put32(p + 4, (uint32_t)queue_id);
    put32(p + 8, (uint32_t)flag);
    put64(p + 12, (uint64_t)qoff);
    put64(p + 20, (uint64_t)phys);
    put32(p + 28, (uint32_t)sys_flag);
    put64(p + 32, (uint64_t)born_ts);
    p += 40;
    memset(p, 0, (size_t)born_field);
    memcpy(p, PyBytes_AS_STRING(born), (size_t)(born_len < born_field ? born_len : born_field));
    p += born_field;
    put64(p, (uint64_t)store_ts);
    p += 8;
    memset(p, 0, (size_t)store_field);
    memcpy(p, PyBytes_AS_STRING(store),
           (size_t)(store_len < store_field ? store_len : store_field));
    p += store_field;
    put32(p, (uint32_t)reconsume);
    put64(p + 4, (uint64_t)prepared);
    put32(p + 12, (uint32_t)blen);
    p += 16;
    memcpy(p, body.buf, (size_t)blen);
    p += blen;
    memcpy(p, PyBytes_AS_STRING(topic), (size_t)tlen);
    p += tlen;
    p[0] = (unsigned char)((uint32_t)plen >> 8);
    p[1] = (unsigned char)plen;
    p += 2;
    memcpy(p, PyBytes_AS_STRING(props), (size_t)plen);
    STORE_BARRIER();
    unsigned char *head = (unsigned char *)out.buf + pos64;
    put32(head, (uint32_t)size);
    put32(head + 4, MAGIC_V1);
    result = PyLong_FromLongLong(size);
done:
    if (out.obj != NULL) {
        PyBuffer_Release(&out);
    }
    PyBuffer_Release(&body);
    return result;
}

/* -- index files ---------------------------------------------------------------- */

#define INDEX_HEADER 40
#define INDEX_SLOT 4
#define INDEX_ENTRY 20

/* Hash "topic#key" without building it: fold topic, '#', then key. */
static int key_hash(uint32_t prefix, PyObject *key, int32_t *out)
{
    uint32_t h = prefix;
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
    uint32_t prefix = 0;
    if (hash_update(topic, &prefix) < 0) {
        return NULL;
    }
    prefix = 31u * prefix + '#';
    PyObject *hashes = PyList_New(0);
    if (hashes == NULL) {
        return NULL;
    }
    int32_t h;
    int has_uniq = uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0;
    if (has_uniq) {
        if (key_hash(prefix, uniq, &h) < 0 || append_hash(hashes, h) < 0) {
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
            if (PyList_Append(seen, token) < 0 || key_hash(prefix, token, &h) < 0 ||
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
 * not a ROLLBACK record, in order (index_service.index_work). */
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
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 11) {
            PyErr_SetString(PyExc_TypeError, "a dispatch entry is an 11-tuple");
            goto fail;
        }
        PyObject *keys = PyTuple_GET_ITEM(entry, 7), *uniq = PyTuple_GET_ITEM(entry, 8);
        if (str_or_none(keys) < 0 || str_or_none(uniq) < 0) {
            goto fail;
        }
        int has_keys = keys != Py_None && PyUnicode_GET_LENGTH(keys) > 0;
        int has_uniq = uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0;
        if (!has_keys && !has_uniq) {
            continue;
        }
        long sys_flag = PyLong_AsLong(PyTuple_GET_ITEM(entry, 9));
        if (sys_flag == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if ((sys_flag & 0xC) == 0xC) {
            continue; /* ROLLBACK */
        }
        PyObject *topic = PyTuple_GET_ITEM(entry, 0);
        if (!PyUnicode_Check(topic)) {
            PyErr_SetString(PyExc_TypeError, "the topic must be a str");
            goto fail;
        }
        PyObject *hashes = record_key_hashes(topic, keys, uniq);
        if (hashes == NULL) {
            goto fail;
        }
        if (PyList_GET_SIZE(hashes) == 0) {
            Py_DECREF(hashes);
            continue;
        }
        PyObject *item = PyTuple_Pack(3, PyTuple_GET_ITEM(entry, 2), PyTuple_GET_ITEM(entry, 5),
                                      hashes);
        Py_DECREF(hashes);
        if (item == NULL) {
            goto fail;
        }
        int rc = PyList_Append(work, item);
        Py_DECREF(item);
        if (rc < 0) {
            goto fail;
        }
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
 * endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount). */
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
    if (slot_num <= 0 || index_num <= 0 || rec < 0 || key < 0) {
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
    Py_ssize_t n = PyList_GET_SIZE(work);
    int failed = 0;
    for (; rec < n; rec++, key = 0) {
        PyObject *item = PyList_GET_ITEM(work, rec);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 ||
            !PyList_Check(PyTuple_GET_ITEM(item, 2))) {
            PyErr_SetString(PyExc_TypeError, "index work items are (offset, time, hashes)");
            failed = 1;
            break;
        }
        int64_t phy, ts;
        if (as_i64(PyTuple_GET_ITEM(item, 0), &phy) || as_i64(PyTuple_GET_ITEM(item, 1), &ts)) {
            failed = 1;
            break;
        }
        PyObject *hashes = PyTuple_GET_ITEM(item, 2);
        Py_ssize_t nh = PyList_GET_SIZE(hashes);
        if (key == 0) {
            if (phy < end_phy || (phy == end_phy && count > 1)) {
                continue; /* indexed already */
            }
            if (nh == 0) {
                continue;
            }
        }
        for (; key < nh; key++) {
            if (count >= index_num) {
                goto full;
            }
            int64_t hash;
            if (as_i64(PyList_GET_ITEM(hashes, key), &hash)) {
                failed = 1;
                goto out;
            }
            if (hash < 0 || hash > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "an index key hash is a non-negative int32");
                failed = 1;
                goto out;
            }
            int64_t slot_pos = INDEX_HEADER + (hash % slot_num) * INDEX_SLOT;
            int32_t prev = get32(base + slot_pos);
            if (prev <= 0 || prev >= count) {
                prev = 0;
                slot_count++;
            }
            if (count == 1) {
                begin_ts = ts;
                begin_phy = phy;
            }
            int64_t diff = begin_ts > 0 ? (ts - begin_ts) / 1000 : 0;
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
    }
full:
out:
    PyBuffer_Release(&mm);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(LLLLLLLL)", (long long)rec, (long long)key, (long long)begin_ts,
                         (long long)end_ts, (long long)begin_phy, (long long)end_phy,
                         (long long)slot_count, (long long)count);
}

/* -- module ----------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"java_hash", (PyCFunction)java_hash, METH_O, "Java String.hashCode of a str."},
    {"message_fields", (PyCFunction)message_fields, METH_O,
     "(tag code, KEYS, UNIQ_KEY) of a property string."},
    {"encode_record_into", (PyCFunction)(void (*)(void))encode_record_into, METH_FASTCALL,
     "Write one v1 commit-log record into a buffer; return its size."},
    {"index_work", (PyCFunction)index_work, METH_O,
     "(offset, store time, key hashes) of the dispatch entries the index takes."},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "Put index work into one mapped index file until done or full."},
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
    return PyModule_Create(&module_def);
}
