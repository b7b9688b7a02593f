/*
 * harness.c - starts real redis-server and lockd processes on free loopback
 * ports in a temp dir, waits with bounded polls, kills by PID, and talks
 * HTTP with libcurl. See harness.h.
 */
#include "tests/lib/harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed;
static char tmpdir[256];
static pid_t children[64];
static int nchildren;
static pid_t owner_pid;

static void cleanup(void)
{
    if (getpid() != owner_pid)
        return;
    for (int i = 0; i < nchildren; i++)
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
        }
    if (tmpdir[0] != '\0' && getenv("TH_KEEP") == NULL) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", tmpdir);
    }
}

static void track(pid_t pid)
{
    if (nchildren < 64)
        children[nchildren++] = pid;
}

static void untrack(pid_t pid)
{
    for (int i = 0; i < nchildren; i++)
        if (children[i] == pid)
            children[i] = 0;
}

void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fprintf(stdout, "%d passed, 1 failed\n", passed);
    fflush(stdout);
    exit(1);
}

static const char *current;

static int64_t case_start_ms;

void th_case_begin(const char *name)
{
    current = name;
    case_start_ms = th_now_ms();
    fprintf(stderr, "... %s\n", name);
}

void th_case_end(const char *name)
{
    passed++;
    /* the case's wall time: where a suite's time goes */
    fprintf(stdout, "ok %s (%lld ms)\n", name, (long long)(th_now_ms() - case_start_ms));
    fflush(stdout);
    current = NULL;
}

static const char *only_part;

void th_only(const char *part)
{
    only_part = part;
}

bool th_selected(const char *name)
{
    const char *part = only_part != NULL ? only_part : getenv("TH_ONLY");
    return part == NULL || strstr(name, part) != NULL;
}

int th_done(void)
{
    const char *part = only_part != NULL ? only_part : getenv("TH_ONLY");
    if (passed == 0 && part != NULL) {
        /* a selection that names no case (a typo) must not pass */
        fprintf(stdout, "no case matches '%s'\n0 passed, 1 failed\n", part);
        fflush(stdout);
        return 1;
    }
    fprintf(stdout, "%d passed, 0 failed\n", passed);
    fflush(stdout);
    return 0;
}

int64_t th_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void th_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

bool th_wait_for(bool (*cond)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t end = th_now_ms() + timeout_ms;
    for (;;) {
        if (cond(arg))
            return true;
        if (th_now_ms() >= end)
            return false;
        th_sleep_ms(5);
    }
}

long long th_time_scale(void)
{
    const char *s = getenv("TH_TIME_SCALE");
    long long n = s != NULL ? atoll(s) : 1;
    return n >= 1 ? n : 1;
}

int th_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    return fd;
}

