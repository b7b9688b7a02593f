/*
 * first_hour.c - issue 27's HTTP details, each as a user met them: every
 * error is {"error","message"} JSON (also the answers libmicrohttpd makes on
 * its own: 431, also on HTTPS, 505, a bad chunk), Retry-After on every 503, 201 with
 * Location, HEAD and OPTIONS in Allow and OPTIONS answered 204, a form body
 * told its JSON form, no library internals in messages, a session's owner
 * inherited, a free lock's owner null, a session blocked by itself told so,
 * inspect's expires_at, a waited 409's holder expiry as of its answer, a
 * renewal's mode.
 * Real lockd processes on the memory backend.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "tests/lib/harness.h"

static struct th_lockd ld;
static struct th_client *cl;

static void req(const char *method, const char *path, const char *body, struct th_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", ld.url, path);
    th_http(cl, method, url, body, NULL, r);
}

/* A raw request; the answer must be {"error": want_error, "message": ...}
 * JSON with status want_status and Content-Type application/json. */
static void raw_json_error(const char *request, int want_status, const char *want_error)
{
    int fd = th_connect(ld.port);
    char body[4096];
    size_t len = strlen(request), off = 0;
    while (off < len) { /* large requests: the socket may take them in parts */
        ssize_t n = write(fd, request + off, len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    int st = th_raw_response(fd, body, sizeof(body));
    close(fd);
    if (st != want_status)
        th_fail(__FILE__, __LINE__, "status %d, want %d for %.40s...", st, want_status, request);
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    if (j == NULL)
        th_fail(__FILE__, __LINE__, "not JSON: '%.200s'", body);
    CHECK_STR(json_string_value(json_object_get(j, "error")), want_error);
    CHECK(json_is_string(json_object_get(j, "message")));
    json_decref(j);
}

static char *big_header_request(size_t n)
{
    char *r = malloc(n + 128);
    CHECK(r != NULL);
    int o = snprintf(r, 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(r + o, 'a', n);
    strcpy(r + o + n, "\r\n\r\n");
    return r;
}

static void test_headers_too_large_is_json(void)
{
    /* under 8 KiB: served; over it, in lockd's handler, at the edge of
     * libmicrohttpd's pool (9 KiB; 8.2-9.3 KiB and, from when it was
     * 12 KiB, 11.7-12.1 KiB: where it once sent nothing), and past its pool
     * (its own answer): 431 JSON each time */
    char *ok = big_header_request(7900);
    int fd = th_connect(ld.port);
    char body[512];
    CHECK_EQ_INT(th_raw_request(fd, ok, body, sizeof(body)), 200);
    close(fd);
    free(ok);
    const size_t sizes[] = {8160, 8300,  8700,  8900,  9000,  9100,
                            9300, 11700, 11800, 11900, 12100, 30000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *r = big_header_request(sizes[i]);
        raw_json_error(r, 431, "headers_too_large");
        free(r);
    }
}

struct tls_answer {
    char body[4096];
    size_t len;
    char ctype[128];
};

static size_t tls_body(char *d, size_t sz, size_t n, void *arg)
{
    struct tls_answer *a = arg;
    size_t k = sz * n;
    if (a->len + k < sizeof(a->body)) {
        memcpy(a->body + a->len, d, k);
        a->len += k;
        a->body[a->len] = '\0';
    }
    return k;
}

static size_t tls_header(char *d, size_t sz, size_t n, void *arg)
{
    struct tls_answer *a = arg;
    size_t k = sz * n;
    if (k > 14 && strncasecmp(d, "Content-Type: ", 14) == 0)
        snprintf(a->ctype, sizeof(a->ctype), "%.*s", (int)(k - 14), d + 14);
    return k;
}

/* GET url over HTTPS (certificate not checked) with one extra header line. */
static long tls_get(const char *url, const char *hdr, struct tls_answer *a, CURLcode *cc)
{
    struct curl_slist *hl = curl_slist_append(NULL, hdr);
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, tls_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, tls_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    *cc = curl_easy_perform(h);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_cleanup(h);
    curl_slist_free_all(hl);
    return st;
}

/* The same over HTTPS, where lockd cannot write to the socket itself: at
 * libmicrohttpd's pool edge (12000 to 12100 bytes) the client once got
 * nothing at all. */
static void test_headers_too_large_is_json_on_tls(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout fh.key -out fh.pem -days 2 -subj /CN=127.0.0.1 >fh-openssl.log 2>&1",
             th_tmpdir());
    CHECK(system(cmd) == 0);
    char cert[300], key[300];
    snprintf(cert, sizeof(cert), "%s/fh.pem", th_tmpdir());
    snprintf(key, sizeof(key), "%s/fh.key", th_tmpdir());
    const char *args[] = {"--tls_cert", cert, "--tls_key", key, NULL};
    struct th_lockd tl;
    th_lockd_start(&tl, args, NULL);
    char url[128];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", tl.port);
    const size_t sizes[] = {7900, 8300, 11700, 11900, 11950, 12000, 12050, 12100, 12200, 30000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *hdr = malloc(sizes[i] + 16);
        CHECK(hdr != NULL);
        int o = snprintf(hdr, 16, "X-Big: ");
        memset(hdr + o, 'a', sizes[i]);
        hdr[o + (int)sizes[i]] = '\0';
        struct tls_answer a = {.len = 0};
        CURLcode cc;
        long st = tls_get(url, hdr, &a, &cc);
        free(hdr);
        long want = sizes[i] < 8000 ? 200 : 431;
        if (st != want)
            th_fail(__FILE__, __LINE__, "HTTPS, %zu-byte header: status %ld (%s), want %ld",
                    sizes[i], st, curl_easy_strerror(cc), want);
        if (want != 431)
            continue;
        CHECK(strncmp(a.ctype, "application/json", 16) == 0);
        json_t *j = json_loads(a.body, 0, NULL);
        if (j == NULL)
            th_fail(__FILE__, __LINE__, "HTTPS, %zu-byte header: not JSON: '%.200s'", sizes[i],
                    a.body);
        CHECK_STR(json_string_value(json_object_get(j, "error")), "headers_too_large");
        json_decref(j);
    }
    /* libmicrohttpd's own answer that lockd writes itself, over TLS */
    struct tls_answer a = {.len = 0};
    CURLcode cc;
    CHECK_EQ_INT(tls_get(url, "Content-Length: abc", &a, &cc), 400);
    json_t *j = json_loads(a.body, 0, NULL);
    if (j == NULL)
        th_fail(__FILE__, __LINE__, "HTTPS, bad Content-Length: not JSON: '%.200s'", a.body);
    CHECK_STR(json_string_value(json_object_get(j, "error")), "bad_request");
    json_decref(j);
    th_lockd_kill(&tl, SIGTERM);
}

static void test_mhd_own_answers_are_json(void)
{
    raw_json_error("GET /healthz HTTP/2.5\r\nHost: x\r\n\r\n", 505, "http_version_not_supported");
    raw_json_error("POST /locks/own HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "zz\r\n",
                   400, "bad_request");
    raw_json_error("GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n", 400,
                   "bad_request");
    raw_json_error("GET  HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request");
    raw_json_error("POST /locks/own HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "FFFFFFFFFFFFFFFFFFFF\r\n",
                   413, "body_too_large");
    /* A bad Content-Length: libmicrohttpd 0.9.75 wrote this answer's header
     * twice (the body a client read was the second header) */
    raw_json_error("POST /locks/own HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400,
                   "bad_request");
    raw_json_error("POST /locks/own HTTP/1.1\r\nHost: x\r\n"
                   "Content-Length: 99999999999999999999999\r\n\r\n",
                   413, "body_too_large");
    /* A request libmicrohttpd ended with its own answer is logged with it
     * (once with status 0 and no error) */
    bool logged = false;
    for (int i = 0; i < 50 && !logged; i++) {
        FILE *f = fopen(ld.log, "r");
        char line[2048];
        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            if (strstr(line, "\"path\":\"/locks/own\"") != NULL &&
                strstr(line, "\"status\":413,") != NULL &&
                strstr(line, "\"error\":\"body_too_large\"") != NULL)
                logged = true;
        if (f != NULL)
            fclose(f);
        if (!logged)
            th_sleep_ms(100);
    }
    CHECK(logged);
}

static void test_allow_options_location(void)
{
    struct th_resp r;
    req("OPTIONS", "/locks/opt", NULL, &r);
    CHECK_EQ_INT(r.status, 204);
    CHECK_STR(th_header(&r, "Allow"), "POST, PUT, DELETE, GET, HEAD, OPTIONS");
    th_resp_free(&r);
    req("OPTIONS", "/metrics", NULL, &r);
    CHECK_EQ_INT(r.status, 204);
    CHECK_STR(th_header(&r, "Allow"), "GET, HEAD, OPTIONS");
    th_resp_free(&r);
    req("OPTIONS", "/nowhere", NULL, &r);
    CHECK_EQ_INT(r.status, 404);
    th_resp_free(&r);
    req("POST", "/sessions", "{\"ttl_ms\":5000}", &r);
    CHECK_EQ_INT(r.status, 201);
    char want[64];
    snprintf(want, sizeof(want), "/sessions/%s", th_jstr(&r, "session"));
    CHECK_STR(th_header(&r, "Location"), want);
    th_resp_free(&r);
}

static void test_retry_after_on_503(void)
{
    /* a second lockd allowing one session: the second is 503 too_many_sessions */
    struct th_lockd one;
    const char *args[] = {"--max_sessions", "1", "--log_level", "info", NULL};
    th_lockd_start(&one, args, NULL);
    char url[128];
    snprintf(url, sizeof(url), "%s/sessions", one.url);
    struct th_resp r;
    th_http(cl, "POST", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    th_resp_free(&r);
    th_http(cl, "POST", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 503);
    CHECK_STR(th_jerr(&r), "too_many_sessions");
    CHECK_STR(th_header(&r, "Retry-After"), "1");
    th_resp_free(&r);
    /* a 5xx line carries its error code and the client's address, as a 4xx does */
    bool logged = false;
    for (int i = 0; i < 50 && !logged; i++) {
        FILE *f = fopen(one.log, "r");
        char line[2048];
        while (f != NULL && !logged && fgets(line, sizeof(line), f) != NULL)
            logged = strstr(line, "\"status\":503,") != NULL &&
                     strstr(line, "\"error\":\"too_many_sessions\"") != NULL &&
                     strstr(line, "\"client\":\"127.0.0.1:") != NULL;
        if (f != NULL)
            fclose(f);
        if (!logged)
            th_sleep_ms(100);
    }
    CHECK(logged);
    th_lockd_kill(&one, SIGTERM);

    /* backend_unavailable: a Redis nobody answers on (port 1 refuses) */
    struct th_lockd down;
    const char *dargs[] = {"--redis", "redis://127.0.0.1:1", NULL};
    th_lockd_start(&down, dargs, NULL);
    snprintf(url, sizeof(url), "%s/locks/fh.down", down.url);
    th_http(cl, "POST", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 503);
    CHECK_STR(th_jerr(&r), "backend_unavailable");
    CHECK(th_header(&r, "Retry-After") != NULL && atoi(th_header(&r, "Retry-After")) >= 1);
    th_resp_free(&r);
    th_lockd_kill(&down, SIGKILL);

    /* shutting_down: a draining lockd (a session keeps it up) refuses acquires */
    struct th_lockd dr;
    th_lockd_start(&dr, NULL, NULL);
    snprintf(url, sizeof(url), "%s/sessions", dr.url);
    th_http(cl, "POST", url, "{\"ttl_ms\":60000}", NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    th_resp_free(&r);
    kill(dr.pid, SIGTERM);
    snprintf(url, sizeof(url), "%s/locks/fh.drain", dr.url);
    int st = 0;
    for (int i = 0; i < 100 && st != 503; i++) { /* until the drain has begun */
        th_http(cl, "POST", url, NULL, NULL, &r);
        st = (int)r.status;
        if (st == 503) {
            CHECK_STR(th_jerr(&r), "shutting_down");
            CHECK(th_header(&r, "Retry-After") != NULL);
        }
        th_resp_free(&r);
        if (st != 503)
            th_sleep_ms(50);
    }
    CHECK_EQ_INT(st, 503);
    th_lockd_kill(&dr, SIGKILL);
}

static void test_messages_users_can_act_on(void)
{
    struct th_resp r;
    req("POST", "/locks/form", "ttl_ms=5000&owner=web-1", &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), "invalid_json");
    CHECK_STR(th_jstr(&r, "message"),
              "body must be JSON, not a form: send {\"ttl_ms\":5000,\"owner\":\"web-1\"}");
    th_resp_free(&r);
    req("POST", "/locks/nul", "{\"owner\":\"a\\u0000b\"}", &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_STR(th_jerr(&r), "invalid_json");
    CHECK(strstr(th_jstr(&r, "message"), "JSON_") == NULL);
    CHECK(strstr(th_jstr(&r, "message"), "\\u0000") != NULL);
    th_resp_free(&r);
}

static void test_owner_and_self_block(void)
{
    struct th_resp r;
    req("POST", "/sessions", "{\"ttl_ms\":10000,\"owner\":\"pod-7\"}", &r);
    char sid[64], body[128];
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"session\":\"%s\"}", sid);
    req("POST", "/locks/fh.inherit", body, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "owner"), "pod-7"); /* the session's owner */
    th_resp_free(&r);
    req("GET", "/locks/fh.inherit", NULL, &r);
    CHECK_STR(th_jstr(&r, "owner"), "pod-7");
    CHECK(json_is_string(json_object_get(r.json, "expires_at")));
    CHECK(th_jint(&r, "expires_in_ms") > 0);
    th_resp_free(&r);
    /* the same session again, not reentrant: blocked by itself, and told */
    snprintf(body, sizeof(body), "{\"session\":\"%s\",\"wait_ms\":100}", sid);
    req("POST", "/locks/fh.inherit", body, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK(strstr(th_jstr(&r, "message"), "this session already holds") != NULL);
    CHECK(json_is_true(json_object_get(json_object_get(r.json, "holder"), "same_session")));
    th_resp_free(&r);
    /* the same session, reentrant, in the other mode: reentrant is not
     * what it lacks (it was told to add it), the mode is */
    snprintf(body, sizeof(body), "{\"session\":\"%s\",\"reentrant\":true,\"mode\":\"shared\"}",
             sid);
    req("POST", "/locks/fh.inherit", body, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK(strstr(th_jstr(&r, "message"), "in the mode it holds") != NULL);
    CHECK(json_is_true(json_object_get(json_object_get(r.json, "holder"), "same_session")));
    th_resp_free(&r);
    /* another client: no same_session */
    req("POST", "/locks/fh.inherit", NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK(json_object_get(json_object_get(r.json, "holder"), "same_session") == NULL);
    th_resp_free(&r);
    /* free, and a lock without owner: null, never "" */
    req("GET", "/locks/fh.free", NULL, &r);
    CHECK(json_is_null(json_object_get(r.json, "owner")));
    CHECK(json_is_null(json_object_get(r.json, "expires_at")));
    th_resp_free(&r);
    req("POST", "/locks/fh.noowner", NULL, &r);
    CHECK(json_is_null(json_object_get(r.json, "owner")));
    th_resp_free(&r);
    req("GET", "/locks/fh.noowner", NULL, &r);
    CHECK(json_is_null(json_object_get(r.json, "owner")));
    th_resp_free(&r);
}

/* A 409 after a wait tells how long the holder has left when it answers,
 * not when the wait began: holder.expires_in_ms and Retry-After (openapi:
 * "until the current holder's lease expires") were those of the wait's
 * start, wait_ms too high, for one name and for a multi-lock. */
static void test_waited_409_holder_is_current(void)
{
    struct th_resp r;
    req("POST", "/locks/fh.left", "{\"ttl_ms\":3000}", &r); /* expires in 3 s */
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    req("POST", "/locks/fh.left", "{\"wait_ms\":1000}", &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK(th_jint(&r, "waited_ms") >= 1000);
    json_t *h = json_object_get(r.json, "holder");
    long long left = json_integer_value(json_object_get(h, "expires_in_ms"));
    if (left <= 0 || left > 2000)
        th_fail(__FILE__, __LINE__, "holder.expires_in_ms %lld after a 1 s wait on a 3 s lease",
                left);
    CHECK_STR(th_header(&r, "Retry-After"), "2");
    th_resp_free(&r);
    req("POST", "/locks", "{\"names\":[\"fh.left\",\"fh.left2\"],\"wait_ms\":500}", &r);
    CHECK_EQ_INT(r.status, 409);
    CHECK_STR(th_jstr(&r, "name"), "fh.left");
    h = json_object_get(r.json, "holder");
    left = json_integer_value(json_object_get(h, "expires_in_ms"));
    if (left <= 0 || left > 1500)
        th_fail(__FILE__, __LINE__, "multi-lock holder.expires_in_ms %lld after 1.5 s of 3", left);
    th_resp_free(&r);
}

/* A renewal answers "the same shape as an acquire" (openapi): a shared
 * lease renewed is still shared, with its owner (it said "exclusive"). */
static void test_renew_keeps_mode(void)
{
    struct th_resp r;
    req("POST", "/locks/fh.rmode", "{\"mode\":\"shared\",\"owner\":\"reader-1\"}", &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "mode"), "shared");
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    const char *hdrs[] = {hdr, NULL};
    char url[256];
    snprintf(url, sizeof(url), "%s/locks/fh.rmode", ld.url);
    th_http(cl, "PUT", url, NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(th_jstr(&r, "mode"), "shared");
    CHECK_STR(th_jstr(&r, "owner"), "reader-1");
    th_resp_free(&r);
}

/* The value of one exposition line that starts with prefix, or -1. */
static double metric(const char *text, const char *prefix)
{
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            return atof(p + strlen(prefix));
    return -1;
}

/* A granted blocking acquire's wait is lockd_acquire_wait_seconds', not
 * lockd_http_request_duration_seconds' (a 300 s long poll once landed in
 * its top bucket). Its own lockd: the counts start at zero. */
static void test_wait_is_not_request_time(void)
{
    struct th_lockd w;
    th_lockd_start(&w, NULL, NULL);
    char url[160];
    snprintf(url, sizeof(url), "%s/locks/fh.wait", w.url);
    struct th_resp r;
    th_http(cl, "POST", url, "{\"ttl_ms\":400}", NULL, &r); /* expires in 400 ms */
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    th_http(cl, "POST", url, "{\"wait_ms\":5000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(th_jint(&r, "fencing_token") > 0);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/metrics", w.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(metric(r.body, "lockd_acquire_wait_seconds_count ") == 1);
    CHECK(metric(r.body, "lockd_acquire_wait_seconds_sum ") >= 0.2);
    CHECK(metric(r.body, "lockd_http_request_duration_seconds_count{route=\"/locks/{name}\"} ") ==
          2);
    CHECK(metric(r.body, "lockd_http_request_duration_seconds_sum{route=\"/locks/{name}\"} ") <
          0.2);
    th_resp_free(&r);
    th_lockd_kill(&w, SIGTERM);
}

int main(void)
{
    const char *args[] = {"--log_level", "info", NULL}; /* the access log too */
    th_lockd_start(&ld, args, NULL);
    cl = th_client_new();
    TH_RUN(test_headers_too_large_is_json);
    TH_RUN(test_headers_too_large_is_json_on_tls);
    TH_RUN(test_mhd_own_answers_are_json);
    TH_RUN(test_allow_options_location);
    TH_RUN(test_retry_after_on_503);
    TH_RUN(test_messages_users_can_act_on);
    TH_RUN(test_owner_and_self_block);
    TH_RUN(test_waited_409_holder_is_current);
    TH_RUN(test_renew_keeps_mode);
    TH_RUN(test_wait_is_not_request_time);
    th_client_free(cl);
    th_lockd_kill(&ld, SIGTERM);
    return th_done();
}
