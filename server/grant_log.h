/*
 * grant_log.h - the leases one Redis lock layer granted that are still live,
 * kept so that they can be re-asserted on a Redis that restarted empty or
 * was replaced by a replica that lacked them (server/reassert.c). One table
 * per node; bounded by max_locks. Any thread: striped mutexes, each a leaf.
 * The engine keeps one more, of the plain (not session-bound) leases it
 * granted, for lockd_locks_held and lockd_lock_hold_seconds (engine.c).
 */
#ifndef LOCKD_SERVER_GRANT_LOG_H
#define LOCKD_SERVER_GRANT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct glog;

/* One lease as re-assertion needs it (a copy). */
struct gl_item {
    char lease[33];
    int64_t token;
    int64_t left_ms; /* what is left of its ttl (>= 1) */
    int64_t ttl_ms;  /* the ttl it was last given (its renewals' default) */
    bool sb;         /* session-bound */
    char *name;      /* malloc'd "name\0owner\0"; owner is lk_pair_second(name) */
};

struct glog *glog_new(int64_t max);
void glog_free(struct glog *g);
/* Whether max leases are recorded already (the next grant is refused). */
bool glog_full(struct glog *g);
size_t glog_count(struct glog *g);
/* Records a grant: rest is the lock value's tail '<sb> <ttl_ms> <owner>'
 * (rlen bytes); expires_ms is monotonic. Replaces a record of the same lease. */
void glog_put(struct glog *g, const char *name, const char *lease, int64_t token, const char *rest,
              size_t rlen, int64_t expires_ms);
/* A renewal of lease: ttl_ms (0 = the last one) from start_ms (monotonic). */
void glog_renew(struct glog *g, const char *lease, int64_t ttl_ms, int64_t start_ms);
/* Redlock's fence write-back gave lease another token. */
void glog_token(struct glog *g, const char *lease, int64_t token);
/* lease is gone (released, undone, lost). */
void glog_drop(struct glog *g, const char *lease);
/* As glog_drop, telling whether lease was recorded and, if so, when
 * (lk_now_us) glog_put recorded it. */
bool glog_take(struct glog *g, const char *lease, int64_t *granted_us);
/* Drops every record of name (an operator's force-unlock); how many. A walk
 * of the whole table: for rare calls only. */
size_t glog_drop_name(struct glog *g, const char *name);
/* Copies every lease still live at now (monotonic); *n gets how many. The
 * caller frees with glog_items_free. */
struct gl_item *glog_snapshot(struct glog *g, int64_t now, size_t *n);
void glog_items_free(struct gl_item *it, size_t n);
/* Drops expired records of one stripe (round robin): the janitor calls it
 * every tick, so the whole table is swept about once a second. Returns how
 * many it dropped. */
size_t glog_sweep(struct glog *g, int64_t now);

#endif
