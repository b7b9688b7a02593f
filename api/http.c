/*
 * http.c - libmicrohttpd in external-loop epoll mode, one daemon per worker
 * loop, all watching one shared listening socket (DESIGN.md §Execution
 * model, shape a). The request lifecycle follows MHD's: context on the first call,
 * body chunks, dispatch on the last call, free in the completion callback.
 * Everything here for one request runs on its worker's thread.
 */
#include "api/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utlist.h>

#include "api/auth.h"
#include "api/errors.h"
#include "api/http_own.h"
#include "api/parse.h"
#include "api/router.h"
#include "config/config.h"
#include "server/engine.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

/* One per open connection (MHD's socket context): MHD's own timeout is reset
 * by any byte, so a client trickling a request a byte at a time would keep a
 * connection forever. Each request must instead arrive whole within
 * connection_timeout_ms of the connection opening or the previous answer. */

/* A request line and headers over HEADERS_MAX bytes get 431 headers_too_large
 * from the handler (the spec's limit). MHD keeps them in its per-connection
 * pool, which must hold them and still have room for the answer; past the
 * pool, MHD answers 431 itself (as JSON: http_own.c), and a request between
 * the two would get no answer at all (MHD has no room left to write one).
 * MHD zeroes 1.5 pools per request (the pool on reset, the unused half of its
 * read buffer), so the pool is no larger than that needs: 9 KiB serves 8 KiB
 * of headers and answers every size above with 431 exactly as 12 KiB did
 * (first_hour), at 4.5 KiB less memset per request (12 KiB cost lockd 7 % of
 * its CPU per memory pair: bench/RESULTS.md). */
#define HEADERS_MAX 8192
#define POOL_BYTES (9 * 1024)
struct conn_track {
    struct conn_track *prev, *next;
    int fd;
    void *tls;        /* its GnuTLS session on the HTTPS listener, else NULL */
    int64_t since_ms; /* opened, or its last request finished */
    bool dispatched;  /* the current request arrived whole (then not on wk->arriving) */
};

struct http_worker {
    struct http_server *srv;
    int index;
    struct lk_loop *lp;
    struct MHD_Daemon *d;
    int lfd; /* owned by the daemon once it started */
    pthread_t thread;
    bool started;
    ev_io epoll_w;
    ev_timer mhd_timer;
    ev_prepare prep;
    bool need_run;
    struct req *parked;     /* suspended or held until the engine answers */
    struct req *answered;   /* held, answered: queued by the next flush */
    unsigned nheld;         /* held requests whose connection MHD still has */
    unsigned mhd_timeout_s; /* MHD's idle timeout (MHD_OPTION_CONNECTION_TIMEOUT) */
    bool hold_untimed;      /* a backend round trip may outlast it: lift it while held */
    unsigned conn_limit;    /* this daemon's share of max_connections */
    bool full;              /* reached conn_limit: MHD stopped listening */
    uint64_t req_seq;
    /* The connections whose current request has not arrived whole (or that
     * wait for their next one), oldest since_ms first: all the slow-client
     * timer looks at. A dispatched request's connection (held, a parked
     * waiter or watcher, being answered) is off it until that request
     * completes, so idle cost does not grow with parked connections. */
    struct conn_track *arriving;
    ev_timer slow_timer;
};

struct http_server {
    const struct lk_config *cfg;
    struct engine *e;
    int n;
    struct http_worker *w;
    int port;
    char *tls_cert;
    char *tls_key;
    char run_id[8];
};

struct engine *http_engine(const struct req *r)
{
    return r->wk->srv->e;
}
struct lk_loop *http_loop(const struct req *r)
{
    return r->wk->lp;
}
const struct lk_config *http_config(const struct req *r)
{
    return r->wk->srv->cfg;
}
int http_port(const struct http_server *s)
{
    return s->port;
}

/* How a request whose answer the engine gives later waits for it (r->park).
 *
 * A waiter (wait_ms, which may run for minutes) is suspended: MHD takes its
 * socket out of its epoll set and neither polls it nor times it out.
 *
 * Anything else waits for one backend round trip, and is held instead: the
 * connection stays in MHD's set, in MHD's ready list, and MHD calls
 * on_request for it again on each run, which answers "not yet". When the
 * answer comes it is queued from outside MHD_run (flush_answered), which
 * MHD 0.9.75 allows in external-loop mode and which turns the connection
 * to sending at once. Suspending and resuming would cost three system calls
 * per request (the suspend's EPOLL_CTL_DEL, the resume's EPOLL_CTL_ADD and
 * a recv that finds nothing; bench/RESULTS.md). MHD's idle timeout still
 * runs for a held connection; where backend_timeout_ms could outlast it,
 * it is lifted while the request is held (hold_untimed). A held connection
 * that MHD closes (the client reset it) leaves an orphan: the request lives
 * on until the engine answers, and its grant, if any, is given back then. */
enum req_park {
    REQ_LIVE = 0,  /* not parked: being handled, or answered at once */
    REQ_SUSPENDED, /* a waiter; on wk->parked */
    REQ_HELD,      /* on wk->parked */
    REQ_ANSWERED,  /* was held; on wk->answered */
};

static enum MHD_Result queue(struct req *r);
static void req_done(struct req *r, bool delivered, int64_t now_us);

/* A held request's answer is about to be queued: MHD's idle timeout back. */
static void unhold(struct req *r)
{
    r->park = REQ_LIVE;
    if (r->wk->hold_untimed)
        MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, r->wk->mhd_timeout_s);
}

