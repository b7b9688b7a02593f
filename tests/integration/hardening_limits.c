/*
 * hardening_limits.c - no input can stall or bloat lockd: 500 slowloris
 * connections (partial requests, then silence) while a normal client
 * acquires and releases within 1 s; connection_timeout_ms closes stalled
 * connections; max_connections turns extra connections away and recovers;
 * max_body_bytes answers 413 body_too_large for Content-Length and for
 * chunked bodies; oversized headers are refused and lockd keeps serving;
 * GET /locks never returns more than 1000 locks per request, and paging
 * reaches every held lock exactly once.
 *
 * Runs on the backend TH_BACKEND names (tests/run.sh runs it on memory and
 * on Redis): every lockd here is started with the fixture's backend flags.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "server/util.h"
#include "tests/lib/fixture.h"

static struct fixture fx;
static struct th_client *cl;

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        th_fail(__FILE__, __LINE__, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        th_fail(__FILE__, __LINE__, "connect: %s", strerror(errno));
    return fd;
}

static void send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* the server may close early (413): the answer tells */
        p += n;
        len -= (size_t)n;
    }
}

/* Reads until EOF or a whole Content-Length framed response, within
 * timeout_ms. Returns the status (0 if none) and the text in buf. */
static int raw_response(int fd, char *buf, size_t cap, int timeout_ms, bool *closed)
{
    size_t got = 0;
    int64_t end = th_now_ms() + timeout_ms;
    *closed = false;
    buf[0] = '\0';
    for (;;) {
        char *eoh = strstr(buf, "\r\n\r\n");
        if (eoh != NULL) {
            const char *clen = strcasestr(buf, "\r\nContent-Length:");
            size_t body = clen ? (size_t)strtoul(clen + 17, NULL, 10) : 0;
            if (got >= (size_t)(eoh + 4 - buf) + body)
                break;
        }
        int64_t left = end - th_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0) {
            *closed = true;
            break;
        }
        got += (size_t)n;
        buf[got] = '\0';
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = 0;
    return status;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = rl.rlim_max;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < 700)
        th_fail(__FILE__, __LINE__, "need 700 file descriptors, the hard limit is %llu",
                (unsigned long long)rl.rlim_max);
}

