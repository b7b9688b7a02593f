/*
 * auth.c - the token set is an immutable array swapped under a rwlock; a
 * reload builds a new set and swaps it in, so requests keep their connections.
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

int auth_load(const char *path, char *err, size_t errlen)
{
    struct tokens *t = NULL;
    if (path != NULL && path[0] != '\0') {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            snprintf(err, errlen, "cannot open auth_token_file '%s': %s", path, strerror(errno));
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
            snprintf(err, errlen, "auth_token_file '%s' holds no token", path);
            return -1;
        }
    }
    pthread_rwlock_wrlock(&lock);
    struct tokens *old = current;
    current = t;
    atomic_store(&enabled, t != NULL);
    pthread_rwlock_unlock(&lock);
    tokens_free(old);
    return 0;
}

bool auth_enabled(void)
{
    return atomic_load_explicit(&enabled, memory_order_acquire);
}

bool auth_check(const char *authorization)
{
    pthread_rwlock_rdlock(&lock);
    struct tokens *t = current;
    bool ok = t == NULL;
    if (!ok && authorization != NULL && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *given = authorization + 7;
        while (*given == ' ')
            given++;
        /* Compare against every token, whatever matched: constant time. */
        bool any = false;
        for (size_t i = 0; i < t->n; i++)
            any |= lk_streq_ct(t->v[i], given);
        ok = any;
    }
    pthread_rwlock_unlock(&lock);
    return ok;
}

void auth_free(void)
{
    pthread_rwlock_wrlock(&lock);
    tokens_free(current);
    current = NULL;
    pthread_rwlock_unlock(&lock);
}