/* Queues the answers of held requests, outside MHD_run: MHD_queue_response
 * on a connection MHD is not processing runs its state machine at once, and
 * this loop is the only one that touches the daemon. */
static void flush_answered(struct http_worker *wk)
{
    struct req *r;
    while ((r = wk->answered) != NULL) {
        DL_DELETE2(wk->answered, r, sprev, snext);
        if (r->orphan) {
            r->park = REQ_LIVE;
            req_done(r, false, lk_now_us());
            continue;
        }
        unhold(r);
        if (queue(r) != MHD_YES)
            lk_log(LK_ERROR, "libmicrohttpd refused an answer (request %s)", r->req_id);
    }
}

/* ---- driving MHD from libev ---- */

static unsigned mhd_connections(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return di != NULL ? di->num_connections : 0;
}

static void mhd_drive(struct http_worker *wk)
{
    wk->need_run = false;
    flush_answered(wk);
    MHD_run(wk->d);
    (void)http_own_take(); /* one run's own answer is never another's */
    /* At its connection limit MHD takes the listening socket out of its epoll
     * set, and puts it back only at the start of a later run. When this run
     * freed slots, run once more: nothing else would wake us for the clients
     * waiting in the backlog, and lockd would stop accepting for good. */
    if (mhd_connections(wk->d) >= wk->conn_limit) {
        wk->full = true;
    } else if (wk->full) {
        wk->full = false;
        MHD_run(wk->d);
        if (mhd_connections(wk->d) >= wk->conn_limit)
            wk->full = true;
    }
    MHD_UNSIGNED_LONG_LONG ms;
    ev_timer_stop(loop_ev(wk->lp), &wk->mhd_timer);
    if (MHD_get_timeout(wk->d, &ms) == MHD_YES) {
        /* A held request keeps MHD's ready list non-empty, so MHD asks to
         * run again at once; what it waits for is the engine, whose answer
         * sets need_run. Anything else MHD may have ready gets a run within
         * a millisecond, and the loop does not spin. */
        if (ms == 0 && wk->nheld > 0)
            ms = 1;
        ev_timer_set(&wk->mhd_timer, (double)ms / 1000.0, 0.);
        ev_timer_start(loop_ev(wk->lp), &wk->mhd_timer);
    }
}

static void on_epoll(struct ev_loop *ev, ev_io *w, int revents)
{
    (void)ev;
    (void)revents;
    mhd_drive(w->data);
}

static void on_mhd_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    mhd_drive(t->data);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_worker *wk = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct conn_track *t = lk_calloc(1, sizeof(*t));
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        t->fd = ci != NULL ? ci->connect_fd : -1;
        if (wk->srv->tls_cert != NULL) {
            ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
            t->tls = ci != NULL ? ci->tls_session : NULL;
        }
        t->since_ms = lk_now_ms();
        DL_APPEND(wk->arriving, t);
        *socket_context = t;
    } else {
        http_own_forget(conn);
        if (*socket_context != NULL) {
            struct conn_track *t = *socket_context;
            if (!t->dispatched)
                DL_DELETE(wk->arriving, t);
            free(t);
            *socket_context = NULL;
        }
    }
}

/* t's request arrived whole: off wk->arriving until it completes. */
static void track_dispatched(struct http_worker *wk, struct conn_track *t)
{
    if (t == NULL || t->dispatched)
        return;
    t->dispatched = true;
    DL_DELETE(wk->arriving, t);
}

/* t's next request's time starts at now_ms: back at wk->arriving's tail
 * (every since_ms is the loop's clock when it was set, so the list stays
 * oldest first). */
static void track_restart(struct http_worker *wk, struct conn_track *t, int64_t now_ms)
{
    if (!t->dispatched)
        DL_DELETE(wk->arriving, t);
    t->dispatched = false;
    t->since_ms = now_ms;
    DL_APPEND(wk->arriving, t);
}

/* Shuts down connections whose request has been arriving for longer than
 * connection_timeout_ms; MHD then sees the socket fail and closes it. Walks
 * wk->arriving, oldest first, up to the first one still in time. */
static void on_slow_timer(struct ev_loop *ev, ev_timer *tm, int revents)
{
    (void)ev;
    (void)revents;
    struct http_worker *wk = tm->data;
    int64_t now = lk_now_ms(), limit = wk->srv->cfg->connection_timeout_ms;
    struct conn_track *t, *tmp, *last = wk->arriving != NULL ? wk->arriving->prev : NULL;
    DL_FOREACH_SAFE (wk->arriving, t, tmp) {
        if (now - t->since_ms <= limit)
            break;
        if (t->fd >= 0) {
            lk_log(LK_DEBUG, "closing a connection whose request took over %lld ms to arrive",
                   (long long)limit);
            shutdown(t->fd, SHUT_RDWR);
            wk->need_run = true;
        }
        track_restart(wk, t, now); /* once; MHD closes it on its next run */
        if (t == last)
            break; /* each one once per walk */
    }
}

static struct conn_track *track_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* Before the loop blocks: run MHD if a parked request was answered. */
static void on_prepare(struct ev_loop *ev, ev_prepare *p, int revents)
{
    (void)ev;
    (void)revents;
    struct http_worker *wk = p->data;
    if (wk->need_run)
        mhd_drive(wk);
}

/* ---- responses ---- */

