/*
 * ops.c - /healthz, /readyz and /metrics.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/errors.h"
#include "api/http.h"
#include "api/router.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/util.h"

#include "version.h" /* build/gen: LOCKD_VERSION, from git describe */

void ops_healthz(struct req *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    http_respond_json(r, 200, o);
}

static json_t *nodes_json(struct engine *e)
{
    struct eng_node nodes[16];
    size_t n = engine_nodes(e, nodes, 16);
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "node", json_string(nodes[i].addr));
        json_object_set_new(o, "up", json_boolean(nodes[i].up));
        if (!nodes[i].up)
            json_object_set_new(o, "reason", json_string(nodes[i].reason));
        if (nodes[i].recovering)
            json_object_set_new(o, "recovering", json_true());
        json_array_append_new(a, o);
    }
    return a;
}

static void ping_cb(void *arg, enum lk_code code)
{
    struct req *r = arg;
    struct engine *e = http_engine(r);
    json_t *extra = json_object();
    json_object_set_new(extra, "backend", json_string(engine_backend_name(e)));
    json_object_set_new(extra, "nodes", nodes_json(e));
    if (engine_draining(e)) {
        errors_respond_code(r, LK_SHUTTING_DOWN, extra);
        return;
    }
    if (code == LK_BACKEND_RECOVERING) {
        json_object_set_new(extra, "status", json_string("recovering"));
        errors_respond_code(r, LK_BACKEND_RECOVERING, extra);
        return;
    }
    if (code != LK_OK) {
        /* Not the table's sentence: nothing was asked, so nothing was refused. */
        errors_respond_msg(r, LK_BACKEND_DOWN, "the lock backend does not answer", extra);
        return;
    }
    json_object_set_new(extra, "status", json_string("ready"));
    http_respond_json(r, 200, extra);
}

void ops_readyz(struct req *r)
{
    enum lk_code c = engine_ping(http_engine(r), http_loop(r), ping_cb, r);
    (void)c;
}

static long long node_up(const struct eng_node *nd)
{
    return nd->up ? 1 : 0;
}

static long long node_errors(const struct eng_node *nd)
{
    return (long long)nd->errors;
}

static long long node_restarts(const struct eng_node *nd)
{
    return (long long)nd->restarts;
}

/* The per-node families of /metrics, one row each: a HELP and TYPE line,
 * then name{node="addr"} value for every node. */
static const struct node_family {
    const char *name;
    const char *type;
    const char *help;
    long long (*value)(const struct eng_node *nd);
} node_families[] = {
    {"lockd_backend_up", "gauge", "Whether the backend node answers.", node_up},
    {"lockd_backend_errors_total", "counter", "Backend calls that failed, by node.", node_errors},
    {"lockd_backend_restarts_total", "counter",
     "Times a node turned out to be a new Redis process (a restart or a failover), by node.",
     node_restarts},
};

void ops_metrics(struct req *r)
{
    struct engine *e = http_engine(r);
    struct eng_node nodes[16];
    size_t n = engine_nodes(e, nodes, 16);
    char extra[4096];
    size_t off = 0;
    for (size_t f = 0; f < sizeof(node_families) / sizeof(node_families[0]); f++) {
        const struct node_family *nf = &node_families[f];
        if (off < sizeof(extra))
            off +=
                (size_t)snprintf(extra + off, sizeof(extra) - off, "# HELP %s %s\n# TYPE %s %s\n",
                                 nf->name, nf->help, nf->name, nf->type);
        for (size_t i = 0; i < n && off < sizeof(extra); i++)
            off += (size_t)snprintf(extra + off, sizeof(extra) - off, "%s{node=\"%s\"} %lld\n",
                                    nf->name, nodes[i].addr, nf->value(&nodes[i]));
    }
    if (off < sizeof(extra))
        off += (size_t)snprintf(extra + off, sizeof(extra) - off,
                                "# HELP lockd_build_info Build information.\n"
                                "# TYPE lockd_build_info gauge\n"
                                "lockd_build_info{version=\"%s\",backend=\"%s\"} 1\n",
                                LOCKD_VERSION, engine_backend_name(e));
    if (off >= sizeof(extra))
        off = sizeof(extra) - 1; /* many nodes: cut, never overrun */
    size_t len;
    char *text = metrics_render(extra, &len);
    http_respond_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}
