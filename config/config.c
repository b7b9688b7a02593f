/*
 * config.c - parses defaults, the config file, LOCKD_<KEY> variables and
 * flags into struct lk_config, through the table in config_table.c. Runs on
 * the main thread before anything else starts.
 */
#include "config/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

extern char **environ;

static const struct cfg_key *find_key(const char *name, size_t len)
{
    for (size_t i = 0; i < cfg_nkeys; i++)
        if (strlen(cfg_keys[i].name) == len && strncmp(cfg_keys[i].name, name, len) == 0)
            return &cfg_keys[i];
    return NULL;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A value as an error line shows it: each control byte (below 0x20, 0x7f)
 * and backslash as a C escape (\t, \n, \r, \\, \xNN), so the line stays one
 * line; cut to fit out. Returns out. */
static const char *shown(const char *v, char *out, size_t cap)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p != '\0' && o + 5 < cap; p++) {
        const char *e = *p == '\t' ? "\\t" : *p == '\n' ? "\\n" : *p == '\r' ? "\\r" : NULL;
        if (*p == '\\')
            e = "\\\\";
        if (e != NULL)
            o += (size_t)snprintf(out + o, cap - o, "%s", e);
        else if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    return out;
}

/* The first control byte (below 0x20, or 0x7f) of v, or -1. */
static int control_byte(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++)
        if (*p < 0x20 || *p == 0x7f)
            return *p;
    return -1;
}

int config_parse_ms(const char *s, int64_t *out)
{
    if (s == NULL || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || v < 0)
        return -1;
    long long mult = 1;
    if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else if (strcmp(end, "h") == 0)
        mult = 3600000;
    else
        return -1;
    if (v > INT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "1") || !strcmp(s, "on"))
        *out = true;
    else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "0") || !strcmp(s, "off"))
        *out = false;
    else
        return -1;
    return 0;
}

static bool enum_ok(const char *choices, const char *v)
{
    size_t vl = strlen(v);
    const char *p = choices;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == vl && strncmp(p, v, n) == 0)
            return true;
        if (bar == NULL)
            return false;
        p = bar + 1;
    }
}

int config_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sl)
{
    char host[128];
    const char *colon;
    const char *h = listen;
    size_t hl;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        h = listen + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - listen);
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535 || colon[1] == '\0')
        return -1;
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (host[0] == '\0' || strcmp(host, "*") == 0)
        snprintf(host, sizeof(host), "0.0.0.0");
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *sl = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *sl = sizeof(*in6);
        return 0;
    }
    return -1;
}

