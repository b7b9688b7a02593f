/*
 * hardening_ops.c - what an operator watches: /metrics read by a strict
 * Prometheus text (0.0.4) parser (HELP and TYPE before samples, valid names
 * and labels, families not interleaved, histograms cumulative with +Inf ==
 * _count and _sum present), every metric DESIGN.md §Operations lists,
 * counters that move; structured logs (one JSON object per line with ts,
 * level, msg; req_id on request lines; a lease never logged whole) and
 * X-Request-Id echoed or generated; access_log false silences request lines.
 *
 * Runs on the backend TH_BACKEND names (tests/run.sh runs it on memory and
 * on Redis): the lockd each case starts gets the fixture's backend flags, so
 * a Redis backend's own log lines are held to the same rules.
 */
#include <ctype.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/fixture.h"

static struct fixture fx;
static struct th_client *cl;

/* ---- a strict Prometheus text exposition parser ---- */

/* A parse error fails the test, or, while must_refuse() probes the parser
 * itself, jumps back to it. */
static jmp_buf *probe;

static void pfail(int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void pfail(int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (probe != NULL)
        longjmp(*probe, 1);
    th_fail(__FILE__, line, "%s", msg);
}

#define MAX_FAM 128
#define MAX_SAMPLES 4096

struct fam {
    char name[128];
    char type[16];
    bool help, typed, has_samples, closed;
};

struct sample {
    char series[512]; /* name{labels} exactly as written */
    char name[128];
    char labels_no_le[400];
    char le[32];
    double v;
    int fam;
};

struct expo {
    struct fam fam[MAX_FAM];
    int nfam;
    struct sample *s;
    int ns;
    int last_fam;
    char *copy; /* the text being cut into lines */
};

static bool valid_metric_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
            return false;
    return true;
}

static bool valid_label_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return false;
    return n < 2 || s[0] != '_' || s[1] != '_'; /* __ is reserved */
}

static int fam_find(struct expo *x, const char *name)
{
    for (int i = 0; i < x->nfam; i++)
        if (strcmp(x->fam[i].name, name) == 0)
            return i;
    return -1;
}

static int fam_get(struct expo *x, const char *name, int lineno)
{
    int i = fam_find(x, name);
    if (i >= 0)
        return i;
    if (x->nfam >= MAX_FAM)
        pfail(__LINE__, "metrics line %d: too many families", lineno);
    i = x->nfam++;
    memset(&x->fam[i], 0, sizeof(x->fam[i]));
    snprintf(x->fam[i].name, sizeof(x->fam[i].name), "%s", name);
    return i;
}

/* Moving on to another family closes the previous one: it may not reappear. */
static void fam_touch(struct expo *x, int f, int lineno, const char *line)
{
    if (x->last_fam != f) {
        if (x->fam[f].closed)
            pfail(__LINE__, "metrics line %d: family %s interleaved: %s", lineno, x->fam[f].name,
                  line);
        if (x->last_fam >= 0)
            x->fam[x->last_fam].closed = true;
        x->last_fam = f;
    }
}

static double parse_value(const char *v, int lineno)
{
    if (strcmp(v, "+Inf") == 0)
        return INFINITY;
    if (strcmp(v, "-Inf") == 0)
        return -INFINITY;
    if (strcmp(v, "NaN") == 0)
        return NAN;
    char *end;
    double d = strtod(v, &end);
    if (v[0] == '\0' || *end != '\0' || isspace((unsigned char)v[0]))
        pfail(__LINE__, "metrics line %d: bad value '%s'", lineno, v);
    return d;
}

