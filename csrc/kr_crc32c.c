/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by record batch v2.
 *
 * Two implementations chosen at run time: the SSE4.2 crc32 instruction, run as three
 * independent streams so its 3-cycle latency overlaps (in blocks of 8192, 1024 and 256
 * bytes, so typical 4-64 KiB batches get the interleave too), and a portable slicing-by-8
 * table fallback. The three streams are joined with "shift by N zero bytes" tables: the CRC
 * register update is linear, so the state after block A then block B equals
 * shift_|B|(state after A) ^ crc_from_zero(B).
 */
#include <string.h>

#include "kr_core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KR_HAVE_X86 1
#include <nmmintrin.h>
#endif

#define POLY 0x82F63B78u
#define LONG_BLOCK 8192
#define MID_BLOCK 1024
#define SHORT_BLOCK 256

static uint32_t crc_table[8][256];
static uint32_t shift_long[4][256];  /* state -> state after LONG_BLOCK zero bytes */
static uint32_t shift_mid[4][256];
static uint32_t shift_short[4][256]; /* state -> state after SHORT_BLOCK zero bytes */
static int initialized;
static int have_sse42;

/* GF(2) 32x32 matrix (one uint32 column per input bit) times a vector. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; i++, vec >>= 1)
        if (vec & 1)
            sum ^= mat[i];
    return sum;
}

static void gf2_compose(uint32_t *out, const uint32_t *a, const uint32_t *b)
{
    uint32_t tmp[32];
    for (int i = 0; i < 32; i++)
        tmp[i] = gf2_times(a, b[i]);
    memcpy(out, tmp, sizeof(tmp));
}

/* Tables that advance a raw CRC register over n zero bytes. */
static void build_shift_tables(uint32_t tables[4][256], size_t n)
{
    uint32_t power[32], result[32];
    /* one zero bit: shift right, folding the polynomial in when bit 0 falls out */
    power[0] = POLY;
    for (int i = 1; i < 32; i++)
        power[i] = 1u << (i - 1);
    for (int i = 0; i < 3; i++) /* 1 bit -> 8 bits = one zero byte */
        gf2_compose(power, power, power);
    for (int i = 0; i < 32; i++)
        result[i] = 1u << i; /* identity */
    while (n) {
        if (n & 1)
            gf2_compose(result, power, result);
        n >>= 1;
        if (n)
            gf2_compose(power, power, power);
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            tables[k][b] = gf2_times(result, b << (8 * k));
}

void kr_crc32c_init(void)
{
    if (initialized)
        return;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        crc_table[0][n] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int n = 0; n < 256; n++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
    build_shift_tables(shift_long, LONG_BLOCK);
    build_shift_tables(shift_mid, MID_BLOCK);
    build_shift_tables(shift_short, SHORT_BLOCK);
#ifdef KR_HAVE_X86
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    initialized = 1;
}

int kr_crc32c_have_sse42(void) { return have_sse42; }

void kr_crc32c_force_table(void) { have_sse42 = 0; }

const char *kr_crc32c_backend(void) { return have_sse42 ? "sse4.2" : "table"; }

static inline uint64_t load_le64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

uint32_t kr_crc32c_table(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#ifdef KR_HAVE_X86
static inline uint32_t shift(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static inline uint64_t load_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v)); /* x86 is little-endian; unaligned loads are fine */
    return v;
}

/* Consumes 3 * block bytes at a time as three interleaved streams. */
__attribute__((target("sse4.2"))) static inline uint64_t
stage(const uint32_t t[4][256], size_t block, uint64_t c0, const uint8_t **pp, size_t *lenp)
{
    const uint8_t *p = *pp;
    size_t len = *lenp;
    while (len >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const uint8_t *end = p + block;
        do {
            c0 = _mm_crc32_u64(c0, load_u64(p));
            c1 = _mm_crc32_u64(c1, load_u64(p + block));
            c2 = _mm_crc32_u64(c2, load_u64(p + 2 * block));
            p += 8;
        } while (p < end);
        c0 = shift(t, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = shift(t, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *lenp = len;
    return c0;
}

__attribute__((target("sse4.2"))) uint32_t kr_crc32c_sse42(uint32_t crc, const void *data,
                                                            size_t len)
{
    const uint8_t *p = data;
    uint64_t c0 = (uint32_t)~crc;

    while (len && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        len--;
    }
    c0 = stage(shift_long, LONG_BLOCK, c0, &p, &len);
    c0 = stage(shift_mid, MID_BLOCK, c0, &p, &len);
    c0 = stage(shift_short, SHORT_BLOCK, c0, &p, &len);
    while (len >= 8) {
        c0 = _mm_crc32_u64(c0, load_u64(p));
        p += 8;
        len -= 8;
    }
    while (len--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return ~(uint32_t)c0;
}
#else
uint32_t kr_crc32c_sse42(uint32_t crc, const void *data, size_t len)
{
    return kr_crc32c_table(crc, data, len); /* never selected on this platform */
}
#endif

uint32_t kr_crc32c(uint32_t crc, const void *data, size_t len)
{
    return have_sse42 ? kr_crc32c_sse42(crc, data, len) : kr_crc32c_table(crc, data, len);
}
