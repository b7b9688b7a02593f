/*
 * hardening_auth_tls.c - who may touch locks, and over what. Bearer tokens:
 * missing and wrong tokens get 401 unauthorized with WWW-Authenticate:
 * Bearer, a right one 200; SIGHUP reloads a changed token file (old token
 * refused, new accepted) without dropping keep-alive connections; the
 * operations endpoints stay open unless auth_metrics. TLS: a CA and server
 * certificate made with openssl at test time; libcurl verifying against the
 * CA succeeds, without it fails; plain HTTP to the TLS port fails cleanly and
 * lockd keeps serving.
 *
 * Runs on the backend TH_BACKEND names (tests/run.sh runs it on memory and
 * on Redis): every lockd here is started with the fixture's backend flags.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/fixture.h"

static struct fixture fx;
static struct th_client *cl;

static void write_file(const char *path, const char *text)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL);
    fputs(text, f);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0); /* lockd never reads half a file */
}

static long get(const struct th_lockd *l, const char *method, const char *path, const char *auth,
                struct th_resp *out)
{
    char url[300], hdr[200];
    snprintf(url, sizeof(url), "%s%s", l->url, path);
    const char *hs[] = {hdr, NULL};
    if (auth != NULL)
        snprintf(hdr, sizeof(hdr), "Authorization: %s", auth);
    th_http(cl, method, url, NULL, auth ? hs : NULL, out);
    return out->status;
}

static void expect_401(const struct th_lockd *l, const char *method, const char *path,
                       const char *auth)
{
    struct th_resp r;
    get(l, method, path, auth, &r);
    if (r.status != 401)
        th_fail(__FILE__, __LINE__, "%s %s with '%s': %ld, want 401: %s", method, path,
                auth ? auth : "(none)", r.status, r.body);
    CHECK_STR(th_jerr(&r), "unauthorized");
    CHECK(th_jstr(&r, "message") != NULL);
    const char *www = th_header(&r, "WWW-Authenticate");
    CHECK(www != NULL && strncmp(www, "Bearer", 6) == 0);
    th_resp_free(&r);
}

static void expect_status(const struct th_lockd *l, const char *method, const char *path,
                          const char *auth, long want)
{
    struct th_resp r;
    get(l, method, path, auth, &r);
    if (r.status != want)
        th_fail(__FILE__, __LINE__, "%s %s with '%s': %ld, want %ld: %s", method, path,
                auth ? auth : "(none)", r.status, want, r.body);
    th_resp_free(&r);
}

/* ---- a raw keep-alive connection, to see that it survives a reload ---- */

struct reload_arg {
    const struct th_lockd *l;
    const char *auth;
};

static bool refused(void *arg)
{
    struct reload_arg *a = arg;
    struct th_resp r;
    long s = get(a->l, "GET", "/locks/anything", a->auth, &r);
    th_resp_free(&r);
    return s == 401;
}

