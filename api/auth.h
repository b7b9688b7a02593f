/*
 * auth.h - bearer tokens from auth_token_file, compared in constant time.
 * Loaded at startup, reloaded on SIGHUP; readers never block on a reload.
 */
#ifndef LOCKD_API_AUTH_H
#define LOCKD_API_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Loads (or reloads) the token file; path "" turns authentication off.
 * Returns 0, or -1 with err set (the old tokens stay in force). */
int auth_load(const char *path, char *err, size_t errlen);
/* The same for admin_token_file: "" means no admin token (force refused). */
int auth_load_admin(const char *path, char *err, size_t errlen);
/* True when auth is off, or header is "Bearer <a configured token>". */
/* False while no token is loaded: every request passes, no need to look. */
bool auth_enabled(void);
bool auth_check(const char *authorization);
/* True when header is "Bearer <a configured admin token>"; false with no
 * admin_token_file. Any thread. */
bool auth_admin(const char *authorization);
void auth_free(void);

#endif
