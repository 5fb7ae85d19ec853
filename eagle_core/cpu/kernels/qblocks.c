/* y = x W^T straight from a GGUF file's own blocks: Q4_1 (the default model's layers) and Q8_0
 * (its embedding, tied to the LM head).
 *
 *   Q4_1 block, 32 weights: fp16 scale d, fp16 min m, 16 bytes of nibbles (byte i: weight i in the
 *        low nibble, weight i + 16 in the high one); weight = d * q + m, q in 0..15
 *   Q8_0 block, 32 weights: fp16 scale d, 32 int8; weight = d * q
 *
 * Each row of x is quantized per block of 32 to int8: sx = max|x| / 127, xq = nearest(x / sx)
 * (ties to even), and for Q4_1 the block's xs = sx * sum(xq). A block's product is then an exact
 * integer sum, isum = sum q * xq, and its float part is fixed:
 *
 *   Q4_1:  f = f + (d * sx) * isum;  f = f + m * xs        Q8_0:  f = f + (d * sx) * isum
 *
 * over the blocks in order, each output's f starting at 0: the kernel computes dequant(W) . (xq sx)
 * to float32 rounding, with no fused multiply-add (-ffp-contract=off), so a numpy simulation in
 * float32 gives the same bits (tests/test_qblocks.py). Every output's sequence of float operations is
 * the same whatever the number of rows, the row tile, the thread count or the instruction set:
 * a k-row product equals k one-row products bit for bit, and the plain C path equals the SIMD ones.
 *
 * The weights are stored in groups of 16 output rows (qb_pack_*; the same blocks, interleaved):
 *   Q4_1 group-block, 320 bytes: 16 fp16 d, 16 fp16 m, then 4 x 64 bytes where chunk j holds, for each
 *        row l of the group, its 4 nibble bytes 4j..4j+3 (so weights 4j..4j+3 low, 16+4j.. high)
 *   Q8_0 group-block, 544 bytes: 16 fp16 d, then 8 x 64 bytes: chunk j holds each row's int8 4j..4j+3
 * so one 512-bit register holds 4 weights of each of 16 outputs, and a dot-product instruction
 * against 4 bytes of x broadcast adds 4 products into each output's lane: a block's 16 integer sums
 * end in 16 lanes without a horizontal reduction. The bytes per weight are the file's.
 *
 * Each weight group is loaded once per pass of rows and used for all of them (from L1 for the next
 * pass): t(k) stays near t(1) while the integer arithmetic is below the streaming time. m rows make
 * ceil(m / tile) passes of balanced sizes (13 rows, tile 8: 7 + 6). Threads take contiguous ranges of
 * groups (split 0) or, with at least as many rows as threads, contiguous ranges of rows over every
 * group (split 1); each output is one thread's either way.
 *
 * The knobs (tile, prefetch distance, split) change no bit: each output's operations are the same.
 * They are runtime values per thread count (qb_set_tuning), chosen per machine by measurement
 * (qtuning.py); a call's tile argument 0 means the tuned tile.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && !defined(QB_PLAIN_ONLY)
#include <immintrin.h>
#define QB_X86 1
#else
#define QB_X86 0
#endif

#define GRP 16
#define Q41_GB 320
#define Q80_GB 544
#define MAX_TILE 16
/* Until qb_set_tuning says otherwise: 16 rows a pass, the most accumulators the AVX-512 path keeps in
 * registers, so a 13- or 16-row verification reads each weight group once. */
#ifndef DEFAULT_TILE
#define DEFAULT_TILE 16
#endif
#define MAX_PREFETCH 16384
#define TUNED_THREADS 8 /* qb_set_tuning keeps one choice per thread count 1..8 (more: 8's) */
#define PATH_PLAIN 1
#define PATH_AVX2 2
#define PATH_VNNI 3
#ifndef QB_PREFETCH
#define QB_PREFETCH 2048 /* bytes ahead in a thread's stream of groups; 0: no software prefetch */
#endif

static struct { int tile, prefetch, split; } tuning[TUNED_THREADS + 1] = {
    [0 ... TUNED_THREADS] = {DEFAULT_TILE, QB_PREFETCH, 0}};

#define INLINE static inline __attribute__((always_inline))

