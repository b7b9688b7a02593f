/*
 * auth.c - the token set is an immutable array swapped under a rwlock; a
 * reload builds a new set and swaps it in, so requests keep their connections.
 * Two sets: client tokens (auth_token_file) and admin tokens
 * (admin_token_file, DESIGN.md §Operators); an admin token is accepted
 * wherever a client token is.
 */
#include "api/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

struct tokens {
    size_t n;
    char **v;
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct tokens *current; /* NULL = authentication off */
static struct tokens *admin;   /* NULL = no admin token: force is always refused */
/* current != NULL, readable without the lock: most deployments have no
 * tokens, and then no request needs the lock or its Authorization header */
static atomic_bool enabled;

static void tokens_free(struct tokens *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i]);
    free(t->v);
    free(t);
}

/* Reads a token file: 0 and *out (NULL for path ""), or -1 with err set. */
static int tokens_read(const char *key, const char *path, struct tokens **out, char *err,
                       size_t errlen)
{
    struct tokens *t = NULL;
    *out = NULL;
    if (path != NULL && path[0] != '\0') {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            snprintf(err, errlen, "cannot open %s '%s': %s", key, path, strerror(errno));
            return -1;
        }
        t = lk_calloc(1, sizeof(*t));
        char line[1024];
        while (fgets(line, sizeof(line), f) != NULL) {
            size_t n = strlen(line);
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                             line[n - 1] == '\t'))
                line[--n] = '\0';
            char *p = line;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '\0' || *p == '#')
                continue;
            t->v = lk_realloc(t->v, (t->n + 1) * sizeof(*t->v));
            t->v[t->n++] = lk_strdup(p);
        }
        fclose(f);
        if (t->n == 0) {
            tokens_free(t);
            snprintf(err, errlen, "%s '%s' holds no token", key, path);
            return -1;
        }
    }
    *out = t;
    return 0;
}

int auth_load(const char *path, char *err, size_t errlen)
{
    struct tokens *t;
    if (tokens_read("auth_token_file", path, &t, err, errlen) != 0)
        return -1;
    pthread_rwlock_wrlock(&lock);
    struct tokens *old = current;
    current = t;
    atomic_store(&enabled, t != NULL);
    pthread_rwlock_unlock(&lock);
    tokens_free(old);
    return 0;
}

int auth_load_admin(const char *path, char *err, size_t errlen)
{
    struct tokens *t;
    if (tokens_read("admin_token_file", path, &t, err, errlen) != 0)
        return -1;
    pthread_rwlock_wrlock(&lock);
    struct tokens *old = admin;
    admin = t;
    pthread_rwlock_unlock(&lock);
    tokens_free(old);
    return 0;
}

/* Whether authorization is "Bearer <one of t>": every token compared,
 * whatever matched (constant time). Under lock. */
static bool tokens_match(const struct tokens *t, const char *authorization)
{
    if (t == NULL || authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    bool any = false;
    for (size_t i = 0; i < t->n; i++)
        any |= lk_streq_ct(t->v[i], given);
    return any;
}

bool auth_enabled(void)
{
    return atomic_load_explicit(&enabled, memory_order_acquire);
}

bool auth_check(const char *authorization)
{
    pthread_rwlock_rdlock(&lock);
    bool ok = current == NULL;
    if (!ok) {
        bool client = tokens_match(current, authorization);
        bool adm = tokens_match(admin, authorization); /* both: constant time */
        ok = client || adm;
    }
    pthread_rwlock_unlock(&lock);
    return ok;
}

bool auth_admin(const char *authorization)
{
    pthread_rwlock_rdlock(&lock);
    bool ok = tokens_match(admin, authorization);
    pthread_rwlock_unlock(&lock);
    return ok;
}

void auth_free(void)
{
    pthread_rwlock_wrlock(&lock);
    tokens_free(current);
    current = NULL;
    tokens_free(admin);
    admin = NULL;
    pthread_rwlock_unlock(&lock);
}
