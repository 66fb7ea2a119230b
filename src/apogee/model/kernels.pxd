# C-level declarations of apogee/model/kernels.py (Cython reads this file beside it):
# what apogee.store.kernels cimports, and the store barrier, which has no Python spelling.

cdef extern from *:
    """
    /* Keeps the C compiler from moving stores across this point (no CPU fence:
       the mapped file is read back by this process or after a crash only). */
    #define APOGEE_STORE_BARRIER() __asm__ __volatile__("" ::: "memory")
    """
    void store_barrier "APOGEE_STORE_BARRIER" () nogil

cdef unsigned int fold_str(str text, unsigned int h) except? -1
cdef unsigned int fold_utf8(unsigned char *p, Py_ssize_t start, Py_ssize_t end,
                            unsigned int h) except? -1
cdef object fields_of_utf8(unsigned char *p, Py_ssize_t n)
cdef long long write_record(
    unsigned char *out, Py_ssize_t out_len, long long pos, int crc, int queue_id, int flag,
    long long queue_offset, long long physical_offset, int sys_flag, long long born_timestamp,
    bytes born_host, long long store_timestamp, bytes store_host, int reconsume_times,
    long long prepared, unsigned char *body, Py_ssize_t body_len, bytes topic_field,
    unsigned char *own, Py_ssize_t own_len, Py_ssize_t sep, unsigned char *extra,
    Py_ssize_t extra_len, long long total_size) except? -1
