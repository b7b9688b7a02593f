/*
 * lockctl.c - command-line client of lockd: acquire, renew, release, status,
 * list, session create|heartbeat|status|end, and `run`, which holds a lock
 * for the life of a command (like flock(1) or `consul lock`, across machines).
 * Talks HTTP/JSON to lockd through libcurl and jansson; see DESIGN.md §6 and
 * docs/lockctl.md. `run` uses two threads: main (acquire, fork/exec, wait)
 * and the heartbeat thread, each with its own curl handle.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "version.h" /* build/gen: LOCKD_VERSION */

#define LOCKCTL_DEFAULT_URL "http://127.0.0.1:8080"
#define LOCKCTL_MAX_RESPONSE (8 * 1024 * 1024)
#define LOCKCTL_TIMEOUT_MS 15000L
#define LOCKCTL_CONNECT_TIMEOUT_MS 5000L
/* One long poll asks for at most this much wait; longer --wait repeats it. */
#define LOCKCTL_WAIT_CHUNK_MS 300000LL /* lockd's default max_wait_ms */
#define LOCKCTL_WAIT_SMALL_MS 60000LL  /* when a lockd allows less */
/* lockd's default_ttl_ms, should a grant not say its ttl. */
#define LOCKCTL_DEFAULT_TTL_MS 30000LL
/* Exit code when lockd answered with an error not covered by sysexits. */
#define LOCKCTL_EX_FAILED 1

extern char **environ;

/* ---------------------------------------------------------------- options */

struct lc_opts {
    const char *url;
    const char *token_file;
    const char *cacert;
    bool json;
    bool help;
    bool reentrant;
    bool ready;
    bool shared; /* --shared: --mode shared */
    bool force;  /* release --force: an operator's force-unlock */
    const char *ttl;
    const char *wait;
    const char *session;
    const char *owner;
    const char *lease;
    const char *prefix;
    const char *limit;
    const char *mode;
    const char *session_ttl;
    const char *on_lost;
    const char *lock_delay;
    const char *max_hold;
    const char *kill_after; /* elect: SIGTERM, then SIGKILL after this long */
    const char *count;      /* observe: stop after this many lines */
    const char *pos[4];
    int npos;
    char **cmd; /* run: COMMAND… (argv tail, NULL-terminated) */
};

struct lc_optdef {
    const char *name; /* without the leading -- */
    size_t str_off;   /* offset of a `const char *` in struct lc_opts, or SIZE_MAX */
    size_t flag_off;  /* offset of a `bool`, or SIZE_MAX */
};

#define LC_STR(f)                                                                                  \
    {                                                                                              \
#f, offsetof(struct lc_opts, f), SIZE_MAX                                                  \
    }
#define LC_FLAG(f)                                                                                 \
    {                                                                                              \
#f, SIZE_MAX, offsetof(struct lc_opts, f)                                                  \
    }

static const struct lc_optdef lc_optdefs[] = {
    {"url", offsetof(struct lc_opts, url), SIZE_MAX},
    {"token-file", offsetof(struct lc_opts, token_file), SIZE_MAX},
    {"cacert", offsetof(struct lc_opts, cacert), SIZE_MAX},
    LC_FLAG(json),
    LC_FLAG(help),
    LC_FLAG(reentrant),
    LC_FLAG(ready),
    LC_FLAG(shared),
    LC_FLAG(force),
    LC_STR(ttl),
    LC_STR(wait),
    LC_STR(session),
    LC_STR(owner),
    LC_STR(lease),
    LC_STR(prefix),
    LC_STR(limit),
    LC_STR(mode),
    {"session-ttl", offsetof(struct lc_opts, session_ttl), SIZE_MAX},
    {"on-lost", offsetof(struct lc_opts, on_lost), SIZE_MAX},
    {"lock-delay", offsetof(struct lc_opts, lock_delay), SIZE_MAX},
    {"max-hold", offsetof(struct lc_opts, max_hold), SIZE_MAX},
    {"kill-after", offsetof(struct lc_opts, kill_after), SIZE_MAX},
    LC_STR(count),
};

static const char lc_usage[] =
    "usage: lockctl [GLOBAL OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  acquire NAME [--ttl D] [--wait D] [--session ID] [--owner S]\n"
    "               [--reentrant] [--shared | --mode exclusive|shared] [--limit N]\n"
    "               [--max-hold D]\n"
    "  renew NAME [--lease L] [--ttl D]        (lease also from $LOCKD_LEASE)\n"
    "  release NAME [--lease L]                (lease also from $LOCKD_LEASE)\n"
    "  release --force NAME                     (operator: needs an admin token in --token-file)\n"
    "  status NAME\n"
    "  list [--prefix P] [--limit N]\n"
    "  session create [--ttl D] [--owner S] [--lock-delay D]\n"
    "  session heartbeat|status|end ID\n"
    "  health [--ready]                         (GET /healthz, or /readyz)\n"
    "  run NAME [--ttl D] [--wait D] [--session-ttl D] [--owner S] [--shared]\n"
    "           [--limit N] [--on-lost term|kill|ignore] -- COMMAND [ARG...]\n"
    "  elect NAME [--ttl D] [--session-ttl D] [--owner S] [--kill-after D]\n"
    "             -- COMMAND [ARG...]       (leader election: run COMMAND while leading)\n"
    "  observe NAME [--count N]              (one JSON line per change of the holder)\n"
    "\n"
    "global options:\n"
    "  --url URL          lockd's address (default $LOCKD_URL, else " LOCKCTL_DEFAULT_URL ")\n"
    "  --token-file FILE  bearer token file (default: the token in $LOCKD_TOKEN, else\n"
    "                     the file $LOCKD_TOKEN_FILE)\n"
    "  --cacert FILE      CA certificate(s) to verify lockd's TLS certificate\n"
    "  --json             print lockd's JSON answer instead of key=value lines\n"
    "  --help             this text\n"
    "  --version          lockctl's version\n"
    "\n"
    "Durations: 500ms, 30s, 5m, 1h, or plain milliseconds; a plain number under 100 is\n"
    "refused ('--ttl 30' surely means 30s: write 30s, or 30ms).\n"
    "run sets LOCKD_LOCK, LOCKD_LEASE and LOCKD_FENCING_TOKEN for COMMAND, heartbeats its\n"
    "session and checks the lease every third of the shorter of --ttl and --session-ttl,\n"
    "signals COMMAND if the lock is lost, or before it could expire unconfirmed (lockd dead\n"
    "or hung; default SIGTERM), releases when COMMAND exits and exits with its status\n"
    "(128+N if killed by signal N); 127 or 126 (path and reason on stderr) when COMMAND\n"
    "cannot be executed; SIGTERM or SIGINT before COMMAND starts (a long --wait) ends the\n"
    "session and exits 128+N.\n"
    "elect campaigns for NAME under a session and runs COMMAND while it leads (same\n"
    "environment as run); when leadership is lost it stops COMMAND (SIGTERM, SIGKILL after\n"
    "--kill-after, default 10s) and campaigns again, retrying while lockd is unreachable.\n"
    "It exits with COMMAND's status when COMMAND ends by itself; on SIGTERM/SIGINT it\n"
    "stops COMMAND, resigns and exits 128+N.\n"
    "\n"
    "exit codes: 0 ok, 1 lockd refused (lost lease, not found...), 64 usage or invalid\n"
    "request, 66 token file unreadable, 69 lockd unreachable or unavailable,\n"
    "75 lock not obtained within --wait, 77 unauthorized (or, for --force, forbidden).\n";

static void lc_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void lc_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lockctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int lc_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int lc_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lockctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n(see lockctl --help)\n", stderr);
    va_end(ap);
    return EX_USAGE;
}

/*
 * Parses argv[first..] into o. `allowed` lists the long options this command
 * takes as ",name,name,"; global options are always allowed. With `is_run`,
 * the first `--` (or the first positional after NAME) starts COMMAND.
 * Returns 0 or EX_USAGE (message printed).
 */
static int opts_parse(struct lc_opts *o, int argc, char **argv, int first, const char *allowed,
                      bool is_run)
{
    static const char globals[] = ",url,token-file,cacert,json,help,";
    for (int i = first; i < argc; i++) {
        char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (!is_run)
                return lc_usage_error("unexpected '--'");
            o->cmd = &argv[i + 1];
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (is_run && o->npos == 1) {
                o->cmd = &argv[i];
                return 0;
            }
            if (o->npos >= (int)(sizeof(o->pos) / sizeof(o->pos[0])))
                return lc_usage_error("too many arguments ('%s')", a);
            o->pos[o->npos++] = a;
            continue;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq != NULL ? (size_t)(eq - name) : strlen(name);
        const struct lc_optdef *d = NULL;
        for (size_t k = 0; k < sizeof(lc_optdefs) / sizeof(lc_optdefs[0]); k++) {
            if (strlen(lc_optdefs[k].name) == nlen && strncmp(lc_optdefs[k].name, name, nlen) == 0)
                d = &lc_optdefs[k];
        }
        char key[40];
        if (d == NULL || nlen + 3 > sizeof(key))
            return lc_usage_error("unknown option '%.*s'", (int)(nlen + 2), a);
        snprintf(key, sizeof(key), ",%s,", d->name);
        if (strstr(globals, key) == NULL && strstr(allowed, key) == NULL)
            return lc_usage_error("option '--%s' does not apply to this command", d->name);
        if (d->flag_off != SIZE_MAX) {
            if (eq != NULL)
                return lc_usage_error("option '--%s' takes no value", d->name);
            *(bool *)((char *)o + d->flag_off) = true;
            continue;
        }
        const char *val;
        if (eq != NULL) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return lc_usage_error("option '--%s' needs a value", d->name);
            val = argv[++i];
        }
        *(const char **)((char *)o + d->str_off) = val;
    }
    return 0;
}

