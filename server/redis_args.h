/*
 * redis_args.h - building Redis commands: an argv in one growing buffer
 * (struct rargs), hash-tagged keys, and the RESP encoding of an argv. Pure
 * helpers, no I/O; any thread, each builder used by one thread at a time.
 */
#ifndef LOCKD_SERVER_REDIS_ARGS_H
#define LOCKD_SERVER_REDIS_ARGS_H

#include <stdbool.h>
#include <stddef.h>

/* An argv under construction: one buffer, offsets and lengths. Zero it to
 * start; rargs_free() (or taking buf/off/lens over) to end. Each argument
 * is also NUL-terminated in buf. */
struct rargs {
    char *buf;
    size_t len, cap;
    size_t *off, *lens;
    int n, ncap;
};

void rargs_put(struct rargs *b, const char *s, size_t len);
void rargs_str(struct rargs *b, const char *s);
void rargs_int(struct rargs *b, long long v);
/* Extends the last argument by s (one argument of several parts). */
void rargs_append(struct rargs *b, const char *s, size_t len);
/* <prefix><infix>{<name>}<suffix>: the {name} hash tag keeps every key of
 * one name in one Redis Cluster slot. */
void rargs_tagged(struct rargs *b, const char *prefix, size_t prefix_len, const char *infix,
                  const char *name, const char *suffix);
void rargs_free(struct rargs *b);

/* Formats argv as a RESP array into a per-thread buffer, or a heap block
 * (*heap true: the caller frees it) when large. Returns the bytes, *len
 * their count. Valid until the thread's next call. */
char *rargs_resp(int argc, const char *const *argv, const size_t *argvlen, size_t *len, bool *heap);

#endif