int th_raw_response(int fd, char *body, size_t cap)
{
    char buf[8192];
    size_t got = 0;
    int64_t end = th_now_ms() + 5000 * th_time_scale();
    for (;;) {
        buf[got] = '\0';
        char *eoh = strstr(buf, "\r\n\r\n");
        if (eoh != NULL) {
            const char *clen = strcasestr(buf, "\r\nContent-Length:");
            size_t blen = clen ? (size_t)strtoul(clen + 17, NULL, 10) : 0;
            if (got >= (size_t)(eoh + 4 - buf) + blen) {
                int status = 0;
                sscanf(buf, "HTTP/1.1 %d", &status);
                if (cap > 0)
                    snprintf(body, cap, "%.*s", (int)blen, eoh + 4);
                return status;
            }
        }
        int64_t left = end - th_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
}

int th_raw_request(int fd, const char *req, char *body, size_t cap)
{
    size_t len = strlen(req);
    if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
        return -1;
    return th_raw_response(fd, body, cap);
}

const char *th_tmpdir(void)
{
    if (tmpdir[0] == '\0') {
        owner_pid = getpid();
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/lockd-test-XXXXXX");
        if (mkdtemp(tmpdir) == NULL)
            th_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        atexit(cleanup);
        curl_global_init(CURL_GLOBAL_ALL);
    }
    return tmpdir;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        th_fail(__FILE__, __LINE__, "bind: %s", strerror(errno));
    socklen_t l = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* Whether 127.0.0.1:port takes a connection (to_connect) or can be bound (!to_connect). */
static bool port_try(int port, bool to_connect)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = (to_connect ? connect(fd, (struct sockaddr *)&a, sizeof(a))
                          : bind(fd, (struct sockaddr *)&a, sizeof(a))) == 0;
    close(fd);
    return ok;
}

static bool port_open(int port)
{
    return port_try(port, true);
}

static bool redis_ready(void *arg)
{
    struct th_redis *r = arg;
    if (!port_open(r->port))
        return false;
    const char *out = th_redis_cli(r, "PING");
    return strstr(out, "PONG") != NULL || strstr(out, "NOAUTH") != NULL;
}

static int cluster_port(void);

/* Starts redis-server with a config of its own; sentinel: the monitor lines
 * (NULL: a data node). */
static void redis_spawn(struct th_redis *r, int port, const char *const *extra,
                        const char *sentinel)
{
    const char *tmp = th_tmpdir();
    bool cluster = false;
    for (const char *const *e = extra; e != NULL && *e != NULL; e++)
        cluster = cluster || strcmp(*e, "cluster-enabled yes") == 0;
    if (port == 0) /* a cluster node needs its bus port, +10000, too */
        port = cluster ? cluster_port() : free_port();
    r->port = port;
    snprintf(r->dir, sizeof(r->dir), "%s/redis-%d", tmp, port);
    mkdir(r->dir, 0700);
    char conf[512];
    snprintf(conf, sizeof(conf), "%s/redis.conf", r->dir);
    FILE *f = fopen(conf, "w");
    if (f == NULL)
        th_fail(__FILE__, __LINE__, "cannot write %s", conf);
    fprintf(f,
            "port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\nlogfile %s/redis.log\n"
            "daemonize no\nprotected-mode yes\n",
            port, r->dir, r->dir);
    if (sentinel != NULL)
        fprintf(f, "%s", sentinel);
    for (const char *const *x = extra; x && *x; x++)
        fprintf(f, "%s\n", *x);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        if (sentinel != NULL)
            execlp("redis-server", "redis-server", conf, "--sentinel", (char *)NULL);
        else
            execlp("redis-server", "redis-server", conf, (char *)NULL);
        _exit(127);
    }
    r->pid = pid;
    track(pid);
    if (!th_wait_for(redis_ready, r, 10000))
        th_fail(__FILE__, __LINE__, "redis-server on port %d did not start", port);
}

void th_redis_start(struct th_redis *r, int port, const char *const *extra)
{
    redis_spawn(r, port, extra, NULL);
}

void th_sentinel_start(struct th_redis *s, const char *master, int master_port, int quorum,
                       const char *const *extra)
{
    char mon[512];
    snprintf(mon, sizeof(mon),
             "sentinel monitor %s 127.0.0.1 %d %d\n"
             "sentinel down-after-milliseconds %s 1000\n"
             "sentinel failover-timeout %s 3000\n",
             master, master_port, quorum, master, master);
    redis_spawn(s, 0, extra, mon);
}

static bool port_free(int port)
{
    return port_try(port, false);
}

/* A free port whose cluster bus port (+10000) exists and is free too. */
static int cluster_port(void)
{
    for (int i = 0; i < 500; i++) {
        int p = free_port();
        if (p + 10000 <= 65535 && port_free(p + 10000))
            return p;
    }
    th_fail(__FILE__, __LINE__, "no free port with a free cluster bus port");
}

static bool cluster_ok(void *arg)
{
    struct th_redis *r = arg;
    return strstr(th_redis_cli(r, "CLUSTER INFO"), "cluster_state:ok") != NULL;
}

void th_cluster_start(struct th_redis *nodes, int n, const char *const *extra)
{
    const char *conf[24];
    int k = 0;
    conf[k++] = "cluster-enabled yes";
    conf[k++] = "cluster-config-file nodes.conf";
    conf[k++] = "cluster-node-timeout 1000";
    conf[k++] = "cluster-require-full-coverage no";
    for (const char *const *x = extra; x && *x && k < 23; x++)
        conf[k++] = *x;
    conf[k] = NULL;
    char cmd[2048];
    size_t off = (size_t)snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
    for (int i = 0; i < n; i++) {
        redis_spawn(&nodes[i], cluster_port(), conf, NULL);
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " 127.0.0.1:%d", nodes[i].port);
    }
    snprintf(cmd + off, sizeof(cmd) - off,
             " --cluster-replicas 0 --cluster-yes >%s/cluster.log 2>&1", th_tmpdir());
    if (system(cmd) != 0)
        th_fail(__FILE__, __LINE__, "redis-cli --cluster create failed (see %s/cluster.log)",
                th_tmpdir());
    for (int i = 0; i < n; i++)
        if (!th_wait_for(cluster_ok, &nodes[i], 15000))
            th_fail(__FILE__, __LINE__, "cluster node on port %d never said cluster_state:ok",
                    nodes[i].port);
}

