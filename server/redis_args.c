/*
 * redis_args.c - argv builders and the RESP encoding of a command (see
 * redis_args.h). One pass, no allocation on the hot path beyond the
 * builder's own buffer.
 */
#include "server/redis_args.h"

#include <stdlib.h>
#include <string.h>

#include "server/util.h"

/* Room for need bytes in b's buffer. */
static void rargs_reserve(struct rargs *b, size_t need)
{
    if (need > b->cap) {
        while (need > b->cap)
            b->cap = b->cap ? b->cap * 2 : 512;
        b->buf = lk_realloc(b->buf, b->cap);
    }
}

void rargs_put(struct rargs *b, const char *s, size_t len)
{
    rargs_reserve(b, b->len + len + 1);
    if (b->n == b->ncap) {
        b->ncap = b->ncap ? b->ncap * 2 : 16;
        b->off = lk_realloc(b->off, (size_t)b->ncap * sizeof(*b->off));
        b->lens = lk_realloc(b->lens, (size_t)b->ncap * sizeof(*b->lens));
    }
    memcpy(b->buf + b->len, s, len);
    b->buf[b->len + len] = '\0'; /* hiredis replies aside, keys double as C strings */
    b->off[b->n] = b->len;
    b->lens[b->n] = len;
    b->n++;
    b->len += len + 1;
}

void rargs_str(struct rargs *b, const char *s)
{
    rargs_put(b, s, strlen(s));
}

void rargs_int(struct rargs *b, long long v)
{
    char tmp[24];
    rargs_put(b, tmp, lk_itoa(v, tmp));
}

/* The scripts take such an argument whole: each argument costs Redis a Lua
 * string. */
void rargs_append(struct rargs *b, const char *s, size_t len)
{
    rargs_reserve(b, b->len + len);
    memcpy(b->buf + b->len - 1, s, len); /* over the last argument's '\0' */
    b->len += len;
    b->buf[b->len - 1] = '\0';
    b->lens[b->n - 1] += len;
}

void rargs_tagged(struct rargs *b, const char *prefix, size_t prefix_len, const char *infix,
                  const char *name, const char *suffix)
{
    size_t nl = strlen(name), sl = strlen(suffix), il = strlen(infix);
    char tmp[512]; /* prefix and name are bounded; larger keys take the heap */
    size_t len = prefix_len + il + nl + sl + 2;
    char *k = len <= sizeof(tmp) ? tmp : lk_malloc(len);
    char *o = k;
    memcpy(o, prefix, prefix_len);
    o += prefix_len;
    memcpy(o, infix, il);
    o += il;
    *o++ = '{';
    memcpy(o, name, nl);
    o += nl;
    *o++ = '}';
    memcpy(o, suffix, sl);
    rargs_put(b, k, len);
    if (k != tmp)
        free(k);
}

void rargs_free(struct rargs *b)
{
    free(b->buf);
    free(b->off);
    free(b->lens);
    memset(b, 0, sizeof(*b));
}

/* Ours is one pass with no allocation, where redisAsyncCommandArgv builds an
 * sds per argument; hiredis copies the result into its output buffer. */
char *rargs_resp(int argc, const char *const *argv, const size_t *argvlen, size_t *len, bool *heap)
{
    static __thread char small[16384]; /* no heap block outlives a thread */
    size_t need = 16;
    for (int i = 0; i < argc; i++)
        need += argvlen[i] + 24;
    *heap = need > sizeof(small);
    char *buf = *heap ? lk_malloc(need) : small;
    char *p = buf;
    *p++ = '*';
    p += lk_itoa(argc, p);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        *p++ = '$';
        p += lk_itoa((int64_t)argvlen[i], p);
        *p++ = '\r';
        *p++ = '\n';
        memcpy(p, argv[i], argvlen[i]);
        p += argvlen[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    *len = (size_t)(p - buf);
    return buf;
}