/*
 * Parses a duration: "500ms", "30s", "5m", "1h" or plain milliseconds.
 * Returns 0 and sets *out_ms, or EX_USAGE (message printed).
 */
static int duration_parse(const char *what, const char *s, long long *out_ms)
{
    char *end = NULL;
    /* A digit first: strtoull would skip leading whitespace (a tab, a
     * newline) and take a sign. */
    if (s == NULL || !isdigit((unsigned char)*s))
        return lc_usage_error("%s: invalid duration '%s'", what, s != NULL ? s : "");
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return lc_usage_error("%s: invalid duration '%s'", what, s);
    unsigned long long mul;
    /* A bare number is milliseconds, but '--ttl 30' surely meant seconds:
     * under 100 ms (below any ttl lockd takes) it must carry its unit. */
    if (*end == '\0' && v > 0 && v < 100)
        return lc_usage_error("%s %s: a bare number is milliseconds; did you mean %llus? "
                              "(write %llus, or %llums if you meant milliseconds)",
                              what, s, v, v, v);
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mul = 1;
    else if (strcmp(end, "s") == 0)
        mul = 1000;
    else if (strcmp(end, "m") == 0)
        mul = 60000;
    else if (strcmp(end, "h") == 0)
        mul = 3600000;
    else
        return lc_usage_error("%s: invalid duration '%s' (use 500ms, 30s, 5m, 1h or ms)", what, s);
    /* Durations beyond 2^53 ms cannot be exact JSON numbers anyway. */
    if (v > (1ULL << 53) / mul)
        return lc_usage_error("%s: duration '%s' is too large", what, s);
    *out_ms = (long long)(v * mul);
    return 0;
}

static int count_parse(const char *what, const char *s, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    /* a digit first: strtoll skips leading whitespace and takes a sign */
    if (!isdigit((unsigned char)*s) || errno != 0 || end == s || *end != '\0' || v < 0)
        return lc_usage_error("%s: invalid number '%s'", what, s);
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- COMMAND */

static void write_str(const char *s)
{
    ssize_t w = write(STDERR_FILENO, s, strlen(s));
    (void)w;
}

/*
 * COMMAND could not be executed (errno err): says which path and why, as
 * shells do, and exits 127 when it was not found, else 126. Runs in a child
 * forked from a threaded process: async-signal-safe calls only (no stdio,
 * no strerror).
 */
static void exec_failed(const char *path, int err) __attribute__((noreturn));
static void exec_failed(const char *path, int err)
{
    const char *why;
    switch (err) {
    case ENOENT:
        why = strchr(path, '/') != NULL ? "No such file or directory" : "command not found";
        break;
    case EACCES: why = "Permission denied"; break;
    case ENOEXEC: why = "Exec format error"; break;
    case ENOTDIR: why = "Not a directory"; break;
    case ELOOP: why = "Too many levels of symbolic links"; break;
    case ENAMETOOLONG: why = "File name too long"; break;
    case E2BIG: why = "Argument list too long"; break;
    case ENOMEM: why = "Cannot allocate memory"; break;
    case ETXTBSY: why = "Text file busy"; break;
    default: why = "cannot execute"; break;
    }
    write_str("lockctl: ");
    write_str(path);
    write_str(": ");
    write_str(why);
    write_str("\n");
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

/* ------------------------------------------------------------------- HTTP */

struct lc_client {
    char *base_url;    /* without trailing '/' */
    char *auth_header; /* "Authorization: Bearer …" or NULL */
    const char *cacert;
};

struct lc_buf {
    char *data;
    size_t len;
    bool overflow;
};

struct lc_resp {
    long status;
    json_t *body; /* new reference or NULL when the body is not JSON */
    char *raw;    /* the body as received (NUL-terminated) */
};

enum lc_result { LC_OK = 0, LC_UNREACHABLE };

static size_t buf_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct lc_buf *b = userdata;
    size_t n = size * nmemb;
    if (b->len + n > LOCKCTL_MAX_RESPONSE) {
        b->overflow = true;
        return 0;
    }
    char *p = realloc(b->data, b->len + n + 1);
    if (p == NULL)
        return 0;
    b->data = p;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static void resp_release(struct lc_resp *r)
{
    json_decref(r->body);
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

/* Reads the first non-empty line of path as the bearer token. 0 or EX_NOINPUT. */
static int client_load_token(struct lc_client *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        lc_err("cannot read token file '%s': %s", path, strerror(errno));
        return EX_NOINPUT;
    }
    char line[4096];
    int rc = EX_NOINPUT;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t n = strlen(s);
        while (n > 0 &&
               (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
            s[--n] = '\0';
        if (n == 0 || s[0] == '#')
            continue;
        size_t len = n + sizeof("Authorization: Bearer ");
        c->auth_header = malloc(len);
        if (c->auth_header == NULL)
            abort();
        snprintf(c->auth_header, len, "Authorization: Bearer %s", s);
        rc = 0;
        break;
    }
    fclose(f);
    if (rc != 0)
        lc_err("token file '%s' holds no token", path);
    return rc;
}

/* run: SIGTERM or SIGINT before COMMAND starts (a long --wait) sets this;
 * run then ends the session it created and exits 128+N. */
static volatile sig_atomic_t run_stop_sig;

static void run_on_stop(int sig)
{
    if (run_stop_sig == 0)
        run_stop_sig = sig;
}

/* While true, a request in flight is given up once run_stop_sig is set
 * (libcurl asks at least once a second). Never during cleanup's calls. */
static bool lc_interruptible;

static int xfer_check(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                      curl_off_t ulnow)
{
    (void)p;
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return lc_interruptible && run_stop_sig != 0;
}

/*
 * Sends one request. path is already escaped; lease (may be NULL) goes in the
 * Lock-Lease header; body (borrowed, may be NULL) is sent as JSON.
 * Returns LC_OK with out filled (status may be any HTTP status), or
 * LC_UNREACHABLE (message printed unless quiet).
 */
static enum lc_result client_call(const struct lc_client *c, CURL *h, const char *method,
                                  const char *path, const char *lease, json_t *body,
                                  long timeout_ms, bool quiet, struct lc_resp *out)
{
    enum lc_result res = LC_UNREACHABLE;
    struct lc_buf buf = {NULL, 0, false};
    struct curl_slist *hdrs = NULL;
    char *payload = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    size_t ulen = strlen(c->base_url) + strlen(path) + 1;
    char *url = malloc(ulen);
    if (url == NULL)
        abort();
    snprintf(url, ulen, "%s%s", c->base_url, path);
    memset(out, 0, sizeof(*out));

    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, LOCKCTL_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "lockctl/1");
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xfer_check);
    if (c->cacert != NULL)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
    if (strcmp(method, "GET") == 0)
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (c->auth_header != NULL)
        hdrs = curl_slist_append(hdrs, c->auth_header);
    if (lease != NULL) {
        char lh[300];
        snprintf(lh, sizeof(lh), "Lock-Lease: %s", lease);
        hdrs = curl_slist_append(hdrs, lh);
    }
    if (body != NULL) {
        payload = json_dumps(body, JSON_COMPACT);
        if (payload == NULL)
            abort();
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);

    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        if (!quiet && cc != CURLE_ABORTED_BY_CALLBACK)
            lc_err("cannot reach lockd at '%s': %s", c->base_url,
                   errbuf[0] != '\0' ? errbuf : curl_easy_strerror(cc));
        free(buf.data);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    out->raw = buf.data != NULL ? buf.data : strdup("");
    if (out->raw == NULL)
        abort();
    if (buf.len > 0)
        out->body = json_loadb(out->raw, buf.len, 0, NULL);
    res = LC_OK;
out:
    curl_slist_free_all(hdrs);
    free(payload);
    free(url);
    return res;
}

/* Escapes one path segment (names, session ids). Caller frees with curl_free. */
static char *path_escape(CURL *h, const char *s)
{
    char *e = curl_easy_escape(h, s, 0);
    if (e == NULL)
        abort();
    return e;
}

static const char *resp_str(const struct lc_resp *r, const char *key)
{
    return json_string_value(json_object_get(r->body, key));
}

/* Maps an HTTP error answer to lockctl's exit code and prints it. */
static int resp_fail(const struct lc_resp *r, const char *what, bool json_out)
{
    const char *code = resp_str(r, "error");
    const char *msg = resp_str(r, "message");
    if (code != NULL)
        lc_err("%s: %s (%ld %s)", what, msg != NULL ? msg : code, r->status, code);
    else
        lc_err("%s: unexpected answer %ld from lockd", what, r->status);
    if (json_out && r->raw != NULL && r->raw[0] != '\0')
        printf("%s\n", r->raw);
    if (code != NULL && strcmp(code, "locked") == 0)
        return EX_TEMPFAIL;
    if (r->status == 400 || r->status == 413 || r->status == 405)
        return EX_USAGE;
    if (r->status == 401 || r->status == 403)
        return EX_NOPERM;
    if (r->status == 503 || r->status == 502 || r->status == 504)
        return EX_UNAVAILABLE;
    return LOCKCTL_EX_FAILED;
}

/* --------------------------------------------------------------- printing */

static void print_value(FILE *f, json_t *v)
{
    if (json_is_string(v)) {
        fputs(json_string_value(v), f);
    } else if (json_is_integer(v)) {
        fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_true(v)) {
        fputs("true", f);
    } else if (json_is_false(v)) {
        fputs("false", f);
    } else if (json_is_null(v)) {
        /* empty */
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        bool scalars = true;
        json_array_foreach (v, i, e) {
            if (json_is_object(e) || json_is_array(e))
                scalars = false;
        }
        if (scalars) {
            json_array_foreach (v, i, e) {
                if (i > 0)
                    fputc(',', f);
                print_value(f, e);
            }
        } else {
            char *s = json_dumps(v, JSON_COMPACT);
            fputs(s != NULL ? s : "", f);
            free(s);
        }
    } else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        fputs(s != NULL ? s : "", f);
        free(s);
    }
}