/* ---- the plain C path: the reference every SIMD path equals bit for bit -------------------------- */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (e == 0) {
        float f = (float)man * 5.9604644775390625e-8f; /* man * 2^-24, exact */
        return sign ? -f : f;
    }
    bits = e == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((e + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* One block of 32 values of a row: int8 values, their scale and (sx * their sum). A block holding a
 * NaN or an infinity gets sx = NaN, so every output of that row is NaN, as a float product's would be. */
static void quant_block_plain(const float *x, int8_t *q, float *sx, float *xs) {
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < 32; i++) {
        float a = fabsf(x[i]);
        finite &= a <= 3.4028235e38f;
        amax = a > amax ? a : amax;
    }
    if (!finite || amax == 0.0f) {
        memset(q, 0, 32);
        *sx = *xs = finite ? 0.0f : NAN;
        return;
    }
    float s = amax / 127.0f;
    int sum = 0;
    for (int i = 0; i < 32; i++) {
        int v = (int)nearbyintf(x[i] / s);
        q[i] = (int8_t)v;
        sum += v;
    }
    *sx = s;
    *xs = s * (float)sum;
}

/* outputs o .. o + cnt - 1 of rows 0 .. m - 1, from one group (wg) */
static void group_plain(int fmt, const uint8_t *wg, int64_t nb, const int8_t *xq, int64_t K, const float *sx,
                        const float *xs, int64_t m, float *y, int64_t ldy, int cnt) {
    const int64_t gb = fmt ? Q80_GB : Q41_GB;
    for (int64_t r = 0; r < m; r++)
        for (int l = 0; l < cnt; l++) {
            float f = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = wg + b * gb;
                const int8_t *xb = xq + r * K + b * 32;
                float d = half_to_float(rd16(blk + 2 * l));
                int isum = 0;
                if (fmt == 0) {
                    for (int j = 0; j < 4; j++)
                        for (int e = 0; e < 4; e++) {
                            uint8_t v = blk[64 + 64 * j + 4 * l + e];
                            isum += (v & 15) * xb[4 * j + e] + (v >> 4) * xb[16 + 4 * j + e];
                        }
                } else {
                    for (int j = 0; j < 8; j++)
                        for (int e = 0; e < 4; e++) isum += (int8_t)blk[32 + 64 * j + 4 * l + e] * xb[4 * j + e];
                }
                float t = d * sx[r * nb + b];
                f = f + t * (float)isum;
                if (fmt == 0) f = f + half_to_float(rd16(blk + 32 + 2 * l)) * xs[r * nb + b];
            }
            y[r * ldy + l] = f;
        }
}

#if QB_X86
/* ---- AVX2 (+FMA, F16C): 8 outputs a register, the two halves of a group one after the other ------ */
#define A2 __attribute__((target("avx2,fma,f16c")))

A2 static void quant_block_avx2(const float *x, int8_t *q, float *sx, float *xs) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.4028235e38f);
    __m256 v[4], a[4];
    int fin = 0xff;
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        a[i] = _mm256_andnot_ps(sign, v[i]);
        fin &= _mm256_movemask_ps(_mm256_cmp_ps(a[i], big, _CMP_LE_OQ));
    }
    __m256 mx = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    if (fin != 0xff || amax == 0.0f) {
        memset(q, 0, 32);
        *sx = *xs = fin == 0xff ? 0.0f : NAN;
        return;
    }
    float s = amax / 127.0f;
    const __m256 vs = _mm256_set1_ps(s);
    __m256i iv[4];
    for (int i = 0; i < 4; i++)
        iv[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(v[i], vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
    __m256i t = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0x4e));
    u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0xb1));
    *sx = s;
    *xs = s * (float)_mm_cvtsi128_si32(u);
}

INLINE int32_t x4(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

A2 INLINE void store8(float *y, __m256 v, int cnt) {
    if (cnt >= 8) { _mm256_storeu_ps(y, v); return; }
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < cnt; i++) y[i] = t[i];
}

