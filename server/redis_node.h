/*
 * redis_node.h - the node layer: one Redis server as lockd talks to it. A
 * node (struct rn_node) holds the address, credentials and the status of
 * every connection to it; a connection (struct rn_conn) is one hiredis
 * async context owned by one loop thread: connect, AUTH/SELECT, reconnect
 * with jittered backoff, pipelining with eager writes, a deadline per
 * command, FUNCTION LOAD when Redis lost a function, WAIT after a command, and the
 * mechanics of grouping the commands of one loop turn. It knows nothing of
 * locks: a command goes in as an argv and comes back as a redisReply.
 *
 * How the Redis family builds on it (docs/architecture.md):
 *  - redis: the lock layer (backend_redis.c) over one node, one rn_conn per
 *    loop;
 *  - sentinel (redis_sentinel.c): a discovery step that asks the sentinels
 *    for the primary's address, opens the redis lock layer on it, and moves
 *    the node (rn_node_set_addr) on +switch-master or when the node reports
 *    trouble (rn_node_set_trouble: -READONLY, -LOADING, a lost connection);
 *  - cluster: a slot router holding one node per primary and, per loop, one
 *    rn_conn per node; it picks the conn by a key's slot and follows
 *    MOVED/ASK by resubmitting to another node's conn;
 *  - redlock: a quorum combinator over N lock layers (backend_redlock.c,
 *    redis_lock.h), each the redis backend's over its own node, so one
 *    rn_conn per loop per node; it answers from the majority of their
 *    results within the validity time.
 * Threads: rn_node_* status calls from any thread; everything on an rn_conn
 * (and its commands) on the conn's loop thread only.
 */
#ifndef LOCKD_SERVER_REDIS_NODE_H
#define LOCKD_SERVER_REDIS_NODE_H

#include <ev.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/util.h"

struct redis_url;
struct rargs;
struct rn_node;
struct rn_conn;
struct rn_cmd;
struct redisAsyncContext;

#define RN_BACKOFF_MIN_MS 50   /* first reconnect delay (before jitter) */
#define RN_BACKOFF_MAX_MS 1000 /* cap: a restarted Redis is found within ~1 s */
#define RN_GROUP_MAX 16        /* commands per group (one loop turn, one queue) */
#define RN_QUEUES 4            /* group queues per connection */
#define RN_ARGV_SMALL 12       /* argv entries kept inside the command */

/* A Lua script, run as a Redis Function: one library per script, named
 * (library and function alike) lk_<name>_<12 hex digits of the SHA1 of its
 * code>, so that two lockd versions on one Redis keep their own (function
 * names are global across libraries). FUNCTION LOAD once per node, FCALL per
 * call: the library's top level (its helpers) runs once, at FUNCTION LOAD,
 * not per call as an EVALSHA's would. */
struct rn_script {
    const char *name;
    char fname[64]; /* lk_<name>_<hash>: the library's and the function's name */
    size_t fname_len;
    char *lib; /* the FUNCTION LOAD text: '#!lua name=..', the code, the registration */
    size_t lib_len;
};

/* Fills s from code, a library's code defining lk_call (tools/lua2c.sh);
 * the name is computed here, so FCALL works even if Redis was down at
 * startup. allow_oom: Redis runs it while over maxmemory (the function's
 * allow-oom flag; else FCALL is refused then, before the script runs: an
 * EVAL ran, and only its first write that could grow memory failed).
 * rn_script_fini frees it. */
void rn_script_init(struct rn_script *s, const char *name, const char *code, bool allow_oom);
void rn_script_fini(struct rn_script *s);

/* ---------------------------------------------------------------- nodes */

/* A node for url (copied). Resolves the host name once, here (hiredis 0.14
 * resolves with a blocking getaddrinfo, never on a loop thread). */
struct rn_node *rn_node_new(const struct redis_url *url, int64_t timeout_ms);
/* After every connection to it was freed. */
void rn_node_free(struct rn_node *n);
/* host:port (never the password), for logs and bk_node. */
const char *rn_node_addr(const struct rn_node *n);
int64_t rn_node_timeout_ms(const struct rn_node *n);

/* Called (on any thread: a loop's, or whichever read ROLE) when the node
 * looks like it is no longer a writable primary: a connection failed, a
 * reply said -READONLY or -LOADING, ROLE named a replica. why is a short
 * reason. It must only note the fact and return (the sentinel backend wakes
 * its discovery thread). */
