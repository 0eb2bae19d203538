// libpq, PostgreSQL's C client (https://www.postgresql.org/docs/15/libpq.html), for the chain
// store: connections with TLS verified by libpq itself (sslmode=verify-full), parameterised
// statements, transactions.
#include <libpq-fe.h>
