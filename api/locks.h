/*
 * locks.h - pieces of the /locks handlers (api/locks.c) that the multi-lock
 * handlers (api/multilock.c) share: query checks, the lease rule, holder
 * JSON, Retry-After. On the request's loop.
 */
#ifndef LOCKD_API_LOCKS_H
#define LOCKD_API_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct req;
struct api_error;
struct eng_holder;

/* Checks query parameter names against allowed (NULL-terminated); collects
 * ?lease= values (*conflict when two differ). */
bool check_query(struct req *r, const char *const *allowed, const char **lease, bool *conflict,
                 struct api_error *e);
/* The lease from header, query or body: present ones must agree. */
bool find_lease(struct req *r, const char *body_lease, const char *query_lease, bool query_conflict,
                const char **out, struct api_error *e);
/* A holder as the API shows it (new reference). */
json_t *holder_json(const struct eng_holder *h);
/* Retry-After: ms rounded up to seconds, at least 1. */
void retry_after(struct req *r, int64_t ms);

#endif