/* rows 0 .. R-1 of one group half (outputs 8h .. 8h+7) */
A2 INLINE void half_avx2(const int fmt, const uint8_t *wg, int64_t nb, const int8_t *xq, int64_t K, const float *sx,
                         const float *xs, const int R, int h, float *y, int64_t ldy, int cnt, int pf) {
    const int64_t gb = fmt ? Q80_GB : Q41_GB;
    const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 f[MAX_TILE];
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++) f[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wg + b * gb;
        const __m256 dv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 16 * h)));
        if (fmt == 0) {
            const __m256 mv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + 32 + 16 * h)));
            __m256i w[8];
            for (int j = 0; j < 4; j++) {
                __m256i p = _mm256_loadu_si256((const __m256i *)(blk + 64 + 64 * j + 32 * h));
                w[j] = _mm256_and_si256(p, low);
                w[4 + j] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low);
            }
            #pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                const int8_t *xb = xq + r * K + b * 32;
                /* 8 pair sums of at most 2 * 15 * 127 each: the int16 total stays below 32767 */
                __m256i s = _mm256_maddubs_epi16(w[0], _mm256_set1_epi32(x4(xb)));
                for (int j = 1; j < 8; j++)
                    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(x4(xb + 4 * (j & 3) + 16 * (j >> 2)))));
                __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(s, ones));
                __m256 t = _mm256_mul_ps(dv, _mm256_set1_ps(sx[r * nb + b]));
                f[r] = _mm256_add_ps(f[r], _mm256_mul_ps(t, isum));
                f[r] = _mm256_add_ps(f[r], _mm256_mul_ps(mv, _mm256_set1_ps(xs[r * nb + b])));
            }
        } else {
            __m256i w[8], aw[8];
            for (int j = 0; j < 8; j++) {
                w[j] = _mm256_loadu_si256((const __m256i *)(blk + 32 + 64 * j + 32 * h));
                aw[j] = _mm256_abs_epi8(w[j]);
            }
            #pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                const int8_t *xb = xq + r * K + b * 32;
                /* |w| * (x with w's sign): pair sums of at most 2 * 128 * 127, widened at once */
                __m256i acc = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++) {
                    __m256i sxw = _mm256_sign_epi8(_mm256_set1_epi32(x4(xb + 4 * j)), w[j]);
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(aw[j], sxw), ones));
                }
                __m256 t = _mm256_mul_ps(dv, _mm256_set1_ps(sx[r * nb + b]));
                f[r] = _mm256_add_ps(f[r], _mm256_mul_ps(t, _mm256_cvtepi32_ps(acc)));
            }
        }
        if (pf) _mm_prefetch((const char *)blk + pf + 32 * h, _MM_HINT_T0);
    }
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++) store8(y + r * ldy + 8 * h, f[r], cnt - 8 * h);
}

A2 static void group_avx2(int fmt, const uint8_t *wg, int64_t nb, const int8_t *xq, int64_t K, const float *sx,
                          const float *xs, int R, float *y, int64_t ldy, int cnt, int pf) {
    for (int h = 0; h < 2 && 8 * h < cnt; h++) {
#define CASE_A2(N) case N: { if (fmt) half_avx2(1, wg, nb, xq, K, sx, xs, N, h, y, ldy, cnt, pf); \
                             else half_avx2(0, wg, nb, xq, K, sx, xs, N, h, y, ldy, cnt, pf); } break;
        switch (R) {
            CASE_A2(1) CASE_A2(2) CASE_A2(3) CASE_A2(4) CASE_A2(5) CASE_A2(6) CASE_A2(7) CASE_A2(8)
            CASE_A2(9) CASE_A2(10) CASE_A2(11) CASE_A2(12) CASE_A2(13) CASE_A2(14) CASE_A2(15) CASE_A2(16)
        }
    }
}

/* ---- AVX-512 VNNI: 16 outputs a register, vpdpbusd (u8 x s8, 4 products a lane) ------------------ */
#define AV __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

/* Q8_0 reads x as unsigned bytes xu = xq + 128 (vpdpbusd's first operand is unsigned) and subtracts
 * 128 * (the block's weight sum), computed once per group-block for all rows of the tile. */