static int set_row(struct lk_config *cfg, const struct cfg_key *k, const char *value,
                   const char *src, char *err, size_t errlen)
{
    char *base = (char *)cfg + k->offset;
    char vbuf[256];
    switch (k->type) {
    case CFG_STRING:
    case CFG_LIST:
    case CFG_ENUM: {
        struct sockaddr_storage ss;
        socklen_t sl;
        /* A prefix, a name, an address, a file path or a URL (whose user and
         * password take %0a) never holds a raw control byte, and
         * --check-config would print it raw (an escape sequence, a line
         * reading as another key). A bare password may: it prints masked. */
        int ctl = control_byte(value);
        bool bare_secret = k->type == CFG_STRING && (k->flags & CFG_SECRET);
        if (ctl >= 0 && !bare_secret) {
            if (k->flags & CFG_SECRET) /* the URLs: not shown */
                seterr(err, errlen,
                       "invalid value for '%s' (%s): control byte 0x%02x (control bytes are "
                       "refused; percent-encode one in a URL's user or password)",
                       k->name, src, ctl);
            else
                seterr(err, errlen,
                       "invalid value '%s' for '%s' (%s): control byte 0x%02x (control bytes "
                       "are refused)",
                       shown(value, vbuf, sizeof(vbuf)), k->name, src, ctl);
            return -1;
        }
        if (k->offset == offsetof(struct lk_config, listen) &&
            config_parse_listen(value, &ss, &sl) != 0) {
            seterr(err, errlen,
                   "invalid value '%s' for '%s' (%s): expected HOST:PORT (IPv4, [IPv6], localhost "
                   "or * and a port 0..65535)",
                   shown(value, vbuf, sizeof(vbuf)), k->name, src);
            return -1;
        }
        if (k->type == CFG_ENUM && !enum_ok(k->choices, value)) {
            seterr(err, errlen, "invalid value '%s' for '%s' (%s): expected one of %s",
                   shown(value, vbuf, sizeof(vbuf)), k->name, src,
                   k->choices[0] == '|' ? k->choices + 1 : k->choices);
            return -1;
        }
        char **slot = (char **)(void *)base;
        free(*slot);
        *slot = lk_strdup(value);
        return 0;
    }
    case CFG_BOOL: {
        bool b;
        if (parse_bool(value, &b) != 0) {
            seterr(err, errlen, "invalid value '%s' for '%s' (%s): expected true or false",
                   shown(value, vbuf, sizeof(vbuf)), k->name, src);
            return -1;
        }
        *(bool *)(void *)base = b;
        return 0;
    }
    case CFG_INT:
    case CFG_MS: {
        int64_t v;
        int rc;
        if (k->type == CFG_MS) {
            rc = config_parse_ms(value, &v);
        } else {
            /* digits first, like a duration: strtoll skips leading whitespace */
            const char *digits = value[0] == '-' ? value + 1 : value;
            char *end;
            errno = 0;
            long long ll = strtoll(value, &end, 10);
            rc = (!isdigit((unsigned char)*digits) || errno != 0 || *end != '\0') ? -1 : 0;
            v = ll;
        }
        if (rc != 0) {
            seterr(err, errlen, "invalid value '%s' for '%s' (%s): expected %s",
                   shown(value, vbuf, sizeof(vbuf)), k->name, src,
                   k->type == CFG_MS ? "a duration (500ms, 30s, 5m or milliseconds)"
                                     : "an integer");
            return -1;
        }
        if (v < k->min || v > k->max) {
            seterr(err, errlen, "invalid value '%s' for '%s' (%s): must be %lld..%lld",
                   shown(value, vbuf, sizeof(vbuf)), k->name, src, (long long)k->min,
                   (long long)k->max);
            return -1;
        }
        *(int64_t *)(void *)base = v;
        return 0;
    }
    }
    return -1;
}

int config_set(struct lk_config *cfg, const char *key, const char *value, const char *src,
               char *err, size_t errlen)
{
    const struct cfg_key *k = find_key(key, strlen(key));
    if (k == NULL) {
        seterr(err, errlen, "unknown configuration key '%s' (%s)", key, src);
        return -1;
    }
    return set_row(cfg, k, value, src, err, errlen);
}

void config_defaults(struct lk_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    char err[256];
    for (size_t i = 0; i < cfg_nkeys; i++)
        if (set_row(cfg, &cfg_keys[i], cfg_keys[i].def, "default", err, sizeof(err)) != 0)
            abort(); /* a bad default is a build defect */
}

void config_free(struct lk_config *cfg)
{
    for (size_t i = 0; i < cfg_nkeys; i++) {
        enum cfg_type t = cfg_keys[i].type;
        if (t == CFG_STRING || t == CFG_LIST || t == CFG_ENUM) {
            char **slot = (char **)(void *)((char *)cfg + cfg_keys[i].offset);
            free(*slot);
            *slot = NULL;
        }
    }
}