void http_add_header(struct req *r, const char *name, const char *value)
{
    if (r->nhdrs >= REQ_MAX_HEADERS)
        return;
    size_t n = strlen(value);
    if (n >= sizeof(r->hdr_value[0]))
        n = sizeof(r->hdr_value[0]) - 1;
    r->hdr_name[r->nhdrs] = name;
    memcpy(r->hdr_value[r->nhdrs], value, n);
    r->hdr_value[r->nhdrs][n] = '\0';
    r->nhdrs++;
}

bool http_answer_has_header(const struct req *r, const char *name)
{
    for (int i = 0; i < r->nhdrs; i++)
        if (strcasecmp(r->hdr_name[i], name) == 0)
            return true;
    return false;
}

static void stop_eof_watch(struct req *r)
{
    if (r->eof_watch != NULL) {
        ev_io_stop(loop_ev(r->wk->lp), r->eof_watch);
        free(r->eof_watch);
        r->eof_watch = NULL;
    }
}

static void set_ready(struct req *r)
{
    struct http_worker *wk = r->wk;
    r->ready = true;
    if (r->park == REQ_SUSPENDED) {
        /* lockd_http_request_duration_seconds is lockd's time, not the
         * long poll's wait (lockd_acquire_wait_seconds has that). */
        r->start_us += lk_now_us() - r->suspended_us;
        r->park = REQ_LIVE;
        DL_DELETE2(wk->parked, r, sprev, snext);
        stop_eof_watch(r);
        MHD_resume_connection(r->conn);
        wk->need_run = true;
    } else if (r->park == REQ_HELD) {
        /* Queued by the next flush, never from here: the engine may answer
         * inside MHD_run, from another connection's handler. */
        r->park = REQ_ANSWERED;
        DL_DELETE2(wk->parked, r, sprev, snext);
        DL_APPEND2(wk->answered, r, sprev, snext);
        if (!r->orphan)
            wk->nheld--;
        wk->need_run = true;
    }
}

void http_respond_text(struct req *r, int status, const char *content_type, char *text, size_t len)
{
    free(r->resp);
    r->status = status;
    r->resp = text;
    r->resp_len = len;
    r->content_type = content_type;
    set_ready(r);
}

void http_respond_json(struct req *r, int status, json_t *json)
{
    char *text = NULL;
    size_t len = 0;
    if (json != NULL) {
        text = json_dumps(json, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(json);
        if (text == NULL)
            abort(); /* out of memory */
        len = strlen(text);
        text = realloc(text, len + 2);
        if (text == NULL)
            abort();
        text[len++] = '\n';
        text[len] = '\0';
    }
    http_respond_text(r, status, "application/json", text, len);
}

static enum MHD_Result queue(struct req *r)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->resp_len, r->resp ? r->resp : (void *)"",
                                        r->resp ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    r->resp = NULL;
    if (resp == NULL)
        return MHD_NO;
    if (r->content_type != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    MHD_add_response_header(resp, "X-Request-Id", r->req_id);
    for (int i = 0; i < r->nhdrs; i++)
        MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- requests ---- */

void http_peer(const struct req *r, char *out, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa != NULL && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa != NULL && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(out, len, "%s:%d", host, port);
}

const char *http_header(const struct req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

struct hagree {
    const char *name;
    const char *first;
    bool differ;
};

static enum MHD_Result header_agree_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    (void)kind;
    struct hagree *h = cls;
    if (strcasecmp(key, h->name) != 0)
        return MHD_YES;
    if (h->first == NULL)
        h->first = value;
    else if (strcmp(h->first, value) != 0)
        h->differ = true;
    return MHD_YES;
}

bool http_header_agrees(const struct req *r, const char *name)
{
    struct hagree h = {name, NULL, false};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, header_agree_cb, &h);
    return !h.differ;
}

struct qiter {
    bool (*fn)(void *arg, const char *k, const char *v);
    void *arg;
    bool stop;
};

static enum MHD_Result query_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value)
{
    (void)kind;
    struct qiter *q = cls;
    if (q->stop)
        return MHD_NO;
    if (!q->fn(q->arg, key, value ? value : "")) {
        q->stop = true;
        return MHD_NO;
    }
    return MHD_YES;
}

void http_query_each(const struct req *r, bool (*fn)(void *arg, const char *k, const char *v),
                     void *arg)
{
    struct qiter q = {fn, arg, false};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_cb, &q);
}

