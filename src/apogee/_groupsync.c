/* GroupSync: the SYNC_FLUSH sync loop, run without the GIL.
 *
 * Owns: the extension module apogee._groupsync and its one type, GroupSync, the twin of
 * apogee.store.group_sync.GroupSyncPython (same methods, same results). The
 * Python twin is the specification; read its docstring first.
 *
 * Why it is compiled: a Python thread must hold the GIL to start each
 * fdatasync, and a busy event loop lends it only when it goes idle (or
 * every switch interval, 5 ms). A loop written in C runs entirely with the
 * GIL released, so a sync starts the moment an append asks for one and the
 * next starts as soon as the previous returns, while the event loop keeps
 * appending. Only completing the waiters' futures needs the GIL, and that is
 * the completion thread's job (apogee.store.flush.GroupCommitService).
 *
 * State, guarded by mu:
 *
 *     requested  end offset some append asked to be made durable (grows)
 *     synced     end offset the last successful round made durable (grows)
 *     notify     an eventfd written after every round, for an event loop
 *     files      [start, end) of each commit-log file and our own dup of
 *                its descriptor; a file wholly below synced is closed by
 *                the loop, a file the loop may be using is only marked dead
 *
 * One round: take target = requested, fdatasync every file overlapping
 * [synced, target) in offset order, then synced = target and wake every
 * waiter. A round with no file for its range (ENOENT, a file not registered
 * yet) leaves synced alone and is retried after at most 10 ms. A round whose
 * fdatasync fails is never retried: after a failed fsync the kernel may have
 * dropped the dirty pages, so a later success would prove nothing. The loop
 * then sets failed, keeps error and makes no more rounds; synced stays.
 *
 * Imports: the CPython API and POSIX (pthread, fdatasync, fcntl).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int64_t start;
    int64_t end;
    int fd;   /* our own duplicate, so the owner may close its descriptor */
    int dead; /* forgotten while the loop held descriptors: the loop closes it */
} sync_file;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the loop: a new request, or stop */
    pthread_cond_t done; /* waiters: a round ended, or stop */
    int64_t requested;
    int64_t synced;
    int stopped;
    int running;
    int in_round; /* the loop uses descriptors outside the lock */
    int error;    /* errno of the last failed round; 0 after a good one */
    int failed;   /* an fdatasync failed: no more rounds, synced stays */
    long long syncs;
    double sync_seconds;
    sync_file *files;
    Py_ssize_t nfiles;
    Py_ssize_t cap;
    int ready;  /* mutex and conditions initialised */
    int notify; /* eventfd made readable after every round and at stop */
} GroupSync;

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void deadline_after(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    if (seconds < 0) {
        seconds = 0;
    }
    time_t whole = (time_t)seconds;
    long nanos = (long)((seconds - (double)whole) * 1e9);
    ts->tv_sec += whole;
    ts->tv_nsec += nanos;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Make the eventfd readable (an event loop watching it runs completions).
 * A full counter (2^64 - 2 unread rounds) is as readable as it gets. */
static void notify(GroupSync *self)
{
    uint64_t one = 1;
    ssize_t ignored = write(self->notify, &one, sizeof one);
    (void)ignored;
}

/* Close and remove the files the loop may close now: forgotten ones, and
 * those wholly below synced. Called with mu held and in_round == 0. */
static void reap_files(GroupSync *self)
{
    Py_ssize_t keep = 0;
    for (Py_ssize_t i = 0; i < self->nfiles; i++) {
        sync_file *f = &self->files[i];
        if (f->dead || f->end <= self->synced) {
            close(f->fd);
        } else {
            self->files[keep++] = *f;
        }
    }
    self->nfiles = keep;
}

static int gs_init(GroupSync *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"synced", NULL};
    long long synced = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|L", kwlist, &synced)) {
        return -1;
    }
    if (synced < 0) {
        PyErr_SetString(PyExc_ValueError, "synced must not be negative");
        return -1;
    }
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "GroupSync is already initialised");
        return -1;
    }
    self->notify = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->notify < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    pthread_condattr_t attr;
    if (pthread_mutex_init(&self->mu, NULL) != 0 || pthread_condattr_init(&attr) != 0) {
        PyErr_SetString(PyExc_OSError, "cannot create a mutex");
        return -1;
    }
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int bad = pthread_cond_init(&self->wake, &attr) != 0;
    bad |= pthread_cond_init(&self->done, &attr) != 0;
    pthread_condattr_destroy(&attr);
    if (bad) {
        PyErr_SetString(PyExc_OSError, "cannot create a condition");
        return -1;
    }
    self->ready = 1;
    self->requested = self->synced = synced;
    return 0;
}

