/*
 * operators.c - issue 26 through real lockd and redis-server processes:
 * force-unlock (401 without a token, 403 with a client token or without
 * admin_token_file, 200 with an admin token; every shared holder goes; the
 * former holder's session, on another lockd of the same Redis, reports the
 * name in `lost`; lockd_forced_releases_total moves) and watching (index,
 * Lock-Index, long polls woken by a release through another lockd and by
 * an expiry, an unchanged name answering after wait_ms).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/harness.h"

static struct th_redis rd;
static char redis_url[64];
static struct th_lockd mem, ra, rb, noadm; /* memory; two lockd on one Redis; no admin file */
static struct th_client *cl;
static char client_hdr[64], admin_hdr[64];

#define RUN TH_RUN

static const char *url(const struct th_lockd *l, const char *path, const char *name)
{
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ % 4];
    snprintf(b, 512, "%s%s%s", l->url, path, name);
    return b;
}

/* A request with the client token; status out, body kept in *out. */
static long call(const char *method, const char *u, const char *body, const char *auth,
                 struct th_resp *out)
{
    const char *hdrs[] = {auth, NULL};
    th_http(cl, method, u, body, auth != NULL ? hdrs : NULL, out);
    return out->status;
}

static long long metric(const struct th_lockd *l, const char *name)
{
    struct th_resp r;
    call("GET", url(l, "/metrics", ""), NULL, client_hdr, &r);
    long long v = -1;
    char line[128];
    snprintf(line, sizeof(line), "\n%s ", name); /* the sample, not its # HELP */
    const char *p = r.body != NULL ? strstr(r.body, line) : NULL;
    if (p != NULL)
        v = atoll(p + strlen(line));
    th_resp_free(&r);
    return v;
}

/* ---------------------------------------------------------------- force-unlock */

