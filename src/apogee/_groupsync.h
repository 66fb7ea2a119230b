/* The GroupSync type of apogee._speedups, defined in _groupsync.c. */
#ifndef APOGEE_GROUPSYNC_H
#define APOGEE_GROUPSYNC_H

#include <Python.h>

/* Add the GroupSync type to the module; -1 with an exception set on failure. */
int add_group_sync(PyObject *module);

#endif