static void gs_dealloc(GroupSync *self)
{
    /* run() holds a reference to self, so no loop is running here. */
    for (Py_ssize_t i = 0; i < self->nfiles; i++) {
        close(self->files[i].fd);
    }
    PyMem_RawFree(self->files);
    if (self->ready) {
        close(self->notify);
        pthread_cond_destroy(&self->wake);
        pthread_cond_destroy(&self->done);
        pthread_mutex_destroy(&self->mu);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_ready(GroupSync *self)
{
    if (!self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "GroupSync.__init__ was not called");
        return -1;
    }
    return 0;
}

static PyObject *gs_add_file(GroupSync *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long start, size;
    int fd;
    if (check_ready(self)) {
        return NULL;
    }
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_file() takes 3 arguments");
        return NULL;
    }
    start = PyLong_AsLongLong(args[0]);
    size = PyLong_AsLongLong(args[1]);
    fd = (int)PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || size <= 0 || fd < 0) {
        PyErr_SetString(PyExc_ValueError, "start, size or fd out of range");
        return NULL;
    }
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_mutex_lock(&self->mu);
    for (Py_ssize_t i = 0; i < self->nfiles; i++) {
        sync_file *f = &self->files[i];
        if (f->start == start && !f->dead) {
            f->dead = 1; /* replaced (a file made again after a truncation) */
        }
    }
    if (!self->in_round) {
        reap_files(self);
    }
    if (self->nfiles == self->cap) {
        Py_ssize_t cap = self->cap ? self->cap * 2 : 8;
        sync_file *grown = PyMem_RawRealloc(self->files, (size_t)cap * sizeof(sync_file));
        if (grown == NULL) {
            pthread_mutex_unlock(&self->mu);
            close(own);
            return PyErr_NoMemory();
        }
        self->files = grown;
        self->cap = cap;
    }
    /* Files arrive in offset order (load, then each roll): keep that order. */
    Py_ssize_t at = self->nfiles;
    while (at > 0 && self->files[at - 1].start > start) {
        self->files[at] = self->files[at - 1];
        at--;
    }
    self->files[at] = (sync_file){start, start + size, own, 0};
    self->nfiles++;
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

