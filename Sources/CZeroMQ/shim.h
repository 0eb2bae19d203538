#ifndef CZEROMQ_SHIM_H
#define CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>

// A draft option of libzmq 4.3 (zmq.h declares it only with ZMQ_BUILD_DRAFT_API;
// Debian's libzmq5 4.3.4 accepts it): refuse a connection when no ZAP handler answers.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

// errno is a macro over a thread-local; give Swift one call that reads it.
static inline int czmq_errno(void) { return zmq_errno(); }
#endif