static bool replica_synced(void *arg)
{
    struct th_redis *r = arg;
    const char *info = th_redis_cli(r, "INFO replication");
    return strstr(info, "role:slave") != NULL && strstr(info, "master_link_status:up") != NULL;
}

void th_cluster_add_replica(const struct th_redis *primary, struct th_redis *replica)
{
    const char *const conf[] = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                                "cluster-node-timeout 1000", "cluster-require-full-coverage no",
                                NULL};
    redis_spawn(replica, cluster_port(), conf, NULL);
    char id[64], cmd[512];
    snprintf(id, sizeof(id), "%.40s", th_redis_cli(primary, "CLUSTER MYID"));
    snprintf(cmd, sizeof(cmd),
             "redis-cli --cluster add-node 127.0.0.1:%d 127.0.0.1:%d --cluster-slave "
             "--cluster-master-id %s >%s/cluster-replica.log 2>&1",
             replica->port, primary->port, id, th_tmpdir());
    if (system(cmd) != 0)
        th_fail(__FILE__, __LINE__,
                "redis-cli --cluster add-node failed (see %s/cluster-replica.log)", th_tmpdir());
    if (!th_wait_for(replica_synced, replica, 15000))
        th_fail(__FILE__, __LINE__, "replica on port %d never synced with %d", replica->port,
                primary->port);
}

void th_cluster_lockd_start(struct th_lockd *l, const struct th_redis *a, const struct th_redis *b,
                            const char *prefix, const char *const *extra)
{
    char seeds[128];
    snprintf(seeds, sizeof(seeds), "redis://127.0.0.1:%d,redis://127.0.0.1:%d", a->port, b->port);
    const char *args[8 + 17] = {"--backend",    "cluster", "--redis",   seeds,
                                "--key_prefix", prefix,    "--threads", "2"};
    int n = 8;
    for (const char *const *x = extra; x != NULL && *x != NULL; x++) {
        if (n >= 8 + 16)
            th_fail(__FILE__, __LINE__, "th_cluster_lockd_start: too many args");
        args[n++] = *x;
    }
    args[n] = NULL;
    th_lockd_start(l, args, NULL);
}

void th_redis_stop(struct th_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    untrack(r->pid);
    r->pid = 0;
}

const char *th_redis_cli(const struct th_redis *r, const char *args)
{
    static char out[65536];
    char cmd[2048];
    const char *auth = getenv("TH_REDIS_AUTH");
    snprintf(cmd, sizeof(cmd), "redis-cli -h 127.0.0.1 -p %d %s%s %s 2>&1", r->port,
             auth ? "--no-auth-warning -a " : "", auth ? auth : "", args);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (p != NULL) {
        n = fread(out, 1, sizeof(out) - 1, p);
        pclose(p);
    }
    out[n] = '\0';
    return out;
}

long long th_redis_calls(const struct th_redis *r, const char *cmd)
{
    const char *out = th_redis_cli(r, "INFO commandstats");
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
    const char *p = strstr(out, key);
    return p ? atoll(p + strlen(key)) : 0;
}

/* ---- lockd ---- */

struct up_arg {
    struct th_lockd *l;
    char portfile[300];
    bool exited;
    int status;
};

static bool lockd_up(void *arg)
{
    struct up_arg *u = arg;
    int st;
    if (waitpid(u->l->pid, &st, WNOHANG) == u->l->pid) {
        u->exited = true;
        u->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return true;
    }
    FILE *f = fopen(u->portfile, "r");
    if (f == NULL)
        return false;
    int port = 0;
    if (fscanf(f, "%d", &port) != 1)
        port = 0;
    fclose(f);
    if (port <= 0)
        return false;
    u->l->port = port;
    return port_open(port);
}

