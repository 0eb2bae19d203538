#ifndef CZEROMQ_SHIM_H
#define CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>

// errno is a macro over a thread-local; give Swift one call that reads it.
static inline int czmq_errno(void) { return zmq_errno(); }
#endif
