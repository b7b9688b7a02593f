/*
 * sha1.c - FIPS 180-4 SHA-1, small and unoptimised: it runs once per script
 * at startup so that lockd knows each script's Function name even when Redis
 * is unreachable then. Not a security primitive here.
 */
#include "server/sha1.h"

#include <stdint.h>
#include <string.h>

struct sha1_ctx {
    uint32_t h[5];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
};

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void sha1_block(struct sha1_ctx *c, const unsigned char *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = c->h[0], b = c->h[1], d3 = c->h[2], d = c->h[3], e = c->h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & d3) | (~b & d);
            k = 0x5a827999u;
        } else if (i < 40) {
            f = b ^ d3 ^ d;
            k = 0x6ed9eba1u;
        } else if (i < 60) {
            f = (b & d3) | (b & d) | (d3 & d);
            k = 0x8f1bbcdcu;
        } else {
            f = b ^ d3 ^ d;
            k = 0xca62c1d6u;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = d3;
        d3 = rol(b, 30);
        b = a;
        a = t;
    }
    c->h[0] += a;
    c->h[1] += b;
    c->h[2] += d3;
    c->h[3] += d;
    c->h[4] += e;
}

static void sha1_update(struct sha1_ctx *c, const unsigned char *p, size_t len)
{
    c->bytes += len;
    while (len > 0) {
        size_t n = 64 - c->used;
        if (n > len)
            n = len;
        memcpy(c->block + c->used, p, n);
        c->used += n;
        p += n;
        len -= n;
        if (c->used == 64) {
            sha1_block(c, c->block);
            c->used = 0;
        }
    }
}

void sha1_hex(const void *data, size_t len, char out[41])
{
    struct sha1_ctx c = {
        {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u}, 0, {0}, 0};
    sha1_update(&c, data, len);
    uint64_t bits = c.bytes * 8;
    unsigned char pad = 0x80;
    sha1_update(&c, &pad, 1);
    unsigned char zero = 0;
    while (c.used != 56)
        sha1_update(&c, &zero, 1);
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha1_update(&c, lenb, 8);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) {
            unsigned char byte = (unsigned char)(c.h[i] >> (24 - 8 * j));
            out[8 * i + 2 * j] = hex[byte >> 4];
            out[8 * i + 2 * j + 1] = hex[byte & 15];
        }
    out[40] = '\0';
}
