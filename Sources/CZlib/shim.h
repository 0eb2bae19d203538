// zlib's gzip file functions (https://zlib.net/manual.html, "Gzip File Access
// Functions"), for compressed recordings.
#include <zlib.h>