static void parse_sample(struct expo *x, char *line, int lineno)
{
    struct sample sm;
    memset(&sm, 0, sizeof(sm));
    size_t n = 0;
    while (line[n] && line[n] != '{' && line[n] != ' ')
        n++;
    if (!valid_metric_name(line, n) || n >= sizeof(sm.name))
        pfail(__LINE__, "metrics line %d: bad metric name: %s", lineno, line);
    memcpy(sm.name, line, n);
    char *p = line + n;
    size_t lo = 0;
    if (*p == '{') {
        p++;
        char seen[8][64];
        int nseen = 0;
        while (*p != '}') {
            size_t ln = 0;
            while (p[ln] && p[ln] != '=')
                ln++;
            if (!valid_label_name(p, ln) || p[ln] != '=' || p[ln + 1] != '"' || ln >= 64)
                pfail(__LINE__, "metrics line %d: bad label: %s", lineno, line);
            for (int i = 0; i < nseen; i++)
                if (strlen(seen[i]) == ln && memcmp(seen[i], p, ln) == 0)
                    pfail(__LINE__, "metrics line %d: duplicate label: %s", lineno, line);
            if (nseen < 8) {
                memcpy(seen[nseen], p, ln);
                seen[nseen++][ln] = '\0';
            }
            bool is_le = ln == 2 && memcmp(p, "le", 2) == 0;
            char *lname = p;
            p += ln + 2;
            char val[256];
            size_t vl = 0;
            while (*p != '"') {
                if (*p == '\0' || *p == '\n')
                    pfail(__LINE__, "metrics line %d: open label value", lineno);
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                        pfail(__LINE__, "metrics line %d: bad escape", lineno);
                    if (vl < sizeof(val) - 1)
                        val[vl++] = p[1];
                    p += 2;
                    continue;
                }
                if (vl < sizeof(val) - 1)
                    val[vl++] = *p;
                p++;
            }
            val[vl] = '\0';
            p++;
            if (is_le) {
                snprintf(sm.le, sizeof(sm.le), "%.31s", val);
            } else {
                lo += (size_t)snprintf(sm.labels_no_le + lo, sizeof(sm.labels_no_le) - lo,
                                       "%.*s=%s;", (int)ln, lname, val);
            }
            if (*p == ',')
                p++;
            else if (*p != '}')
                pfail(__LINE__, "metrics line %d: expected , or }: %s", lineno, line);
        }
        p++;
    }
    size_t slen = (size_t)(p - line);
    if (slen >= sizeof(sm.series) || *p != ' ')
        pfail(__LINE__, "metrics line %d: expected one space: %s", lineno, line);
    memcpy(sm.series, line, slen);
    p++;
    char *sp = strchr(p, ' ');
    if (sp != NULL) { /* optional timestamp: an integer */
        *sp = '\0';
        for (char *t = sp + 1; *t; t++)
            if (!isdigit((unsigned char)*t) && !(t == sp + 1 && *t == '-'))
                pfail(__LINE__, "metrics line %d: bad timestamp", lineno);
    }
    sm.v = parse_value(p, lineno);

    /* Which family: the name itself, or a histogram's _bucket/_sum/_count. */
    int f = fam_find(x, sm.name);
    const char *suffixes[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; f < 0 && i < 3; i++) {
        size_t nl = strlen(sm.name), sl = strlen(suffixes[i]);
        if (nl > sl && strcmp(sm.name + nl - sl, suffixes[i]) == 0) {
            char base[128];
            snprintf(base, sizeof(base), "%.*s", (int)(nl - sl), sm.name);
            int g = fam_find(x, base);
            if (g >= 0 && strcmp(x->fam[g].type, "histogram") == 0)
                f = g;
        }
    }
    if (f < 0 || !x->fam[f].help || !x->fam[f].typed)
        pfail(__LINE__, "metrics line %d: sample before its HELP and TYPE: %s", lineno, line);
    fam_touch(x, f, lineno, line);
    x->fam[f].has_samples = true;
    if (strcmp(x->fam[f].type, "counter") == 0) {
        size_t nl = strlen(sm.name);
        if (nl < 6 || strcmp(sm.name + nl - 6, "_total") != 0)
            pfail(__LINE__, "metrics line %d: counter not named *_total", lineno);
        if (!(sm.v >= 0))
            pfail(__LINE__, "metrics line %d: negative counter", lineno);
    }
    if (sm.le[0] != '\0' && strcmp(sm.name + strlen(sm.name) - 7, "_bucket") != 0)
        pfail(__LINE__, "metrics line %d: le outside a bucket", lineno);
    for (int i = 0; i < x->ns; i++)
        if (strcmp(x->s[i].series, sm.series) == 0)
            pfail(__LINE__, "metrics line %d: duplicate series %s", lineno, sm.series);
    sm.fam = f;
    if (x->ns >= MAX_SAMPLES)
        pfail(__LINE__, "metrics: too many samples");
    x->s[x->ns++] = sm;
}

