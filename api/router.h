/*
 * router.h - the route table: {method, path, handler}, like Redis' command
 * table. A path ending in '/' takes one parameter: the rest of the URL.
 */
#ifndef LOCKD_API_ROUTER_H
#define LOCKD_API_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "server/util.h"

struct req;

typedef void (*route_fn)(struct req *r);

struct route {
    const char *method;
    const char *path; /* "/locks/" = prefix with a parameter */
    route_fn fn;
    const char *label; /* metrics route label */
    bool guarded;      /* needs the bearer token when auth is on */
};

/* True when path is one of the routes open without a token (/healthz,
 * /readyz, /metrics), whatever the method. */
bool router_path_open(const char *path);

/* Declares every route label to metrics (latency series from the start). */
void router_declare_metrics(void);

/* Finds the route for method and path. On no match returns NULL and sets
 * *why to LK_NO_ROUTE or LK_METHOD_NOT_ALLOWED (with allow filled, e.g.
 * "GET, POST"); label gets the path's label for metrics. *param points into
 * path. */
const struct route *router_match(const char *method, const char *path, const char **param,
                                 enum lk_code *why, char *allow, size_t allowlen,
                                 const char **label);

/* Handlers (api/locks.c, api/multilock.c, api/sessions.c, api/ops.c). */
void locks_acquire(struct req *r);
void locks_renew(struct req *r);
void locks_release(struct req *r);
void locks_inspect(struct req *r);
void locks_list(struct req *r);
void locks_multi_acquire(struct req *r); /* api/multilock.c */
void locks_multi_renew(struct req *r);
void locks_multi_release(struct req *r);
void sessions_create(struct req *r);
void sessions_heartbeat(struct req *r);
void sessions_get(struct req *r);
void sessions_end(struct req *r);
void ops_healthz(struct req *r);
void ops_readyz(struct req *r);
void ops_metrics(struct req *r);

#endif
