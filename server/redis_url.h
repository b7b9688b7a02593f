/*
 * redis_url.h - parses redis://[user:password@]host:port[/db] into its parts.
 * Used by every Redis-based backend. Pure, any thread.
 */
#ifndef LOCKD_SERVER_REDIS_URL_H
#define LOCKD_SERVER_REDIS_URL_H

#include <stddef.h>

#include "server/util.h"

struct redis_url {
    char host[256];     /* without IPv6 brackets */
    int port;           /* default 6379 */
    int db;             /* default 0 */
    char user[128];     /* "" = the default user */
    char password[256]; /* "" = no AUTH */
};

/* Fills u from s (user and password may be percent-encoded). Returns LK_OK,
 * or LK_INVALID with one line in err that never repeats the password. */
enum lk_code redis_url_parse(const char *s, struct redis_url *u, char *err, size_t errlen) LK_WUR;

/* Parses the comma-separated URLs of the `redis` key into out[0..max) and
 * sets *n. More than max is LK_INVALID naming `what` ("backend redlock");
 * the same for a URL that does not parse. The caller wipes out (passwords). */
enum lk_code redis_url_parse_list(const char *urls, struct redis_url *out, size_t max, size_t *n,
                                  const char *what, char *err, size_t errlen) LK_WUR;

#endif