AV INLINE void group_vnni_r(const int fmt, const uint8_t *wg, int64_t nb, const int8_t *xq, const uint8_t *xu,
                            int64_t K, const float *sx, const float *xs, const int R, float *y, int64_t ldy, int cnt,
                            int pf) {
    const int64_t gb = fmt ? Q80_GB : Q41_GB;
    const __m512i low = _mm512_set1_epi8(0x0f), one8 = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
    __m512 f[MAX_TILE];
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++) f[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wg + b * gb;
        const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
        if (pf)
            for (int c = 0; c < (fmt ? 9 : 5); c++) _mm_prefetch((const char *)blk + pf + 64 * c, _MM_HINT_T0);
        if (fmt == 0) {
            const __m512 mv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + 32)));
            __m512i w[8];
            for (int j = 0; j < 4; j++) {
                __m512i p = _mm512_loadu_si512(blk + 64 + 64 * j);
                w[j] = _mm512_and_si512(p, low);
                w[4 + j] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low);
            }
            #pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                const int8_t *xb = xq + r * K + b * 32;
                __m512i a = zero, c = zero; /* two chains: weights 0..15 and 16..31 */
                for (int j = 0; j < 4; j++) {
                    a = _mm512_dpbusd_epi32(a, w[j], _mm512_set1_epi32(x4(xb + 4 * j)));
                    c = _mm512_dpbusd_epi32(c, w[4 + j], _mm512_set1_epi32(x4(xb + 16 + 4 * j)));
                }
                __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(a, c));
                __m512 t = _mm512_mul_ps(dv, _mm512_set1_ps(sx[r * nb + b]));
                f[r] = _mm512_add_ps(f[r], _mm512_mul_ps(t, isum));
                f[r] = _mm512_add_ps(f[r], _mm512_mul_ps(mv, _mm512_set1_ps(xs[r * nb + b])));
            }
        } else {
            __m512i w[8], ws0 = zero, ws1 = zero;
            for (int j = 0; j < 8; j++) w[j] = _mm512_loadu_si512(blk + 32 + 64 * j);
            for (int j = 0; j < 4; j++) {
                ws0 = _mm512_dpbusd_epi32(ws0, one8, w[j]);
                ws1 = _mm512_dpbusd_epi32(ws1, one8, w[4 + j]);
            }
            /* one of each row's two chains starts at -128 * (weight sum): no subtraction after them */
            const __m512i ws = _mm512_sub_epi32(zero, _mm512_slli_epi32(_mm512_add_epi32(ws0, ws1), 7));
            #pragma GCC unroll 16
            for (int r = 0; r < R; r++) {
                const uint8_t *xb = xu + r * K + b * 32;
                __m512i a = ws, c = zero;
                for (int j = 0; j < 4; j++) {
                    a = _mm512_dpbusd_epi32(a, _mm512_set1_epi32(x4((const int8_t *)xb + 4 * j)), w[j]);
                    c = _mm512_dpbusd_epi32(c, _mm512_set1_epi32(x4((const int8_t *)xb + 16 + 4 * j)), w[4 + j]);
                }
                __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(a, c));
                __m512 t = _mm512_mul_ps(dv, _mm512_set1_ps(sx[r * nb + b]));
                f[r] = _mm512_add_ps(f[r], _mm512_mul_ps(t, isum));
            }
        }
    }
    const __mmask16 keep = cnt >= 16 ? 0xffff : (__mmask16)((1u << cnt) - 1);
    #pragma GCC unroll 16
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + r * ldy, keep, f[r]);
}

AV static void group_vnni(int fmt, const uint8_t *wg, int64_t nb, const int8_t *xq, const uint8_t *xu, int64_t K,
                          const float *sx, const float *xs, int R, float *y, int64_t ldy, int cnt, int pf) {
#define CASE_V(N) case N: { if (fmt) group_vnni_r(1, wg, nb, xq, xu, K, sx, xs, N, y, ldy, cnt, pf); \
                            else group_vnni_r(0, wg, nb, xq, xu, K, sx, xs, N, y, ldy, cnt, pf); } break;
    switch (R) {
        CASE_V(1) CASE_V(2) CASE_V(3) CASE_V(4) CASE_V(5) CASE_V(6) CASE_V(7) CASE_V(8)
        CASE_V(9) CASE_V(10) CASE_V(11) CASE_V(12) CASE_V(13) CASE_V(14) CASE_V(15) CASE_V(16)
    }
}
#endif

/* ---- entry points --------------------------------------------------------------------------- */