/* One key=value line, or for an object or a list of objects one line per
 * field as key.field=value and key.N.field=value (never JSON in a value):
 * holder_list.0.owner=... */
static void print_kv(const char *key, json_t *v)
{
    bool nested = json_is_object(v);
    size_t i;
    json_t *e;
    if (json_is_array(v))
        json_array_foreach (v, i, e)
            nested = nested || json_is_object(e) || json_is_array(e);
    if (!nested) {
        printf("%s=", key);
        print_value(stdout, v);
        putchar('\n');
        return;
    }
    size_t klen = strlen(key) + 32;
    if (json_is_object(v)) {
        const char *k;
        json_object_foreach (v, k, e) {
            char *sub = malloc(klen + strlen(k));
            if (sub == NULL)
                abort();
            snprintf(sub, klen + strlen(k), "%s.%s", key, k);
            print_kv(sub, e);
            free(sub);
        }
        return;
    }
    char *sub = malloc(klen);
    if (sub == NULL)
        abort();
    json_array_foreach (v, i, e) {
        snprintf(sub, klen, "%s.%zu", key, i);
        print_kv(sub, e);
    }
    free(sub);
}

/* Prints lockd's answer: the raw JSON with --json, else key=value lines. */
static void print_answer(const struct lc_resp *r, bool json_out)
{
    if (json_out || !json_is_object(r->body)) {
        char *s =
            r->body != NULL ? json_dumps(r->body, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", s != NULL ? s : r->raw);
        free(s);
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach (r->body, k, v)
        print_kv(k, v);
}

/* ------------------------------------------------------------ the context */

struct lc_ctx {
    struct lc_opts o;
    struct lc_client client;
    CURL *h;
};

static int ctx_init(struct lc_ctx *x)
{
    const char *url = x->o.url != NULL ? x->o.url : getenv("LOCKD_URL");
    if (url == NULL || *url == '\0')
        url = LOCKCTL_DEFAULT_URL;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return lc_usage_error("--url must start with http:// or https:// ('%s')", url);
    x->client.base_url = strdup(url);
    if (x->client.base_url == NULL)
        abort();
    size_t n = strlen(x->client.base_url);
    while (n > 0 && x->client.base_url[n - 1] == '/')
        x->client.base_url[--n] = '\0';
    /* --token-file, else $LOCKD_TOKEN (the token itself, as examples/ use
     * it), else $LOCKD_TOKEN_FILE. */
    const char *env_token = getenv("LOCKD_TOKEN");
    if (x->o.token_file == NULL && env_token != NULL && *env_token != '\0') {
        if (asprintf(&x->client.auth_header, "Authorization: Bearer %s", env_token) < 0)
            abort();
    }
    const char *tf = x->o.token_file != NULL ? x->o.token_file : getenv("LOCKD_TOKEN_FILE");
    if (x->client.auth_header == NULL && tf != NULL && *tf != '\0') {
        int rc = client_load_token(&x->client, tf);
        if (rc != 0)
            return rc;
    }
    x->client.cacert = x->o.cacert;
    x->h = curl_easy_init();
    if (x->h == NULL) {
        lc_err("cannot initialise libcurl");
        return EX_SOFTWARE;
    }
    return 0;
}

static void ctx_release(struct lc_ctx *x)
{
    if (x->h != NULL)
        curl_easy_cleanup(x->h);
    free(x->client.base_url);
    free(x->client.auth_header);
}

/* Sets key to a duration option's value in obj; 0 or EX_USAGE. */
static int body_set_duration(json_t *obj, const char *key, const char *opt, const char *val)
{
    long long ms;
    if (val == NULL)
        return 0;
    int rc = duration_parse(opt, val, &ms);
    if (rc != 0)
        return rc;
    json_object_set_new(obj, key, json_integer(ms));
    return 0;
}

/* --------------------------------------------------------- simple commands */

static int need_name(const struct lc_opts *o, const char *cmd)
{
    if (o->npos != 1)
        return lc_usage_error("%s needs exactly one lock NAME", cmd);
    return 0;
}

static long long mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/*
 * POST /locks/NAME with body, repeating the long poll while wait_ms is left
 * (each poll asks for at most LOCKCTL_WAIT_CHUNK_MS, lockd's default
 * max_wait_ms, or 60 s when lockd refuses that). Returns LC_OK with the
 * last answer in out, or LC_UNREACHABLE. sent_ms (may be NULL) gets the
 * monotonic time the last request was sent: a lease it granted was granted
 * after that.
 */
static enum lc_result acquire_call(struct lc_ctx *x, const char *name, json_t *body,
                                   long long wait_ms, struct lc_resp *out, long long *sent_ms)
{
    char *ename = path_escape(x->h, name);
    size_t plen = strlen(ename) + 8;
    char *path = malloc(plen);
    if (path == NULL)
        abort();
    snprintf(path, plen, "/locks/%s", ename);
    curl_free(ename);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    enum lc_result res;
    long long cap = LOCKCTL_WAIT_CHUNK_MS;
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long long spent = (t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000;
        long long left = wait_ms - spent;
        if (left < 0)
            left = 0;
        long long chunk = left > cap ? cap : left;
        json_object_set_new(body, "wait_ms", json_integer(chunk));
        if (sent_ms != NULL)
            *sent_ms = mono_ms();
        res = client_call(&x->client, x->h, "POST", path, NULL, body,
                          (long)(chunk + LOCKCTL_TIMEOUT_MS), false, out);
        if (res == LC_OK && out->status == 400 && chunk > LOCKCTL_WAIT_SMALL_MS) {
            /* This lockd's max_wait_ms is lower: poll in smaller turns (each
             * new poll queues again at the back). */
            cap = LOCKCTL_WAIT_SMALL_MS;
            resp_release(out);
            continue;
        }
        if (res != LC_OK || out->status != 409 || left <= chunk || run_stop_sig != 0)
            break;
        const char *code = resp_str(out, "error");
        if (code == NULL || strcmp(code, "locked") != 0)
            break;
        resp_release(out);
    }
    free(path);
    return res;
}

/* --shared (or --mode) and --limit into an acquire body: 0 or a usage error. */
static int body_set_mode_limit(json_t *body, const struct lc_opts *o)
{
    long long n;
    int rc;
    if (o->shared && o->mode != NULL && strcmp(o->mode, "shared") != 0)
        return lc_usage_error("--shared and --mode %s disagree", o->mode);
    if (o->shared || o->mode != NULL)
        json_object_set_new(body, "mode", json_string(o->shared ? "shared" : o->mode));
    if (o->limit != NULL) {
        if ((rc = count_parse("--limit", o->limit, &n)) != 0)
            return rc;
        json_object_set_new(body, "limit", json_integer(n));
    }
    return 0;
}

static int cmd_acquire(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    int rc = need_name(o, "acquire");
    if (rc != 0)
        return rc;
    long long wait_ms = 0;
    if (o->wait != NULL && (rc = duration_parse("--wait", o->wait, &wait_ms)) != 0)
        return rc;
    json_t *body = json_object();
    if ((rc = body_set_duration(body, "ttl_ms", "--ttl", o->ttl)) != 0 ||
        (rc = body_set_duration(body, "max_hold_ms", "--max-hold", o->max_hold)) != 0)
        goto out;
    if (o->session != NULL)
        json_object_set_new(body, "session", json_string(o->session));
    if (o->owner != NULL)
        json_object_set_new(body, "owner", json_string(o->owner));
    if (o->reentrant)
        json_object_set_new(body, "reentrant", json_true());
    if ((rc = body_set_mode_limit(body, o)) != 0)
        goto out;
    struct lc_resp r;
    if (acquire_call(x, o->pos[0], body, wait_ms, &r, NULL) != LC_OK) {
        rc = EX_UNAVAILABLE;
        goto out;
    }
    if (r.status == 200) {
        print_answer(&r, o->json);
        rc = 0;
    } else {
        rc = resp_fail(&r, "acquire", o->json);
    }
    resp_release(&r);
out:
    json_decref(body);
    return rc;
}

/* One request on /locks/NAME or /sessions/ID; prints the answer. */
static int simple_call(struct lc_ctx *x, const char *what, const char *method, const char *coll,
                       const char *id, const char *lease, json_t *body, int ok_status)
{
    char *eid = path_escape(x->h, id);
    size_t plen = strlen(coll) + strlen(eid) + 2;
    char *path = malloc(plen);
    if (path == NULL)
        abort();
    snprintf(path, plen, "%s/%s", coll, eid);
    curl_free(eid);
    struct lc_resp r;
    int rc;
    if (client_call(&x->client, x->h, method, path, lease, body, LOCKCTL_TIMEOUT_MS, false, &r) !=
        LC_OK) {
        rc = EX_UNAVAILABLE;
    } else {
        if (r.status == ok_status) {
            print_answer(&r, x->o.json);
            rc = 0;
        } else {
            rc = resp_fail(&r, what, x->o.json);
        }
        resp_release(&r);
    }
    free(path);
    return rc;
}

static const char *lease_arg(const struct lc_opts *o)
{
    if (o->lease != NULL)
        return o->lease;
    const char *e = getenv("LOCKD_LEASE");
    return e != NULL && *e != '\0' ? e : NULL;
}

static int cmd_renew(struct lc_ctx *x)
{
    int rc = need_name(&x->o, "renew");
    if (rc != 0)
        return rc;
    const char *lease = lease_arg(&x->o);
    if (lease == NULL)
        return lc_usage_error("renew needs --lease (or $LOCKD_LEASE)");
    json_t *body = json_object();
    rc = body_set_duration(body, "ttl_ms", "--ttl", x->o.ttl);
    if (rc == 0)
        rc = simple_call(x, "renew", "PUT", "/locks", x->o.pos[0], lease,
                         json_object_size(body) > 0 ? body : NULL, 200);
    json_decref(body);
    return rc;
}

static int cmd_release(struct lc_ctx *x)
{
    int rc = need_name(&x->o, "release");
    if (rc != 0)
        return rc;
    if (x->o.force) {
        if (x->o.lease != NULL)
            return lc_usage_error("release --force takes no --lease");
        /* DELETE /locks/NAME?force=true: no lease, the admin token decides */
        char *eid = path_escape(x->h, x->o.pos[0]);
        size_t plen = strlen(eid) + sizeof("/locks/?force=true");
        char *path = malloc(plen);
        if (path == NULL)
            abort();
        snprintf(path, plen, "/locks/%s?force=true", eid);
        curl_free(eid);
        struct lc_resp r;
        if (client_call(&x->client, x->h, "DELETE", path, NULL, NULL, LOCKCTL_TIMEOUT_MS, false,
                        &r) != LC_OK) {
            rc = EX_UNAVAILABLE;
        } else {
            rc = r.status == 200 ? (print_answer(&r, x->o.json), 0)
                                 : resp_fail(&r, "release --force", x->o.json);
            resp_release(&r);
        }
        free(path);
        return rc;
    }
    const char *lease = lease_arg(&x->o);
    if (lease == NULL)
        return lc_usage_error("release needs --lease (or $LOCKD_LEASE)");
    return simple_call(x, "release", "DELETE", "/locks", x->o.pos[0], lease, NULL, 200);
}

static int cmd_status(struct lc_ctx *x)
{
    int rc = need_name(&x->o, "status");
    if (rc != 0)
        return rc;
    return simple_call(x, "status", "GET", "/locks", x->o.pos[0], NULL, NULL, 200);
}

static int cmd_list(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    long long max = -1;
    int rc = 0;
    if (o->npos != 0)
        return lc_usage_error("list takes no NAME (use --prefix)");
    if (o->limit != NULL && (rc = count_parse("--limit", o->limit, &max)) != 0)
        return rc;
    json_t *all = json_array();
    char *cursor = NULL;
    for (;;) {
        long long page = max < 0 ? 1000 : max - (long long)json_array_size(all);
        if (page > 1000)
            page = 1000;
        if (page <= 0)
            break;
        char *path = NULL;
        char *ep = path_escape(x->h, o->prefix != NULL ? o->prefix : "");
        char *ec = path_escape(x->h, cursor != NULL ? cursor : "");
        if (asprintf(&path, "/locks?limit=%lld%s%s%s%s", page, *ep ? "&prefix=" : "", ep,
                     *ec ? "&cursor=" : "", ec) < 0)
            abort();
        curl_free(ep);
        curl_free(ec);
        struct lc_resp r;
        enum lc_result res =
            client_call(&x->client, x->h, "GET", path, NULL, NULL, LOCKCTL_TIMEOUT_MS, false, &r);
        free(path);
        if (res != LC_OK) {
            rc = EX_UNAVAILABLE;
            goto out;
        }
        if (r.status != 200 || !json_is_array(json_object_get(r.body, "locks"))) {
            rc = resp_fail(&r, "list", o->json);
            resp_release(&r);
            goto out;
        }
        json_array_extend(all, json_object_get(r.body, "locks"));
        free(cursor);
        cursor = NULL;
        const char *next = resp_str(&r, "next_cursor");
        if (next != NULL && *next != '\0') {
            cursor = strdup(next);
            if (cursor == NULL)
                abort();
        }
        resp_release(&r);
        if (cursor == NULL)
            break;
    }
    if (o->json) {
        json_t *doc = json_pack("{s:O}", "locks", all);
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s != NULL ? s : "{}");
        free(s);
        json_decref(doc);
    } else {
        size_t i;
        json_t *l;
        json_array_foreach (all, i, l) {
            /* NAME <tab> fencing_token <tab> expires_in_ms <tab> owner */
            print_value(stdout, json_object_get(l, "name"));
            putchar('\t');
            print_value(stdout, json_object_get(l, "fencing_token"));
            putchar('\t');
            print_value(stdout, json_object_get(l, "expires_in_ms"));
            putchar('\t');
            print_value(stdout, json_object_get(l, "owner"));
            putchar('\n');
        }
    }
out:
    free(cursor);
    json_decref(all);
    return rc;
}

static int cmd_session(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    if (o->npos < 1)
        return lc_usage_error("session needs create, heartbeat, status or end");
    const char *verb = o->pos[0];
    if (strcmp(verb, "create") == 0) {
        if (o->npos != 1)
            return lc_usage_error("session create takes no argument");
        json_t *body = json_object();
        int rc;
        if ((rc = body_set_duration(body, "ttl_ms", "--ttl", o->ttl)) != 0 ||
            (rc = body_set_duration(body, "lock_delay_ms", "--lock-delay", o->lock_delay)) != 0) {
            json_decref(body);
            return rc;
        }
        if (o->owner != NULL)
            json_object_set_new(body, "owner", json_string(o->owner));
        struct lc_resp r;
        if (client_call(&x->client, x->h, "POST", "/sessions", NULL, body, LOCKCTL_TIMEOUT_MS,
                        false, &r) != LC_OK) {
            rc = EX_UNAVAILABLE;
        } else {
            if (r.status == 201 || r.status == 200) {
                print_answer(&r, o->json);
                rc = 0;
            } else {
                rc = resp_fail(&r, "session create", o->json);
            }
            resp_release(&r);
        }
        json_decref(body);
        return rc;
    }
    if (o->ttl != NULL || o->owner != NULL || o->lock_delay != NULL)
        return lc_usage_error("--ttl, --owner and --lock-delay apply to session create only");
    if (o->npos != 2)
        return lc_usage_error("session %s needs exactly one session ID", verb);
    if (strcmp(verb, "heartbeat") == 0)
        return simple_call(x, "session heartbeat", "PUT", "/sessions", o->pos[1], NULL, NULL, 200);
    if (strcmp(verb, "status") == 0)
        return simple_call(x, "session status", "GET", "/sessions", o->pos[1], NULL, NULL, 200);
    if (strcmp(verb, "end") == 0)
        return simple_call(x, "session end", "DELETE", "/sessions", o->pos[1], NULL, NULL, 200);
    return lc_usage_error("unknown session command '%s'", verb);
}

/* GET /healthz (or /readyz with --ready): exit 0 when lockd answers 200. */
static int cmd_health(struct lc_ctx *x)
{
    if (x->o.npos != 0)
        return lc_usage_error("health takes no argument");
    const char *path = x->o.ready ? "/readyz" : "/healthz";
    struct lc_resp r;
    if (client_call(&x->client, x->h, "GET", path, NULL, NULL, LOCKCTL_TIMEOUT_MS, false, &r) !=
        LC_OK)
        return EX_UNAVAILABLE;
    int rc;
    if (r.status == 200) {
        print_answer(&r, x->o.json);
        rc = 0;
    } else {
        rc = resp_fail(&r, path + 1, x->o.json);
        if (rc != EX_NOPERM)
            rc = EX_UNAVAILABLE;
    }
    resp_release(&r);
    return rc;
}

/* -------------------------------------------------------------------- run */

enum lc_on_lost { ON_LOST_TERM, ON_LOST_KILL, ON_LOST_IGNORE };

/*
 * Shared by the main thread and the heartbeat thread; fields under mu.
 *
 * The safety rule: COMMAND must be stopped before anyone else can be granted
 * the lock, and lockctl cannot count on lockd to tell it (lockd may be dead,
 * hung or cut off). So lockctl keeps two lower bounds of its own, on the
 * monotonic clock, each from the time a request lockd answered was SENT
 * (lockd handled it later, so the real times are later still):
 * - the session lives until session_ok_ms + session_ttl_ms at least: lockd
 *   extended it to a full ttl when it answered the heartbeat;
 * - the lease lives until lease_until_ms at least: the send time of the
 *   acquire plus the granted ttl, then of each GET /locks/NAME plus the
 *   expires_in_ms it reported. The lease's own ttl counts, not a session's:
 *   lockd's watchdog renews it every ttl/3, so a lease ttl shorter than the
 *   session ttl runs out first when lockd dies, and a heartbeat alone proves
 *   only that lockd was alive, not when the lease was last renewed.
 * COMMAND is signalled once the earlier bound, less hb_margin_ms, passes.
 */
struct lc_hb {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on stop and when the lock is granted */
    bool stop;
    bool lost;
    bool acquired; /* the lock was granted: the fields below it are set */
    pid_t child;   /* running COMMAND, 0 when none (or reaped) */
    enum lc_on_lost on_lost;
    long long session_ok_ms;  /* monotonic send time of the last answered session request */
    long long lease_until_ms; /* monotonic: the lease exists in the backend until then */
    long long lease_ttl_ms;   /* granted ttl */
    json_int_t token;         /* our fencing token */
    const char *lock_path;    /* escaped path "/locks/NAME" */
    /* read-only after start */
    const struct lc_client *client;
    const char *session; /* escaped path "/sessions/ID" */
    const char *name;
    long long session_ttl_ms;
    long long max_interval_ms; /* elect: check at least this often (0: no cap) */
};

static volatile sig_atomic_t lc_forward_pid;

static void run_forward_signal(int sig)
{
    pid_t p = (pid_t)lc_forward_pid;
    if (p > 0)
        kill(p, sig);
}

static bool json_array_has(json_t *arr, const char *s)
{
    size_t i;
    json_t *e;
    json_array_foreach (arr, i, e) {
        if (json_is_string(e) && strcmp(json_string_value(e), s) == 0)
            return true;
    }
    return false;
}

/* min(session ttl, lease ttl once granted): the shortest life a confirmation buys. Under mu. */
static long long hb_window_ms(const struct lc_hb *hb)
{
    if (hb->acquired && hb->lease_ttl_ms < hb->session_ttl_ms)
        return hb->lease_ttl_ms;
    return hb->session_ttl_ms;
}

/* Heartbeat every third of the window, so one late or lost heartbeat is not a loss. */
static long long hb_interval_ms(const struct lc_hb *hb)
{
    long long w = hb_window_ms(hb) / 3;
    if (hb->max_interval_ms > 0 && w > hb->max_interval_ms)
        w = hb->max_interval_ms;
    return w > 0 ? w : 1;
}

/* Time kept in hand for waking up, signalling COMMAND and clock rate error. */
static long long hb_margin_ms(const struct lc_hb *hb)
{
    return hb_window_ms(hb) / 10 + 50;
}

/* The monotonic time by which COMMAND must have been stopped unless a newer
 * answer moves it; *why says which bound it is. Under mu. */
static long long hb_deadline_ms(const struct lc_hb *hb, const char **why)
{
    long long dl = hb->session_ok_ms + hb->session_ttl_ms;
    *why = "no heartbeat reached lockd within the session ttl";
    if (hb->acquired && hb->lease_until_ms < dl) {
        dl = hb->lease_until_ms;
        *why = "lockd did not confirm the lease before it could expire";
    }
    return dl - hb_margin_ms(hb);
}

/* Called with hb->mu held: marks the lock lost and signals COMMAND once. */
static void hb_mark_lost(struct lc_hb *hb, const char *why)
{
    if (hb->lost)
        return;
    hb->lost = true;
    if (hb->child <= 0) {
        lc_err("lock '%s' lost: %s", hb->name, why);
        return;
    }
    if (hb->on_lost == ON_LOST_IGNORE) {
        lc_err("lock '%s' lost: %s; COMMAND (pid %d) keeps running (--on-lost ignore)", hb->name,
               why, (int)hb->child);
        return;
    }
    int sig = hb->on_lost == ON_LOST_KILL ? SIGKILL : SIGTERM;
    lc_err("lock '%s' lost: %s; sending %s to COMMAND (pid %d)", hb->name, why,
           sig == SIGKILL ? "SIGKILL" : "SIGTERM", (int)hb->child);
    kill(hb->child, sig);
}

/* A request's timeout: at most max(interval, 1 s), and never past the
 * deadline (a hung lockd must not hold the check up). Under mu. */
static long hb_timeout_ms(const struct lc_hb *hb, long long sent_ms)
{
    long long t = hb_interval_ms(hb) < 1000 ? 1000 : hb_interval_ms(hb);
    const char *why;
    if (!hb->lost) {
        long long left = hb_deadline_ms(hb, &why) - sent_ms;
        if (left < t)
            t = left > 1 ? left : 1; /* 0 would mean no timeout to libcurl */
    }
    return (long)t;
}

/*
 * One heartbeat: PUT /sessions/ID, then, while the lock is held, GET
 * /locks/NAME for how long the lease has left in the backend. Called and
 * returns with mu held; drops it during the requests.
 */
static void hb_beat(struct lc_hb *hb, CURL *h)
{
    struct lc_resp r;
    long long sent = mono_ms();
    long timeout = hb_timeout_ms(hb, sent);
    pthread_mutex_unlock(&hb->mu);
    enum lc_result res =
        client_call(hb->client, h, "PUT", hb->session, NULL, NULL, timeout, true, &r);
    pthread_mutex_lock(&hb->mu);
    bool ok = res == LC_OK && r.status == 200;
    if (ok) {
        hb->session_ok_ms = sent;
        if (hb->acquired && json_array_has(json_object_get(r.body, "lost"), hb->name))
            hb_mark_lost(hb, "lockd reports it lost (taken over or expired)");
    } else if (res == LC_OK && r.status == 404) {
        hb_mark_lost(hb, "the session expired or is unknown to lockd");
    }
    if (res == LC_OK)
        resp_release(&r);
    if (!ok || !hb->acquired || hb->lost)
        return;

    sent = mono_ms();
    timeout = hb_timeout_ms(hb, sent);
    pthread_mutex_unlock(&hb->mu);
    res = client_call(hb->client, h, "GET", hb->lock_path, NULL, NULL, timeout, true, &r);
    pthread_mutex_lock(&hb->mu);
    if (res != LC_OK)
        return;
    if (r.status == 200 && json_is_boolean(json_object_get(r.body, "held"))) {
        json_t *tok = json_object_get(r.body, "fencing_token");
        json_t *left = json_object_get(r.body, "expires_in_ms");
        if (json_is_true(json_object_get(r.body, "held")) && json_is_integer(tok) &&
            json_integer_value(tok) == hb->token && json_is_integer(left))
            /* lockd measured expires_in_ms after we sent: the lease lasts at least this long */
            hb->lease_until_ms = sent + json_integer_value(left);
        else
            hb_mark_lost(hb, "lockd shows it no longer held by this run");
    }
    /* any other answer (503: the backend is out of reach) confirms nothing */
    resp_release(&r);
}

/*
 * The heartbeat thread: a heartbeat every hb_interval_ms; the lock counts
 * as lost when lockd says the session is gone (404), when the lock shows up
 * in `lost` or lockd shows it held by no one or someone else, or when
 * hb_deadline_ms passes without an answer that moves it.
 */
static void *hb_main(void *arg)
{
    struct lc_hb *hb = arg;
    CURL *h = curl_easy_init();
    if (h == NULL)
        abort();
    pthread_mutex_lock(&hb->mu);
    long long last_sent = hb->session_ok_ms;
    while (!hb->stop) {
        const char *why = NULL;
        long long deadline = hb->lost ? LLONG_MAX : hb_deadline_ms(hb, &why);
        long long now = mono_ms();
        if (now >= deadline) {
            hb_mark_lost(hb, why);
            continue;
        }
        long long next = last_sent + hb_interval_ms(hb);
        if (now >= next) {
            last_sent = now;
            hb_beat(hb, h);
            continue;
        }
        /* Sleep until the next heartbeat or the deadline; a grant or stop wakes us early. */
        long long until = next < deadline ? next : deadline;
        struct timespec ts = {(time_t)(until / 1000), (long)(until % 1000) * 1000000L};
        pthread_cond_timedwait(&hb->cv, &hb->mu, &ts);
    }
    pthread_mutex_unlock(&hb->mu);
    curl_easy_cleanup(h);
    return NULL;
}

/* Builds COMMAND's environment: ours without old LOCKD_* lock vars, plus the new ones. */
/* A 200 grant's lease (new, the caller frees), token and the lease's ttl
 * (the asked ttl, or the default, when the answer has none); releases r.
 * run and elect. */
static char *grant_take(struct lc_resp *r, long long ttl_ms, json_int_t *token,
                        json_int_t *lease_ttl)
{
    char *lease = strdup(resp_str(r, "lease"));
    if (lease == NULL)
        abort();
    *token = json_integer_value(json_object_get(r->body, "fencing_token"));
    *lease_ttl = json_integer_value(json_object_get(r->body, "ttl_ms"));
    if (*lease_ttl <= 0)
        *lease_ttl = ttl_ms > 0 ? ttl_ms : LOCKCTL_DEFAULT_TTL_MS;
    resp_release(r);
    return lease;
}

static char **run_env(const char *name, const char *lease, json_int_t token)
{
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 4, sizeof(*env));
    if (env == NULL)
        abort();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "LOCKD_LOCK=", 11) == 0 ||
            strncmp(environ[i], "LOCKD_LEASE=", 12) == 0 ||
            strncmp(environ[i], "LOCKD_FENCING_TOKEN=", 20) == 0)
            continue;
        env[k++] = environ[i];
    }
    if (asprintf(&env[k++], "LOCKD_LOCK=%s", name) < 0 ||
        asprintf(&env[k++], "LOCKD_LEASE=%s", lease) < 0 ||
        asprintf(&env[k++], "LOCKD_FENCING_TOKEN=%" JSON_INTEGER_FORMAT, token) < 0)
        abort();
    env[k] = NULL;
    return env;
}

