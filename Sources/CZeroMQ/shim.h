#ifndef CZEROMQ_SHIM_H
#define CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>

// A draft option of libzmq 4.3 (zmq.h declares it only with ZMQ_BUILD_DRAFT_API;
// Debian's libzmq5 4.3.4 accepts it): refuse a connection when no ZAP handler answers.
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

// ioctl(2) is variadic, which Swift cannot call: the bytes a connected socket
// (libzmq's, by the descriptor its monitor reports) has not yet had taken by its
// peer (SIOCOUTQ, the same request as TIOCOUTQ, tcp(7) and unix(7)); -1 on error.
#include <sys/ioctl.h>
static inline int czmq_socket_unsent_bytes(int fd) {
    int bytes = 0;
    return ioctl(fd, TIOCOUTQ, &bytes) == 0 ? bytes : -1;
}

// errno is a macro over a thread-local; give Swift one call that reads it.
static inline int czmq_errno(void) { return zmq_errno(); }
#endif