static void check_histograms(struct expo *x)
{
    for (int f = 0; f < x->nfam; f++) {
        if (strcmp(x->fam[f].type, "histogram") != 0)
            continue;
        char bucket[160], sum[160], count[160];
        snprintf(bucket, sizeof(bucket), "%s_bucket", x->fam[f].name);
        snprintf(sum, sizeof(sum), "%s_sum", x->fam[f].name);
        snprintf(count, sizeof(count), "%s_count", x->fam[f].name);
        /* Each label set (le aside) of the family. */
        for (int i = 0; i < x->ns; i++) {
            struct sample *c = &x->s[i];
            if (c->fam != f || strcmp(c->name, count) != 0)
                continue;
            double prev_le = -INFINITY, prev_v = 0, inf_v = -1;
            int nb = 0;
            bool have_sum = false;
            for (int j = 0; j < x->ns; j++) {
                struct sample *b = &x->s[j];
                if (b->fam != f || strcmp(b->labels_no_le, c->labels_no_le) != 0)
                    continue;
                if (strcmp(b->name, sum) == 0)
                    have_sum = true;
                if (strcmp(b->name, bucket) != 0)
                    continue;
                if (b->le[0] == '\0')
                    pfail(__LINE__, "%s: bucket without le", x->fam[f].name);
                double le = parse_value(b->le, 0);
                if (!(le > prev_le))
                    pfail(__LINE__, "%s: le not increasing at %s", x->fam[f].name, b->le);
                if (b->v < prev_v)
                    pfail(__LINE__, "%s: buckets not cumulative at le=%s", x->fam[f].name, b->le);
                prev_le = le;
                prev_v = b->v;
                nb++;
                if (isinf(le))
                    inf_v = b->v;
            }
            if (nb == 0 || inf_v < 0)
                pfail(__LINE__, "%s: no +Inf bucket", x->fam[f].name);
            if (inf_v != c->v)
                pfail(__LINE__, "%s: +Inf bucket %g != _count %g", x->fam[f].name, inf_v, c->v);
            if (!have_sum)
                pfail(__LINE__, "%s: no _sum", x->fam[f].name);
        }
        bool any = false;
        for (int i = 0; i < x->ns; i++)
            if (x->s[i].fam == f && strcmp(x->s[i].name, count) == 0)
                any = true;
        if (!any)
            pfail(__LINE__, "%s: histogram without _count", x->fam[f].name);
    }
}

static void expo_parse(struct expo *x, const char *text)
{
    memset(x, 0, sizeof(*x));
    x->s = calloc(MAX_SAMPLES, sizeof(*x->s));
    x->last_fam = -1;
    CHECK(x->s != NULL);
    size_t len = strlen(text);
    CHECK(len > 0 && text[len - 1] == '\n'); /* the last line ends too */
    char *copy = x->copy = strdup(text);
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (line[0] == '#') {
            char kind[8], name[128];
            int off = 0;
            if (sscanf(line, "# %7s %127s %n", kind, name, &off) < 2)
                continue; /* a plain comment */
            if (strcmp(kind, "HELP") != 0 && strcmp(kind, "TYPE") != 0)
                continue;
            if (!valid_metric_name(name, strlen(name)))
                pfail(__LINE__, "metrics line %d: bad name in %s", lineno, line);
            int f = fam_get(x, name, lineno);
            fam_touch(x, f, lineno, line);
            if (x->fam[f].has_samples)
                pfail(__LINE__, "metrics line %d: %s after samples", lineno, kind);
            if (strcmp(kind, "HELP") == 0) {
                if (x->fam[f].help)
                    pfail(__LINE__, "metrics line %d: second HELP", lineno);
                if (off == 0 || line[off] == '\0')
                    pfail(__LINE__, "metrics line %d: empty HELP", lineno);
                x->fam[f].help = true;
            } else {
                const char *t = line + off;
                if (x->fam[f].typed)
                    pfail(__LINE__, "metrics line %d: second TYPE", lineno);
                if (strcmp(t, "counter") && strcmp(t, "gauge") && strcmp(t, "histogram") &&
                    strcmp(t, "summary") && strcmp(t, "untyped"))
                    pfail(__LINE__, "metrics line %d: bad TYPE '%s'", lineno, t);
                snprintf(x->fam[f].type, sizeof(x->fam[f].type), "%s", t);
                x->fam[f].typed = true;
            }
            continue;
        }
        parse_sample(x, line, lineno);
    }
    free(copy);
    x->copy = NULL;
    for (int f = 0; f < x->nfam; f++)
        if (!x->fam[f].help || !x->fam[f].typed)
            pfail(__LINE__, "family %s lacks HELP or TYPE", x->fam[f].name);
    check_histograms(x);
}