static void force_on(const struct th_lockd *holder, const struct th_lockd *op, const char *name)
{
    struct th_resp r;
    /* a session-bound holder whose lease the watchdog renews every 200 ms */
    CHECK_EQ_INT(call("POST", url(holder, "/sessions", ""), "{\"ttl_ms\":5000}", client_hdr, &r),
                 201);
    char sess[40], lease[40], body[160];
    snprintf(sess, sizeof(sess), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"ttl_ms\":600,\"session\":\"%s\"}", sess);
    CHECK_EQ_INT(call("POST", url(holder, "/locks/", name), body, client_hdr, &r), 200);
    snprintf(lease, sizeof(lease), "%s", th_jstr(&r, "lease"));
    long long token = th_jint(&r, "fencing_token");
    th_resp_free(&r);

    long long before = metric(op, "lockd_forced_releases_total");
    char path[300];
    snprintf(path, sizeof(path), "%s?force=true", name);
    CHECK_EQ_INT(call("DELETE", url(op, "/locks/", path), NULL, NULL, &r), 401);
    CHECK_STR(th_jerr(&r), "unauthorized");
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", url(op, "/locks/", path), NULL, client_hdr, &r), 403);
    CHECK_STR(th_jerr(&r), "forbidden");
    th_resp_free(&r);
    snprintf(path, sizeof(path), "%s?force=maybe", name);
    CHECK_EQ_INT(call("DELETE", url(op, "/locks/", path), NULL, admin_hdr, &r), 400);
    th_resp_free(&r);
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before);

    snprintf(path, sizeof(path), "%s?force=true", name);
    CHECK_EQ_INT(call("DELETE", url(op, "/locks/", path), NULL, admin_hdr, &r), 200);
    CHECK(json_is_true(json_object_get(r.json, "released")));
    CHECK(json_is_true(json_object_get(r.json, "forced")));
    CHECK_EQ_INT(th_jint(&r, "fencing_token"), token);
    th_resp_free(&r);
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before + 1);
    CHECK_EQ_INT(call("DELETE", url(op, "/locks/", path), NULL, admin_hdr, &r), 404);
    CHECK_STR(th_jerr(&r), "not_held");
    th_resp_free(&r);
    CHECK_EQ_INT(metric(op, "lockd_forced_releases_total"), before + 1);

    /* no lock-delay: free at once */
    CHECK_EQ_INT(call("POST", url(op, "/locks/", name), "{\"ttl_ms\":5000}", client_hdr, &r), 200);
    char other[40];
    snprintf(other, sizeof(other), "%s", th_jstr(&r, "lease"));
    th_resp_free(&r);

    /* the former holder's session reports it lost at its next renewal */
    bool lost = false;
    for (int i = 0; i < 100 && !lost; i++) {
        CHECK_EQ_INT(call("GET", url(holder, "/sessions/", sess), NULL, client_hdr, &r), 200);
        json_t *l = json_object_get(r.json, "lost");
        for (size_t k = 0; k < json_array_size(l); k++)
            lost |= strcmp(json_string_value(json_array_get(l, k)), name) == 0;
        th_resp_free(&r);
        if (!lost)
            th_sleep_ms(20);
    }
    CHECK(lost);
    /* and its own renew fails */
    char lh[80];
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", lease);
    const char *hdrs[] = {client_hdr, lh, NULL};
    th_http(cl, "PUT", url(holder, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    snprintf(lh, sizeof(lh), "Lock-Lease: %s", other);
    th_http(cl, "DELETE", url(op, "/locks/", name), NULL, hdrs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", url(holder, "/sessions/", sess), NULL, client_hdr, &r), 200);
    th_resp_free(&r);
}

static void t_force_memory(void)
{
    force_on(&mem, &mem, "force-mem");
}

static void t_force_two_lockd(void)
{
    force_on(&ra, &rb, "force-redis");
}

/* Every holder of a semaphore goes; the token is the highest. */
static void t_force_shared(void)
{
    const struct th_lockd *ls[] = {&mem, &ra};
    for (int k = 0; k < 2; k++) {
        struct th_resp r;
        long long top = 0;
        for (int i = 0; i < 3; i++) {
            CHECK_EQ_INT(call("POST", url(ls[k], "/locks/", "force-sem"),
                              "{\"ttl_ms\":5000,\"limit\":3}", client_hdr, &r),
                         200);
            top = th_jint(&r, "fencing_token");
            th_resp_free(&r);
        }
        CHECK_EQ_INT(call("DELETE", url(ls[k], "/locks/", "force-sem?force=true"), NULL,
                          admin_hdr, &r),
                     200);
        CHECK_EQ_INT(th_jint(&r, "fencing_token"), top);
        th_resp_free(&r);
        CHECK_EQ_INT(call("GET", url(ls[k], "/locks/", "force-sem"), NULL, client_hdr, &r), 200);
        CHECK(json_is_false(json_object_get(r.json, "held")));
        th_resp_free(&r);
    }
}

/* Without admin_token_file force is refused, even with auth off. */
static void t_force_no_admin_file(void)
{
    struct th_resp r;
    CHECK_EQ_INT(call("POST", url(&noadm, "/locks/", "f"), NULL, NULL, &r), 200);
    th_resp_free(&r);
    CHECK_EQ_INT(call("DELETE", url(&noadm, "/locks/", "f?force=true"), NULL, admin_hdr, &r), 403);
    CHECK_STR(th_jerr(&r), "forbidden");
    th_resp_free(&r);
}

int main(void)
{
    th_redis_start(&rd, 0, NULL);
    snprintf(redis_url, sizeof(redis_url), "redis://127.0.0.1:%d", rd.port);
    char ctok[300], atok[300];
    snprintf(ctok, sizeof(ctok), "%s/client.tok", th_tmpdir());
    snprintf(atok, sizeof(atok), "%s/admin.tok", th_tmpdir());
    FILE *f = fopen(ctok, "w");
    CHECK(f != NULL);
    fputs("client-secret\n", f);
    fclose(f);
    f = fopen(atok, "w");
    CHECK(f != NULL);
    fputs("# operators\nadmin-secret\n", f);
    fclose(f);
    snprintf(client_hdr, sizeof(client_hdr), "Authorization: Bearer client-secret");
    snprintf(admin_hdr, sizeof(admin_hdr), "Authorization: Bearer admin-secret");
    const char *margs[] = {"--backend", "memory", "--auth_token_file", ctok,
                           "--admin_token_file", atok, NULL};
    const char *rargs[] = {"--backend", "redis", "--redis", redis_url, "--auth_token_file", ctok,
                           "--admin_token_file", atok, NULL};
    const char *nargs[] = {"--backend", "memory", NULL};
    th_lockd_start(&mem, margs, NULL);
    th_lockd_start(&ra, rargs, NULL);
    th_lockd_start(&rb, rargs, NULL);
    th_lockd_start(&noadm, nargs, NULL);
    cl = th_client_new();

    RUN(t_force_memory);
    RUN(t_force_two_lockd);
    RUN(t_force_shared);
    RUN(t_force_no_admin_file);

    th_client_free(cl);
    th_lockd_kill(&mem, SIGKILL);
    th_lockd_kill(&ra, SIGKILL);
    th_lockd_kill(&rb, SIGKILL);
    th_lockd_kill(&noadm, SIGKILL);
    th_redis_stop(&rd);
    return th_done();
}
