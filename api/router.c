/*
 * router.c - the route table and its matcher.
 */
#include "api/router.h"

#include <stdio.h>
#include <string.h>

#include "server/metrics.h"

static const struct route routes[] = {
    {"POST", "/locks/", locks_acquire, "/locks/{name}", true},
    {"PUT", "/locks/", locks_renew, "/locks/{name}", true},
    {"DELETE", "/locks/", locks_release, "/locks/{name}", true},
    {"GET", "/locks/", locks_inspect, "/locks/{name}", true},
    {"GET", "/locks", locks_list, "/locks", true},
    {"POST", "/locks", locks_multi_acquire, "/locks", true},
    {"PUT", "/locks", locks_multi_renew, "/locks", true},
    {"DELETE", "/locks", locks_multi_release, "/locks", true},
    {"POST", "/sessions", sessions_create, "/sessions", true},
    {"PUT", "/sessions/", sessions_heartbeat, "/sessions/{id}", true},
    {"GET", "/sessions/", sessions_get, "/sessions/{id}", true},
    {"DELETE", "/sessions/", sessions_end, "/sessions/{id}", true},
    {"GET", "/healthz", ops_healthz, "/healthz", false},
    {"GET", "/readyz", ops_readyz, "/readyz", false},
    {"GET", "/metrics", ops_metrics, "/metrics", false},
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static bool path_matches(const struct route *rt, const char *path, const char **param)
{
    size_t n = strlen(rt->path);
    if (rt->path[n - 1] == '/') {
        if (strncmp(path, rt->path, n) != 0)
            return false;
        *param = path + n;
        return true;
    }
    *param = NULL;
    return strcmp(path, rt->path) == 0;
}

bool router_path_open(const char *path)
{
    for (size_t i = 0; i < NROUTES; i++) {
        const char *p;
        if (!routes[i].guarded && path_matches(&routes[i], path, &p))
            return true;
    }
    return false;
}

void router_declare_metrics(void)
{
    for (size_t i = 0; i < NROUTES; i++)
        metrics_route(routes[i].label);
    metrics_route("other");
}

const struct route *router_match(const char *method, const char *path, const char **param,
                                 enum lk_code *why, char *allow, size_t allowlen,
                                 const char **label)
{
    bool any = false;
    allow[0] = '\0';
    *label = "other";
    for (size_t i = 0; i < NROUTES; i++) {
        const char *p;
        if (!path_matches(&routes[i], path, &p))
            continue;
        any = true;
        *label = routes[i].label;
        if (strcmp(routes[i].method, method) == 0 ||
            (strcmp(method, "HEAD") == 0 && strcmp(routes[i].method, "GET") == 0)) {
            *param = p;
            return &routes[i];
        }
    }
    *why = any ? LK_METHOD_NOT_ALLOWED : LK_NO_ROUTE;
    /* Only a 405 or OPTIONS needs the Allow list: built here, off the hot
     * path. HEAD goes wherever GET does; OPTIONS is answered everywhere. */
    size_t used = 0;
    for (size_t i = 0; any && i < NROUTES && used < allowlen; i++) {
        const char *p;
        if (path_matches(&routes[i], path, &p))
            used += (size_t)snprintf(allow + used, allowlen - used, "%s%s%s", used ? ", " : "",
                                     routes[i].method,
                                     strcmp(routes[i].method, "GET") == 0 ? ", HEAD" : "");
    }
    if (any && used < allowlen)
        snprintf(allow + used, allowlen - used, ", OPTIONS");
    if (any && strcmp(method, "OPTIONS") == 0)
        *why = LK_OK; /* 204 with Allow */
    return NULL;
}
