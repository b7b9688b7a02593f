/*
 * sha1.h - SHA-1 of a buffer, as lowercase hex. Only for naming Lua scripts
 * (their Function names), never for anything that needs to be secret.
 * Pure function, any thread.
 */
#ifndef LOCKD_SERVER_SHA1_H
#define LOCKD_SERVER_SHA1_H

#include <stddef.h>

/* Writes 40 hex chars + NUL into out. */
void sha1_hex(const void *data, size_t len, char out[41]);

#endif
