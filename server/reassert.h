/*
 * reassert.h - keeping locks through a Redis that restarted empty or was
 * replaced by a replica (issue 25; Chubby's master fail-over grace). One per
 * Redis lock layer (backend_redis.c), so per node: Sentinel's one, each
 * of Redlock's, each Cluster primary's. It records the live leases the layer granted (grant_log.h);
 * when the node layer reports another Redis process (rn_node_set_restart) it
 * holds back grants, renewals and releases, re-asserts every recorded lease
 * on that Redis in batches (reassert.lua: same lease, same token, what is
 * left of its ttl, the fence counter raised, never over another holder), and
 * when data was lost keeps refusing new grants for restart_grace_ms after.
 * docs/architecture.md "Restarts". Threads: the hook on a loop thread under
 * the node's mutex; ra_ready on the loop of a lock-layer connection; the
 * gates on any thread (atomics).
 */
#ifndef LOCKD_SERVER_REASSERT_H
#define LOCKD_SERVER_REASSERT_H

#include <stdbool.h>
#include <stdint.h>

#include "server/util.h"

struct reassert;
struct rn_node;
struct rn_conn;
struct rn_script;
struct glog;
struct lk_config;

/* For the lock layer on node n whose keys start with prefix; script is
 * reassert.lua (owned by the caller, outliving this). Sets the node's
 * restart hook. Main thread, before any connection to n exists. */
struct reassert *ra_new(struct rn_node *n, const struct lk_config *cfg, const char *prefix,
                        const struct rn_script *script, bool cluster);
void ra_free(struct reassert *ra);
/* The grants table the lock layer records into. */
struct glog *ra_log(struct reassert *ra);

/* A lock-layer connection is ready (hooks.ready): starts the re-assertion
 * a restart asked for, on c, before anything that waited goes out. */
void ra_ready(struct reassert *ra, struct rn_conn *c);

/* Cluster: the slot (the primary's lowest, from the router's map) whose
 * marker and grace keys stand for the node's; -1 none. Any thread. */
void ra_set_probe_slot(struct reassert *ra, int slot);

/* A run asked for (ra_adopt) while c was ready already: starts it on c
 * (its loop's thread), as ra_ready would. Cheap when nothing is asked. */
void ra_kick(struct reassert *ra, struct rn_conn *c);

/* Cluster (redis_cluster.c): the slots whose names pick accepts now belong
 * to to's primary: from's records of those names move to to's table and,
 * with failover (from's primary is down: its replica took over), to's
 * primary re-asserts them as after a restart at a new address (grants held
 * back, then the grace). Any thread but a loop's. */
typedef bool (*ra_pick_fn)(void *arg, const char *name, size_t len);
void ra_adopt(struct reassert *to, struct reassert *from, ra_pick_fn pick, void *arg,
              bool failover);

/* Whether an operation may go to Redis now: LK_OK, or LK_BACKEND_RECOVERING
 * (*retry_ms: when to ask again). grant: an acquire (or a ping, so that
 * /readyz says recovering): refused while re-asserting and through the
 * grace. Other lock operations (renew, release, the watchdog's batch):
 * refused only while re-asserting, so a lease not yet put back is not
 * reported gone. */
enum lk_code ra_gate(struct reassert *ra, bool grant, int64_t *retry_ms);
/* Whether the node is re-asserting or in its grace now (for nodes()). */
bool ra_recovering(struct reassert *ra);

#endif