static void run_env_free(char **env)
{
    size_t n = 0;
    while (env[n] != NULL)
        n++;
    /* the last three are ours */
    for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++)
        free(env[i]);
    free(env);
}

/* "lockctl VERB on HOST pid PID", or --owner when given, into owner[cap]. */
static void owner_default(const struct lc_opts *o, const char *verb, char *owner, size_t cap)
{
    if (o->owner != NULL) {
        snprintf(owner, cap, "%s", o->owner);
    } else {
        char host[64] = "";
        gethostname(host, sizeof(host) - 1);
        snprintf(owner, cap, "lockctl %s on %s pid %d", verb, host, (int)getpid());
    }
}

/* POSTs a new session for owner (ttl sttl_ms when >= 0); *sent_ms gets the
 * monotonic send time. As client_call: on LC_OK the caller releases *r. */
static enum lc_result session_create(struct lc_ctx *x, const char *owner, long long sttl_ms,
                                     bool quiet, struct lc_resp *r, long long *sent_ms)
{
    json_t *body = json_pack("{s:s}", "owner", owner);
    if (sttl_ms >= 0)
        json_object_set_new(body, "ttl_ms", json_integer(sttl_ms));
    *sent_ms = mono_ms();
    enum lc_result res = client_call(&x->client, x->h, "POST", "/sessions", NULL, body,
                                     LOCKCTL_TIMEOUT_MS, quiet, r);
    json_decref(body);
    return res;
}