static void test_tokens(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/tokens", th_tmpdir());
    write_file(path, "# one token a line\n  alpha-token-1  \n\nbeta-token-2\r\n");
    struct th_lockd l;
    const char *args[] = {"--auth_token_file", path, NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    fx_check_backend(&fx, &l); /* /readyz is open without auth_metrics */

    /* Missing, wrong, malformed: 401 on every /locks and /sessions route. */
    expect_401(&l, "POST", "/locks/guarded", NULL);
    expect_401(&l, "GET", "/locks/guarded", NULL);
    expect_401(&l, "GET", "/locks", NULL);
    expect_401(&l, "POST", "/sessions", NULL);
    expect_401(&l, "PUT", "/sessions/abc", NULL);
    expect_401(&l, "DELETE", "/locks/guarded", "Bearer wrong-token");
    expect_401(&l, "POST", "/locks/guarded", "Bearer alpha-token");    /* a prefix */
    expect_401(&l, "POST", "/locks/guarded", "Bearer alpha-token-12"); /* longer */
    expect_401(&l, "POST", "/locks/guarded", "Basic alpha-token-1");
    expect_401(&l, "POST", "/locks/guarded", "alpha-token-1");
    expect_401(&l, "POST", "/locks/guarded", "Bearer ");
    /* Right tokens, either of the file's, scheme case-insensitive. */
    expect_status(&l, "POST", "/locks/guarded", "Bearer alpha-token-1", 200);
    expect_status(&l, "GET", "/locks/guarded", "bearer beta-token-2", 200);
    expect_status(&l, "POST", "/sessions", "Bearer beta-token-2", 201);
    /* Operations endpoints stay open. */
    expect_status(&l, "GET", "/healthz", NULL, 200);
    expect_status(&l, "GET", "/readyz", NULL, 200);
    expect_status(&l, "GET", "/metrics", NULL, 200);
    /* A 401 is an auth answer even for bad input: nothing leaks before auth. */
    expect_401(&l, "POST", "/locks/bad%2Fname", NULL);
    /* Nor which routes and methods exist: 401 before 404 and 405. */
    expect_401(&l, "PATCH", "/locks/guarded", NULL);
    expect_401(&l, "GET", "/no-such-route", NULL);
    expect_401(&l, "DELETE", "/sessions", NULL);
    /* With the token they are what they are. */
    expect_status(&l, "PATCH", "/locks/guarded", "Bearer alpha-token-1", 405);
    expect_status(&l, "GET", "/no-such-route", "Bearer alpha-token-1", 404);
    /* The open endpoints stay open for every method (405, not 401). */
    expect_status(&l, "POST", "/healthz", NULL, 405);

    /* A keep-alive connection opened before the reload. */
    int fd = th_connect(l.port);
    CHECK_EQ_INT(th_raw_request(fd,
                                "GET /locks/guarded HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer alpha-token-1\r\n\r\n",
                                NULL, 0),
                 200);

    /* Change the file, SIGHUP: the old token goes, the new one works. */
    write_file(path, "gamma-token-3\n");
    CHECK(kill(l.pid, SIGHUP) == 0);
    struct reload_arg ra = {&l, "Bearer alpha-token-1"};
    CHECK(th_wait_for(refused, &ra, 5000));
    expect_401(&l, "GET", "/locks/guarded", "Bearer beta-token-2");
    expect_status(&l, "GET", "/locks/guarded", "Bearer gamma-token-3", 200);
    /* The old connection is still open and now needs the new token. */
    CHECK_EQ_INT(th_raw_request(fd,
                                "GET /locks/guarded HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer alpha-token-1\r\n\r\n",
                                NULL, 0),
                 401);
    CHECK_EQ_INT(th_raw_request(fd,
                                "GET /locks/guarded HTTP/1.1\r\nHost: x\r\n"
                                "Authorization: Bearer gamma-token-3\r\n\r\n",
                                NULL, 0),
                 200);

    /* A reload that fails (empty file) keeps the tokens in force. */
    write_file(path, "# nothing\n");
    CHECK(kill(l.pid, SIGHUP) == 0);
    th_sleep_ms(300); /* nothing to wait for: the state must simply not change */
    expect_status(&l, "GET", "/locks/guarded", "Bearer gamma-token-3", 200);
    CHECK_EQ_INT(th_raw_request(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL, 0), 200);
    close(fd);
    CHECK(kill(l.pid, 0) == 0);
    th_lockd_kill(&l, SIGKILL); /* SIGTERM would drain until the session above ends */

    /* auth_metrics: the operations endpoints need the token too. */
    write_file(path, "ops-token\n");
    const char *args2[] = {"--auth_token_file", path, "--auth_metrics", "true", NULL};
    fx_lockd_start(&fx, &l, args2, NULL);
    expect_401(&l, "GET", "/metrics", NULL);
    expect_401(&l, "GET", "/healthz", "Bearer nope");
    expect_401(&l, "GET", "/readyz", NULL);
    expect_status(&l, "GET", "/metrics", "Bearer ops-token", 200);
    expect_status(&l, "GET", "/healthz", "Bearer ops-token", 200);
    th_lockd_kill(&l, SIGTERM);

    /* No token file: everything open. A missing file: lockd refuses to start. */
    fx_lockd_start(&fx, &l, NULL, NULL);
    expect_status(&l, "POST", "/locks/open", NULL, 200);
    th_lockd_kill(&l, SIGTERM);
    char missing[320];
    snprintf(missing, sizeof(missing), "%s/no-such-file", th_tmpdir());
    const char *args3[] = {"--auth_token_file", missing, NULL};
    int code = 0;
    CHECK(!fx_lockd_try_start(&fx, &l, args3, NULL, &code));
    CHECK_EQ_INT(code, 2);
}

/* ---- TLS ---- */

static void sh(const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof(full), "cd '%s' && { %s; } >openssl.log 2>&1", th_tmpdir(), cmd);
    if (system(full) != 0) {
        char show[600];
        snprintf(show, sizeof(show), "cat '%s/openssl.log' >&2", th_tmpdir());
        if (system(show) != 0)
            fprintf(stderr, "(no openssl log)\n");
        th_fail(__FILE__, __LINE__, "command failed: %s", cmd);
    }
}

