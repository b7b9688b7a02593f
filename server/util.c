/*
 * util.c - allocators that abort on OOM (leases expire at their TTL when lockd
 * dies, a tested fault), clocks, RFC 3339, randomness, name validation.
 */
#include "server/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* One name per code, for logs (and a session's "lost" reasons). Domain
 * results use the API's error string; input codes their own name, so a log
 * tells LK_BAD_CURSOR from LK_INVALID where the API says invalid_field for
 * both. */
const char *lk_code_name(enum lk_code code)
{
    switch (code) {
    case LK_OK: return "ok";
    case LK_AGAIN: return "again";
    case LK_INTERNAL: return "internal";
    case LK_INVALID: return "invalid";
    case LK_INVALID_JSON: return "invalid_json";
    case LK_UNKNOWN_FIELD: return "unknown_field";
    case LK_INVALID_NAME: return "invalid_name";
    case LK_CONFLICTING_LEASE: return "conflicting_lease";
    case LK_BAD_CURSOR: return "bad_cursor";
    case LK_BODY_TOO_LARGE: return "body_too_large";
    case LK_UNAUTHORIZED: return "unauthorized";
    case LK_FORBIDDEN: return "forbidden";
    case LK_NO_ROUTE: return "no_route";
    case LK_METHOD_NOT_ALLOWED: return "method_not_allowed";
    case LK_CANCELLED: return "cancelled";
    case LK_LOCKED: return "locked";
    case LK_HELD_BY_OTHER: return "held_by_other";
    case LK_NOT_HELD: return "not_held";
    case LK_SESSION_NOT_FOUND: return "session_not_found";
    case LK_TOO_MANY_SESSIONS: return "too_many_sessions";
    case LK_LIMIT_MISMATCH: return "limit_mismatch";
    case LK_UNSUPPORTED: return "unsupported_by_backend";
    case LK_BACKEND_DOWN: return "backend_unavailable";
    case LK_SHUTTING_DOWN: return "shutting_down";
    case LK_BAD_REQUEST: return "bad_request";
    case LK_HEADERS_TOO_LARGE: return "headers_too_large";
    case LK_HTTP_VERSION: return "http_version_not_supported";
    case LK_BACKEND_RECOVERING: return "backend_recovering";
    case LK_TOO_MANY_LOCKS: return "too_many_locks";
    case LK_CODE_COUNT: break;
    }
    return "unknown";
}

static void oom(size_t n)
{
    fprintf(stderr, "{\"level\":\"fatal\",\"msg\":\"out of memory allocating %zu bytes\"}\n", n);
    abort();
}

void *lk_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *lk_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *lk_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *lk_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = lk_malloc(n);
    memcpy(p, s, n);
    return p;
}

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t lk_now_ms(void)
{
    return clock_us(CLOCK_MONOTONIC) / 1000;
}
int64_t lk_now_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}
int64_t lk_wall_ms(void)
{
    return clock_us(CLOCK_REALTIME) / 1000;
}
int64_t lk_wall_us(void)
{
    return clock_us(CLOCK_REALTIME);
}

size_t lk_itoa(int64_t v, char out[24])
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324"
                                   "25262728293031323334353637383940414243444546474849"
                                   "50515253545556575859606162636465666768697071727374"
                                   "75767778798081828384858687888990919293949596979899";
    char b[24];
    char *e = b + sizeof(b), *q = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) { /* two digits per division */
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        *--q = pairs[d + 1];
        *--q = pairs[d];
    }
    if (u >= 10) {
        *--q = pairs[u * 2 + 1];
        *--q = pairs[u * 2];
    } else {
        *--q = (char)('0' + u);
    }
    if (v < 0)
        *--q = '-';
    size_t n = (size_t)(e - q);
    memcpy(out, q, n);
    out[n] = '\0';
    return n;
}

void lk_rfc3339(int64_t wall_ms, char out[32])
{
    /* Per thread, the "YYYY-MM-DDTHH:MM:SS" of the last second formatted:
     * grants within one second cost a copy, not gmtime_r + snprintf. */
    static __thread int64_t cached_sec = INT64_MIN;
    static __thread char prefix[24];
    int64_t sec = wall_ms / 1000;
    int ms = (int)(wall_ms % 1000);
    if (sec != cached_sec) {
        time_t secs = (time_t)sec;
        struct tm tm;
        gmtime_r(&secs, &tm);
        char buf[96];
        snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        memcpy(prefix, buf, 19);
        prefix[19] = '\0';
        cached_sec = sec;
    }
    memcpy(out, prefix, 19);
    out[19] = '.';
    out[20] = (char)('0' + ms / 100);
    out[21] = (char)('0' + ms / 10 % 10);
    out[22] = (char)('0' + ms % 10);
    out[23] = 'Z';
    out[24] = '\0';
}

void lk_random_hex(char *out, size_t nbytes)
{
    /* Per thread, 4 KiB from getrandom(2) at a time: 256 leases per system
     * call. The bytes are the kernel's CSPRNG output, used once each. */
    static __thread unsigned char pool[4096];
    static __thread size_t avail;
    static const char hex[] = "0123456789abcdef";
    if (nbytes > 64)
        nbytes = 64;
    if (avail < nbytes) {
        size_t got = 0;
        while (got < sizeof(pool)) {
            ssize_t r = getrandom(pool + got, sizeof(pool) - got, 0);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                abort(); /* no entropy: a guessable lease is worse than no lockd */
            }
            got += (size_t)r;
        }
        avail = sizeof(pool);
    }
    const unsigned char *buf = pool + sizeof(pool) - avail;
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[buf[i] >> 4];
        out[2 * i + 1] = hex[buf[i] & 15];
    }
    memset(pool + sizeof(pool) - avail, 0, nbytes); /* never hand out twice */
    avail -= nbytes;
    out[2 * nbytes] = '\0';
}

/* The bytes of a name: [A-Za-z0-9._:-]. */
static const bool name_byte[256] = {
    ['-'] = 1, ['.'] = 1, [':'] = 1, ['_'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1,
    ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['A'] = 1, ['B'] = 1,
    ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1,
    ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

bool lk_name_valid(const char *s, size_t len)
{
    if (len == 0 || len > LK_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_byte[(unsigned char)s[i]])
            return false;
    return true;
}

size_t lk_strlcpy(char *dst, const char *src, size_t n)
{
    size_t len = strlen(src);
    size_t k = len < n ? len : n - 1;
    memcpy(dst, src, k);
    dst[k] = '\0';
    return len;
}

void lk_pair_put(char *dst, const char *a, size_t alen, const char *b, size_t blen)
{
    memcpy(dst, a, alen);
    dst[alen] = '\0';
    memcpy(dst + alen + 1, b, blen);
    dst[alen + 1 + blen] = '\0';
}

const char *lk_pair_second(const char *pair)
{
    return pair + strlen(pair) + 1;
}

int lk_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool lk_streq_ct(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}