typedef void (*rn_trouble_fn)(void *arg, const char *why);
/* Any thread (the hook is read atomically). */
void rn_node_set_trouble(struct rn_node *n, rn_trouble_fn fn, void *arg);
/* Called when a connection finds the node is another Redis process than the
 * one lockd last talked to: its run_id (INFO server) changed since the last
 * connection (a restart, or, moved true, another server at a new address: a
 * promoted replica). Runs on the connection's loop thread under the node's
 * mutex, before that connection (or any other to the node) sends a command
 * to the new process: it must only note the fact (never call into the node
 * layer). The restart is counted (rn_node_restarts) and logged at error. */
typedef void (*rn_restart_fn)(void *arg, bool moved);
/* Turns the check on: every connection then asks INFO server in its hello and
 * sends no command before the answer. Main thread, before any connection. */
void rn_node_set_restart(struct rn_node *n, rn_restart_fn fn, void *arg);
/* Restarts seen (a run_id that changed). Any thread. */
int64_t rn_node_restarts(struct rn_node *n);
/* Counts one more (the cluster router saw a replica take over the slots of
 * a primary that went down: reassert.c's ra_adopt). Any thread. */
void rn_node_count_restart(struct rn_node *n);

/* Moves the node to host:port (a sentinel named another primary): every
 * connection drops its context for the old address and reconnects to the
 * new one at once, on its own thread. No-op when unchanged. Any thread. */
void rn_node_set_addr(struct rn_node *n, const char *host, int port);

/* Startup checks over a blocking connection (main thread, before serving):
 * AUTH, SELECT, the Redis version, SCRIPT LOAD of each script. Bad
 * credentials, database or version: LK_INVALID with one line in err; a
 * script Redis names differently: LK_INTERNAL. An unreachable node is not
 * an error: LK_OK, and the node is down until a connection comes up. */
enum lk_code rn_node_probe(struct rn_node *n, const struct rn_script *scripts, size_t nscripts,
                           char *err, size_t errlen) LK_WUR;

/* A blocking connection to host:port (not a node's: a cluster's seed or a
 * sentinel), timeout_ms for the connect and each command, AUTH with auth's
 * user and password when it has one. NULL when it cannot connect or AUTH
 * fails; role non-NULL ("sentinel") logs that failure as a warning naming
 * it. The caller owns the context (redisFree). Any thread but a loop's. */
redisContext *rn_connect_blocking(const struct redis_url *auth, const char *host, int port,
                                  int64_t timeout_ms, const char *role);

/* Whether every connection to the node is up and it takes writes; reason
 * gets why not ("" when up). Any thread. */
bool rn_node_status(struct rn_node *n, char *reason, size_t cap);

/* Reads the reply to ROLE (the readiness probe): LK_OK for a master, or
 * when Redis answered but may not say (an ACL without +role, an old
 * Redis); LK_BACKEND_DOWN for a replica (the node is then down: it refuses
 * every write) or no usable answer (r NULL or another error). */
enum lk_code rn_node_role(struct rn_node *n, const redisReply *r);

/* ---------------------------------------------------------------- connections */

struct rn_conn_hooks {
    /* The connection is (again) ready: Redis answered its hello. May be NULL. */
    void (*ready)(void *arg, struct rn_conn *c);
    /* Sends a group of n >= 2 commands queued with rn_queue(q) during one
     * loop turn, e.g. as one script call. It takes over the queue's
     * reference on each member (rn_cmd_unref each when done with it). May
     * be NULL when nothing is queued. */
    void (*group)(void *arg, struct rn_conn *c, int q, struct rn_cmd **m, int n);
    bool pubsub; /* a subscriber: no SELECT (channels ignore the database) */
};

/* A connection of node n on the loop ev; starts connecting at once. On ev's
 * thread. */
struct rn_conn *rn_conn_new(struct rn_node *n, struct ev_loop *ev, const struct rn_conn_hooks *h,
                            void *arg);
/* Answers every command still queued or waiting (no reply), then frees. On
 * the conn's thread. */
void rn_conn_free(struct rn_conn *c);
bool rn_conn_ready(const struct rn_conn *c);
struct rn_node *rn_conn_node(const struct rn_conn *c);

/* Sends a raw command whose callback hiredis may call many times
 * (SUBSCRIBE) or never (fn NULL: UNSUBSCRIBE), only while ready; the
 * caller deals with the reply as hiredis gives it. 0, or -1 when not sent. */
