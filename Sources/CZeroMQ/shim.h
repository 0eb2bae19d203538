#ifndef CZEROMQ_SHIM_H
#define CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>

// errno is a macro over a thread-local; give Swift one call that reads it.
// A draft option in libzmq 4.3 (stable since 4.3.5's DRAFT list; Debian's
// libzmq is built with it): refuse a connection when no ZAP handler answers.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

static inline int czmq_errno(void) { return zmq_errno(); }
#endif