/* The escaped path "/sessions/ID" of the session r created (new, the caller
 * frees it) and in *ttl_ms its ttl: lockd's, else sttl_ms when > 0, else 10 s. */
static char *session_path_new(struct lc_ctx *x, const struct lc_resp *r, long long sttl_ms,
                              long long *ttl_ms)
{
    char *esess = path_escape(x->h, resp_str(r, "session"));
    char *path;
    if (asprintf(&path, "/sessions/%s", esess) < 0)
        abort();
    curl_free(esess);
    *ttl_ms = json_integer_value(json_object_get(r->body, "ttl_ms"));
    if (*ttl_ms <= 0)
        *ttl_ms = sttl_ms > 0 ? sttl_ms : 10000;
    return path;
}

/* Readies hb (zeroed) for hb_main over the session at session_path
 * (borrowed while hb lives), last answered at session_ok_ms: its mutex and
 * its condition on the monotonic clock, which the caller destroys. */
static void hb_init(struct lc_hb *hb, const struct lc_client *client, const char *session_path,
                    const char *name, long long session_ttl_ms, long long session_ok_ms,
                    enum lc_on_lost on_lost)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hb->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&hb->mu, NULL);
    hb->on_lost = on_lost;
    hb->client = client;
    hb->session = session_path;
    hb->name = name;
    hb->session_ttl_ms = session_ttl_ms;
    hb->session_ok_ms = session_ok_ms;
}

