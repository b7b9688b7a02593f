/*
 * redis_pubsub.h - release notifications over Redis pub/sub: a thread of
 * its own with one subscriber connection (a node-layer rn_conn) that
 * subscribes to a lock's release channel while lockd has waiters for it
 * (and a second after, redis_pubsub.c RPS_LINGER_MS), and hands each release message (and each
 * subscription confirmation) to a hook. Knows the channel's name format, nothing else of locks.
 */
#ifndef LOCKD_SERVER_REDIS_PUBSUB_H
#define LOCKD_SERVER_REDIS_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>

#include "server/backend.h"

struct rn_node;
struct rps;

/* A lock's release channel is <prefix>RPS_CHANNEL_INFIX{<name>}; a message
 * on it carries the publisher's instance id (or anything else: "-"). */
#define RPS_CHANNEL_INFIX "released:"
#define RPS_SUB_CHUNK 256 /* channels per SUBSCRIBE after a reconnect */

/* Starts the subscriber thread on node (which must outlive it). prefix and
 * instance are copied; messages from instance are our own and ignored.
 * NULL if the thread cannot start. Main thread. */
struct rps *rps_new(struct rn_node *node, const char *prefix, const char *instance);
/* rps_new, and with sharded true for a Redis Cluster primary: shard
 * channels (SSUBSCRIBE, one command per channel), whose SPUBLISHed
 * messages stay on their shard. */
struct rps *rps_new_sharded(struct rn_node *node, const char *prefix, const char *instance,
                            bool sharded);
/* Stops the thread and frees. Main thread. */
void rps_free(struct rps *ps);
/* Counts a watcher of name up (on) or down; subscribed while above 0 (and
 * a second after, at most RPS_LINGER_MAX names). Any thread. */
void rps_watch(struct rps *ps, const char *name, bool on);
/* fn(arg, name) runs on the subscriber thread. Any thread. */
void rps_set_hook(struct rps *ps, bk_release_fn fn, void *arg);

#endif