/* The client of a suspended long poll hung up: withdraw its waiter. */
static void on_eof(struct ev_loop *ev, ev_io *w, int revents)
{
    (void)ev;
    (void)revents;
    struct req *r = w->data;
    char c;
    ssize_t n = recv(r->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    stop_eof_watch(r);
    if (n > 0)
        return; /* pipelined data, not a hang-up: we can no longer tell */
    if (r->waiting) {
        r->waiting = false;
        engine_cancel(http_engine(r), r->waiter);
        r->waiter = NULL;
        errors_respond_code(r, LK_CANCELLED, NULL);
    }
}

static void release_ignored(void *arg, const struct eng_result *res);

bool http_grant_undeliverable(struct req *r, const char *name, const char *lease)
{
    if (!r->orphan) {
        if (r->sock < 0)
            return false; /* answered at once, not parked: its client is there */
        char c;
        ssize_t n = recv(r->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
            return false;
    }
    /* The client hung up before its grant came (its FIN is queued, though
     * our EOF watcher has not run yet): nobody would learn this lease, so
     * give the lock back now instead of leaving it held for its ttl. */
    enum lk_code code =
        engine_release(http_engine(r), http_loop(r), name, lease, release_ignored, NULL);
    (void)code;
    errors_respond_code(r, LK_CANCELLED, NULL);
    return true;
}

void http_park(struct req *r, json_t *body, enum lk_code c, struct eng_waiter *w)
{
    json_decref(body);
    if (c == LK_AGAIN && !r->ready && w != NULL) {
        r->waiting = true;
        r->waiter = w;
    }
}

void http_reject(struct req *r, json_t *body, const struct api_error *e)
{
    json_decref(body);
    errors_respond_input(r, e);
}

/* Keeps the socket of a parked request, for http_grant_undeliverable. */
static void note_sock(struct req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL)
        r->sock = ci->connect_fd;
}

static void watch_eof(struct req *r)
{
    note_sock(r);
    if (r->sock < 0)
        return;
    ev_io *w = malloc(sizeof(*w));
    if (w == NULL)
        abort();
    ev_io_init(w, on_eof, r->sock, EV_READ);
    w->data = r;
    r->eof_watch = w;
    ev_io_start(loop_ev(r->wk->lp), w);
}

/* Writes v in lowercase hex (no leading zeros, no NUL); returns the length. */
static size_t put_hex(char *out, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[16];
    size_t n = 0, o = 0;
    do {
        tmp[n++] = hex[v & 15];
        v >>= 4;
    } while (v);
    while (n)
        out[o++] = tmp[--n];
    return o;
}

/* An invalid traceparent is ignored, as the Trace Context spec says, and
 * what a client sent never reaches the log unless it is 32 lowercase hex
 * digits. */
void http_trace_id(const char *tp, char *out)
{
    out[0] = '\0';
    if (tp == NULL)
        return;
    size_t n = strlen(tp);
    if (n < 55 || (n > 55 && (tp[55] != '-' || strncmp(tp, "00", 2) == 0)) || tp[2] != '-' ||
        tp[35] != '-' || tp[52] != '-' || strncmp(tp, "ff", 2) == 0)
        return;
    static const char hex[] = "0123456789abcdef";
    bool trace_set = false, parent_set = false; /* all-zero ids are invalid */
    for (size_t i = 0; i < 55; i++) {
        if (i == 2 || i == 35 || i == 52)
            continue;
        if (tp[i] == '\0' || strchr(hex, tp[i]) == NULL)
            return;
        if (i >= 3 && i < 35)
            trace_set = trace_set || tp[i] != '0';
        else if (i >= 36 && i < 52)
            parent_set = parent_set || tp[i] != '0';
    }
    if (!trace_set || !parent_set)
        return;
    memcpy(out, tp + 3, 32);
    out[32] = '\0';
}

static void req_start(struct http_worker *wk, struct req *r, struct MHD_Connection *conn,
                      const char *url, const char *method)
{
    r->wk = wk;
    r->conn = conn;
    r->url = url;
    r->method = method;
    r->start_us = lk_now_us();
    r->sock = -1;
    r->trace_id[0] = '\0';
    if (wk->srv->cfg->access_log && lk_log_level <= LK_INFO)
        http_trace_id(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
                      r->trace_id);
    const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (rid != NULL && strlen(rid) < sizeof(r->req_id) && rid[0] != '\0') {
        bool clean = true;
        for (const char *p = rid; *p; p++)
            if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
                clean = false;
        if (clean)
            lk_strlcpy(r->req_id, rid, sizeof(r->req_id));
    }
    if (r->req_id[0] == '\0') {
        /* "<run>-<worker hex>-<sequence hex>", by hand: one per request;
         * <run> (6 random hex digits per lockd start) keeps ids of one run
         * apart from the next one's. */
        size_t o = 6;
        memcpy(r->req_id, wk->srv->run_id, o);
        r->req_id[o++] = '-';
        o += put_hex(r->req_id + o, (uint64_t)wk->index);
        r->req_id[o++] = '-';
        o += put_hex(r->req_id + o, ++wk->req_seq);
        r->req_id[o] = '\0';
    }
}

static enum MHD_Result header_bytes_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + (value != NULL ? strlen(value) : 0) + 4; /* ": " CRLF */
    return MHD_YES;
}

/* The request line and headers as they came, near enough (MHD keeps no total). */
static size_t header_bytes(const struct req *r)
{
    size_t n = strlen(r->method) + strlen(r->url) + 12;
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, header_bytes_cb, &n);
    return n;
}

