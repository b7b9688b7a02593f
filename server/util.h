/*
 * util.h - the one result enum, aborting allocators, clocks and small helpers
 * shared by every module. Safe to call from any thread.
 */
#ifndef LOCKD_SERVER_UTIL_H
#define LOCKD_SERVER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LK_WUR __attribute__((warn_unused_result))

/* One result code across the project; api/errors.c alone maps each to an
 * HTTP status, an error string and a default message (one table). Each code
 * means one thing. */
enum lk_code {
    LK_OK = 0,
    LK_AGAIN,    /* parked: the callback runs later on the same loop */
    LK_INTERNAL, /* a bug or a broken invariant: 500 */
    /* input, rejected at the edge before anything changes */
    LK_INVALID,           /* a field's value (invalid_field); also a bad config */
    LK_INVALID_JSON,      /* the body is not a JSON object */
    LK_UNKNOWN_FIELD,     /* a body field or query parameter lockd does not know */
    LK_INVALID_NAME,      /* a lock name outside [A-Za-z0-9._:-]{1,255} */
    LK_CONFLICTING_LEASE, /* the lease sent twice, differently */
    LK_BAD_CURSOR,        /* a list cursor this lockd did not give out */
    LK_BODY_TOO_LARGE,    /* over max_body_bytes */
    LK_UNAUTHORIZED,      /* auth on, no valid bearer token */
    LK_FORBIDDEN,         /* an operator call without an admin token */
    LK_NO_ROUTE,          /* no route for the path */
    LK_METHOD_NOT_ALLOWED,
    LK_CANCELLED, /* the client left before it was answered (logged as 499) */
    /* domain results */
    LK_LOCKED,        /* acquire not granted */
    LK_HELD_BY_OTHER, /* renew/release: another lease holds the lock */
    LK_NOT_HELD,      /* renew/release: nobody holds the lock */
    LK_SESSION_NOT_FOUND,
    LK_TOO_MANY_SESSIONS, /* max_sessions live already */
    LK_LIMIT_MISMATCH,    /* holders of the name use another limit */
    LK_UNSUPPORTED,       /* the backend cannot do this (a mode, a limit) */
    LK_BACKEND_DOWN,      /* never a grant on doubt: answered 503 */
    LK_SHUTTING_DOWN,
    /* answers libmicrohttpd makes before a handler runs (api/http_own.c) */
    LK_BAD_REQUEST,        /* not HTTP lockd can read: request line, Host, chunks */
    LK_HEADERS_TOO_LARGE,  /* request line and headers over 8 KiB */
    LK_HTTP_VERSION,       /* neither HTTP/1.0 nor HTTP/1.1 */
    LK_BACKEND_RECOVERING, /* a Redis lost its data: no new grant until re-asserted + grace */
    LK_TOO_MANY_LOCKS,     /* max_locks leases recorded for re-assertion already */
    LK_CODE_COUNT
};

const char *lk_code_name(enum lk_code code);

void *lk_malloc(size_t n);
void *lk_calloc(size_t n, size_t size);
void *lk_realloc(void *p, size_t n);
char *lk_strdup(const char *s);

/* Monotonic milliseconds / microseconds for deadlines. */
int64_t lk_now_ms(void);
int64_t lk_now_us(void);
/* Wall clock, only for expires_at and for seeding fencing tokens. */
int64_t lk_wall_ms(void);
int64_t lk_wall_us(void);

/* Writes v in decimal plus a NUL (at most 21 bytes); returns the length.
 * The hot paths' "%lld" without snprintf. */
size_t lk_itoa(int64_t v, char out[24]);

/* Formats unix milliseconds as RFC 3339 UTC with ms ("2026-11-22T01:02:03.456Z"). */
void lk_rfc3339(int64_t wall_ms, char out[32]);

/* Fills out with 2*nbytes hex chars + NUL from getrandom(2). */
void lk_random_hex(char *out, size_t nbytes);

/* Lock names: 1..255 bytes of [A-Za-z0-9._:-]. */
#define LK_NAME_MAX 255
bool lk_name_valid(const char *s, size_t len);

#define LK_LEASE_LEN 32 /* 128 random bits, hex */
#define LK_OWNER_MAX 128
#define LK_SESSION_LEN 32

/* Copies src into dst of size n (n > 0), cut to fit, always NUL-terminated;
 * returns strlen(src). */
size_t lk_strlcpy(char *dst, const char *src, size_t n);

/* A record with two strings of its own (a lock's name and owner) keeps them
 * in its trailing char[]: "a\0b\0". LK_PAIR_SIZE is the bytes they need,
 * lk_pair_put writes them, lk_pair_second reads b back. */
#define LK_PAIR_SIZE(alen, blen) ((alen) + 1 + (blen) + 1)
void lk_pair_put(char *dst, const char *a, size_t alen, const char *b, size_t blen);
const char *lk_pair_second(const char *pair);

/* Value of one hex digit (either case), or -1. */
int lk_hexval(char c);

/* Constant-time equality of two NUL-terminated strings. */
bool lk_streq_ct(const char *a, const char *b);

#endif
