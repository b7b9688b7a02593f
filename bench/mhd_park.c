/*
 * mhd_park.c - what parking a request costs in libmicrohttpd, the way lockd
 * parks one while its Redis command is in flight: the same external-loop
 * epoll daemon on libev as api/http.c (8 KiB connection pool, TURBO), and a
 * handler that either answers at once (--mode now, lockd's memory backend)
 * or suspends the connection and resumes it on the next loop iteration
 * (--mode park: lockd's Redis path before 62097ac, its waiters since). --mode park-peek adds
 * the MSG_PEEK recv lockd makes before it answers a parked acquire. --mode
 * hold keeps the request without suspending it and queues the answer from
 * outside MHD_run on the next loop iteration, as lockd does since 62097ac
 * for a request waiting for one Redis round trip. bench/park.sh drives it
 * with bench/loadgen and reads its CPU per request.
 * --syscalls prints what one system call of each kind parking adds costs
 * on this machine, alone in a loop (no load, no libmicrohttpd).
 * Not part of lockd; no engine, no JSON parsing.
 */
#include <errno.h>
#include <ev.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <utlist.h>

enum mode { MODE_NOW, MODE_PARK, MODE_PARK_PEEK, MODE_HOLD };

struct ctx {
    struct ctx *prev, *next;
    struct MHD_Connection *conn;
    int sock;
    bool ready;
    bool held;
};

static enum mode g_mode;
static struct MHD_Daemon *g_d;
static struct ev_loop *g_ev;
static ev_timer g_timer;
static struct ctx *g_parked; /* suspended, resumed by the next prepare */
static struct ctx *g_held;   /* not suspended, answered by the next prepare */
static unsigned g_nheld;
static bool g_need_run;

static const char g_body[] = "{\"name\":\"x\",\"lease\":\"0123456789abcdef0123456789abcdef\","
                             "\"fencing_token\":1795557993888438,\"ttl_ms\":30000}\n";

static void drive(void)
{
    MHD_UNSIGNED_LONG_LONG ms;
    g_need_run = false;
    MHD_run(g_d);
    ev_timer_stop(g_ev, &g_timer);
    if (MHD_get_timeout(g_d, &ms) == MHD_YES) {
        if (ms == 0 && g_nheld > 0)
            ms = 1000;
        ev_timer_set(&g_timer, (double)ms / 1000.0, 0.);
        ev_timer_start(g_ev, &g_timer);
    }
}

static void on_epoll(struct ev_loop *ev, ev_io *w, int revents)
{
    (void)ev;
    (void)w;
    (void)revents;
    drive();
}

static void on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)t;
    (void)revents;
    drive();
}

static enum MHD_Result respond(struct ctx *c);

/* Stands in for the Redis reply: every parked request is answered the next
 * time the loop is about to block, as lockd answers when a reply is read. */