static void test_slowloris(void)
{
    struct th_lockd l;
    fx_lockd_start(&fx, &l, NULL, NULL); /* defaults: max_connections 10000, 30 s timeout */
    fx_check_backend(&fx, &l);
    enum { N = 500 };
    static int fds[N];
    static const char *partial[] = {
        "POST /locks/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le",
        "POST /locks/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"ttl_",
        "GET /locks/sl",
        "POST /locks/slow HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: x\r\n\r\n5\r\n{\"tt",
    };
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect(l.port);
        send_all(fds[i], partial[i % 4], strlen(partial[i % 4]));
    }
    /* Let lockd accept and read them all before the normal client comes. */
    th_sleep_ms(200);
    struct th_client *c = th_client_new();
    char url[128];
    snprintf(url, sizeof(url), "%s/locks/normal", l.url);
    for (int round = 0; round < 3; round++) {
        int64_t t0 = th_now_ms();
        struct th_resp r;
        th_http(c, "POST", url, "{\"ttl_ms\":5000}", NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        char hdr[80];
        snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
        th_resp_free(&r);
        const char *hs[] = {hdr, NULL};
        th_http(c, "DELETE", url, NULL, hs, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
        int64_t took = th_now_ms() - t0;
        if (took >= 1000)
            th_fail(__FILE__, __LINE__, "acquire+release took %lld ms beside %d slow clients",
                    (long long)took, N);
    }
    th_client_free(c);
    /* The slow clients are still connected (nothing was dropped to serve). */
    int open = 0;
    for (int i = 0; i < N; i++) {
        char b;
        if (recv(fds[i], &b, 1, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN)
            open++;
        close(fds[i]);
    }
    CHECK(open >= N - 5);
    CHECK(kill(l.pid, 0) == 0);
    th_lockd_kill(&l, SIGTERM);
}

static void test_connection_timeout(void)
{
    struct th_lockd l;
    const char *args[] = {"--connection_timeout_ms", "1000", NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    int fd = raw_connect(l.port);
    send_all(fd, "GET /healthz HTTP/1.1\r\nHo", 25);
    int64_t t0 = th_now_ms();
    char buf[4096];
    bool closed;
    raw_response(fd, buf, sizeof(buf), 5000, &closed);
    int64_t took = th_now_ms() - t0;
    CHECK(closed);
    if (took < 500 || took > 3500)
        th_fail(__FILE__, __LINE__, "a stalled connection was closed after %lld ms, want ~1000",
                (long long)took);
    close(fd);

    /* A client that trickles its request a byte every 200 ms never goes
     * idle, but its request must still arrive whole within the timeout: it is
     * cut off after about 1 s, not after the 6 s its bytes would take. A
     * keep-alive client's next request gets its own full second. */
    static const char req[] =
        "POST /locks/trickle HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n"
        "{\"ttl_ms\":5000}";
    fd = raw_connect(l.port);
    t0 = th_now_ms();
    bool cut = false;
    for (size_t i = 0; i < sizeof(req) - 1 && th_now_ms() - t0 < 8000; i++) {
        if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1) {
            cut = true;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) { /* readable: closed (or answered) */
            char b[64];
            if (recv(fd, b, sizeof(b), 0) <= 0) {
                cut = true;
                break;
            }
        }
    }
    took = th_now_ms() - t0;
    close(fd);
    if (!cut || took > 3500)
        th_fail(__FILE__, __LINE__, "a trickling client was %s after %lld ms, want cut at ~1000",
                cut ? "cut" : "still connected", (long long)took);
    struct th_resp r;
    char url[128];
    snprintf(url, sizeof(url), "%s/locks/trickle", l.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    CHECK(json_is_false(json_object_get(r.json, "held")));
    th_resp_free(&r);
    /* Keep-alive: two requests 700 ms apart on one connection both answered. */
    fd = raw_connect(l.port);
    for (int i = 0; i < 2; i++) {
        if (i == 1)
            th_sleep_ms(700);
        static const char hz[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        send_all(fd, hz, sizeof(hz) - 1);
        CHECK_EQ_INT(raw_response(fd, buf, sizeof(buf), 3000, &closed), 200);
    }
    close(fd);
    /* A waiter parked past the timeout is not cut (its request arrived
     * whole); once answered, its connection's next request has its own
     * second again: stalled, it is cut at ~1 s. */
    snprintf(url, sizeof(url), "%s/locks/kw", l.url);
    th_http(cl, "POST", url, "{\"ttl_ms\":20000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    static const char wq[] = "POST /locks/kw HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n"
                             "{\"ttl_ms\":5000,\"wait_ms\":2200}";
    fd = raw_connect(l.port);
    send_all(fd, wq, sizeof(wq) - 1);
    t0 = th_now_ms();
    CHECK_EQ_INT(raw_response(fd, buf, sizeof(buf), 8000, &closed), 409);
    took = th_now_ms() - t0;
    CHECK(!closed);
    if (took < 1800)
        th_fail(__FILE__, __LINE__, "a waiter was answered after %lld ms, want ~2200",
                (long long)took);
    send_all(fd, "GET /healthz HTTP/1.1\r\nHo", 25);
    t0 = th_now_ms();
    raw_response(fd, buf, sizeof(buf), 5000, &closed);
    took = th_now_ms() - t0;
    CHECK(closed);
    if (took < 500 || took > 3500)
        th_fail(__FILE__, __LINE__, "a stalled request after a wait was closed after %lld ms",
                (long long)took);
    close(fd);
    th_lockd_kill(&l, SIGTERM);
}

static void test_max_connections(void)
{
    struct th_lockd l;
    const char *args[] = {"--threads", "1", "--max_connections", "4", NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    int fds[4];
    char buf[4096];
    bool closed;
    for (int i = 0; i < 4; i++) {
        fds[i] = raw_connect(l.port);
        send_all(fds[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
        CHECK_EQ_INT(raw_response(fds[i], buf, sizeof(buf), 3000, &closed), 200);
    }
    /* The fifth is turned away: closed, not answered, not left hanging. */
    int extra = raw_connect(l.port);
    send_all(extra, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 35);
    int st = raw_response(extra, buf, sizeof(buf), 3000, &closed);
    CHECK(st != 200);
    close(extra);
    /* Freed slots serve again. */
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    th_sleep_ms(100);
    struct th_resp r;
    char url[128];
    snprintf(url, sizeof(url), "%s/healthz", l.url);
    struct th_client *c = th_client_new();
    th_http(c, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    th_client_free(c);
    th_lockd_kill(&l, SIGTERM);
}

static void expect_413(const char *text, bool json)
{
    if (strstr(text, "HTTP/1.1 413") != text)
        th_fail(__FILE__, __LINE__, "want 413, got: %.200s", text);
    if (json) {
        const char *body = strstr(text, "\r\n\r\n");
        CHECK(body != NULL);
        json_t *o = json_loads(body + 4, 0, NULL);
        CHECK(o != NULL);
        CHECK_STR(json_string_value(json_object_get(o, "error")), "body_too_large");
        CHECK(json_string_value(json_object_get(o, "message")) != NULL);
        json_decref(o);
    }
}

static void test_body_limit(void)
{
    struct th_lockd l;
    const char *args[] = {"--max_body_bytes", "1024", NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    char url[128];
    snprintf(url, sizeof(url), "%s/locks/bodies", l.url);
    struct th_resp r;
    /* Exactly the limit: read and parsed (it is not JSON: 400, not 413). */
    char *body = malloc(4096);
    memset(body, ' ', 1024);
    body[0] = 'x';
    body[1024] = '\0';
    th_http(cl, "POST", url, body, NULL, &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), "invalid_json");
    th_resp_free(&r);
    /* One byte over, with Content-Length. */
    memset(body, ' ', 1025);
    body[1025] = '\0';
    th_http(cl, "POST", url, body, NULL, &r);
    CHECK_EQ_INT(r.status, 413);
    CHECK_STR(th_jerr(&r), "body_too_large");
    th_resp_free(&r);
    /* A huge Content-Length is answered before the body is sent. */
    int fd = raw_connect(l.port);
    const char *hdr =
        "POST /locks/bodies HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n";
    send_all(fd, hdr, strlen(hdr));
    char buf[8192];
    bool closed;
    raw_response(fd, buf, sizeof(buf), 3000, &closed);
    expect_413(buf, true);
    close(fd);
    /* Chunked, 5 x 1000 bytes: discarded as it comes, then 413. */
    fd = raw_connect(l.port);
    hdr = "POST /locks/bodies HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, hdr, strlen(hdr));
    memset(body, 'a', 1000);
    for (int i = 0; i < 5; i++) {
        send_all(fd, "3e8\r\n", 5);
        send_all(fd, body, 1000);
        send_all(fd, "\r\n", 2);
    }
    send_all(fd, "0\r\n\r\n", 5);
    raw_response(fd, buf, sizeof(buf), 3000, &closed);
    expect_413(buf, true);
    close(fd);
    /* Chunked under the limit still works. */
    fd = raw_connect(l.port);
    send_all(fd, hdr, strlen(hdr));
    const char *small = "e\r\n{\"ttl_ms\":5000\r\n1\r\n}\r\n0\r\n\r\n";
    send_all(fd, small, strlen(small));
    CHECK_EQ_INT(raw_response(fd, buf, sizeof(buf), 3000, &closed), 200);
    close(fd);
    /* A body that starts in the request's inline buffer (128 bytes) and
     * outgrows it chunk by chunk arrives whole: the 128-byte owner, split
     * across three chunks, comes back in the grant. */
    char owner[LK_OWNER_MAX + 1];
    for (int i = 0; i < LK_OWNER_MAX; i++)
        owner[i] = (char)('a' + i % 26);
    owner[LK_OWNER_MAX] = '\0';
    char full[512];
    int flen = snprintf(full, sizeof(full), "{\"ttl_ms\":5000,\"owner\":\"%s\"}", owner);
    fd = raw_connect(l.port);
    hdr = "POST /locks/grown HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, hdr, strlen(hdr));
    int cuts[] = {0, 100, 140, flen};
    for (int i = 0; i < 3; i++) {
        char sz[16];
        int n = snprintf(sz, sizeof(sz), "%x\r\n", cuts[i + 1] - cuts[i]);
        send_all(fd, sz, (size_t)n);
        send_all(fd, full + cuts[i], (size_t)(cuts[i + 1] - cuts[i]));
        send_all(fd, "\r\n", 2);
        usleep(20000); /* separate reads, so separate upload callbacks */
    }
    send_all(fd, "0\r\n\r\n", 5);
    CHECK_EQ_INT(raw_response(fd, buf, sizeof(buf), 3000, &closed), 200);
    char want[LK_OWNER_MAX + 16];
    snprintf(want, sizeof(want), "\"owner\":\"%s\"", owner);
    CHECK(strstr(buf, want) != NULL);
    close(fd);
    free(body);
    CHECK(kill(l.pid, 0) == 0);
    th_lockd_kill(&l, SIGTERM);
}

static void test_header_limit(void)
{
    struct th_lockd l;
    fx_lockd_start(&fx, &l, NULL, NULL);
    /* 64 KiB of headers: over libmicrohttpd's per-connection memory (32 KiB). */
    size_t big = 64 * 1024;
    char *req = malloc(big + 256);
    int n = snprintf(req, 256, "GET /locks/h HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'b', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    int fd = raw_connect(l.port);
    send_all(fd, req, strlen(req));
    char buf[8192];
    bool closed;
    int st = raw_response(fd, buf, sizeof(buf), 3000, &closed);
    /* libmicrohttpd 0.9.75 answers this itself (431, or 413 in older
     * releases) with its own small HTML page, before lockd sees the request:
     * the API has no hook for a JSON body here. What matters: refused. */
    if (st != 431 && st != 413)
        th_fail(__FILE__, __LINE__, "oversized headers: status %d: %.200s", st, buf);
    close(fd);
    free(req);
    /* Headers under the limit (8 KiB for request line and headers, the
     * connection pool lockd gives libmicrohttpd) are fine. */
    struct th_resp r;
    char url[128], hbuf[8200];
    snprintf(url, sizeof(url), "%s/healthz", l.url);
    snprintf(hbuf, sizeof(hbuf), "X-Medium: %0*d", 6000, 0);
    const char *hs[] = {hbuf, NULL};
    th_http(cl, "GET", url, NULL, hs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK(kill(l.pid, 0) == 0);
    th_lockd_kill(&l, SIGTERM);
}

enum { NMANY = 1003 };

/* Pages through GET /locks?<query> (query without cursor) to the end. Every
 * page holds at most limit locks, each held, named with prefix, and
 * next_cursor is a string on every page but the last (null). Counts in seen[]
 * how often each many-NNNN name came back, and fails on any name seen twice
 * on the memory backend (Redis SCAN may return a key again when Redis resizes
 * its table between two pages, as openapi.yaml says). Returns the number of
 * pages. */
static int walk(const char *base, const char *query, size_t limit, const char *prefix,
                int seen[NMANY])
{
    char url[900];
    char cursor[600] = "";
    json_t *names = json_object(); /* every name seen, many-* or not */
    int pages = 0;
    memset(seen, 0, NMANY * sizeof(seen[0]));
    for (;;) {
        /* An empty page is allowed on Redis (SCAN); a cursor that never ends is not. */
        if (++pages > 4 * NMANY)
            th_fail(__FILE__, __LINE__, "GET /locks?%s: no last page after %d pages", query,
                    pages - 1);
        char *esc = curl_escape(cursor, 0);
        snprintf(url, sizeof(url), "%s/locks?%s%s%s%s", base, query,
                 query[0] && cursor[0] ? "&" : "", cursor[0] ? "cursor=" : "",
                 cursor[0] ? esc : "");
        curl_free(esc);
        struct th_resp r;
        th_http(cl, "GET", url, NULL, NULL, &r);
        if (r.status != 200)
            th_fail(__FILE__, __LINE__, "GET %s: %ld %s", url, r.status, r.body);
        json_t *locks = json_object_get(r.json, "locks");
        CHECK(json_is_array(locks));
        if (json_array_size(locks) > limit)
            th_fail(__FILE__, __LINE__, "GET %s: %zu locks, limit %zu", url, json_array_size(locks),
                    limit);
        size_t i;
        json_t *o;
        json_array_foreach (locks, i, o) {
            const char *name = json_string_value(json_object_get(o, "name"));
            CHECK(name != NULL && strncmp(name, prefix, strlen(prefix)) == 0);
            CHECK(json_is_true(json_object_get(o, "held")));
            if (json_object_get(names, name) != NULL && !fx_is_redis())
                th_fail(__FILE__, __LINE__, "GET /locks?%s: %s listed twice (page %d)", query, name,
                        pages);
            json_object_set_new(names, name, json_true());
            int k;
            char tail;
            if (sscanf(name, "many-%4d%c", &k, &tail) == 1 && k >= 0 && k < NMANY)
                seen[k]++;
        }
        json_t *next = json_object_get(r.json, "next_cursor");
        CHECK(json_is_null(next) || json_is_string(next));
        if (json_is_null(next)) {
            th_resp_free(&r);
            break;
        }
        CHECK(json_string_length(next) > 0 && json_string_length(next) < sizeof(cursor));
        snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
        th_resp_free(&r);
    }
    json_decref(names);
    return pages;
}

static void test_list_limit(void)
{
    struct th_lockd l;
    fx_lockd_start(&fx, &l, NULL, NULL);
    fx_check_backend(&fx, &l);
    char url[160];
    struct th_resp r;
    for (int i = 0; i < NMANY; i++) {
        snprintf(url, sizeof(url), "%s/locks/many-%04d", l.url, i);
        th_http(cl, "POST", url, NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        th_resp_free(&r);
    }
    snprintf(url, sizeof(url), "%s/locks?limit=1001", l.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), "invalid_field");
    th_resp_free(&r);
    static int seen[NMANY];
    if (!fx_is_redis()) {
        /* The memory backend fills every page: 1000, then the other 3, and
         * 100 by default. Not on Redis: a page there is what one SCAN call
         * found, which may be fewer than limit (the API promises at most
         * limit), so Redis gets only the walks below. */
        snprintf(url, sizeof(url), "%s/locks?limit=1000&prefix=many-", l.url);
        th_http(cl, "GET", url, NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 1000);
        const char *next = th_jstr(&r, "next_cursor");
        CHECK(next != NULL);
        char cursor[600];
        snprintf(cursor, sizeof(cursor), "%s", next);
        th_resp_free(&r);
        char *esc = curl_escape(cursor, 0);
        snprintf(url, sizeof(url), "%s/locks?limit=1000&prefix=many-&cursor=%s", l.url, esc);
        curl_free(esc);
        th_http(cl, "GET", url, NULL, NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 3);
        CHECK(json_is_null(json_object_get(r.json, "next_cursor")));
        th_resp_free(&r);
        /* The default page is 100. */
        snprintf(url, sizeof(url), "%s/locks", l.url);
        th_http(cl, "GET", url, NULL, NULL, &r);
        CHECK_EQ_INT(json_array_size(json_object_get(r.json, "locks")), 100);
        th_resp_free(&r);
    }
    /* Both backends (Redis pages come from SCAN and may be short: the API
     * promises at most limit): pages of at most 1000, and of at most the
     * default 100, reach every lock: exactly once on memory, at least once
     * on Redis (SCAN, see walk). */
    int pages = walk(l.url, "limit=1000&prefix=many-", 1000, "many-", seen);
    for (int i = 0; i < NMANY; i++)
        if (seen[i] < 1 || (seen[i] > 1 && !fx_is_redis()))
            th_fail(__FILE__, __LINE__, "limit=1000: many-%04d listed %d times", i, seen[i]);
    CHECK(pages >= 2);
    pages = walk(l.url, "", 100, "", seen);
    for (int i = 0; i < NMANY; i++)
        if (seen[i] < 1 || (seen[i] > 1 && !fx_is_redis()))
            th_fail(__FILE__, __LINE__, "default limit: many-%04d listed %d times", i, seen[i]);
    CHECK(pages >= 11);
    th_lockd_kill(&l, SIGKILL); /* 1003 held locks: nothing to drain */
}

int main(void)
{
    raise_nofile();
    fx_backend_start(&fx);
    cl = th_client_new();
    TH_RUN(test_slowloris);
    TH_RUN(test_connection_timeout);
    TH_RUN(test_max_connections);
    TH_RUN(test_body_limit);
    TH_RUN(test_header_limit);
    TH_RUN(test_list_limit);
    th_client_free(cl);
    fx_stop(&fx);
    return th_done();
}