static void route_request(struct req *r)
{
    if (header_bytes(r) > HEADERS_MAX) {
        http_add_header(r, "Connection", "close");
        errors_respond_code(r, LK_HEADERS_TOO_LARGE, NULL);
        return;
    }
    char allow[72];
    enum lk_code why = LK_NO_ROUTE;
    const char *param = NULL, *label;
    r->route = router_match(r->method, r->url, &param, &why, allow, sizeof(allow), &label);
    r->label = label; /* a 405 or OPTIONS counts under its path's route too */
    /* The token first: without it, a 404 or 405 would already tell a
     * stranger which routes and methods exist. */
    bool guarded = r->route != NULL ? r->route->guarded : !router_path_open(r->url);
    if ((guarded || r->wk->srv->cfg->auth_metrics) && auth_enabled() &&
        !auth_check(http_header(r, MHD_HTTP_HEADER_AUTHORIZATION))) {
        http_add_header(r, "WWW-Authenticate", "Bearer realm=\"lockd\"");
        errors_respond_code(r, LK_UNAUTHORIZED, NULL);
        return;
    }
    if (r->route == NULL) {
        if (why == LK_OK) { /* OPTIONS on a known path */
            http_add_header(r, "Allow", allow);
            http_respond_text(r, 204, NULL, NULL, 0);
        } else if (why == LK_METHOD_NOT_ALLOWED) {
            http_add_header(r, "Allow", allow);
            char msg[160];
            snprintf(msg, sizeof(msg), "method %.16s is not allowed here; use %s", r->method,
                     allow);
            errors_respond_msg(r, LK_METHOD_NOT_ALLOWED, msg, NULL);
        } else {
            errors_respond_code(r, LK_NO_ROUTE, NULL);
        }
        return;
    }
    if (param != NULL) {
        size_t n = strlen(param);
        if (n < sizeof(r->param_small)) {
            memcpy(r->param_small, param, n + 1);
            r->param = r->param_small;
        } else {
            r->param_buf = strdup(param);
            if (r->param_buf == NULL)
                abort();
            r->param = r->param_buf;
        }
    }
}

/* Headers that nearly fill MHD's pool leave it no room to write any answer
 * ("failed to create response header": the client would get nothing). The
 * 431 is small and the connection closes after it: it is written straight
 * to the socket (on HTTPS as TLS records of the connection's session), and
 * MHD is told to close. */
static enum MHD_Result answer_431_direct(struct req *r)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nX-Request-Id: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     r->req_id, r->resp_len);
    const struct conn_track *t = r->track;
    int fd = t->fd;
    if (n > 0 && (size_t)n < sizeof(head) && t->tls != NULL) {
        char all[sizeof(head) + 512];
        if ((size_t)n + r->resp_len <= sizeof(all)) {
            memcpy(all, head, (size_t)n);
            memcpy(all + n, r->resp, r->resp_len);
            (void)http_own_tls_write(t->tls, all, (size_t)n + r->resp_len);
        }
        return MHD_NO;
    }
    if (n > 0 && (size_t)n < sizeof(head) && fd >= 0) {
        struct iovec iov[2] = {{head, (size_t)n}, {r->resp, r->resp_len}};
        ssize_t sent = writev(fd, iov, 2); /* ~300 bytes into an empty socket buffer */
        (void)sent;
        shutdown(fd, SHUT_WR);
    }
    return MHD_NO; /* MHD closes the connection; req_done logs the 431 */
}

static void body_free(struct req *r)
{
    if (r->body != r->body_small)
        free(r->body);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct http_worker *wk = cls;
    struct req *r = *con_cls;
    if (r == NULL) {
        r = malloc(sizeof(*r));
        if (r == NULL)
            abort();
        memset(r, 0, REQ_ZEROED);
        r->grant_lease[0] = '\0';
        *con_cls = r;
        r->track = track_of(conn);
        req_start(wk, r, conn, url, method);
        route_request(r);
        if (r->status == 431 && r->track != NULL &&
            (r->wk->srv->tls_cert == NULL || ((struct conn_track *)r->track)->tls != NULL))
            return answer_431_direct(r);
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL &&
            strtoull(cl, NULL, 10) > (unsigned long long)wk->srv->cfg->max_body_bytes) {
            /* Answer before reading: MHD closes the connection after. */
            r->body_too_large = true;
            track_dispatched(wk, r->track);
            char msg[96];
            snprintf(msg, sizeof(msg), "request body is larger than %lld bytes",
                     (long long)wk->srv->cfg->max_body_bytes);
            errors_respond_msg(r, LK_BODY_TOO_LARGE, msg, NULL);
            return queue(r);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->body_too_large)
            return MHD_YES; /* chunked and too large: discard, bounded memory */
        if (r->body_len + n > (size_t)wk->srv->cfg->max_body_bytes) {
            r->body_too_large = true;
            body_free(r);
            r->body = NULL;
            r->body_len = 0;
            return MHD_YES;
        }
        if (r->body_len + n < sizeof(r->body_small) &&
            (r->body == NULL || r->body == r->body_small)) {
            r->body = r->body_small;
        } else if (r->body == r->body_small) {
            char *b = malloc(r->body_len + n + 1);
            if (b == NULL)
                abort();
            memcpy(b, r->body_small, r->body_len);
            r->body = b;
        } else {
            r->body = realloc(r->body, r->body_len + n + 1);
            if (r->body == NULL)
                abort();
        }
        memcpy(r->body + r->body_len, upload_data, n);
        r->body_len += n;
        r->body[r->body_len] = '\0';
        return MHD_YES;
    }
    if (r->park == REQ_HELD)
        return MHD_YES; /* MHD polls a held request on each run: not yet */
    track_dispatched(wk, r->track);
    if (r->ready) {
        if (r->park == REQ_ANSWERED) { /* MHD came first; the flush must not */
            DL_DELETE2(wk->answered, r, sprev, snext);
            unhold(r);
        }
        return queue(r);
    }
    if (r->body_too_large) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request body is larger than %lld bytes",
                 (long long)wk->srv->cfg->max_body_bytes);
        errors_respond_msg(r, LK_BODY_TOO_LARGE, msg, NULL);
        return queue(r);
    }
    r->route->fn(r);
    if (r->ready)
        return queue(r);
    /* The engine answers later on this loop: park the request (enum
     * req_park). A waiter's hang-up withdraws it at once; any other parked
     * request's hang-up is seen when its grant comes
     * (http_grant_undeliverable). */
    DL_APPEND2(wk->parked, r, sprev, snext);
    if (r->waiting) {
        r->park = REQ_SUSPENDED;
        r->suspended_us = lk_now_us();
        MHD_suspend_connection(conn);
        watch_eof(r);
    } else {
        r->park = REQ_HELD;
        wk->nheld++;
        if (wk->hold_untimed)
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
        note_sock(r);
    }
    return MHD_YES;
}

