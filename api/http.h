/*
 * http.h - libmicrohttpd glue. One worker per configured thread: its own
 * event loop, descriptor of the one listening socket and MHD daemon in
 * external-loop epoll mode, so a request starts and finishes on one loop.
 * A handler answers at once or later on the same loop; in between the
 * request is parked (struct req's park), never a thread.
 */
#ifndef LOCKD_API_HTTP_H
#define LOCKD_API_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "server/util.h"

struct engine;
struct lk_config;
struct lk_loop;
struct http_server;
struct eng_waiter;
struct api_error;
struct route;

#define REQ_MAX_HEADERS 6

/* One HTTP request, allocated on its first callback and freed in the
 * completion callback. A suspended request is reached only through this
 * struct, never through the stack. */
struct req {
    struct http_worker *wk;
    struct MHD_Connection *conn;
    const struct route *route;
    const char *method; /* MHD's copy, valid for the request */
    const char *url;    /* decoded path (MHD's copy) */
    const char *param;  /* the {name} or {id} part of the path, NUL-terminated copy */
    char *param_buf;    /* malloc'd when the part is too long for param_small */
    char *body;         /* body_small, or malloc'd when larger */
    size_t body_len;
    bool body_too_large;
    int64_t start_us; /* moved on by the time it spent suspended (a long poll) */
    int64_t suspended_us;
    void *track; /* the connection's struct conn_track (http.c) */
    char req_id[40];

    /* the answer, set by http_respond*() */
    bool ready;
    uint8_t park; /* enum req_park (http.c): how it waits for the engine */
    bool orphan;  /* its connection closed while the engine still had it */
    int status;
    char *resp; /* malloc'd */
    size_t resp_len;
    const char *content_type;
    const char *hdr_name[REQ_MAX_HEADERS]; /* static strings */
    int nhdrs;

    /* while parked: on the worker's list of parked or of answered requests */
    struct req *sprev, *snext;

    /* blocking acquire */
    struct eng_waiter *waiter;
    bool waiting;    /* engine callback not run yet */
    int sock;        /* its socket while parked: EOF watch, hang-up peek */
    void *eof_watch; /* ev_io *, malloc'd */
    bool grant_pending;
    /* a multi-lock's grant_pending: its names, "<name>\0...<name>\0\0"
     * (malloc'd), released as param is for a single lock */
    char *grant_names;
    int64_t token;     /* fencing token the answer carried, for the access log; 0 = none */
    const char *error; /* an error answer's "error" (errors.c's table, static), for the log */
    const char *label; /* the path's metrics route label (router.c's, static); NULL = "other" */

    /* Buffers from here on are not zeroed when the request starts (that was
     * a 1.5 KiB memset per request); each is written before it is read. */
    char hdr_value[REQ_MAX_HEADERS][72]; /* [0, nhdrs) */
    /* a grant that must be released if the client never receives it: the
     * lock is the request's own name (param), or grant_names' */
    char grant_lease[33]; /* "" until a grant */
    char trace_id[33];    /* a W3C traceparent header's trace id, for the log; "" if none */
    char param_small[64];
    char body_small[128];
};
/* One malloc and free per request: they stay on glibc's fast path (its
 * per-thread cache) only up to 1032 bytes. 944 on x86-64; at 1328 bytes
 * lockd served 5 % fewer pairs/s (bench/RESULTS.md). */
_Static_assert(sizeof(struct req) <= 1024, "struct req outgrew glibc's tcache");
#define REQ_ZEROED offsetof(struct req, hdr_value)

struct http_worker;

struct engine *http_engine(const struct req *r);
struct lk_loop *http_loop(const struct req *r);
const struct lk_config *http_config(const struct req *r);

/* Sets the answer (takes ownership of json, may be NULL for an empty body).
 * On the request's loop; resumes the connection if it was suspended. */
void http_respond_json(struct req *r, int status, json_t *json);
void http_respond_text(struct req *r, int status, const char *content_type, char *text, size_t len);
/* name must be a string literal (kept by pointer); value is copied. */
void http_add_header(struct req *r, const char *name, const char *value);
/* True when the answer already carries a header called name (set by
 * http_add_header). */
bool http_answer_has_header(const struct req *r, const char *name);

/* The client's address as "host:port" (for operator logs). */
void http_peer(const struct req *r, char *out, size_t len);

/* The trace id of a W3C traceparent header tp ("00-<32 hex>-<16 hex>-<2
 * hex>"; a later version may add fields after a '-') into out[33], or ""
 * when tp is NULL or not a valid one. Pure, any thread. */
void http_trace_id(const char *tp, char *out);

/* Request headers and query arguments. */
const char *http_header(const struct req *r, const char *name);
/* For a waiter just granted name/lease: when its client has already hung
 * up, releases the grant, answers 499 and returns true. */
bool http_grant_undeliverable(struct req *r, const char *name, const char *lease);
/* The end of a handler that called the engine: frees body (new reference
 * or NULL; the engine copied what it keeps) and, when the engine parked the
 * request (c is LK_AGAIN, w its waiter, no answer yet), the request waits on
 * w until the engine's callback answers, its client hangs up or lockd stops. */
void http_park(struct req *r, json_t *body, enum lk_code c, struct eng_waiter *w);
/* The end of a handler whose input was rejected: frees body (new reference
 * or NULL) and answers e (400 and the like, errors.c's table). */
void http_reject(struct req *r, json_t *body, const struct api_error *e);
/* False when the request repeats header `name` with different values. */
bool http_header_agrees(const struct req *r, const char *name);
/* Calls fn for every query argument; stops early when fn returns false. */
void http_query_each(const struct req *r, bool (*fn)(void *arg, const char *k, const char *v),
                     void *arg);

/* Starts the workers (binds, spawns threads). On failure writes err. */
struct http_server *http_start(const struct lk_config *cfg, struct engine *e, char *err,
                               size_t errlen);
int http_port(const struct http_server *s);

/* What http_start checks of the configuration short of binding the
 * listener: tls_cert and tls_key can be read and libmicrohttpd (GnuTLS)
 * takes them as a certificate and its key. 0, or -1 with one line in err.
 * lockd --check-config runs it, and startup before anything else. */
int http_check(const struct lk_config *cfg, char *err, size_t errlen);
/* Stops accepting, stops the loops, joins threads, frees. */
void http_stop(struct http_server *s);

#endif
