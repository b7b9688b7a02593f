/*
 * redis_lock.h - the Redis lock layer (backend_redis.c) as a part other
 * backends build on: one lock layer over one node, opened from a parsed
 * URL, with the `redis` backend's operations, plus the one operation only
 * Redlock needs (raising a name's fence counter: its write-back). The
 * `redlock` backend (backend_redlock.c) is a quorum combinator over N of
 * these, each on its own node layer. docs/architecture.md.
 */
#ifndef LOCKD_SERVER_REDIS_LOCK_H
#define LOCKD_SERVER_REDIS_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/backend.h"

struct redis_url;
struct lk_config;
struct lk_loop;
struct rn_node;
struct reassert;

/* Opens one lock layer on url (the node is probed now: an unreachable one is
 * not an error, it is down until it answers): a backend named "redis" with
 * the redis backend's ops, its own subscriber thread and instance id. Uses
 * cfg's key_prefix, backend_timeout_ms and redis_wait_replicas. On failure
 * one line in err and LK_INVALID, LK_INTERNAL or LK_BACKEND_DOWN. Main thread. */
enum lk_code redis_lock_open(const struct redis_url *url, const struct lk_config *cfg,
                             struct backend *out, char *err, size_t errlen) LK_WUR;

/* redis_lock_open for one primary of a Redis Cluster when cluster is true
 * (redis_cluster.c): its scripts publish release wake-ups with SPUBLISH and
 * its subscriber uses SSUBSCRIBE; grouped acquires and releases go as one
 * call per slot; a Redis error that answers an operation LK_BACKEND_DOWN
 * is in bk_res.refusal (MOVED, ASK, TRYAGAIN, CLUSTERDOWN). */
enum lk_code redis_lock_open_cluster(const struct redis_url *url, const struct lk_config *cfg,
                                     bool cluster, struct backend *out, char *err,
                                     size_t errlen) LK_WUR;

/* The ops' submit, with every command it makes sent alone right behind an
 * ASKING on the same connection (Redis Cluster's ASK redirection). As
 * submit: the completion contract of backend.h, on lp's thread. */
enum lk_code redis_lock_submit_asking(void *state, struct lk_loop *lp, const struct bk_req *req,
                                      bk_done_fn done, void *arg);

/* The node the lock layer runs on (the sentinel backend moves it to the
 * primary the sentinels name). state is what redis_lock_open put in
 * out->state. Any thread. */
struct rn_node *redis_lock_node(void *state);
/* Its re-assertion of leases after a restart (reassert.h): the cluster
 * router hands it the leases of slots it took over. Any thread. */
struct reassert *redis_lock_reassert(void *state);

/* BK_ACQUIRE as the ops' submit does it (acquire.lua, or acquire_shared.lua
 * for a shared hold), with now_us as the token's floor instead of this
 * call's own clock: Redlock gives all its nodes one, so nodes whose
 * counters agree grant one token. */
enum lk_code redis_lock_acquire(void *state, struct lk_loop *lp, const struct bk_req *req,
                                int64_t now_us, bk_done_fn done, void *arg);

/* Makes the lock layer a Redlock node's (before any operation; main
 * thread): a shared acquire's floor is then now_us rounded up to a
 * multiple of modulus, and a fence counter that ran past it steps to the
 * next value with residue (1 .. modulus - 1; sh_step in _shared.lua), so
 * that no two shared grants get one token while uncontended nodes still
 * vote alike. Redlock gives node i of its list residue i + 1; modulus 1
 * (the default) keeps tokens as one Redis grants them. backend_redlock.c
 * says why. */
void redis_lock_set_vote(void *state, int residue, int modulus);

/* Raises name's fence counter to at least token (never lowers it) and, when
 * lease still holds name here, gives its lock (a shared holder: its own
 * hold) that token (fence_raise.lua).
 * done gets LK_OK (the lease holds here), LK_NOT_HELD (the counter was
 * raised, the lease does not hold the name here) or LK_BACKEND_DOWN, with
 * the completion contract of backend.h. state is what redis_lock_open put
 * in out->state; on lp's thread. */
enum lk_code redis_lock_fence_raise(void *state, struct lk_loop *lp, const char *name,
                                    const char *lease, int64_t token, bk_done_fn done, void *arg);

/* Deletes name's lock (a shared holder: its hold) if lease holds it,
 * publishing nothing (undo.lua):
 * Redlock gives back a grant that missed the majority. done gets LK_OK
 * (deleted), LK_NOT_HELD or LK_BACKEND_DOWN. As redis_lock_fence_raise. */
enum lk_code redis_lock_undo(void *state, struct lk_loop *lp, const char *name, const char *lease,
                             bk_done_fn done, void *arg);

/* Listing cursors of the lock layer: '<where>~<check>', where the walk is
 * (list.lua's position: '<SCAN cursor>' or '<SCAN cursor>:<span end>:<name
 * to resume after>') and 12 hex digits of SHA-1 over the key prefix and
 * it, so that a cursor no lockd of this prefix gave out is LK_BAD_CURSOR.
 * Pure, any thread; fuzzed by tests/fuzz/fuzz_cursor.c. */
#define REDIS_CURSOR_MAX (LK_NAME_MAX + 64)
struct redis_list_pos {
    char scan[21];               /* SCAN cursor, "0" for the start */
    char stop[21];               /* "" or the span end */
    char after[LK_NAME_MAX + 1]; /* "" or a lock name */
};
/* The cursor for where (list.lua's answer) into out; false when there is
 * none to give: where is "0" (the walk is over) or too long. */
bool redis_list_cursor(const char *prefix, const char *where, char out[REDIS_CURSOR_MAX]);
/* Reads a cursor a client sent back (NULL or "" for the start) into pos;
 * false when no lockd of prefix gave it out. */
bool redis_list_cursor_open(const char *prefix, const char *cursor, struct redis_list_pos *pos);

#endif