static void release_ignored(void *arg, const struct eng_result *res)
{
    (void)arg;
    (void)res;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    struct req *r = *con_cls;
    if (r == NULL)
        return;
    *con_cls = NULL;
    struct http_worker *wk = r->wk;
    struct conn_track *t = r->track;
    r->track = NULL;
    int64_t now_us = lk_now_us(); /* lk_now_ms() is this clock in ms */
    if (t != NULL)                /* the next request's time starts now */
        track_restart(wk, t, now_us / 1000);
    stop_eof_watch(r);
    switch ((enum req_park)r->park) {
    case REQ_SUSPENDED:
        r->start_us += now_us - r->suspended_us; /* as set_ready does */
        DL_DELETE2(wk->parked, r, sprev, snext);
        break;
    case REQ_HELD:
        /* The engine still has it: done when its answer comes. MHD frees
         * the connection's memory now, method and path with it: keep the
         * route's own (a held request always has a route). */
        r->orphan = true;
        r->conn = NULL;
        r->sock = -1;
        r->method = r->route->method;
        r->url = r->route->label;
        wk->nheld--;
        return;
    case REQ_ANSWERED: DL_DELETE2(wk->answered, r, sprev, snext); break;
    case REQ_LIVE: break;
    }
    r->park = REQ_LIVE;
    if (r->status == 0 && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        /* Ended by an answer libmicrohttpd made itself (a bad chunk). */
        enum lk_code own = http_own_take();
        if (own != LK_OK) {
            r->status = errors_status(own);
            r->error = errors_row(own)->error;
        }
    }
    req_done(r, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK, now_us);
}

/* Counts, logs and frees a request; delivered: its client got the answer. */
static void req_done(struct req *r, bool delivered, int64_t now_us)
{
    struct http_worker *wk = r->wk;
    if (r->waiting) {
        engine_cancel(wk->srv->e, r->waiter);
        r->waiting = false;
    }
    if (r->grant_pending && !delivered) {
        /* The client never got its lease: give the lock (or a multi-lock's
         * every name) back now. */
        for (const char *n = r->grant_names ? r->grant_names : r->param; n[0] != '\0';
             n += strlen(n) + 1) {
            enum lk_code c =
                engine_release(wk->srv->e, wk->lp, n, r->grant_lease, release_ignored, NULL);
            (void)c;
            if (r->grant_names == NULL)
                break;
        }
    }
    int64_t us = now_us - r->start_us;
    metrics_http(r->label ? r->label : "other", r->method, r->status, us);
    if (wk->srv->cfg->access_log && lk_log_level <= LK_INFO) {
        char status[8], dur[24], token[24];
        snprintf(status, sizeof(status), "%d", r->status);
        snprintf(dur, sizeof(dur), "%.3f", (double)us / 1000.0);
        snprintf(token, sizeof(token), "%lld", (long long)r->token);
        /* The parameter of /sessions/{id} is a session id, a secret the
         * logger cuts like a lease; of /locks/{name}, a lock name. */
        const char *pkey =
            r->route && strncmp(r->route->label, "/sessions", 9) == 0 ? "session" : "name";
        /* The path holds a session id too: cut it there the same way. */
        char path[64];
        const char *shown_path = r->url;
        if (pkey[0] == 's' && r->param && strlen(r->param) > 6) {
            snprintf(path, sizeof(path), "/sessions/%.6s...", r->param);
            shown_path = path;
        }
        /* A new session's id, cut by the logger like any session id: the
         * Location of POST /sessions' 201. */
        const char *created = NULL;
        if (r->status == 201 && r->route != NULL && strcmp(r->route->label, "/sessions") == 0)
            for (int i = 0; i < r->nhdrs; i++)
                if (strcmp(r->hdr_name[i], "Location") == 0 &&
                    strncmp(r->hdr_value[i], "/sessions/", 10) == 0)
                    created = r->hdr_value[i] + 10;
        /* An error's client address: who to ask about a 401 or a flood of
         * 409s. Only then, and only while MHD still has the connection. */
        char client[INET6_ADDRSTRLEN + 8];
        client[0] = '\0';
        if (r->status >= 400 && r->conn != NULL)
            http_peer(r, client, sizeof(client));
        /* Short fields first: a line too long for the logger loses its last
         * fields (the client-chosen path and name), never status or ms.
         * Optional ones are packed, as the list ends at the first NULL key. */
        const char *kv[18] = {NULL};
        int n = 0;
        if (r->error != NULL && r->status >= 400) {
            kv[n++] = "error";
            kv[n++] = r->error;
        }
        if (client[0] != '\0') {
            kv[n++] = "client";
            kv[n++] = client;
        }
        if (r->token > 0) {
            kv[n++] = "fencing_token";
            kv[n++] = token;
        }
        if (r->grant_lease[0]) {
            kv[n++] = "lease";
            kv[n++] = r->grant_lease;
        }
        if (created != NULL) {
            kv[n++] = "session";
            kv[n++] = created;
        }
        if (r->trace_id[0] != '\0') {
            kv[n++] = "trace_id";
            kv[n++] = r->trace_id;
        }
        kv[n++] = "path";
        kv[n++] = shown_path;
        if (r->param) {
            kv[n++] = pkey;
            kv[n++] = r->param;
        }
        lk_log_kv(LK_INFO, "request", "req_id", r->req_id, "method", r->method, "status", status,
                  "ms", dur, kv[0], kv[1], kv[2], kv[3], kv[4], kv[5], kv[6], kv[7], kv[8], kv[9],
                  kv[10], kv[11], kv[12], kv[13], kv[14], kv[15], (char *)NULL);
    }
    free(r->param_buf);
    free(r->grant_names);
    body_free(r);
    free(r->resp);
    free(r);
}

