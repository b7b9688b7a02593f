/*
 * resp_guard.h - for the fuzz targets that read RESP through hiredis.
 */
#ifndef LOCKD_FUZZ_RESP_GUARD_H
#define LOCKD_FUZZ_RESP_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the bytes may hold an array header of more than 4096 elements
 * ('*' and a number, wherever it is: a bulk string's end is skipped
 * unread): hiredis 0.14 allocates them all before it reads one, and
 * libFuzzer takes a 16 GB calloc for a crash (a real one fails, and hiredis
 * says so). Such inputs are skipped. */
static inline bool resp_huge_array(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '*')
            continue;
        size_t d = i + 1 < n && (p[i + 1] == '+' || p[i + 1] == '-') ? 1 : 0; /* a sign */
        long long v = 0;
        for (; i + 1 + d < n && p[i + 1 + d] >= '0' && p[i + 1 + d] <= '9' && v <= 4096; d++)
            v = v * 10 + (p[i + 1 + d] - '0');
        if (v > 4096)
            return true;
    }
    return false;
}

#endif