static void on_prepare(struct ev_loop *ev, ev_prepare *p, int revents)
{
    (void)ev;
    (void)p;
    (void)revents;
    struct ctx *c, *tmp;
    DL_FOREACH_SAFE (g_parked, c, tmp) {
        DL_DELETE(g_parked, c);
        if (g_mode == MODE_PARK_PEEK) {
            char b;
            ssize_t n = recv(c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            (void)n;
        }
        c->ready = true;
        MHD_resume_connection(c->conn);
        g_need_run = true;
    }
    DL_FOREACH_SAFE (g_held, c, tmp) {
        DL_DELETE(g_held, c);
        g_nheld--;
        c->held = false;
        respond(c);
        g_need_run = true;
    }
    if (g_need_run)
        drive();
}

static enum MHD_Result respond(struct ctx *c)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(sizeof(g_body) - 1, (void *)g_body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, "Lock-Lease", "0123456789abcdef0123456789abcdef");
    enum MHD_Result ret = MHD_queue_response(c->conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    (void)data;
    struct ctx *c = *con_cls;
    if (c == NULL) {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            abort();
        c->conn = conn;
        c->sock = -1;
        *con_cls = c;
        return MHD_YES;
    }
    if (*size > 0) {
        *size = 0; /* the body is read and dropped */
        return MHD_YES;
    }
    if (c->held)
        return MHD_YES;
    if (c->ready || g_mode == MODE_NOW)
        return respond(c);
    if (g_mode == MODE_HOLD) {
        c->held = true;
        DL_APPEND(g_held, c);
        g_nheld++;
        return MHD_YES;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL)
        c->sock = ci->connect_fd;
    MHD_suspend_connection(conn);
    DL_APPEND(g_parked, c);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    struct ctx *c = *con_cls;
    if (c != NULL && c->held) { /* its client left before the answer */
        DL_DELETE(g_held, c);
        g_nheld--;
    }
    free(c);
    *con_cls = NULL;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ns per call of getppid (the bare cost of entering the kernel), of a
 * recv that finds nothing (as after a resume) and of an epoll_ctl (a
 * suspend's DEL and a resume's ADD, timed as pairs), best of 5 runs. */
static int syscalls(void)
{
    enum { N = 200000 };
    int sv[2], ep = epoll_create1(0);
    if (ep < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("mhd_park");
        return 1;
    }
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLET};
    double best[3] = {1e18, 1e18, 1e18};
    char c;
    for (int run = 0; run < 5; run++) {
        double t0 = now_ns();
        for (int i = 0; i < N; i++)
            (void)getppid();
        double t1 = now_ns();
        for (int i = 0; i < N; i++)
            (void)recv(sv[0], &c, 1, MSG_DONTWAIT);
        double t2 = now_ns();
        for (int i = 0; i < N / 2; i++) {
            (void)epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &e);
            (void)epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL);
        }
        double t3 = now_ns();
        double d[3] = {(t1 - t0) / N, (t2 - t1) / N, (t3 - t2) / N};
        for (int k = 0; k < 3; k++)
            if (d[k] < best[k])
                best[k] = d[k];
    }
    printf("getppid %.0f ns, recv (nothing there) %.0f ns, epoll_ctl %.0f ns\n", best[0], best[1],
           best[2]);
    close(sv[0]);
    close(sv[1]);
    close(ep);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--syscalls") == 0)
        return syscalls();
    const char *port_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            g_mode = strcmp(m, "park") == 0        ? MODE_PARK
                     : strcmp(m, "hold") == 0      ? MODE_HOLD
                     : strcmp(m, "park-peek") == 0 ? MODE_PARK_PEEK
                                                   : MODE_NOW;
        } else if (strcmp(argv[i], "--port_file") == 0 && i + 1 < argc) {
            port_file = argv[++i];
        } else {
            fprintf(
                stderr,
                "usage: mhd_park [--mode now|park|park-peek|hold] [--port_file F] | --syscalls\n");
            return 64;
        }
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    g_d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO, 0, NULL, NULL,
                           on_request, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)8 * 1024,
                           MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_NOTIFY_COMPLETED,
                           on_completed, NULL, MHD_OPTION_END);
    if (g_d == NULL) {
        fprintf(stderr, "mhd_park: cannot start libmicrohttpd\n");
        return 1;
    }
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(g_d, MHD_DAEMON_INFO_BIND_PORT);
    const union MHD_DaemonInfo *ei = MHD_get_daemon_info(g_d, MHD_DAEMON_INFO_EPOLL_FD);
    if (pi == NULL || ei == NULL) {
        fprintf(stderr, "mhd_park: libmicrohttpd gives no port or epoll fd\n");
        return 1;
    }
    if (port_file != NULL) {
        FILE *f = fopen(port_file, "w");
        if (f == NULL || fprintf(f, "%u\n", (unsigned)pi->port) < 0 || fclose(f) != 0) {
            fprintf(stderr, "mhd_park: cannot write %s\n", port_file);
            return 1;
        }
    } else {
        printf("%u\n", (unsigned)pi->port);
        fflush(stdout);
    }
    g_ev = ev_default_loop(0);
    ev_io ew;
    ev_io_init(&ew, on_epoll, ei->epoll_fd, EV_READ);
    ev_io_start(g_ev, &ew);
    ev_timer_init(&g_timer, on_timer, 0., 0.);
    ev_prepare prep;
    ev_prepare_init(&prep, on_prepare);
    ev_prepare_start(g_ev, &prep);
    drive();
    ev_run(g_ev, 0);
    MHD_stop_daemon(g_d);
    return 0;
}
