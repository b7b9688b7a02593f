/*
 * grant_log.h - the leases one Redis lock layer granted that are still live,
 * kept so that they can be re-asserted on a Redis that restarted empty or
 * was replaced by a replica that lacked them (server/reassert.c). One table
 * per node, one record per (lease, name); bounded by max_locks. Any
 * thread: striped mutexes, each a leaf.
 * A record costs ≈ 58 bytes with a 16-byte name, the index included
 * (tests/unit/test_grant_log.c measures it, and holds it to ≤ 60). The
 * engine keeps one more, of the plain (not session-bound) leases it
 * granted, for lockd_locks_held and lockd_lock_hold_seconds (engine.c):
 * there `token` holds the grant's time.
 */
#ifndef LOCKD_SERVER_GRANT_LOG_H
#define LOCKD_SERVER_GRANT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct glog;

/* A grant as the lock layer records it (borrowed strings). */
struct gl_grant {
    const char *name;
    const char *lease; /* 32 lowercase hex digits; anything else is not recorded */
    const char *owner;
    size_t owner_len;
    int64_t token;
    int64_t ttl_ms;     /* the ttl it was given (its renewals' default) */
    int64_t expires_ms; /* monotonic */
    bool sb;            /* session-bound */
    bool shared;        /* a shared hold: a reader (limit 1) or a semaphore's slot */
    int limit;          /* the name's limit (1..10000; 1 for a reader) */
};

/* One lease as re-assertion needs it (a copy). */
struct gl_item {
    char lease[33];
    int64_t token;
    int64_t left_ms; /* what is left of its ttl (>= 1) */
    int64_t ttl_ms;  /* the ttl it was last given (its renewals' default) */
    bool sb;         /* session-bound */
    bool shared, reader;
    int limit;
    int slot;   /* the cluster slot of the name (reassert.c fills it in) */
    char *name; /* malloc'd "name\0owner\0"; owner is lk_pair_second(name) */
};

struct glog *glog_new(int64_t max);
void glog_free(struct glog *g);
/* Whether max leases are recorded already (the next grant is refused). */
bool glog_full(struct glog *g);
/* Whether n more records fit under max (a multi-lock records one per name,
 * a group of readers one per reader). */
bool glog_room(struct glog *g, size_t n);
size_t glog_count(struct glog *g);
/* Records a grant. Replaces a record of the same lease and name. Records
 * are keyed by (lease, name): a multi-lock's members share one lease. */
void glog_put(struct glog *g, const struct gl_grant *gr);
/* A renewal of lease on name: ttl_ms (0 = the last one) from start_ms
 * (monotonic). */
void glog_renew(struct glog *g, const char *lease, const char *name, int64_t ttl_ms,
                int64_t start_ms);
/* Redlock's fence write-back gave lease on name another token. */
void glog_token(struct glog *g, const char *lease, const char *name, int64_t token);
/* lease on name is gone (released, undone, lost). */
void glog_drop(struct glog *g, const char *lease, const char *name);
/* As glog_drop, telling whether it was recorded and, if so, its token. */
bool glog_take(struct glog *g, const char *lease, const char *name, int64_t *token);
/* Drops every record of name (an operator's force-unlock); how many. A walk
 * of the whole table: for rare calls only. */
size_t glog_drop_name(struct glog *g, const char *name);
/* Copies every lease still live at now (monotonic); *n gets how many. The
 * caller frees with glog_items_free. */
struct gl_item *glog_snapshot(struct glog *g, int64_t now, size_t *n);
void glog_items_free(struct gl_item *it, size_t n);
/* Moves every record of from whose name pick accepts (name: len bytes, not
 * NUL-terminated) into to; returns how many. The cluster backend hands a
 * primary's leases of the slots another primary took over to that one's
 * table. Any thread; takes one mutex at a time. */
typedef bool (*glog_pick_fn)(void *arg, const char *name, size_t len);
size_t glog_move(struct glog *from, struct glog *to, glog_pick_fn pick, void *arg);
/* Drops expired records of one stripe (round robin): the janitor calls it
 * every tick, so the whole table is swept about once a second. Returns how
 * many it dropped. */
size_t glog_sweep(struct glog *g, int64_t now);

#endif