/* Tells the heartbeat thread tid to stop and waits for it. */
static void hb_stop(struct lc_hb *hb, pthread_t tid)
{
    pthread_mutex_lock(&hb->mu);
    hb->stop = true;
    pthread_cond_signal(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
    pthread_join(tid, NULL);
}

/* The lock at lock_path (borrowed) was granted to an acquire sent at
 * sent_ms: the heartbeat thread keeps the lease from now on. A grant that
 * came too late to be used is marked lost at once. Caller holds hb->mu. */
static void hb_grant(struct lc_hb *hb, json_int_t token, const char *lock_path,
                     long long lease_ttl_ms, long long sent_ms)
{
    hb->acquired = true;
    hb->token = token;
    hb->lock_path = lock_path;
    hb->lease_ttl_ms = lease_ttl_ms;
    /* lockd granted it after we sent the acquire: it lasts a ttl from then at least */
    hb->lease_until_ms = sent_ms + lease_ttl_ms;
    pthread_cond_signal(&hb->cv); /* the heartbeat interval and deadline change */
    const char *why;
    if (!hb->lost && mono_ms() >= hb_deadline_ms(hb, &why))
        hb_mark_lost(hb, why);
}

/* DELETE the lock (when lease is set) then the session, each within
 * timeout_ms; failures are not fatal, and a lock found no longer held is
 * reported unless quiet (it was known lost, or elect resigns). */
static void run_cleanup(struct lc_ctx *x, const char *lock_path, const char *lease,
                        const char *session_path, long timeout_ms, bool quiet)
{
    struct lc_resp r;
    if (lock_path != NULL && lease != NULL &&
        client_call(&x->client, x->h, "DELETE", lock_path, lease, NULL, timeout_ms, true, &r) ==
            LC_OK) {
        if (r.status != 200 && !quiet)
            lc_err("release: lock was no longer held (%ld %s)", r.status,
                   resp_str(&r, "error") != NULL ? resp_str(&r, "error") : "");
        resp_release(&r);
    }
    if (session_path != NULL && client_call(&x->client, x->h, "DELETE", session_path, NULL, NULL,
                                            timeout_ms, true, &r) == LC_OK)
        resp_release(&r);
}

static int cmd_run(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    if (o->npos != 1)
        return lc_usage_error("run needs a lock NAME");
    if (o->cmd == NULL || o->cmd[0] == NULL)
        return lc_usage_error("run needs a COMMAND after '--'");
    long long wait_ms = 0, ttl_ms = -1, sttl_ms = -1;
    int rc;
    if ((o->wait != NULL && (rc = duration_parse("--wait", o->wait, &wait_ms)) != 0) ||
        (o->ttl != NULL && (rc = duration_parse("--ttl", o->ttl, &ttl_ms)) != 0) ||
        (o->session_ttl != NULL &&
         (rc = duration_parse("--session-ttl", o->session_ttl, &sttl_ms)) != 0))
        return rc;
    enum lc_on_lost on_lost = ON_LOST_TERM;
    if (o->on_lost != NULL) {
        if (strcmp(o->on_lost, "term") == 0)
            on_lost = ON_LOST_TERM;
        else if (strcmp(o->on_lost, "kill") == 0)
            on_lost = ON_LOST_KILL;
        else if (strcmp(o->on_lost, "ignore") == 0)
            on_lost = ON_LOST_IGNORE;
        else
            return lc_usage_error("--on-lost must be term, kill or ignore ('%s')", o->on_lost);
    }
    json_t *check = json_object(); /* usage errors before a session exists */
    rc = body_set_mode_limit(check, o);
    json_decref(check);
    if (rc != 0)
        return rc;
    const char *name = o->pos[0];
    char owner[129];
    owner_default(o, "run", owner, sizeof(owner));

    char *session_path = NULL, *lock_path = NULL, *lease = NULL, *ename = NULL;
    char **env = NULL;
    json_t *body = NULL;
    struct lc_hb hb;
    bool hb_started = false;
    memset(&hb, 0, sizeof(hb));
    rc = LOCKCTL_EX_FAILED;

    /* Until COMMAND runs, SIGTERM and SIGINT end the session we create
     * (at once, even in a long --wait) rather than leave it to its ttl. */
    struct sigaction stop_sa, stop_old_term, stop_old_int;
    memset(&stop_sa, 0, sizeof(stop_sa));
    stop_sa.sa_handler = run_on_stop;
    sigemptyset(&stop_sa.sa_mask);
    sigaction(SIGTERM, &stop_sa, &stop_old_term);
    sigaction(SIGINT, &stop_sa, &stop_old_int);

    /* 1. session */
    struct lc_resp r;
    long long session_sent_ms;
    enum lc_result res = session_create(x, owner, sttl_ms, false, &r, &session_sent_ms);
    if (res != LC_OK) {
        rc = EX_UNAVAILABLE;
        goto out;
    }
    if ((r.status != 201 && r.status != 200) || resp_str(&r, "session") == NULL) {
        rc = resp_fail(&r, "session create", false);
        resp_release(&r);
        goto out;
    }
    const char *session_id = resp_str(&r, "session");
    long long got_ttl;
    session_path = session_path_new(x, &r, sttl_ms, &got_ttl);

    /* 2. heartbeat thread, running from now on (a long wait must not expire the session) */
    hb_init(&hb, &x->client, session_path, name, got_ttl, session_sent_ms, on_lost);
    pthread_t tid;
    if (pthread_create(&tid, NULL, hb_main, &hb) != 0) {
        lc_err("cannot start the heartbeat thread");
        resp_release(&r);
        rc = EX_OSERR;
        goto out;
    }
    hb_started = true;

    /* 3. acquire under the session */
    body = json_pack("{s:s, s:s}", "session", session_id, "owner", owner);
    resp_release(&r);
    if (ttl_ms >= 0)
        json_object_set_new(body, "ttl_ms", json_integer(ttl_ms));
    if ((rc = body_set_mode_limit(body, o)) != 0)
        goto out;
    ename = path_escape(x->h, name);
    if (asprintf(&lock_path, "/locks/%s", ename) < 0)
        abort();
    long long acquire_sent_ms = 0;
    lc_interruptible = true;
    res = run_stop_sig != 0 ? LC_UNREACHABLE
                            : acquire_call(x, name, body, wait_ms, &r, &acquire_sent_ms);
    lc_interruptible = false;
    if (run_stop_sig != 0) {
        if (res == LC_OK && r.status == 200 && resp_str(&r, "lease") != NULL)
            lease = strdup(resp_str(&r, "lease")); /* granted meanwhile: given back */
        if (res == LC_OK)
            resp_release(&r);
        lc_err("run: %s before COMMAND started: ending session and exiting",
               run_stop_sig == SIGINT ? "SIGINT" : "SIGTERM");
        rc = 128 + run_stop_sig;
        goto out;
    }
    if (res != LC_OK) {
        rc = EX_UNAVAILABLE;
        goto out;
    }
    if (r.status != 200 || resp_str(&r, "lease") == NULL) {
        rc = resp_fail(&r, "acquire", false);
        resp_release(&r);
        goto out;
    }
    json_int_t token, lease_ttl;
    lease = grant_take(&r, ttl_ms, &token, &lease_ttl);
    env = run_env(name, lease, token);
    if (run_stop_sig != 0) { /* came just after the grant: give it back */
        rc = 128 + run_stop_sig;
        goto out;
    }

    /* 4. COMMAND. Signals for lockctl go on to COMMAND while it runs. */
    fflush(NULL);
    pthread_mutex_lock(&hb.mu);
    hb_grant(&hb, token, lock_path, lease_ttl, acquire_sent_ms);
    if (hb.lost) {
        pthread_mutex_unlock(&hb.mu);
        rc = LOCKCTL_EX_FAILED;
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        pthread_mutex_unlock(&hb.mu);
        lc_err("cannot fork: %s", strerror(errno));
        rc = EX_OSERR;
        goto out;
    }
    if (pid == 0) {
        execvpe(o->cmd[0], o->cmd, env);
        exec_failed(o->cmd[0], errno);
    }
    hb.child = pid;
    lc_forward_pid = pid;
    pthread_mutex_unlock(&hb.mu);

    struct sigaction sa, old_term, old_hup, old_int, old_quit;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = run_forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
    /* COMMAND is in our process group: a terminal's ^C or ^\ reaches it directly. */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGQUIT, &sa, &old_quit);

    /* Wait without reaping first, so the heartbeat thread never signals a recycled pid. */
    siginfo_t si;
    for (;;) {
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) == 0)
            break;
        if (errno != EINTR) {
            lc_err("waitid: %s", strerror(errno));
            break;
        }
    }
    pthread_mutex_lock(&hb.mu);
    hb.child = 0;
    lc_forward_pid = 0;
    pthread_mutex_unlock(&hb.mu);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (WIFEXITED(status))
        rc = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        rc = 128 + WTERMSIG(status);
    else
        rc = LOCKCTL_EX_FAILED;