/* bit 1: plain C, bit 2: AVX2, bit 3: AVX-512 VNNI (bit p set: path p runs here) */
int qb_paths(void) {
    int p = 1 << PATH_PLAIN;
#if QB_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        p |= 1 << PATH_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
            p |= 1 << PATH_VNNI;
    }
#endif
    return p;
}

int qb_best_path(void) {
    int p = qb_paths();
    return p & (1 << PATH_VNNI) ? PATH_VNNI : p & (1 << PATH_AVX2) ? PATH_AVX2 : PATH_PLAIN;
}

/* The knobs for calls with `nthreads` threads (<= 0: every thread count): tile 1..16 rows per pass,
 * prefetch 0..16384 bytes ahead (a multiple of 64; 0: none), split 0 (groups) or 1 (rows).
 * -> 0, -1 for a value out of range (nothing set then). */
int qb_set_tuning(int nthreads, int tile, int prefetch, int split) {
    if (tile < 1 || tile > MAX_TILE || prefetch < 0 || prefetch > MAX_PREFETCH || prefetch % 64 || split < 0 || split > 1)
        return -1;
    for (int t = 0; t <= TUNED_THREADS; t++)
        if (nthreads <= 0 || t == (nthreads > TUNED_THREADS ? TUNED_THREADS : nthreads)) {
            tuning[t].tile = tile;
            tuning[t].prefetch = prefetch;
            tuning[t].split = split;
        }
    return 0;
}

/* out[0..2] = the tile, prefetch and split calls with `nthreads` threads use */
void qb_get_tuning(int nthreads, int *out) {
    const int t = nthreads < 1 ? 1 : nthreads > TUNED_THREADS ? TUNED_THREADS : nthreads;
    out[0] = tuning[t].tile;
    out[1] = tuning[t].prefetch;
    out[2] = tuning[t].split;
}

/* rows r0 .. r1 - 1 of groups g0 .. g1 - 1, in passes of balanced sizes of at most `tile` rows */
static void block_range(int fmt, int path, const uint8_t *w, int64_t nb, const int8_t *xq, const uint8_t *xu,
                        int64_t K, const float *sx, const float *xs, int64_t n, float *y, int64_t ldy, int64_t g0,
                        int64_t g1, int64_t r0, int64_t r1, int tile, int pf) {
    const int64_t gb = fmt ? Q80_GB : Q41_GB, m = r1 - r0, passes = (m + tile - 1) / tile;
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t *wg = w + g * nb * gb;
        const int cnt = n - g * GRP >= GRP ? GRP : (int)(n - g * GRP);
        for (int64_t p = 0; p < passes; p++) {
            const int64_t a = r0 + m * p / passes;
            const int R = (int)(r0 + m * (p + 1) / passes - a);
            const int8_t *xr = xq + a * K;
            float *yr = y + a * ldy + g * GRP;
#if QB_X86
            if (path == PATH_VNNI)
                group_vnni(fmt, wg, nb, xr, xu ? xu + a * K : NULL, K, sx + a * nb, xs + a * nb, R, yr, ldy, cnt, pf);
            else if (path == PATH_AVX2)
                group_avx2(fmt, wg, nb, xr, K, sx + a * nb, xs + a * nb, R, yr, ldy, cnt, pf);
            else
#endif
                group_plain(fmt, wg, nb, xr, K, sx + a * nb, xs + a * nb, R, yr, ldy, cnt);
        }
    }
}

/* fmt 0: Q4_1, 1: Q8_0. x: m rows of K floats (contiguous); w: packed groups (qb_pack_*) of n outputs;
 * y: m rows, ldy apart. path 0: the best here; tile: rows per pass over a weight group (0: the tuned
 * tile for nthreads, qb_set_tuning). -> 0, -1 for a shape or path not served, -2 out of memory. */
