/*
 * config.h - lockd's effective configuration. Precedence: flags > LOCKD_<KEY>
 * environment > --config file > defaults. One table (config_table.c) drives
 * every source, --help and --check-config. Read-only once lockd runs.
 */
#ifndef LOCKD_CONFIG_CONFIG_H
#define LOCKD_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

struct lk_config {
    char *listen;
    char *backend; /* "memory", "redis", "redlock", "sentinel" (derived when empty) */
    char *redis;   /* comma-separated redis:// URLs */
    char *key_prefix;
    int64_t default_ttl_ms;
    int64_t max_ttl_ms;
    int64_t max_wait_ms;
    int64_t max_hold_ms;
    int64_t session_ttl_ms;
    int64_t max_session_ttl_ms;
    int64_t threads;
    int64_t max_connections;
    int64_t connection_timeout_ms;
    int64_t max_body_bytes;
    int64_t max_waiters;
    int64_t max_sessions;
    int64_t backend_timeout_ms;
    int64_t redis_wait_replicas;
    int64_t restart_grace_ms; /* Redis lost its data: no new grants this long after re-asserting */
    int64_t fence_retention_ms;  /* a fence counter's ttl after its name's last grant */
    int64_t max_locks;           /* live leases recorded per node for re-assertion */
    char *redis_master_name;     /* sentinel: the primary's name at the sentinels */
    char *redis_master_user;     /* sentinel: data nodes' user ("" = the URLs') */
    char *redis_master_password; /* sentinel: data nodes' password ("" = the URLs') */
    char *auth_token_file;
    char *admin_token_file;
    bool auth_metrics;
    char *tls_cert;
    char *tls_key;
    char *log_level;
    char *log_format;
    bool access_log;
    int64_t shutdown_timeout_ms;
    bool release_on_shutdown;
    char *port_file;
};

enum cfg_type { CFG_STRING, CFG_INT, CFG_MS, CFG_BOOL, CFG_ENUM, CFG_LIST };

#define CFG_SECRET 1u

struct cfg_key {
    const char *name;
    enum cfg_type type;
    size_t offset;
    const char *def; /* parsed like user input */
    int64_t min, max;
    const char *choices; /* CFG_ENUM: "a|b|c" */
    unsigned flags;
    const char *help;
};

extern const struct cfg_key cfg_keys[];
extern const size_t cfg_nkeys;

/* What main() should do after config_load. */
enum cfg_action { CFG_RUN, CFG_HELP, CFG_VERSION, CFG_CHECK };

/* Fills cfg from defaults, the file named by --config, the environment (envp
 * may be NULL: use environ) and argv. On error writes one line naming the key
 * and its source into err and returns -1 (main exits 2). */
int config_load(struct lk_config *cfg, int argc, char **argv, char **envp, enum cfg_action *action,
                char *err, size_t errlen) __attribute__((warn_unused_result));

/* Sets one key from text; src names the source for errors ("flag --x",
 * "LOCKD_X", "file:3"). Returns 0 or -1 with err filled. */
int config_set(struct lk_config *cfg, const char *key, const char *value, const char *src,
               char *err, size_t errlen) __attribute__((warn_unused_result));

/* Parses a config file's text (key value lines, # comments). */
int config_parse_text(struct lk_config *cfg, const char *text, size_t len, const char *path,
                      char *err, size_t errlen) __attribute__((warn_unused_result));

void config_defaults(struct lk_config *cfg);
void config_free(struct lk_config *cfg);
void config_print(const struct lk_config *cfg, FILE *out); /* secrets masked */
void config_help(FILE *out);

/* Parses durations like "500ms", "30s", "5m", "2h" or plain milliseconds. */
int config_parse_ms(const char *s, int64_t *out);

/* Parses listen ("HOST:PORT", "[IPv6]:PORT"; host may be localhost, * or
 * empty for all IPv4 addresses; port 0..65535). 0 on success. */
int config_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sl);

#endif
