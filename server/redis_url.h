/*
 * redis_url.h - parses redis://[user:password@]host:port[/db] into its parts.
 * Used by the Redis backend (and later Redlock). Pure, any thread.
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

#endif