/* Percent-decoding lives in parse.c (shared with the fuzz targets). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return parse_unescape(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    lk_log(LK_DEBUG, "libmicrohttpd: %s", msg);
}

/* ---- listening ---- */

static int open_listener(struct sockaddr_storage *ss, socklen_t sl, char *err, size_t errlen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create socket: %s", strerror(errno));
        return -1;
    }
    /* No SO_REUSEPORT: with it a second lockd on the same port would bind
     * too and split the clients, so one name could have two holders. The
     * workers share this one socket instead (a dup each). */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss->ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)ss, sl) != 0 || listen(fd, 4096) != 0) {
        snprintf(err, errlen, "cannot listen: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void *worker_main(void *arg)
{
    struct http_worker *wk = arg;
    loop_run(wk->lp);
    return NULL;
}

static void worker_init(void *arg)
{
    struct http_worker *wk = arg;
    struct ev_loop *ev = loop_ev(wk->lp);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(wk->d, MHD_DAEMON_INFO_EPOLL_FD);
    ev_io_init(&wk->epoll_w, on_epoll, di->epoll_fd, EV_READ);
    wk->epoll_w.data = wk;
    ev_io_start(ev, &wk->epoll_w);
    ev_timer_init(&wk->mhd_timer, on_mhd_timer, 0., 0.);
    wk->mhd_timer.data = wk;
    ev_prepare_init(&wk->prep, on_prepare);
    wk->prep.data = wk;
    ev_prepare_start(ev, &wk->prep);
    ev_timer_init(&wk->slow_timer, on_slow_timer, 0.25, 0.25);
    wk->slow_timer.data = wk;
    ev_timer_start(ev, &wk->slow_timer);
    mhd_drive(wk);
}

/* libmicrohttpd parsed a request line: http_own.c may have to answer it
 * itself (a bad Content-Length). Returns the request's initial *con_cls. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)uri;
    http_own_note(conn);
    return NULL;
}

static int start_daemon(struct http_worker *wk, char *err, size_t errlen)
{
    const struct lk_config *cfg = wk->srv->cfg;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    unsigned limit = (unsigned)((cfg->max_connections + wk->srv->n - 1) / wk->srv->n);
    wk->conn_limit = limit;
    struct MHD_OptionItem opts[16];
    int n = 0;
    /* The logger first: libmicrohttpd warns (through its default logger) of
     * one that comes later. */
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, wk->lfd, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)limit, NULL};
    wk->mhd_timeout_s = (unsigned)((cfg->connection_timeout_ms + 999) / 1000);
    /* MHD counts idle time from the request's last byte, in whole seconds */
    wk->hold_untimed = cfg->backend_timeout_ms + 1000 >= (int64_t)wk->mhd_timeout_s * 1000;
    opts[n++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)wk->mhd_timeout_s, NULL};
    /* POOL_BYTES: headers and the read/write buffers only (bodies are copied
     * out chunk by chunk). MHD zeroes the pool for every request on a
     * keep-alive connection, so a larger pool costs a large memset per request. */
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, POOL_BYTES, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_INCREMENT, 2048, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, wk};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)unescape, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)uri_seen, NULL};
    if (wk->srv->tls_cert != NULL) {
        flags |= MHD_USE_TLS;
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, wk->srv->tls_cert};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, wk->srv->tls_key};
    }
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    wk->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, wk, MHD_OPTION_ARRAY, opts,
                             MHD_OPTION_END);
    if (wk->d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server (libmicrohttpd refused the options)");
        return -1;
    }
    return 0;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, len = 0;
    char *buf = lk_malloc(cap + 1);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len, f)) > 0 && len + r < cap)
        len += r;
    len += r;
    fclose(f);
    buf[len < cap ? len : cap] = '\0';
    return buf;
}

static enum MHD_Result check_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)conn;
    (void)url;
    (void)method;
    (void)version;
    (void)upload_data;
    (void)upload_size;
    (void)con_cls;
    return MHD_NO;
}

