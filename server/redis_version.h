/*
 * redis_version.h - the oldest Redis lockd's scripts run on, read from the
 * answer to INFO server. Pure, any thread.
 */
#ifndef LOCKD_SERVER_REDIS_VERSION_H
#define LOCKD_SERVER_REDIS_VERSION_H

#include <stdbool.h>
#include <stddef.h>

/* The scripts take a lock with SET ... NX GET, which Redis 7.0 brought. */
#define REDIS_MIN_MAJOR 7
#define REDIS_MIN_MINOR 0

/* Reads redis_version from info (INFO server's text) into version (at most
 * cap - 1 bytes, "" when the field is missing). Returns false only when a
 * version is there and older than REDIS_MIN_MAJOR.REDIS_MIN_MINOR: a reply
 * without one (another server, a trimmed INFO) is not refused. */
bool redis_version_ok(const char *info, char *version, size_t cap);

/* Copies the value of field key (e.g. "run_id") of an INFO answer into out
 * (at most cap - 1 bytes). Returns false, out "", when the field is missing. */
bool redis_info_field(const char *info, const char *key, char *out, size_t cap);

#endif