int qb_matmul(int fmt, const float *x, int64_t m, int64_t K, const uint8_t *w, int64_t n, float *y, int64_t ldy,
              int nthreads, int path, int tile) {
    if ((fmt != 0 && fmt != 1) || m < 1 || n < 1 || K < 32 || K % 32 || ldy < n) return -1;
    if (path == 0) path = qb_best_path();
    if (path < PATH_PLAIN || path > PATH_VNNI || !(qb_paths() & (1 << path))) return -1;
    int knobs[3];
    qb_get_tuning(nthreads, knobs);
    tile = tile <= 0 ? knobs[0] : tile > MAX_TILE ? MAX_TILE : tile;
    const int pf = knobs[1], by_rows = knobs[2] == 1 && nthreads > 1 && m >= nthreads;
    const int64_t nb = K / 32, groups = (n + GRP - 1) / GRP;
    int8_t *xq = aligned_alloc(64, (size_t)(m * K + 63) / 64 * 64);
    uint8_t *xu = fmt && path == PATH_VNNI ? aligned_alloc(64, (size_t)(m * K + 63) / 64 * 64) : NULL;
    float *sx = malloc(sizeof(float) * m * nb), *xs = malloc(sizeof(float) * m * nb);
    int rc = !xq || !sx || !xs || (fmt && path == PATH_VNNI && !xu) ? -2 : 0;
    if (rc == 0) {
        #pragma omp parallel num_threads(nthreads) if (nthreads > 1)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            for (int64_t r = t; r < m; r += nt) {
                for (int64_t b = 0; b < nb; b++) {
                    const float *xb = x + r * K + 32 * b;
                    int8_t *qb = xq + r * K + 32 * b;
#if QB_X86
                    if (path != PATH_PLAIN) quant_block_avx2(xb, qb, sx + r * nb + b, xs + r * nb + b);
                    else
#endif
                        quant_block_plain(xb, qb, sx + r * nb + b, xs + r * nb + b);
                }
                if (xu)
                    for (int64_t i = 0; i < K; i++) xu[r * K + i] = (uint8_t)(xq[r * K + i] ^ 0x80);
            }
            #pragma omp barrier
            if (by_rows && nt > 1)
                block_range(fmt, path, w, nb, xq, xu, K, sx, xs, n, y, ldy, 0, groups, m * t / nt, m * (t + 1) / nt,
                            tile, pf);
            else
                block_range(fmt, path, w, nb, xq, xu, K, sx, xs, n, y, ldy, groups * t / nt, groups * (t + 1) / nt,
                            0, m, tile, pf);
        }
    }
    free(xq);
    free(xu);
    free(sx);
    free(xs);
    return rc;
}

/* The file's blocks (n rows of K / 32 blocks, row-major) -> the group layout above; rows past n in
 * the last group are zero (d = m = 0: they add nothing and are never stored). out: groups * nb * gb bytes. */
void qb_pack(int fmt, const uint8_t *blocks, int64_t n, int64_t K, uint8_t *out) {
    const int64_t nb = K / 32, groups = (n + GRP - 1) / GRP, bs = fmt ? 34 : 20, gb = fmt ? Q80_GB : Q41_GB;
    memset(out, 0, (size_t)(groups * nb * gb));
    for (int64_t o = 0; o < n; o++) {
        const int64_t g = o / GRP, l = o % GRP;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *src = blocks + (o * nb + b) * bs;
            uint8_t *dst = out + (g * nb + b) * gb;
            memcpy(dst + 2 * l, src, 2); /* d */
            if (fmt == 0) {
                memcpy(dst + 32 + 2 * l, src + 2, 2); /* m */
                for (int j = 0; j < 4; j++) memcpy(dst + 64 + 64 * j + 4 * l, src + 4 + 4 * j, 4);
            } else {
                for (int j = 0; j < 8; j++) memcpy(dst + 32 + 64 * j + 4 * l, src + 2 + 4 * j, 4);
            }
        }
    }
}

/* Reads the first `bytes` bytes of `a` (rounded down to 64) with nthreads threads, each a contiguous
 * range (the streaming bound of a weight-reading step). The count is bytes, not 8-byte words. */
uint64_t qb_stream_read(const uint64_t *a, int64_t bytes, int nthreads) {
    uint64_t total = 0;
    #pragma omp parallel for num_threads(nthreads) reduction(+ : total) schedule(static)
    for (int64_t i = 0; i < bytes / 64; i++) {
        const uint64_t *p = a + 8 * i;
        total += (p[0] + p[1]) + (p[2] + p[3]) + (p[4] + p[5]) + (p[6] + p[7]);
    }
    return total;
}