out:
    if (hb_started)
        hb_stop(&hb, tid);
    run_cleanup(x, lock_path, lease, session_path, LOCKCTL_TIMEOUT_MS, hb.lost);
    sigaction(SIGTERM, &stop_old_term, NULL);
    sigaction(SIGINT, &stop_old_int, NULL);
    if (hb_started || session_path != NULL) {
        pthread_cond_destroy(&hb.cv);
        pthread_mutex_destroy(&hb.mu);
    }
    if (env != NULL)
        run_env_free(env);
    json_decref(body);
    curl_free(ename);
    free(lock_path);
    free(lease);
    free(session_path);
    return rc;
}

/* ------------------------------------------------------------------ elect */

/* elect polls lockd in turns this long, so a signal is noticed within one. */
#define ELECT_WAIT_CHUNK_MS 1000LL
/* elect checks its leadership at least this often (heartbeat + GET). */
#define ELECT_CHECK_MS 1000LL
/* Pause before trying again when lockd is out of reach or unavailable. */
#define ELECT_RETRY_MS 500LL
/* Timeout of resigning's release and session end. */
#define ELECT_CLEANUP_TIMEOUT_MS 2000L
#define ELECT_DEFAULT_KILL_AFTER_MS 10000LL

static volatile sig_atomic_t elect_stop_sig;

static void elect_on_signal(int sig)
{
    if (elect_stop_sig == 0)
        elect_stop_sig = sig;
}

static void sleep_ms(long long ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal cuts it short: the caller checks elect_stop_sig */
}

/* Waits for COMMAND (not reaping) while watching for a stop signal and a
 * loss; on either, SIGTERM, then SIGKILL after kill_after_ms. Reaps it and
 * returns its wait status. */
static int elect_wait_child(struct lc_hb *hb, pid_t pid, long long kill_after_ms)
{
    long long term_at = -1;
    bool killed = false;
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            break;
        pthread_mutex_lock(&hb->mu);
        bool lost = hb->lost; /* hb_mark_lost has sent SIGTERM already */
        pthread_mutex_unlock(&hb->mu);
        long long now = mono_ms();
        if (term_at < 0 && (lost || elect_stop_sig != 0)) {
            if (!lost)
                kill(pid, SIGTERM);
            term_at = now;
        }
        if (term_at >= 0 && !killed && now - term_at >= kill_after_ms) {
            lc_err("COMMAND (pid %d) still runs %lld ms after SIGTERM: sending SIGKILL", (int)pid,
                   kill_after_ms);
            kill(pid, SIGKILL);
            killed = true;
        }
        sleep_ms(20);
    }
    pthread_mutex_lock(&hb->mu);
    hb->child = 0;
    pthread_mutex_unlock(&hb->mu);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

enum elect_turn { ELECT_AGAIN, ELECT_EXIT };

/*
 * One campaign: a session, a heartbeat thread, a waiting acquire in turns of
 * ELECT_WAIT_CHUNK_MS, COMMAND while leading. Returns ELECT_EXIT with *rc
 * set (COMMAND ended by itself, a stop signal, a fatal answer), or
 * ELECT_AGAIN (leadership or the session lost, lockd out of reach).
 */
static enum elect_turn elect_campaign(struct lc_ctx *x, const char *owner, long long ttl_ms,
                                      long long sttl_ms, long long kill_after_ms, int *rc)
{
    struct lc_opts *o = &x->o;
    const char *name = o->pos[0];
    enum elect_turn turn = ELECT_AGAIN;
    char *session_path = NULL, *lock_path = NULL, *lease = NULL, *ename = NULL;
    char *session_id = NULL;
    char **env = NULL;
    struct lc_hb hb;
    bool hb_started = false;
    pthread_t tid;
    struct lc_resp r;
    memset(&hb, 0, sizeof(hb));

    /* 1. session */
    json_t *body = NULL;
    long long session_sent_ms;
    enum lc_result res = session_create(x, owner, sttl_ms, true, &r, &session_sent_ms);
    if (res != LC_OK) {
        sleep_ms(ELECT_RETRY_MS);
        return ELECT_AGAIN;
    }
    if ((r.status != 201 && r.status != 200) || resp_str(&r, "session") == NULL) {
        if (r.status == 503 || r.status == 502 || r.status == 504) {
            resp_release(&r);
            sleep_ms(ELECT_RETRY_MS);
            return ELECT_AGAIN;
        }
        *rc = resp_fail(&r, "session create", false);
        resp_release(&r);
        return ELECT_EXIT;
    }
    session_id = strdup(resp_str(&r, "session"));
    if (session_id == NULL)
        abort();
    long long got_ttl;
    session_path = session_path_new(x, &r, sttl_ms, &got_ttl);
    resp_release(&r);

    /* 2. heartbeat thread (the session lives through the campaign) */
    hb_init(&hb, &x->client, session_path, name, got_ttl, session_sent_ms, ON_LOST_TERM);
    hb.max_interval_ms = ELECT_CHECK_MS;
    if (pthread_create(&tid, NULL, hb_main, &hb) != 0) {
        lc_err("cannot start the heartbeat thread");
        *rc = EX_OSERR;
        turn = ELECT_EXIT;
        goto out;
    }
    hb_started = true;

    /* 3. campaign: a waiting acquire under the session, in short turns */
    ename = path_escape(x->h, name);
    if (asprintf(&lock_path, "/locks/%s", ename) < 0)
        abort();
    body = json_pack("{s:s, s:s, s:I}", "session", session_id, "owner", owner, "wait_ms",
                     (json_int_t)ELECT_WAIT_CHUNK_MS);
    if (ttl_ms >= 0)
        json_object_set_new(body, "ttl_ms", json_integer(ttl_ms));
    long long acquire_sent_ms = 0;
    bool said_unreachable = false;
    for (;;) {
        if (elect_stop_sig != 0) {
            *rc = 128 + elect_stop_sig;
            turn = ELECT_EXIT;
            goto out;
        }
        pthread_mutex_lock(&hb.mu);
        bool lost = hb.lost; /* the session is gone or could not be kept */
        pthread_mutex_unlock(&hb.mu);
        if (lost)
            goto out;
        acquire_sent_ms = mono_ms();
        res = client_call(&x->client, x->h, "POST", lock_path, NULL, body,
                          (long)(ELECT_WAIT_CHUNK_MS + LOCKCTL_TIMEOUT_MS), true, &r);
        if (res != LC_OK) {
            if (!said_unreachable)
                lc_err("elect: cannot reach lockd at '%s'; retrying", x->client.base_url);
            said_unreachable = true;
            sleep_ms(ELECT_RETRY_MS);
            continue;
        }
        if (r.status == 200 && resp_str(&r, "lease") != NULL)
            break;
        const char *code = resp_str(&r, "error");
        if (r.status == 409 && code != NULL && strcmp(code, "locked") == 0) {
            resp_release(&r);
            continue;
        }
        if (r.status == 404 || r.status == 503 || r.status == 502 || r.status == 504) {
            /* 404: the session is gone; 503: lockd or its backend unavailable */
            long st = r.status;
            resp_release(&r);
            if (st != 404)
                sleep_ms(ELECT_RETRY_MS);
            goto out;
        }
        *rc = resp_fail(&r, "elect", false);
        resp_release(&r);
        turn = ELECT_EXIT;
        goto out;
    }
    json_int_t token, lease_ttl;
    lease = grant_take(&r, ttl_ms, &token, &lease_ttl);
    env = run_env(name, lease, token);

    /* 4. lead: COMMAND until it ends, leadership is lost, or a stop signal */
    fflush(NULL);
    pthread_mutex_lock(&hb.mu);
    hb_grant(&hb, token, lock_path, lease_ttl, acquire_sent_ms);
    if (hb.lost || elect_stop_sig != 0) {
        pthread_mutex_unlock(&hb.mu);
        if (elect_stop_sig != 0) {
            *rc = 128 + elect_stop_sig;
            turn = ELECT_EXIT;
        }
        goto out;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        pthread_mutex_unlock(&hb.mu);
        lc_err("cannot fork: %s", strerror(errno));
        *rc = EX_OSERR;
        turn = ELECT_EXIT;
        goto out;
    }
    if (pid == 0) {
#ifdef __linux__
        /* COMMAND must not outlive a lockctl killed with SIGKILL as a leader
         * nobody tracks: it gets SIGTERM when lockctl dies. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(128 + SIGTERM);
#else
        (void)parent;
#endif
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        execvpe(o->cmd[0], o->cmd, env);
        exec_failed(o->cmd[0], errno);
    }
    hb.child = pid;
    pthread_mutex_unlock(&hb.mu);

    int status = elect_wait_child(&hb, pid, kill_after_ms);
    pthread_mutex_lock(&hb.mu);
    bool lost = hb.lost;
    pthread_mutex_unlock(&hb.mu);
    if (elect_stop_sig != 0) {
        *rc = 128 + elect_stop_sig;
        turn = ELECT_EXIT;
    } else if (!lost) {
        /* COMMAND ended by itself: so does lockctl, with its status */
        *rc = WIFEXITED(status)     ? WEXITSTATUS(status)
              : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                    : LOCKCTL_EX_FAILED;
        turn = ELECT_EXIT;
    } else {
        lc_err("elect: leadership of '%s' lost; COMMAND stopped; campaigning again", name);
    }

out:
    if (hb_started)
        hb_stop(&hb, tid);
    /* resign: release (when leading) and end the session, quietly and briefly */
    run_cleanup(x, lock_path, lease, session_path, ELECT_CLEANUP_TIMEOUT_MS, true);
    pthread_cond_destroy(&hb.cv);
    pthread_mutex_destroy(&hb.mu);
    if (env != NULL)
        run_env_free(env);
    json_decref(body);
    curl_free(ename);
    free(lock_path);
    free(lease);
    free(session_path);
    free(session_id);
    return turn;
}

