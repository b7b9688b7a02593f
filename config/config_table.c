/*
 * config_table.c - one row per configuration key, sorted by name. The same
 * rows drive the file parser, LOCKD_<KEY>, flags, --help and --check-config.
 */
#include <stddef.h>

#include "config/config.h"

#define OFF(f) offsetof(struct lk_config, f)
#define DAY_MS 86400000LL

const struct cfg_key cfg_keys[] = {
    {"access_log", CFG_BOOL, OFF(access_log), "true", 0, 1, NULL, 0,
     "log one line per HTTP request at info level"},
    {"admin_token_file", CFG_STRING, OFF(admin_token_file), "", 0, 0, NULL, 0,
     "file of operator bearer tokens (force-unlock), one per line; empty = none (SIGHUP reloads)"},
    {"auth_metrics", CFG_BOOL, OFF(auth_metrics), "false", 0, 1, NULL, 0,
     "also require the bearer token on /healthz, /readyz and /metrics"},
    {"auth_token_file", CFG_STRING, OFF(auth_token_file), "", 0, 0, NULL, 0,
     "file of bearer tokens, one per line; empty = no authentication (SIGHUP reloads)"},
    {"backend", CFG_ENUM, OFF(backend), "", 0, 0, "|memory|redis|redlock|sentinel|cluster", 0,
     "memory, redis, redlock, sentinel or cluster; empty = memory without redis, redis for one "
     "URL, redlock for 3+"},
    {"backend_timeout_ms", CFG_MS, OFF(backend_timeout_ms), "2000", 10, 60000, NULL, 0,
     "deadline of each backend connect and command; past it the request gets 503"},
    {"connection_timeout_ms", CFG_MS, OFF(connection_timeout_ms), "30000", 1000, 3600000, NULL, 0,
     "idle HTTP connection timeout (whole seconds, rounded up), and the longest a request "
     "may take to arrive (slow clients are dropped)"},
    {"default_ttl_ms", CFG_MS, OFF(default_ttl_ms), "30000", 100, DAY_MS, NULL, 0,
     "lease ttl when an acquire gives none"},
    {"fence_retention_ms", CFG_MS, OFF(fence_retention_ms), "86400000", 100, 30 * DAY_MS, NULL, 0,
     "how long a name's fence counter outlives its last grant in Redis (never below max_ttl_ms); "
     "past it the wall-clock floor keeps tokens increasing"},
    {"key_prefix", CFG_STRING, OFF(key_prefix), "lockd:", 0, 0, NULL, 0,
     "prefix of every Redis key lockd writes"},
    {"listen", CFG_STRING, OFF(listen), "127.0.0.1:8080", 0, 0, NULL, 0,
     "HOST:PORT to serve HTTP on ([::1]:8080 for IPv6; port 0 picks a free port)"},
    {"log_format", CFG_ENUM, OFF(log_format), "json", 0, 0, "json|text", 0,
     "json (one object per line) or text; every log line, the startup one too, goes to stderr"},
    {"log_level", CFG_ENUM, OFF(log_level), "info", 0, 0, "debug|info|warn|error", 0,
     "least severe level that is logged"},
    {"max_body_bytes", CFG_INT, OFF(max_body_bytes), "16384", 64, 1048576, NULL, 0,
     "largest request body; larger gets 413 body_too_large"},
    {"max_connections", CFG_INT, OFF(max_connections), "10000", 1, 1000000, NULL, 0,
     "most HTTP connections served at once (waiters included)"},
    {"max_hold_ms", CFG_MS, OFF(max_hold_ms), "0", 0, 30 * DAY_MS, NULL, 0,
     "default cap on how long the watchdog renews a session lock; 0 = unbounded"},
    {"max_locks", CFG_INT, OFF(max_locks), "1000000", 1, 100000000, NULL, 0,
     "most live leases this lockd records per Redis node to re-assert after a restart; past it "
     "acquires get 503 too_many_locks"},
    {"max_session_ttl_ms", CFG_MS, OFF(max_session_ttl_ms), "3600000", 1000, DAY_MS, NULL, 0,
     "largest session ttl a client may ask for"},
    {"max_sessions", CFG_INT, OFF(max_sessions), "100000", 1, 10000000, NULL, 0,
     "most live sessions"},
    {"max_ttl_ms", CFG_MS, OFF(max_ttl_ms), "3600000", 100, 30 * DAY_MS, NULL, 0,
     "largest lease ttl a client may ask for"},
    {"max_wait_ms", CFG_MS, OFF(max_wait_ms), "300000", 0, DAY_MS, NULL, 0,
     "longest wait_ms of a blocking acquire"},
    {"max_waiters", CFG_INT, OFF(max_waiters), "100000", 0, 10000000, NULL, 0,
     "most blocked acquires queued at once; past it wait_ms acquires are tried once; "
     "0 = no bound of its own (max_connections still bounds them)"},
    {"port_file", CFG_STRING, OFF(port_file), "", 0, 0, NULL, 0,
     "write the bound TCP port to this file once listening (useful with port 0)"},
    {"redis", CFG_LIST, OFF(redis), "", 0, 0, NULL, CFG_SECRET,
     "comma-separated redis://[user:password@]host:port[/db] URLs"},
    {"redis_master_name", CFG_STRING, OFF(redis_master_name), "", 0, 0, NULL, 0,
     "backend sentinel: the primary's name at the sentinels listed in redis"},
    {"redis_master_password", CFG_STRING, OFF(redis_master_password), "", 0, 0, NULL, CFG_SECRET,
     "backend sentinel: password of the data nodes; empty = the redis URLs' password"},
    {"redis_master_user", CFG_STRING, OFF(redis_master_user), "", 0, 0, NULL, 0,
     "backend sentinel: ACL user of the data nodes; empty = the redis URLs' user"},
    {"redis_wait_replicas", CFG_INT, OFF(redis_wait_replicas), "0", 0, 100, NULL, 0,
     "replicas each grant must reach (WAIT) before it is answered; 0 = none"},
    {"release_on_shutdown", CFG_BOOL, OFF(release_on_shutdown), "false", 0, 1, NULL, 0,
     "release session locks still held when lockd exits (default: let them expire)"},
    {"restart_grace_ms", CFG_MS, OFF(restart_grace_ms), "2000", 0, 600000, NULL, 0,
     "after a Redis lost its data: no new grants on it until this lockd re-asserted its leases "
     "and this long after (every lockd on that Redis must reconnect and re-assert within it)"},
    {"session_ttl_ms", CFG_MS, OFF(session_ttl_ms), "10000", 1000, DAY_MS, NULL, 0,
     "session ttl when POST /sessions gives none"},
    {"shutdown_timeout_ms", CFG_MS, OFF(shutdown_timeout_ms), "25000", 0, 600000, NULL, 0,
     "how long SIGTERM waits for sessions to end before exiting"},
    {"threads", CFG_INT, OFF(threads), "2", 1, 64, NULL, 0,
     "event loops serving HTTP (each with its own backend connection)"},
    {"tls_cert", CFG_STRING, OFF(tls_cert), "", 0, 0, NULL, 0,
     "PEM certificate: serve HTTPS (with tls_key)"},
    {"tls_key", CFG_STRING, OFF(tls_key), "", 0, 0, NULL, 0, "PEM private key for tls_cert"},
};

const size_t cfg_nkeys = sizeof(cfg_keys) / sizeof(cfg_keys[0]);