static size_t sink(char *d, size_t s, size_t n, void *a)
{
    struct th_resp *r = a;
    size_t add = s * n;
    r->body = realloc(r->body, r->len + add + 1);
    memcpy(r->body + r->len, d, add);
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

/* One request with libcurl; returns the curl code, status in *status. */
static CURLcode tls_req(const char *method, const char *url, const char *cainfo, const char *body,
                        long *status, char **resp)
{
    CURL *h = curl_easy_init();
    struct th_resp r;
    memset(&r, 0, sizeof(r));
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (cainfo != NULL) {
        curl_easy_setopt(h, CURLOPT_CAINFO, cainfo);
        curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
    }
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (body != NULL)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    CURLcode c = curl_easy_perform(h);
    *status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    if (resp != NULL)
        *resp = r.body;
    else
        free(r.body);
    return c;
}

static void test_tls(void)
{
    /* A throwaway CA and a server certificate for 127.0.0.1, both P-256. */
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
       "-out ca.pem -days 2 -subj '/CN=lockd test CA' "
       "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign");
    sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem "
       "-out srv.csr -subj '/CN=127.0.0.1'");
    sh("printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
       "extendedKeyUsage=serverAuth\\n' >ext.cnf && "
       "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
       "-extfile ext.cnf -out cert.pem");
    char cert[300], key[300], ca[300];
    snprintf(cert, sizeof(cert), "%s/cert.pem", th_tmpdir());
    snprintf(key, sizeof(key), "%s/key.pem", th_tmpdir());
    snprintf(ca, sizeof(ca), "%s/ca.pem", th_tmpdir());
    struct th_lockd l;
    const char *args[] = {"--tls_cert", cert, "--tls_key", key, NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    char https[300], http[300];
    long status;
    char *body = NULL;

    /* Verified against the CA: works, the whole API. */
    snprintf(https, sizeof(https), "https://127.0.0.1:%d/healthz", l.port);
    CURLcode c = tls_req("GET", https, ca, NULL, &status, NULL);
    if (c != CURLE_OK)
        th_fail(__FILE__, __LINE__, "https with the CA: %s", curl_easy_strerror(c));
    CHECK_EQ_INT(status, 200);
    snprintf(https, sizeof(https), "https://127.0.0.1:%d/locks/secure", l.port);
    CHECK_EQ_INT(tls_req("POST", https, ca, "{\"ttl_ms\":5000}", &status, &body), CURLE_OK);
    CHECK_EQ_INT(status, 200);
    CHECK(body != NULL && strstr(body, "\"fencing_token\"") != NULL);
    free(body);
    /* By name too: the certificate names localhost. */
    snprintf(https, sizeof(https), "https://localhost:%d/healthz", l.port);
    CHECK_EQ_INT(tls_req("GET", https, ca, NULL, &status, NULL), CURLE_OK);

    /* Without the CA the certificate is not trusted. */
    char other_ca[300];
    snprintf(other_ca, sizeof(other_ca), "%s/other.pem", th_tmpdir());
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other.key "
       "-out other.pem -days 2 -subj '/CN=someone else'");
    snprintf(https, sizeof(https), "https://127.0.0.1:%d/healthz", l.port);
    c = tls_req("GET", https, other_ca, NULL, &status, NULL);
    CHECK(c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT);

    /* Plain HTTP to the TLS port: a prompt, clean failure (no hang, no 200). */
    snprintf(http, sizeof(http), "http://127.0.0.1:%d/healthz", l.port);
    for (int i = 0; i < 3; i++) {
        int64_t t0 = th_now_ms();
        c = tls_req("GET", http, NULL, NULL, &status, NULL);
        CHECK(c != CURLE_OK || status != 200);
        CHECK(c != CURLE_OPERATION_TIMEDOUT);
        CHECK(th_now_ms() - t0 < 4000);
    }
    /* Garbage on a raw socket: closed, lockd unharmed. */
    int fd = th_connect(l.port);
    const char junk[] = "\x16\x03\x01\x00\x05hello-not-tls\r\n\r\n";
    CHECK(send(fd, junk, sizeof(junk) - 1, MSG_NOSIGNAL) > 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 5000) == 1); /* an alert or EOF, not silence */
    close(fd);

    /* Still serving, still alive. */
    CHECK(kill(l.pid, 0) == 0);
    snprintf(https, sizeof(https), "https://127.0.0.1:%d/locks/secure", l.port);
    CHECK_EQ_INT(tls_req("GET", https, ca, NULL, &status, NULL), CURLE_OK);
    CHECK_EQ_INT(status, 200);
    th_lockd_kill(&l, SIGTERM);

    /* A key that does not parse: lockd refuses to start, exit 2. */
    char badkey[300];
    snprintf(badkey, sizeof(badkey), "%s/bad.key", th_tmpdir());
    write_file(badkey, "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n");
    const char *bad[] = {"--tls_cert", cert, "--tls_key", badkey, NULL};
    int code = 0;
    CHECK(!fx_lockd_try_start(&fx, &l, bad, NULL, &code));
    CHECK_EQ_INT(code, 2);
}

int main(void)
{
    fx_backend_start(&fx);
    cl = th_client_new();
    TH_RUN(test_tokens);
    TH_RUN(test_tls);
    th_client_free(cl);
    fx_stop(&fx);
    return th_done();
}