static int cmd_elect(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    if (o->npos != 1)
        return lc_usage_error("elect needs a lock NAME");
    if (o->cmd == NULL || o->cmd[0] == NULL)
        return lc_usage_error("elect needs a COMMAND after '--'");
    long long ttl_ms = -1, sttl_ms = -1, kill_after_ms = ELECT_DEFAULT_KILL_AFTER_MS;
    int rc;
    if ((o->ttl != NULL && (rc = duration_parse("--ttl", o->ttl, &ttl_ms)) != 0) ||
        (o->session_ttl != NULL &&
         (rc = duration_parse("--session-ttl", o->session_ttl, &sttl_ms)) != 0) ||
        (o->kill_after != NULL &&
         (rc = duration_parse("--kill-after", o->kill_after, &kill_after_ms)) != 0))
        return rc;
    char owner[129];
    owner_default(o, "elect", owner, sizeof(owner));
    struct sigaction sa, old_term, old_int;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = elect_on_signal; /* no SA_RESTART: sleeps end early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    rc = LOCKCTL_EX_FAILED;
    /* Each turn waits (a lease, a retry pause, a poll of lockd) or ends. */
    while (elect_campaign(x, owner, ttl_ms, sttl_ms, kill_after_ms, &rc) == ELECT_AGAIN) {
        if (elect_stop_sig != 0) {
            rc = 128 + elect_stop_sig;
            break;
        }
    }
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    return rc;
}

/* ---------------------------------------------------------------- observe */

#define OBSERVE_WAIT_MS 30000LL
#define OBSERVE_WAIT_SMALL_MS 5000LL

/* One line {"name","held","owner","fencing_token","index"} of an inspect body. */
static void observe_print(const char *name, json_t *b)
{
    bool held = json_is_true(json_object_get(b, "held"));
    json_t *owner = json_object_get(b, "owner");
    json_t *tok = json_object_get(b, "fencing_token");
    json_t *line = json_object();
    json_object_set_new(line, "name", json_string(name));
    json_object_set_new(line, "held", json_boolean(held));
    json_object_set(line, "owner", held && owner != NULL ? owner : json_null());
    json_object_set(line, "fencing_token", held && json_is_integer(tok) ? tok : json_null());
    json_object_set(line, "index", json_object_get(b, "index"));
    char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s == NULL)
        abort();
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(line);
}

static int cmd_observe(struct lc_ctx *x)
{
    struct lc_opts *o = &x->o;
    int rc = need_name(o, "observe");
    if (rc != 0)
        return rc;
    long long count = -1;
    if (o->count != NULL) {
        if ((rc = count_parse("--count", o->count, &count)) != 0)
            return rc;
        if (count < 1)
            return lc_usage_error("--count must be at least 1");
    }
    const char *name = o->pos[0];
    char *ename = path_escape(x->h, name);
    json_int_t index = 0;
    bool have_index = false, said_unreachable = false;
    long long wait_ms = OBSERVE_WAIT_MS, printed = 0;
    rc = 0;
    /* Each turn is one long poll of up to wait_ms, or a retry pause. */
    while (count < 0 || printed < count) {
        char *path = NULL;
        if (!have_index) {
            if (asprintf(&path, "/locks/%s", ename) < 0)
                abort();
        } else if (asprintf(&path, "/locks/%s?index=%" JSON_INTEGER_FORMAT "&wait_ms=%lld", ename,
                            index, wait_ms) < 0) {
            abort();
        }
        struct lc_resp r;
        enum lc_result res = client_call(&x->client, x->h, "GET", path, NULL, NULL,
                                         (long)(wait_ms + LOCKCTL_TIMEOUT_MS), have_index, &r);
        free(path);
        if (res != LC_OK) {
            if (!have_index) { /* the first answer never came: as any command, 69 */
                rc = EX_UNAVAILABLE;
                break;
            }
            if (!said_unreachable)
                lc_err("observe: cannot reach lockd at '%s'; retrying", x->client.base_url);
            said_unreachable = true;
            sleep_ms(1000);
            continue;
        }
        said_unreachable = false;
        if (r.status == 400 && have_index && wait_ms > OBSERVE_WAIT_SMALL_MS) {
            wait_ms = OBSERVE_WAIT_SMALL_MS; /* this lockd's max_wait_ms is lower */
            resp_release(&r);
            continue;
        }
        if (r.status != 200 || !json_is_integer(json_object_get(r.body, "index"))) {
            if (have_index && (r.status == 503 || r.status == 502 || r.status == 504)) {
                resp_release(&r);
                sleep_ms(1000);
                continue;
            }
            rc = resp_fail(&r, "observe", false);
            resp_release(&r);
            break;
        }
        json_int_t got = json_integer_value(json_object_get(r.body, "index"));
        if (!have_index || got != index) {
            observe_print(name, r.body);
            printed++;
        }
        index = got;
        have_index = true;
        resp_release(&r);
    }
    curl_free(ename);
    return rc;
}

/* ------------------------------------------------------------------- main */

struct lc_command {
    const char *name;
    const char *allowed; /* ",opt,opt," */
    int (*run)(struct lc_ctx *x);
};

static const struct lc_command lc_commands[] = {
    {"acquire", ",ttl,wait,session,owner,reentrant,shared,mode,limit,max-hold,", cmd_acquire},
    {"renew", ",lease,ttl,", cmd_renew},
    {"release", ",lease,force,", cmd_release},
    {"status", ",", cmd_status},
    {"list", ",prefix,limit,", cmd_list},
    {"session", ",ttl,owner,lock-delay,", cmd_session},
    {"run", ",ttl,wait,session-ttl,owner,shared,limit,on-lost,", cmd_run},
    {"health", ",ready,", cmd_health},
    {"elect", ",ttl,session-ttl,owner,kill-after,", cmd_elect},
    {"observe", ",count,", cmd_observe},
};

int main(int argc, char **argv)
{
    struct lc_ctx x;
    memset(&x, 0, sizeof(x));
    /* Global options may come before the command. */
    int i = 1;
    const struct lc_command *cmd = NULL;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("lockctl %s\n", LOCKD_VERSION);
            return 0;
        }
        if (strncmp(argv[i], "--", 2) != 0 || strcmp(argv[i], "--") == 0)
            break;
        /* a global option: parse it alone */
        bool has_value = strchr(argv[i], '=') == NULL && strcmp(argv[i], "--json") != 0 &&
                         strcmp(argv[i], "--help") != 0;
        int end = has_value && i + 1 < argc ? i + 2 : i + 1;
        int rc = opts_parse(&x.o, end, argv, i, ",", false);
        if (rc != 0)
            return rc;
        i = end - 1;
    }
    if (x.o.help || (i < argc && strcmp(argv[i], "help") == 0)) {
        fputs(lc_usage, stdout);
        return 0;
    }
    if (i >= argc)
        return lc_usage_error("no command given");
    for (size_t k = 0; k < sizeof(lc_commands) / sizeof(lc_commands[0]); k++) {
        if (strcmp(argv[i], lc_commands[k].name) == 0)
            cmd = &lc_commands[k];
    }
    if (cmd == NULL)
        return lc_usage_error("unknown command '%s'", argv[i]);
    int rc = opts_parse(&x.o, argc, argv, i + 1, cmd->allowed,
                        strcmp(cmd->name, "run") == 0 || strcmp(cmd->name, "elect") == 0);
    if (rc != 0)
        return rc;
    if (x.o.help) {
        fputs(lc_usage, stdout);
        return 0;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        lc_err("cannot initialise libcurl");
        return EX_SOFTWARE;
    }
    rc = ctx_init(&x);
    if (rc == 0)
        rc = cmd->run(&x);
    ctx_release(&x);
    curl_global_cleanup();
    return rc;
}