bool th_lockd_try_start(struct th_lockd *l, const char *const *args, const char *const *env,
                        int *exit_code)
{
    static int seq;
    const char *tmp = th_tmpdir();
    const char *bin = getenv("LOCKD_BIN");
    if (bin == NULL)
        bin = "build/lockd";
    struct up_arg u;
    memset(&u, 0, sizeof(u));
    memset(l, 0, sizeof(*l));
    u.l = l;
    seq++;
    snprintf(u.portfile, sizeof(u.portfile), "%s/lockd-%d.port", tmp, seq);
    snprintf(l->log, sizeof(l->log), "%s/lockd-%d.log", tmp, seq);
    unlink(u.portfile);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port_file";
    argv[n++] = u.portfile;
    argv[n++] = "--log_level";
    argv[n++] = getenv("TH_LOG_LEVEL") ? getenv("TH_LOG_LEVEL") : "warn";
    for (const char *const *a = args; a && *a && n < 62; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 2);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        /* The runner's own LOCKD_* variables are not lockd configuration. */
        unsetenv("LOCKD_BIN");
        unsetenv("LOCKCTL_BIN");
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    l->pid = pid;
    track(pid);
    if (!th_wait_for(lockd_up, &u, 10000) || u.exited) {
        if (exit_code != NULL)
            *exit_code = u.exited ? u.status : -1;
        if (!u.exited) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        untrack(pid);
        l->pid = 0;
        return false;
    }
    snprintf(l->url, sizeof(l->url), "http://127.0.0.1:%d", l->port);
    return true;
}

void th_lockd_start(struct th_lockd *l, const char *const *args, const char *const *env)
{
    int code = -1;
    if (!th_lockd_try_start(l, args, env, &code)) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "tail -20 '%s' >&2", l->log);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
        th_fail(__FILE__, __LINE__, "lockd did not start (exit %d)", code);
    }
}

int th_lockd_signal_wait(struct th_lockd *l, int sig, int64_t timeout_ms)
{
    if (l->pid <= 0)
        return -1;
    kill(l->pid, sig);
    int64_t end = th_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(l->pid, &st, WNOHANG);
        if (r == l->pid) {
            untrack(l->pid);
            l->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (th_now_ms() >= end)
            return -1;
        th_sleep_ms(5);
    }
}

void th_lockd_kill(struct th_lockd *l, int sig)
{
    if (l->pid <= 0)
        return;
    if (th_lockd_signal_wait(l, sig, 10000) < 0) {
        kill(l->pid, SIGKILL);
        waitpid(l->pid, NULL, 0);
        untrack(l->pid);
        l->pid = 0;
    }
}

/* ---- HTTP ---- */

const char *th_url(const struct th_lockd *l, const char *path, const char *name)
{
    static __thread char buf[4][512];
    static __thread int slot;
    char *b = buf[slot++ % 4];
    snprintf(b, 512, "%s%s%s", l->url, path, name);
    return b;
}

struct th_client {
    CURL *curl;
};

struct th_client *th_client_new(void)
{
    th_tmpdir();
    struct th_client *c = calloc(1, sizeof(*c));
    c->curl = curl_easy_init();
    return c;
}

void th_client_free(struct th_client *c)
{
    if (c == NULL)
        return;
    curl_easy_cleanup(c->curl);
    free(c);
}

struct buf {
    char *p;
    size_t len;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    b->p = realloc(b->p, b->len + n + 1);
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    struct th_resp *r = arg;
    size_t n = size * nmemb;
    size_t used = strlen(r->headers);
    if (strncmp(data, "HTTP/", 5) == 0) {
        r->headers[0] = '\0'; /* a new response (e.g. after 100 Continue) */
        used = 0;
    }
    if (used + n < sizeof(r->headers)) {
        memcpy(r->headers + used, data, n);
        r->headers[used + n] = '\0';
    }
    return n;
}