static void expo_free(struct expo *x)
{
    free(x->s);
}

/* Value of one series written exactly so (e.g. name{a="b"}); NAN if absent. */
static double series(const struct expo *x, const char *s)
{
    for (int i = 0; i < x->ns; i++)
        if (strcmp(x->s[i].series, s) == 0)
            return x->s[i].v;
    return NAN;
}

static bool family_has_label(const struct expo *x, const char *fam, const char *type,
                             const char *label)
{
    int f = -1;
    for (int i = 0; i < x->nfam; i++)
        if (strcmp(x->fam[i].name, fam) == 0)
            f = i;
    if (f < 0 || strcmp(x->fam[f].type, type) != 0)
        return false;
    if (label == NULL)
        return true;
    char want[80];
    snprintf(want, sizeof(want), "%s=", label);
    for (int i = 0; i < x->ns; i++)
        if (x->s[i].fam == f && strstr(x->s[i].labels_no_le, want) == x->s[i].labels_no_le)
            return true;
    for (int i = 0; i < x->ns; i++)
        if (x->s[i].fam == f && strstr(x->s[i].labels_no_le, want) != NULL)
            return true;
    return false;
}

static void scrape(struct expo *x)
{
    struct th_resp r;
    th_http(cl, "GET", fx_url(&fx, "/metrics"), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    const char *ct = th_header(&r, "Content-Type");
    CHECK(ct != NULL && strstr(ct, "text/plain") == ct && strstr(ct, "version=0.0.4") != NULL);
    expo_parse(x, r.body);
    th_resp_free(&r);
}

/* The parser itself must refuse what Prometheus refuses. */
static void must_refuse(const char *text)
{
    static struct expo x; /* static: longjmp leaves no stack object behind */
    jmp_buf jb;
    memset(&x, 0, sizeof(x));
    if (setjmp(jb) == 0) {
        probe = &jb;
        expo_parse(&x, text);
        probe = NULL;
        th_fail(__FILE__, __LINE__, "parser accepted bad exposition:\n%s", text);
    }
    probe = NULL;
    free(x.copy);
    free(x.s);
}

static void test_parser_is_strict(void)
{
    must_refuse("x_total 1\n"); /* no HELP/TYPE */
    must_refuse("# HELP x_total h\n# TYPE x_total counter\nx_total{a=\"1\" 1\n");
    must_refuse("# HELP x_total h\n# TYPE x_total counter\nx_total one\n");
    must_refuse("# HELP x h\n# TYPE x counter\nx 1\n"); /* counter name */
    must_refuse("# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                "h_sum 1\nh_count 1\n"); /* not cumulative */
    must_refuse("# HELP h h\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                "h_sum 1\nh_count 3\n"); /* +Inf != count */
    must_refuse("# HELP h h\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n");
    must_refuse("# HELP a_total h\n# TYPE a_total counter\na_total 1\n# HELP b h\n# TYPE b gauge\n"
                "b 1\na_total{x=\"y\"} 2\n");                   /* interleaved */
    must_refuse("# HELP g h\n# TYPE g gauge\ng{1a=\"x\"} 1\n"); /* label name */
    must_refuse("# HELP g h\n# TYPE g gauge\ng 1\ng 2\n");      /* duplicate */
}

static void test_metrics(void)
{
    fx_check_backend(&fx, &fx.lockd);
    struct expo x;
    scrape(&x);
    /* Every metric DESIGN.md §Operations lists, with its type and labels. */
    static const struct {
        const char *name, *type, *label;
    } want[] = {
        {"lockd_http_requests_total", "counter", NULL},
        {"lockd_http_request_duration_seconds", "histogram", "route"},
        {"lockd_acquire_total", "counter", "result"},
        {"lockd_release_total", "counter", "result"},
        {"lockd_renew_total", "counter", "result"},
        {"lockd_locks_held", "gauge", "session_bound"},
        {"lockd_lock_hold_seconds", "histogram", NULL},
        {"lockd_acquire_wait_seconds", "histogram", NULL},
        {"lockd_sessions", "gauge", NULL},
        {"lockd_waiters", "gauge", NULL},
        {"lockd_watchdog_renewals_total", "counter", "result"},
        {"lockd_leases_lost_total", "counter", NULL},
        {"lockd_sessions_expired_total", "counter", NULL},
        {"lockd_backend_up", "gauge", "node"},
        {"lockd_backend_errors_total", "counter", "node"},
        {"lockd_backend_request_duration_seconds", "histogram", "op"},
        {"lockd_build_info", "gauge", "version"},
        {"lockd_handoff_seconds", "histogram", NULL},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!family_has_label(&x, want[i].name, want[i].type, want[i].label))
            th_fail(__FILE__, __LINE__, "metric %s (%s, label %s) missing", want[i].name,
                    want[i].type, want[i].label ? want[i].label : "-");
    double granted0 = series(&x, "lockd_acquire_total{result=\"granted\"}");
    double locked0 = series(&x, "lockd_acquire_total{result=\"locked\"}");
    double released0 = series(&x, "lockd_release_total{result=\"released\"}");
    double post0 = series(&x, "lockd_http_requests_total{route=\"/locks/{name}\",method=\"POST\","
                              "code=\"200\"}");
    /* Latency per route: every route has its series from the start. */
    static const char *const routes[] = {"/locks/{name}", "/locks",  "/sessions", "/sessions/{id}",
                                         "/healthz",      "/readyz", "/metrics",  "other"};
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        char s[128];
        snprintf(s, sizeof(s), "lockd_http_request_duration_seconds_count{route=\"%s\"}",
                 routes[i]);
        if (isnan(series(&x, s)))
            th_fail(__FILE__, __LINE__, "no latency series for route %s", routes[i]);
    }
    double dur0 = series(&x, "lockd_http_request_duration_seconds_count{route=\"/locks/{name}\"}");
    double hz0 = series(&x, "lockd_http_request_duration_seconds_count{route=\"/healthz\"}");
    /* Backend latency by op: every op has its series from the start. */
    double be0 = series(&x, "lockd_backend_request_duration_seconds_count{op=\"acquire\"}");
    double berel0 = series(&x, "lockd_backend_request_duration_seconds_count{op=\"release\"}");
    CHECK(!isnan(granted0) && !isnan(dur0) && !isnan(be0) && !isnan(berel0));
    CHECK(!isnan(series(&x, "lockd_backend_request_duration_seconds_count{op=\"force_release\"}")));
    if (isnan(post0))
        post0 = 0;
    expo_free(&x);

    /* Acquire, collide, release: the counters follow. */
    struct th_resp r;
    th_http(cl, "POST", fx_url(&fx, "/locks/metered"), "{\"ttl_ms\":5000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", th_jstr(&r, "lease"));
    th_resp_free(&r);
    th_http(cl, "POST", fx_url(&fx, "/locks/metered"), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    const char *hs[] = {hdr, NULL};
    th_http(cl, "DELETE", fx_url(&fx, "/locks/metered"), NULL, hs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);

    scrape(&x);
    CHECK_EQ_INT(series(&x, "lockd_acquire_total{result=\"granted\"}"), granted0 + 1);
    CHECK_EQ_INT(series(&x, "lockd_acquire_total{result=\"locked\"}"), locked0 + 1);
    CHECK_EQ_INT(series(&x, "lockd_release_total{result=\"released\"}"), released0 + 1);
    CHECK_EQ_INT(series(&x, "lockd_http_requests_total{route=\"/locks/{name}\",method=\"POST\","
                            "code=\"200\"}"),
                 post0 + 1);
    CHECK(series(&x, "lockd_http_requests_total{route=\"/locks/{name}\",method=\"POST\","
                     "code=\"409\"}") >= 1);
    CHECK_EQ_INT(series(&x, "lockd_http_request_duration_seconds_count{route=\"/locks/{name}\"}"),
                 dur0 + 3);
    CHECK_EQ_INT(series(&x, "lockd_http_request_duration_seconds_count{route=\"/healthz\"}"), hz0);
    CHECK(series(&x, "lockd_backend_request_duration_seconds_count{op=\"acquire\"}") >= be0 + 2);
    CHECK(series(&x, "lockd_backend_request_duration_seconds_count{op=\"release\"}") >= berel0 + 1);
    CHECK(series(&x, "lockd_http_request_duration_seconds_sum{route=\"/locks/{name}\"}") > 0);
    expo_free(&x);

    /* What a client puts in the method can neither break the exposition
     * (quotes, backslashes) nor fill the series table: 300 made-up methods
     * count as method="other", and real requests are still counted after. */
    th_http(cl, "A\"B\\C", fx_url(&fx, "/locks/metered"), NULL, NULL, &r);
    th_resp_free(&r);
    for (int i = 0; i < 300; i++) {
        char m[16];
        snprintf(m, sizeof(m), "M%d", i);
        th_http(cl, m, fx_url(&fx, "/locks/metered"), NULL, NULL, &r);
        CHECK(r.status == 405 || r.status == 400);
        th_resp_free(&r);
    }
    th_http(cl, "DELETE", fx_url(&fx, "/locks/never-held"), NULL,
            (const char *[]){"Lock-Lease: 0123456789abcdef0123456789abcdef", NULL}, &r);
    CHECK_EQ_INT(r.status, 404);
    th_resp_free(&r);
    scrape(&x); /* the strict parser fails on a broken label */
    int other = 0;
    for (int i = 0; i < x.ns; i++)
        if (strstr(x.s[i].series, "lockd_http_requests_total{") == x.s[i].series &&
            strstr(x.s[i].series, "method=\"other\"") != NULL)
            other += (int)x.s[i].v;
    CHECK(other >= 301);
    CHECK(series(&x, "lockd_http_requests_total{route=\"/locks/{name}\",method=\"DELETE\","
                     "code=\"404\"}") >= 1);
    /* A 405 and an OPTIONS on a known path count under that path's route,
     * not "other" (which is for paths no route serves). */
    CHECK(series(&x, "lockd_http_requests_total{route=\"/locks/{name}\",method=\"other\","
                     "code=\"405\"}") >= 300);
    double opt0 = series(&x, "lockd_http_requests_total{route=\"/healthz\",method=\"OPTIONS\","
                             "code=\"204\"}");
    expo_free(&x);
    th_http(cl, "OPTIONS", fx_url(&fx, "/healthz"), NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 204);
    th_resp_free(&r);
    scrape(&x);
    CHECK_EQ_INT(series(&x, "lockd_http_requests_total{route=\"/healthz\",method=\"OPTIONS\","
                            "code=\"204\"}"),
                 (isnan(opt0) ? 0 : opt0) + 1);
    expo_free(&x);
}

/* ---- logs ---- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t n;
    while ((n = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    b[len] = '\0';
    return b;
}

struct logscan {
    int lines, requests;
    bool saw_req_id[4];
    int with_token; /* request lines with a fencing_token field */
};

/* Every line one JSON object with ts, level, msg; request lines have req_id. */
static void scan_log(const char *path, const char *const *req_ids, int nids, struct logscan *ls)
{
    memset(ls, 0, sizeof(*ls));
    char *text = slurp(path);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t err;
        json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
        if (o == NULL || !json_is_object(o))
            th_fail(__FILE__, __LINE__, "log line is not a JSON object (%s): %s", err.text, line);
        const char *ts = json_string_value(json_object_get(o, "ts"));
        const char *level = json_string_value(json_object_get(o, "level"));
        const char *msg = json_string_value(json_object_get(o, "msg"));
        if (ts == NULL || strlen(ts) != 24 || ts[10] != 'T' || ts[23] != 'Z' || level == NULL ||
            msg == NULL)
            th_fail(__FILE__, __LINE__, "log line without ts/level/msg: %s", line);
        CHECK(strcmp(level, "debug") == 0 || strcmp(level, "info") == 0 ||
              strcmp(level, "warn") == 0 || strcmp(level, "error") == 0);
        if (strcmp(msg, "request") == 0) {
            ls->requests++;
            const char *rid = json_string_value(json_object_get(o, "req_id"));
            if (rid == NULL || rid[0] == '\0')
                th_fail(__FILE__, __LINE__, "request line without req_id: %s", line);
            for (int i = 0; i < nids && i < 4; i++)
                if (strcmp(rid, req_ids[i]) == 0)
                    ls->saw_req_id[i] = true;
            const char *lease = json_string_value(json_object_get(o, "lease"));
            if (lease != NULL)
                CHECK_EQ_INT(strlen(lease), 6);
            const char *sess = json_string_value(json_object_get(o, "session"));
            if (sess != NULL)
                CHECK_EQ_INT(strlen(sess), 6);
            /* Numbers are JSON numbers, so queries can compare them. */
            if (!json_is_integer(json_object_get(o, "status")) ||
                !json_is_number(json_object_get(o, "ms")))
                th_fail(__FILE__, __LINE__, "status/ms not numbers: %s", line);
            json_t *tok = json_object_get(o, "fencing_token");
            if (tok != NULL) {
                CHECK(json_is_integer(tok) && json_integer_value(tok) > 0);
                ls->with_token++;
            }
        }
        ls->lines++;
        json_decref(o);
    }
    free(text);
}

static void test_logs(void)
{
    /* Debug level, so everything lockd could ever print is printed. */
    struct th_lockd l;
    const char *args[] = {"--log_level", "debug", "--access_log", "true", NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    fx_check_backend(&fx, &l);
    char url[160];
    char leases[3][40];
    long long tokens[3];
    struct th_resp r;
    const char *rid_hdr[] = {"X-Request-Id: trace-abc.123", NULL};
    for (int i = 0; i < 3; i++) {
        snprintf(url, sizeof(url), "%s/locks/logged-%d", l.url, i);
        th_http(cl, "POST", url, "{\"ttl_ms\":5000,\"owner\":\"o\\u00e9\\\"q\"}",
                i == 0 ? rid_hdr : NULL, &r);
        CHECK_EQ_INT(r.status, 200);
        snprintf(leases[i], sizeof(leases[i]), "%s", th_jstr(&r, "lease"));
        tokens[i] = th_jint(&r, "fencing_token");
        if (i == 0) /* echoed */
            CHECK_STR(th_header(&r, "X-Request-Id"), "trace-abc.123");
        th_resp_free(&r);
    }
    /* Generated when absent, distinct per request. */
    char g1[64], g2[64];
    snprintf(url, sizeof(url), "%s/healthz", l.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    snprintf(g1, sizeof(g1), "%s",
             th_header(&r, "X-Request-Id") ? th_header(&r, "X-Request-Id") : "");
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/healthz", l.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    snprintf(g2, sizeof(g2), "%s",
             th_header(&r, "X-Request-Id") ? th_header(&r, "X-Request-Id") : "");
    th_resp_free(&r);
    CHECK(g1[0] != '\0' && g2[0] != '\0' && strcmp(g1, g2) != 0);
    /* A request id with spaces or control bytes is replaced, not echoed. */
    const char *bad_rid[] = {"X-Request-Id: two words", NULL};
    snprintf(url, sizeof(url), "%s/healthz", l.url);
    th_http(cl, "GET", url, NULL, bad_rid, &r);
    CHECK(th_header(&r, "X-Request-Id") != NULL &&
          strcmp(th_header(&r, "X-Request-Id"), "two words") != 0);
    th_resp_free(&r);

    /* The lease travels by header, query and body; none may be logged whole. */
    char hdr[80];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", leases[0]);
    const char *hs[] = {hdr, NULL};
    snprintf(url, sizeof(url), "%s/locks/logged-0", l.url);
    th_http(cl, "PUT", url, NULL, hs, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/locks/logged-1?lease=%s", l.url, leases[1]);
    th_http(cl, "PUT", url, "{\"ttl_ms\":6000}", NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    char body[96];
    snprintf(body, sizeof(body), "{\"lease\":\"%s\"}", leases[2]);
    snprintf(url, sizeof(url), "%s/locks/logged-2", l.url);
    th_http(cl, "DELETE", url, body, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    /* A wrong lease, and a name that is not UTF-8: logged lines stay JSON. */
    snprintf(url, sizeof(url), "%s/locks/logged-0?lease=%s", l.url, leases[1]);
    th_http(cl, "DELETE", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 409);
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/locks/%%ff%%fe%%22%%5c", l.url);
    th_http(cl, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 400);
    th_resp_free(&r);
    /* A very long path is cut, the line stays whole. */
    char *longurl = malloc(20000);
    int n = snprintf(longurl, 20000, "%s/locks/", l.url);
    memset(longurl + n, 'x', 6000); /* longer than a log line, within the 8 KiB pool */
    longurl[n + 6000] = '\0';
    th_http(cl, "GET", longurl, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 400);
    th_resp_free(&r);
    free(longurl);
    /* A session id is a secret too (it heartbeats and ends the session): it
     * is cut like a lease, in its field and in the path. */
    char sid[80];
    snprintf(url, sizeof(url), "%s/sessions", l.url);
    th_http(cl, "POST", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/sessions/%s", l.url, sid);
    th_http(cl, "PUT", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    th_http(cl, "DELETE", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    th_resp_free(&r);
    th_lockd_kill(&l, SIGTERM);

    char *text = slurp(l.log);
    for (int i = 0; i < 3; i++)
        if (strstr(text, leases[i]) != NULL)
            th_fail(__FILE__, __LINE__, "the log holds a whole lease %s", leases[i]);
    if (strstr(text, sid) != NULL)
        th_fail(__FILE__, __LINE__, "the log holds a whole session id %s", sid);
    /* The grant's fencing token is a field of its request line. */
    for (int i = 0; i < 3; i++) {
        char want[48];
        snprintf(want, sizeof(want), "\"fencing_token\":%lld", tokens[i]);
        if (strstr(text, want) == NULL)
            th_fail(__FILE__, __LINE__, "no request line with %s", want);
    }
    /* Its first 6 characters are there, to match lines with a client's. */
    char six[8];
    snprintf(six, sizeof(six), "%.6s", leases[0]);
    CHECK(strstr(text, six) != NULL);
    /* libmicrohttpd finds lockd's logger where it wants it (first). */
    if (strstr(text, "is not the first option") != NULL)
        th_fail(__FILE__, __LINE__, "libmicrohttpd warned of the logger's place");
    free(text);
    const char *ids[] = {"trace-abc.123", g1};
    struct logscan ls;
    scan_log(l.log, ids, 2, &ls);
    if (ls.requests < 15)
        th_fail(__FILE__, __LINE__, "%d request lines, want 15", ls.requests);
    CHECK(ls.saw_req_id[0] && ls.saw_req_id[1]);
    CHECK(ls.with_token >= 6); /* 3 grants, 2 renewals, 1 release */
}

static void test_access_log_off(void)
{
    struct th_lockd l;
    const char *args[] = {"--log_level", "info", "--access_log", "false", NULL};
    fx_lockd_start(&fx, &l, args, NULL);
    struct th_resp r;
    char url[160];
    snprintf(url, sizeof(url), "%s/locks/quiet", l.url);
    for (int i = 0; i < 3; i++) {
        th_http(cl, "POST", url, NULL, NULL, &r);
        th_resp_free(&r);
    }
    th_lockd_kill(&l, SIGTERM);
    struct logscan ls;
    scan_log(l.log, NULL, 0, &ls);
    CHECK_EQ_INT(ls.requests, 0);
    CHECK(ls.lines >= 1); /* the startup line is still there */

    /* And on: the same requests are logged at info. */
    const char *on[] = {"--log_level", "info", NULL};
    fx_lockd_start(&fx, &l, on, NULL);
    snprintf(url, sizeof(url), "%s/locks/loud", l.url);
    for (int i = 0; i < 3; i++) {
        th_http(cl, "POST", url, NULL, NULL, &r);
        th_resp_free(&r);
    }
    th_lockd_kill(&l, SIGTERM);
    scan_log(l.log, NULL, 0, &ls);
    CHECK_EQ_INT(ls.requests, 3);
}

/* A second lockd on a port that is in use exits 2 and says so; it never
 * joins the first one's port (two lockd on one port would each grant the
 * same name to different clients). */
static void test_port_in_use(void)
{
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", fx.lockd.port);
    const char *args[] = {"--listen", listen, NULL};
    struct th_lockd l;
    int code = -1;
    CHECK(!fx_lockd_try_start(&fx, &l, args, NULL, &code));
    CHECK_EQ_INT(code, 2);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "grep -q 'Address already in use' '%s'", l.log);
    CHECK(system(cmd) == 0);
    /* Every acquire still reaches the first lockd: one holder, the rest 409. */
    int granted = 0;
    for (int i = 0; i < 20; i++) {
        struct th_client *c = th_client_new(); /* a new connection each time */
        struct th_resp r;
        th_http(c, "POST", fx_url(&fx, "/locks/one-port"), "{\"ttl_ms\":30000}", NULL, &r);
        CHECK(r.status == 200 || r.status == 409);
        granted += r.status == 200;
        th_resp_free(&r);
        th_client_free(c);
    }
    CHECK_EQ_INT(granted, 1);
}

int main(void)
{
    fx_start(&fx, NULL);
    cl = th_client_new();
    TH_RUN(test_parser_is_strict);
    TH_RUN(test_metrics);
    TH_RUN(test_logs);
    TH_RUN(test_access_log_off);
    TH_RUN(test_port_in_use);
    th_client_free(cl);
    fx_stop(&fx);
    return th_done();
}