int config_parse_text(struct lk_config *cfg, const char *text, size_t len, const char *path,
                      char *err, size_t errlen)
{
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        char line[4096];
        size_t n = end - pos;
        if (n >= sizeof(line)) {
            seterr(err, errlen, "line too long (%s:%d)", path, lineno);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos = end + 1;
        if (memchr(line, '\0', n) != NULL) {
            seterr(err, errlen, "NUL byte in line (%s:%d)", path, lineno);
            return -1;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        char *key = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        size_t klen = (size_t)(p - key);
        while (*p == ' ' || *p == '\t')
            p++;
        char *val = p;
        char *ve = val + strlen(val);
        while (ve > val && (ve[-1] == ' ' || ve[-1] == '\t' || ve[-1] == '\r'))
            ve--;
        *ve = '\0';
        if (ve - val >= 2 && val[0] == '"' && ve[-1] == '"') {
            val++;
            ve[-1] = '\0';
        }
        char src[512];
        snprintf(src, sizeof(src), "%s:%d", path, lineno);
        const struct cfg_key *k = find_key(key, klen);
        if (k == NULL) {
            seterr(err, errlen, "unknown configuration key '%.*s' (%s)", (int)klen, key, src);
            return -1;
        }
        if (set_row(cfg, k, val, src, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static int load_file(struct lk_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        seterr(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *buf = lk_malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            if (cap >= (1u << 20)) {
                fclose(f);
                free(buf);
                seterr(err, errlen, "config file '%s' is larger than 1 MiB", path);
                return -1;
            }
            cap *= 2;
            buf = lk_realloc(buf, cap);
        }
    }
    fclose(f);
    int rc = config_parse_text(cfg, buf, len, path, err, errlen);
    free(buf);
    return rc;
}

/* LOCKD_ variables that belong to clients, not to lockd: --config itself,
 * lockctl's settings, what `lockctl run` hands its command, the examples'
 * token, and the test runner's binaries. Any other unknown LOCKD_ variable
 * stops startup, so a typo does not pass silently. */
static bool client_variable(const char *key)
{
    static const char *const names[] = {"config", "url",  "token_file",    "cacert", "token",
                                        "lease",  "lock", "fencing_token", "bin",    NULL};
    for (const char *const *n = names; *n != NULL; n++)
        if (strcmp(*n, key) == 0)
            return true;
    return false;
}

/* Derives backend from redis when not set and checks cross-key rules. */
static int finish(struct lk_config *cfg, char *err, size_t errlen)
{
    size_t urls = 0;
    if (cfg->redis[0] != '\0') {
        urls = 1;
        for (const char *p = cfg->redis; *p; p++)
            urls += *p == ',';
    }
    if (cfg->backend[0] == '\0') {
        free(cfg->backend);
        cfg->backend = lk_strdup(urls == 0 ? "memory" : urls < 3 ? "redis" : "redlock");
    }
    if (strcmp(cfg->backend, "redis") == 0 && urls != 1) {
        seterr(err, errlen, "invalid value for 'redis': backend redis needs exactly one URL");
        return -1;
    }
    /* A majority of an even count is no more fault-tolerant than of one
     * node fewer; 15 is what per-node metrics hold. */
    if (strcmp(cfg->backend, "redlock") == 0 && (urls < 3 || urls % 2 == 0 || urls > 15)) {
        seterr(err, errlen,
               "invalid value for 'redis': backend redlock needs an odd number of URLs, 3 to 15");
        return -1;
    }
    if (strcmp(cfg->backend, "cluster") == 0 && urls == 0) {
        seterr(err, errlen,
               "invalid value for 'redis': backend cluster needs one or more seed nodes' URLs");
        return -1;
    }
    bool sentinel = strcmp(cfg->backend, "sentinel") == 0;
    if (sentinel && (urls == 0 || cfg->redis_master_name[0] == '\0')) {
        seterr(err, errlen,
               "invalid value for 'redis': backend sentinel needs the sentinels' URLs in 'redis' "
               "and the primary's name in 'redis_master_name'");
        return -1;
    }
    if (!sentinel && cfg->redis_master_name[0] != '\0') {
        seterr(err, errlen,
               "invalid value for 'redis_master_name': only backend sentinel uses it (set "
               "backend sentinel)");
        return -1;
    }
    if (cfg->default_ttl_ms > cfg->max_ttl_ms) {
        seterr(err, errlen, "invalid value for 'default_ttl_ms': larger than max_ttl_ms");
        return -1;
    }
    if (cfg->fence_retention_ms < cfg->max_ttl_ms) {
        seterr(err, errlen, "invalid value for 'fence_retention_ms': smaller than max_ttl_ms");
        return -1;
    }
    if (cfg->session_ttl_ms > cfg->max_session_ttl_ms) {
        seterr(err, errlen, "invalid value for 'session_ttl_ms': larger than max_session_ttl_ms");
        return -1;
    }
    if ((cfg->tls_cert[0] == '\0') != (cfg->tls_key[0] == '\0')) {
        seterr(err, errlen, "invalid value for 'tls_cert'/'tls_key': set both or neither");
        return -1;
    }
    return 0;
}

int config_load(struct lk_config *cfg, int argc, char **argv, char **envp, enum cfg_action *action,
                char *err, size_t errlen)
{
    config_defaults(cfg);
    *action = CFG_RUN;
    const char *file = NULL;
    /* Pass 1: find --config and the action flags. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            *action = CFG_HELP;
        else if (!strcmp(a, "--version") || !strcmp(a, "-V"))
            *action = CFG_VERSION;
        else if (!strcmp(a, "--check-config"))
            *action = CFG_CHECK;
        else if (!strcmp(a, "--config")) {
            if (i + 1 >= argc) {
                seterr(err, errlen, "missing value for flag --config");
                return -1;
            }
            file = argv[++i];
        } else if (!strncmp(a, "--config=", 9))
            file = a + 9;
    }
    if (*action == CFG_HELP || *action == CFG_VERSION)
        return 0;
    if (file == NULL) {
        for (char **e = envp ? envp : environ; e && *e; e++)
            if (!strncmp(*e, "LOCKD_CONFIG=", 13))
                file = *e + 13;
    }
    if (file != NULL && load_file(cfg, file, err, errlen) != 0)
        return -1;
    /* Environment: LOCKD_<KEY>, key upper-cased. */
    for (char **e = envp ? envp : environ; e && *e; e++) {
        if (strncmp(*e, "LOCKD_", 6) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (eq == NULL)
            continue;
        char key[64];
        size_t kl = (size_t)(eq - *e) - 6;
        if (kl == 0 || kl >= sizeof(key))
            continue;
        for (size_t j = 0; j < kl; j++)
            key[j] = (char)tolower((unsigned char)(*e)[6 + j]);
        key[kl] = '\0';
        if (client_variable(key))
            continue;
        char src[80];
        snprintf(src, sizeof(src), "environment LOCKD_%.*s", (int)kl, *e + 6);
        if (config_set(cfg, key, eq + 1, src, err, errlen) != 0)
            return -1;
    }
    /* Flags: --key value or --key=value; dashes and underscores both work. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "--version") ||
            !strcmp(a, "-V") || !strcmp(a, "--check-config"))
            continue;
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        if (!strncmp(a, "--config=", 9))
            continue;
        if (strncmp(a, "--", 2) != 0) {
            seterr(err, errlen, "unexpected argument '%s' (flags are --key value)", a);
            return -1;
        }
        char key[64];
        const char *eq = strchr(a + 2, '=');
        size_t kl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (kl == 0 || kl >= sizeof(key)) {
            seterr(err, errlen, "unknown flag '%s'", a);
            return -1;
        }
        for (size_t j = 0; j < kl; j++)
            key[j] = a[2 + j] == '-' ? '_' : a[2 + j];
        key[kl] = '\0';
        const char *val;
        const struct cfg_key *k = find_key(key, kl);
        if (k == NULL) {
            seterr(err, errlen, "unknown flag '%s'", a);
            return -1;
        }
        if (eq != NULL)
            val = eq + 1;
        else if (k->type == CFG_BOOL && (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)))
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            seterr(err, errlen, "missing value for flag --%s", key);
            return -1;
        }
        char src[80];
        snprintf(src, sizeof(src), "flag --%s", key);
        if (set_row(cfg, k, val, src, err, errlen) != 0)
            return -1;
    }
    return finish(cfg, err, errlen);
}

/* Masks the password of each redis:// URL: what redis_url_parse takes for
 * it, from the first ':' of the credentials to their end at the last '@'
 * before the path, since a password may hold a raw '@' ("a:b@c@h" is
 * password "b@c"). Without "://" the credentials start the URL. */
static void mask_urls(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    const char *p = in;
    while (*p && o + 1 < cap) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *scheme = memmem(p, n, "://", 3);
        const char *cred = scheme != NULL ? scheme + 3 : p;
        const char *slash = memchr(cred, '/', n - (size_t)(cred - p));
        const char *auth_end = slash != NULL ? slash : p + n;
        const char *at = NULL;
        for (const char *q = cred; q < auth_end; q++)
            if (*q == '@')
                at = q;
        if (at != NULL) {
            const char *colon = memchr(cred, ':', (size_t)(at - cred));
            size_t keep = (size_t)((colon ? colon + 1 : cred) - p);
            o += (size_t)snprintf(out + o, cap - o, "%.*s****%.*s", (int)keep, p,
                                  (int)(n - (size_t)(at - p)), at);
        } else {
            o += (size_t)snprintf(out + o, cap - o, "%.*s", (int)n, p);
        }
        if (o >= cap)
            o = cap - 1;
        p += n;
        if (*p == ',' && o + 1 < cap) {
            out[o++] = ',';
            p++;
        }
    }
    out[o < cap ? o : cap - 1] = '\0';
}

void config_print(const struct lk_config *cfg, FILE *out)
{
    for (size_t i = 0; i < cfg_nkeys; i++) {
        const struct cfg_key *k = &cfg_keys[i];
        const char *base = (const char *)cfg + k->offset;
        switch (k->type) {
        case CFG_STRING:
        case CFG_LIST:
        case CFG_ENUM: {
            const char *v = *(char *const *)(const void *)base;
            if ((k->flags & CFG_SECRET) && k->type == CFG_LIST) {
                char masked[2048];
                mask_urls(v, masked, sizeof(masked));
                fprintf(out, "%s %s\n", k->name, masked[0] ? masked : "\"\"");
            } else if (k->flags & CFG_SECRET) {
                /* A bare secret (a password): nothing of it is shown. */
                fprintf(out, "%s %s\n", k->name, v[0] ? "****" : "\"\"");
            } else {
                fprintf(out, "%s %s\n", k->name, v[0] ? v : "\"\"");
            }
            break;
        }
        case CFG_BOOL:
            fprintf(out, "%s %s\n", k->name, *(const bool *)(const void *)base ? "true" : "false");
            break;
        case CFG_INT:
        case CFG_MS:
            fprintf(out, "%s %lld\n", k->name, (long long)*(const int64_t *)(const void *)base);
            break;
        }
    }
}

void config_help(FILE *out)
{
    fprintf(out,
            "usage: lockd [--config FILE] [--KEY VALUE]... [--check-config] [--help] [--version]\n"
            "\n"
            "lockd is a distributed-lock sidecar: HTTP/JSON leases with fencing tokens,\n"
            "sessions, blocking waits. Every key can be set as a flag (--key value), as an\n"
            "environment variable (LOCKD_KEY) or in the config file (key value lines, #\n"
            "comments); flags win over the environment, which wins over the file.\n"
            "A flag is --key value or --key=value, with dashes or underscores (--max-ttl-ms);\n"
            "a true/false key given as a flag without a value means true.\n"
            "Durations accept 500ms, 30s, 5m, 2h or plain milliseconds.\n"
            "\n"
            "  --config FILE      read keys from FILE (also --config=FILE, LOCKD_CONFIG)\n"
            "  --check-config     check what startup checks (values, backend URLs, token files,\n"
            "                     TLS certificate and key; no listener, no backend reached),\n"
            "                     print the effective configuration (secrets masked) and exit\n"
            "  -h, --help         print this and exit\n"
            "  -V, --version      print the version and exit\n"
            "\nkeys (default in brackets):\n");
    for (size_t i = 0; i < cfg_nkeys; i++) {
        const struct cfg_key *k = &cfg_keys[i];
        fprintf(out, "  %-22s %s [%s]\n", k->name, k->help, k->def[0] ? k->def : "\"\"");
    }
}