void th_http(struct th_client *c, const char *method, const char *url, const char *body,
             const char *const *hdrs, struct th_resp *out)
{
    memset(out, 0, sizeof(*out));
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct buf b = {NULL, 0};
    struct curl_slist *list = NULL;
    list = curl_slist_append(list, "Expect:");
    for (const char *const *x = hdrs; x && *x; x++)
        list = curl_slist_append(list, *x);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(list);
    if (rc != CURLE_OK) {
        /* no response: status 0, and curl's reason as the body, so that a
         * test printing it says what happened to the connection */
        free(b.p);
        char why[256];
        snprintf(why, sizeof(why), "(no response: curl: %s)", curl_easy_strerror(rc));
        out->status = 0;
        out->body = strdup(why);
        out->len = strlen(why);
        return;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    out->body = b.p ? b.p : strdup("");
    out->len = b.len;
    out->json = json_loadb(out->body, out->len, 0, NULL);
}

void th_resp_free(struct th_resp *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

const char *th_header(const struct th_resp *r, const char *name)
{
    static __thread char val[512];
    size_t nl = strlen(name);
    const char *p = r->headers;
    while (p && *p) {
        const char *eol = strstr(p, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t n = (size_t)(eol - v);
            if (n >= sizeof(val))
                n = sizeof(val) - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            return val;
        }
        p = eol + 2;
    }
    return NULL;
}

const char *th_jstr(const struct th_resp *r, const char *key)
{
    json_t *v = r->json ? json_object_get(r->json, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

long long th_jint(const struct th_resp *r, const char *key)
{
    json_t *v = r->json ? json_object_get(r->json, key) : NULL;
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

const char *th_jerr(const struct th_resp *r)
{
    return th_jstr(r, "error");
}

void th_excl_reset(struct th_excl *x)
{
    pthread_mutex_lock(&x->mu);
    memset(x->last, 0, sizeof(x->last));
    pthread_mutex_unlock(&x->mu);
    for (int i = 0; i < TH_EXCL_NAMES; i++)
        atomic_store(&x->holders[i], 0);
    atomic_store(&x->overlaps, 0);
    atomic_store(&x->regressions, 0);
    atomic_store(&x->grants, 0);
}

void th_excl_enter(struct th_excl *x, int k, const char *name, long long token)
{
    if (k < 0 || k >= TH_EXCL_NAMES)
        th_fail(__FILE__, __LINE__, "th_excl: name index %d out of range", k);
    if (atomic_fetch_add(&x->holders[k], 1) != 0)
        atomic_fetch_add(&x->overlaps, 1);
    pthread_mutex_lock(&x->mu);
    if (token <= x->last[k]) {
        fprintf(stderr, "%s: token %lld after %lld\n", name, token, x->last[k]);
        atomic_fetch_add(&x->regressions, 1);
    }
    x->last[k] = token;
    pthread_mutex_unlock(&x->mu);
    atomic_fetch_add(&x->grants, 1);
}

void th_excl_leave(struct th_excl *x, int k)
{
    atomic_fetch_sub(&x->holders[k], 1);
}

long th_status(struct th_client *c, const char *method, const char *url, const char *body,
               const char *hdr, struct th_resp *keep)
{
    const char *hdrs[] = {hdr, NULL};
    struct th_resp r;
    th_http(c, method, url, body, hdr ? hdrs : NULL, &r);
    long st = r.status;
    if (keep != NULL)
        *keep = r;
    else
        th_resp_free(&r);
    return st;
}

long th_req(struct th_client *c, const char *method, const char *url, const char *body,
            const char *lease, struct th_resp *keep)
{
    char hdr[256];
    snprintf(hdr, sizeof(hdr), "Lock-Lease: %s", lease ? lease : "");
    return th_status(c, method, url, body, lease ? hdr : NULL, keep);
}

long th_grant(struct th_client *c, const char *url, const char *body, long long *token, char *hdr,
              size_t hdrcap, char *err, size_t errcap)
{
    struct th_resp r;
    th_http(c, "POST", url, body, NULL, &r);
    long st = r.status;
    if (st == 200) {
        *token = th_jint(&r, "fencing_token");
        snprintf(hdr, hdrcap, "Lock-Lease: %s", th_jstr(&r, "lease"));
    } else if (err != NULL) {
        snprintf(err, errcap, "%s", r.body != NULL ? r.body : "");
    }
    th_resp_free(&r);
    return st;
}

int th_until_free(struct th_client *c, const struct th_lockd *l, const char *const *names, int n,
                  int64_t t0, int64_t within_ms)
{
    bool *got = calloc((size_t)n, sizeof(*got));
    int ngot = 0;
    while (ngot < n && th_now_ms() - t0 < within_ms * th_time_scale()) {
        for (int i = 0; i < n; i++)
            if (!got[i] && th_req(c, "POST", th_url(l, "/locks/", names[i]), "{\"ttl_ms\":1000}",
                                  NULL, NULL) == 200)
                got[i] = true, ngot++;
        if (ngot < n)
            th_sleep_ms(20);
    }
    free(got);
    return ngot;
}

long long th_metric_sum(struct th_client *c, const struct th_lockd *l, const char *metric)
{
    char url[160], series[160];
    snprintf(url, sizeof(url), "%s/metrics", l->url);
    snprintf(series, sizeof(series), "\n%s{", metric);
    struct th_resp r;
    th_http(c, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 200);
    long long v = 0;
    for (const char *p = strstr(r.body, series); p != NULL; p = strstr(p + 1, series)) {
        const char *e = strchr(p, '}');
        if (e != NULL)
            v += atoll(e + 1);
    }
    th_resp_free(&r);
    return v;
}

long long th_restarts(struct th_client *c, const struct th_lockd *l)
{
    return th_metric_sum(c, l, "lockd_backend_restarts_total");
}

bool th_log_has(const struct th_lockd *l, const char *a, const char *b)
{
    FILE *f = fopen(l->log, "r");
    if (f == NULL)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL);
    fclose(f);
    return found;
}

long th_log_reasserted(const struct th_lockd *l)
{
    FILE *f = fopen(l->log, "r");
    if (f == NULL)
        return -1;
    char line[1024];
    long n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *p = strstr(line, "re-asserted leases on redis");
        p = p ? strstr(p, " ms: ") : NULL;
        if (p != NULL)
            n += atol(p + 5);
    }
    fclose(f);
    return n;
}

void th_session_handoff(struct th_client *c, const struct th_lockd *a, const struct th_lockd *b,
                        const char *name)
{
    char url[200], aurl[200], burl[200];
    snprintf(url, sizeof(url), "%s/sessions", a->url);
    snprintf(aurl, sizeof(aurl), "%s/locks/%s", a->url, name);
    snprintf(burl, sizeof(burl), "%s/locks/%s", b->url, name);
    struct th_resp r;
    th_http(c, "POST", url, "{\"ttl_ms\":1000,\"lock_delay_ms\":500}", NULL, &r);
    CHECK_EQ_INT(r.status, 201);
    char sid[80], body[200];
    snprintf(sid, sizeof(sid), "%s", th_jstr(&r, "session"));
    th_resp_free(&r);
    snprintf(body, sizeof(body), "{\"ttl_ms\":600,\"session\":\"%s\"}", sid);
    CHECK_EQ_INT(th_req(c, "POST", aurl, body, NULL, &r), 200);
    long long token = th_jint(&r, "fencing_token");
    th_resp_free(&r);
    snprintf(url, sizeof(url), "%s/sessions/%s", a->url, sid);
    int64_t last_hb = 0;
    for (int i = 0; i < 8; i++) { /* 2.4 s: four lease ttls */
        th_sleep_ms(300);
        th_http(c, "PUT", url, NULL, NULL, &r);
        last_hb = th_now_ms();
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(json_array_size(json_object_get(r.json, "lost")), 0);
        th_resp_free(&r);
        CHECK_EQ_INT(th_req(c, "POST", burl, "{\"ttl_ms\":1000}", NULL, &r), 409);
        json_t *h = json_object_get(r.json, "holder");
        CHECK_EQ_INT(json_integer_value(json_object_get(h, "fencing_token")), token);
        th_resp_free(&r);
    }
    /* no more heartbeats: expiry, then the lock-delay */
    long st = 0;
    int64_t got = 0;
    bool delayed = false;
    while (th_now_ms() - last_hb < 10000 * th_time_scale()) {
        st = th_req(c, "POST", burl, "{\"ttl_ms\":1000}", NULL, &r);
        json_t *h = json_object_get(r.json, "holder");
        if (st == 409 && json_is_true(json_object_get(h, "lock_delay")))
            delayed = true;
        th_resp_free(&r);
        if (st == 200) {
            got = th_now_ms();
            break;
        }
        th_sleep_ms(20);
    }
    printf("# session's lock granted elsewhere %lld ms after the last heartbeat\n",
           (long long)(got - last_hb));
    CHECK_EQ_INT(st, 200);
    CHECK(got - last_hb >= 1000 + 400); /* session ttl, then (most of) the lock-delay */
    CHECK(delayed);
    th_http(c, "GET", url, NULL, NULL, &r);
    CHECK_EQ_INT(r.status, 404);
    th_resp_free(&r);
}
