/*
 * first_hour.c - issue 27's HTTP details, each as a user met them: every
 * error is {"error","message"} JSON (also the answers libmicrohttpd makes on
 * its own: 431, 505, a bad chunk), Retry-After on every 503, 201 with
 * Location, HEAD and OPTIONS in Allow and OPTIONS answered 204, a form body
 * told its JSON form, no library internals in messages, a session's owner
 * inherited, a free lock's owner null, a session blocked by itself told so,
 * inspect's expires_at. Real lockd processes on the memory backend.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    const size_t sizes[] = {8160, 8300, 8700, 8900, 9000, 9100, 9300, 11700, 11800, 11900, 12100, 30000};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *r = big_header_request(sizes[i]);
        raw_json_error(r, 431, "headers_too_large");
        free(r);
    }
}

static void test_mhd_own_answers_are_json(void)
{
    raw_json_error("GET /healthz HTTP/2.5\r\nHost: x\r\n\r\n", 505, "http_version_not_supported");
    raw_json_error("POST /locks/own HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "zz\r\n",
                   400, "bad_request");
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
    const char *args[] = {"--max_sessions", "1", NULL};
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
    th_lockd_kill(&one, SIGTERM);
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
    th_lockd_start(&ld, NULL, NULL);
    cl = th_client_new();
    TH_RUN(test_headers_too_large_is_json);
    TH_RUN(test_mhd_own_answers_are_json);
    TH_RUN(test_allow_options_location);
    TH_RUN(test_retry_after_on_503);
    TH_RUN(test_messages_users_can_act_on);
    TH_RUN(test_owner_and_self_block);
    TH_RUN(test_wait_is_not_request_time);
    th_client_free(cl);
    th_lockd_kill(&ld, SIGTERM);
    return th_done();
}