int http_check(const struct lk_config *cfg, char *err, size_t errlen)
{
    if (cfg->tls_cert[0] == '\0')
        return 0;
    char why[400];
    char *cert = slurp(cfg->tls_cert, why, sizeof(why));
    char *key = cert != NULL ? slurp(cfg->tls_key, why, sizeof(why)) : NULL;
    if (key == NULL) {
        snprintf(err, errlen, "invalid value for '%s': %s", cert == NULL ? "tls_cert" : "tls_key",
                 why);
        free(cert);
        return -1;
    }
    /* A daemon with no listening socket: GnuTLS reads both as http_start's
     * daemons will, and nothing is bound. */
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_NO_LISTEN_SOCKET | MHD_USE_TLS, 0, NULL, NULL,
                                            check_handler, NULL, MHD_OPTION_HTTPS_MEM_CERT, cert,
                                            MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
    if (d != NULL)
        MHD_stop_daemon(d);
    else
        snprintf(err, errlen,
                 "invalid value for 'tls_cert'/'tls_key': '%s' and '%s' are not a PEM "
                 "certificate and its private key",
                 cfg->tls_cert, cfg->tls_key);
    memset(key, 0, strlen(key));
    free(cert);
    free(key);
    return d != NULL ? 0 : -1;
}

struct http_server *http_start(const struct lk_config *cfg, struct engine *e, char *err,
                               size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (config_parse_listen(cfg->listen, &ss, &sl) != 0) {
        snprintf(err, errlen, "invalid value '%s' for 'listen': expected HOST:PORT", cfg->listen);
        return NULL;
    }
    router_declare_metrics();
    http_own_init();
    struct http_server *s = lk_calloc(1, sizeof(*s));
    lk_random_hex(s->run_id, 3);
    s->cfg = cfg;
    s->e = e;
    s->n = (int)cfg->threads;
    s->w = lk_calloc((size_t)s->n, sizeof(*s->w));
    if (cfg->tls_cert[0] != '\0') {
        s->tls_cert = slurp(cfg->tls_cert, err, errlen);
        s->tls_key = s->tls_cert ? slurp(cfg->tls_key, err, errlen) : NULL;
        if (s->tls_key == NULL)
            goto fail;
    }
    int lfd = open_listener(&ss, sl, err, errlen);
    if (lfd < 0)
        goto fail;
    struct sockaddr_storage got;
    socklen_t gl = sizeof(got);
    getsockname(lfd, (struct sockaddr *)&got, &gl);
    s->port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                             : ((struct sockaddr_in6 *)&got)->sin6_port);
    /* Every worker's daemon watches the one listening socket through its own
     * descriptor (MHD closes it on stop); whichever loop wakes first accepts. */
    for (int i = 0; i < s->n; i++) {
        struct http_worker *wk = &s->w[i];
        wk->srv = s;
        wk->index = i;
        wk->lfd = i == s->n - 1 ? lfd : fcntl(lfd, F_DUPFD_CLOEXEC, 0);
        if (wk->lfd < 0) {
            snprintf(err, errlen, "cannot share the listening socket: %s", strerror(errno));
            if (i < s->n - 1)
                close(lfd);
            goto fail;
        }
        if (i == s->n - 1)
            lfd = -1;
        if (start_daemon(wk, err, errlen) != 0) {
            if (lfd >= 0)
                close(lfd);
            goto fail;
        }
        wk->lp = loop_new(i);
    }
    for (int i = 0; i < s->n; i++) {
        struct http_worker *wk = &s->w[i];
        if (engine_attach(e, wk->lp) != LK_OK) {
            snprintf(err, errlen, "cannot attach the backend to worker %d", i);
            goto fail;
        }
        loop_post(wk->lp, worker_init, wk);
        if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
            snprintf(err, errlen, "cannot start worker thread: %s", strerror(errno));
            goto fail;
        }
        wk->started = true;
    }
    return s;
fail:
    http_stop(s);
    return NULL;
}

static void worker_fini(void *arg)
{
    struct http_worker *wk = arg;
    struct ev_loop *ev = loop_ev(wk->lp);
    ev_io_stop(ev, &wk->epoll_w);
    ev_timer_stop(ev, &wk->mhd_timer);
    ev_timer_stop(ev, &wk->slow_timer);
    ev_prepare_stop(ev, &wk->prep);
    /* Detach first: commands still in flight complete (503) while their
     * requests exist; then MHD frees every request in its completion
     * callback, here on this loop. */
    engine_detach(wk->srv->e, wk->lp);
    /* libmicrohttpd aborts if stopped with suspended connections: answer
     * whatever is still parked (a waiter that arrived as we stopped), let
     * MHD take the connections back, then stop it. */
    struct req *r, *tmp;
    DL_FOREACH_SAFE2(wk->parked, r, tmp, snext)
    {
        if (r->waiting) {
            r->waiting = false;
            engine_cancel(wk->srv->e, r->waiter);
            r->waiter = NULL;
        }
        errors_respond_code(r, LK_SHUTTING_DOWN, NULL);
    }
    flush_answered(wk);
    if (wk->d != NULL) {
        MHD_run(wk->d);
        MHD_stop_daemon(wk->d);
        wk->d = NULL;
    }
    loop_stop(wk->lp);
}

void http_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->n; i++) {
        struct http_worker *wk = &s->w[i];
        if (wk->started) {
            loop_post(wk->lp, worker_fini, wk);
            pthread_join(wk->thread, NULL);
        } else if (wk->d != NULL) {
            MHD_stop_daemon(wk->d);
            wk->d = NULL;
            wk->lfd = -1; /* closed by MHD */
        }
        if (wk->lp != NULL)
            loop_free(wk->lp);
        if (wk->lfd > 0 && !wk->started && wk->d == NULL)
            close(wk->lfd);
    }
    free(s->tls_cert);
    free(s->tls_key);
    free(s->w);
    free(s);
}