static PyObject *gs_request(GroupSync *self, PyObject *arg)
{
    long long end = PyLong_AsLongLong(arg);
    if (end == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (check_ready(self)) {
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    if (end > self->requested) {
        self->requested = end;
        pthread_cond_signal(&self->wake);
    }
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

/* Collect the descriptors of the files overlapping [from, to) into *buf.
 * Called with mu held; returns the count, or -1 when out of memory. */
static Py_ssize_t files_between(GroupSync *self, int64_t from, int64_t to, int **buf,
                                Py_ssize_t *cap)
{
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < self->nfiles; i++) {
        sync_file *f = &self->files[i];
        if (f->dead || f->end <= from || f->start >= to) {
            continue;
        }
        if (n == *cap) {
            Py_ssize_t grown_cap = *cap ? *cap * 2 : 4;
            int *grown = PyMem_RawRealloc(*buf, (size_t)grown_cap * sizeof(int));
            if (grown == NULL) {
                return -1;
            }
            *buf = grown;
            *cap = grown_cap;
        }
        (*buf)[n++] = f->fd;
    }
    return n;
}

static PyObject *gs_run(GroupSync *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self)) {
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    int already = self->running;
    if (!already) {
        self->running = 1;
    }
    pthread_mutex_unlock(&self->mu);
    if (already) {
        PyErr_SetString(PyExc_RuntimeError, "the sync loop is already running");
        return NULL;
    }
    int *fds = NULL;
    Py_ssize_t cap = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    while (!self->stopped) {
        if (self->failed || self->requested <= self->synced) {
            pthread_cond_wait(&self->wake, &self->mu);
            continue;
        }
        reap_files(self);
        int64_t from = self->synced, target = self->requested;
        Py_ssize_t n = files_between(self, from, target, &fds, &cap);
        int err = n < 0 ? ENOMEM : (n == 0 ? ENOENT : 0); /* no file: nothing to vouch for */
        int io_failed = 0;
        double took = 0;
        if (!err) {
            self->in_round = 1;
            pthread_mutex_unlock(&self->mu);
            double began = monotonic_s();
            for (Py_ssize_t i = 0; i < n && !err; i++) {
                while (fdatasync(fds[i]) != 0) {
                    if (errno != EINTR) {
                        err = errno;
                        io_failed = 1;
                        break;
                    }
                }
            }
            took = monotonic_s() - began;
            pthread_mutex_lock(&self->mu);
            self->in_round = 0;
        }
        if (err) {
            self->error = err;
            self->failed = io_failed;
            pthread_cond_broadcast(&self->done);
            notify(self);
            if (io_failed) {
                continue; /* sticky: the loop waits for stop */
            }
            struct timespec until;
            deadline_after(&until, 0.010);
            if (!self->stopped) {
                pthread_cond_timedwait(&self->wake, &self->mu, &until);
            }
            continue;
        }
        self->synced = target;
        self->error = 0;
        self->syncs++;
        self->sync_seconds += took;
        pthread_cond_broadcast(&self->done);
        notify(self);
    }
    self->running = 0;
    pthread_cond_broadcast(&self->done);
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(fds);
    Py_RETURN_NONE;
}

static PyObject *gs_wait(GroupSync *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_ready(self)) {
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wait() takes 2 arguments");
        return NULL;
    }
    long long seen = PyLong_AsLongLong(args[0]);
    double timeout = PyFloat_AsDouble(args[1]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    long long synced;
    Py_BEGIN_ALLOW_THREADS
    struct timespec until;
    deadline_after(&until, timeout);
    pthread_mutex_lock(&self->mu);
    while (self->synced <= seen && !self->stopped) {
        if (pthread_cond_timedwait(&self->done, &self->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    synced = self->synced;
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(synced);
}

static PyObject *gs_stop(GroupSync *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self)) {
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    self->stopped = 1;
    pthread_cond_broadcast(&self->wake);
    pthread_cond_broadcast(&self->done);
    notify(self);
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

static PyObject *gs_fileno(GroupSync *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self)) {
        return NULL;
    }
    return PyLong_FromLong(self->notify);
}

static PyObject *gs_ack(GroupSync *self, PyObject *Py_UNUSED(ignored))
{
    if (check_ready(self)) {
        return NULL;
    }
    uint64_t count = 0;
    if (read(self->notify, &count, sizeof count) < 0 && errno != EAGAIN) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* Read-only figures, each read under the lock. */
enum { F_SYNCED, F_REQUESTED, F_SYNCS, F_ERROR, F_RUNNING, F_FILES, F_FAILED };

static PyObject *gs_figure(GroupSync *self, void *which)
{
    if (check_ready(self)) {
        return NULL;
    }
    long long value = 0;
    pthread_mutex_lock(&self->mu);
    switch ((int)(intptr_t)which) {
    case F_SYNCED: value = self->synced; break;
    case F_REQUESTED: value = self->requested; break;
    case F_SYNCS: value = self->syncs; break;
    case F_ERROR: value = self->error; break;
    case F_RUNNING: value = self->running; break;
    case F_FAILED: value = self->failed; break;
    default: {
        for (Py_ssize_t i = 0; i < self->nfiles; i++) {
            value += !self->files[i].dead;
        }
    }
    }
    pthread_mutex_unlock(&self->mu);
    if ((intptr_t)which == F_RUNNING || (intptr_t)which == F_FAILED) {
        return PyBool_FromLong((long)value);
    }
    return PyLong_FromLongLong(value);
}

static PyObject *gs_sync_seconds(GroupSync *self, void *Py_UNUSED(closure))
{
    if (check_ready(self)) {
        return NULL;
    }
    pthread_mutex_lock(&self->mu);
    double value = self->sync_seconds;
    pthread_mutex_unlock(&self->mu);
    return PyFloat_FromDouble(value);
}

static PyGetSetDef gs_getset[] = {
    {"synced", (getter)gs_figure, NULL, "End offset made durable.", (void *)F_SYNCED},
    {"requested", (getter)gs_figure, NULL, "End offset asked for.", (void *)F_REQUESTED},
    {"syncs", (getter)gs_figure, NULL, "Rounds that succeeded.", (void *)F_SYNCS},
    {"error", (getter)gs_figure, NULL, "errno of the last failed round, 0 after a good one.",
     (void *)F_ERROR},
    {"running", (getter)gs_figure, NULL, "Whether run() is looping.", (void *)F_RUNNING},
    {"failed", (getter)gs_figure, NULL, "Whether an fdatasync failed (no more rounds).",
     (void *)F_FAILED},
    {"files", (getter)gs_figure, NULL, "Files registered and not yet closed.", (void *)F_FILES},
    {"sync_seconds", (getter)gs_sync_seconds, NULL, "Time spent in fdatasync.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef gs_methods[] = {
    {"add_file", (PyCFunction)(void (*)(void))gs_add_file, METH_FASTCALL,
     "add_file(start, size, fd): a log file the loop syncs (its descriptor is duplicated)."},
    {"request", (PyCFunction)gs_request, METH_O,
     "request(end): ask for every byte before end to be made durable."},
    {"run", (PyCFunction)gs_run, METH_NOARGS,
     "The sync loop, without the GIL; returns after stop()."},
    {"wait", (PyCFunction)(void (*)(void))gs_wait, METH_FASTCALL,
     "wait(seen, timeout_s) -> synced: block until synced passes seen, stop or timeout."},
    {"stop", (PyCFunction)gs_stop, METH_NOARGS, "End run() and wake every waiter."},
    {"fileno", (PyCFunction)gs_fileno, METH_NOARGS,
     "An eventfd that turns readable after every round (and at stop)."},
    {"ack", (PyCFunction)gs_ack, METH_NOARGS, "Reset the eventfd (read it, if readable)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GroupSyncType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "apogee._groupsync.GroupSync",
    .tp_basicsize = sizeof(GroupSync),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "GroupSync(synced=0): the SYNC_FLUSH sync loop (see apogee.store.group_sync).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gs_init,
    .tp_dealloc = (destructor)gs_dealloc,
    .tp_methods = gs_methods,
    .tp_getset = gs_getset,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "apogee._groupsync",
    "The SYNC_FLUSH sync loop without the GIL (see apogee.store.group_sync).", -1, NULL,
};

PyMODINIT_FUNC PyInit__groupsync(void)
{
    if (PyType_Ready(&GroupSyncType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&GroupSyncType);
    if (PyModule_AddObject(module, "GroupSync", (PyObject *)&GroupSyncType) < 0) {
        Py_DECREF(&GroupSyncType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