int rn_conn_raw(struct rn_conn *c, void (*fn)(struct redisAsyncContext *, void *, void *),
                void *priv, int argc, const char **argv, const size_t *argvlen);

/* Logs a Redis error reply, one line a second per connection at most. */
void rn_conn_log_refusal(struct rn_conn *c, const redisReply *r);

/* ---------------------------------------------------------------- commands */

/* What the node layer calls back; the owner of a command supplies them. */
struct rn_cmd_type {
    /* Redis answered (r: its reply, error replies included, after any
     * NOSCRIPT fallback), or no reply will come (r NULL: the connection went,
     * or the command could not be sent). Valid during the call only. */
    void (*reply)(struct rn_cmd *cmd, redisReply *r);
    /* The reply to the WAIT that followed it (r NULL when lost). May be NULL. */
    void (*wait_reply)(struct rn_cmd *cmd, redisReply *r);
    /* Its deadline passed first: answer the caller now. The node then drops
     * the connection if the command had gone out on it (a reply that late
     * is suspect, and so are those behind it). May be NULL. */
    void (*expire)(struct rn_cmd *cmd);
    /* Asked right before the command is written (may be NULL): false keeps it
     * from Redis, as if it could not be sent (reply(NULL) follows). The lock
     * layer holds back grants while a restarted Redis is being re-asserted. */
    bool (*may_send)(struct rn_cmd *cmd);
    /* Nothing holds the command any more (last rn_cmd_unref): the owner
     * answers its caller if it did not yet, calls rn_cmd_fini and frees it. */
    void (*settle)(struct rn_cmd *cmd);
};

/* One command. Owners embed it (as their first member, so that callbacks
 * can cast back) and set the public fields; the rest is the node layer's. */
struct rn_cmd {
    const struct rn_cmd_type *type;
    const struct rn_script *script; /* argv[0..1] = EVALSHA <sha>; NULL: a plain command */
    int64_t wait_replicas;          /* > 0: a WAIT <n> <timeout/3> follows it */
    int argc;
    const char **argv;
    size_t *argvlen;
    char *buf;      /* the arguments' bytes, freed by rn_cmd_fini */
    bool wait_lost; /* read-only: its WAIT could not be queued */
    bool expired;   /* read-only: its deadline passed */
    /* private to redis_node.c */
    struct rn_conn *conn;
    struct ev_loop *ev; /* kept apart from conn: a deferred hiredis free may outlive it */
    struct rn_cmd *next_wait;
    int refs;
    int skip_waits; /* WAIT replies that belong to an EVALSHA that got NOSCRIPT */
    bool reloaded;
    bool timing;
    ev_timer deadline;
    const char *argv_small[RN_ARGV_SMALL];
    size_t argvlen_small[RN_ARGV_SMALL];
};

/* Prepares cmd for conn c (NULL: no connection, every send fails) with one
 * reference, the caller's. */
void rn_cmd_init(struct rn_cmd *cmd, const struct rn_cmd_type *type, struct rn_conn *c,
                 const struct rn_script *script);
/* Takes the builder's buffer as the arguments (after EVALSHA sha for a
 * script); b is left empty. */
void rn_cmd_take_args(struct rn_cmd *cmd, struct rargs *b);
/* Frees what rn_cmd_take_args took (the owner's settle calls it). */
void rn_cmd_fini(struct rn_cmd *cmd);
void rn_cmd_ref(struct rn_cmd *cmd);
void rn_cmd_unref(struct rn_cmd *cmd);

/* Starts the command's deadline (the node's timeout) / stops it. */
void rn_cmd_arm(struct rn_cmd *cmd);
void rn_cmd_disarm(struct rn_cmd *cmd);

/* Sends cmd on its connection: at once when a context exists (pipelined
 * behind the hello while it connects); while the connection is down between
 * attempts it waits for the next one (brought forward by this demand), and
 * goes out when that attempt starts, or gets reply(NULL) when the attempt
 * fails. Its deadline bounds the wait. 0, or -1 when it cannot be sent at
 * all (no connection, or it is closing): the caller answers. */
int rn_send(struct rn_cmd *cmd) LK_WUR;

/* Queues cmd in group queue q of its connection (taking a reference) and
 * starts its deadline; what a queue holds goes out through hooks->group
 * (or alone, a group of one, or none when every member expired) when it
 * is full or before the loop sleeps. */
int rn_queue(struct rn_cmd *cmd, int q) LK_WUR; /* 0, or -1 as rn_send */

#endif
