/* The draft LM head from 8-bit weights: y = x W^T with W's rows stored as int8 and a float32 scale.
 *
 * The drafter's LM-head product reads its rows (8,192 x 576 for SmolLM2's reduced draft
 * vocabulary) twice a cycle, right after a verification has streamed the target's weights through
 * the caches, so they come from memory each time and each MB read costs drafting time
 * (docs/performance.md, "The kernels' choices, measured"). Stored as int8 with one scale per row they
 * are half the float16 bytes.
 * These numbers only choose the draft (the target verifies every token from its own float32
 * weights), so the output cannot change; the draft's q moves by the rounding (tau measured in
 * docs/performance.md, "The kernels' choices, measured").
 *
 *   y[r][o] = scale[o] * sum_k x[r][k] * q[o][k]
 *
 * Each output is one thread's: 8 (AVX2) or 16 (AVX-512) lane sums in order of k, then the lanes
 * added in a fixed order, so a row's result is the same alone or in any batch, with any thread
 * count (how outputs are grouped changes no sum). m <= GEMV8_ROWS rows per call (the drafter
 * has 1-2).
 *
 * With AVX-512 VNNI (Intel since Cascade Lake, AMD since Zen 4) the product is integer: each row
 * of x is rounded to int16 with its own scale (sx = max|x| / 32767), the weights widened to int16,
 * and vpdpwssd adds 32 products an instruction into int32 lanes, exactly:
 *
 *   y[r][o] = scale[o] * (sx[r] * (float) sum_k xq[r][k] * q[o][k])
 *
 * The float path spends four instructions on 16 weights of one row (two widenings, a convert, an
 * FMA) and was bound by them, not by the bytes (docs/performance.md, "The kernels' choices,
 * measured"). Integer sums are exact, so a row's result is
 * again the same alone, in a batch or with any thread count; x moves by its int16 rounding (a
 * 1/65,534 of its largest value), which like the weights' only moves the draft.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#define GEMV8_ROWS 8
#define A512 __attribute__((target("avx512f")))

static float hsum8(__m256 v) {
    float l[8];
    _mm256_storeu_ps(l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* Bytes ahead of the current group of rows to prefetch, one cache line per step of k: the rows
 * come from memory (see above), and without it the product was no faster than float16 storage read
 * by smallgemm, which prefetches (docs/performance.md, "The kernels' choices, measured"). */
#ifndef GEMV8_PREFETCH
#define GEMV8_PREFETCH 8192
#endif

/* OUTS outputs at a time: OUTS x m independent accumulator chains (one chain per output stalls on
 * the FMA's latency, slower than float16 storage warm: docs/performance.md, "The kernels' choices, measured"). */
#define OUTS 4

#define INLINE static inline __attribute__((always_inline))

/* outputs o .. o + cnt - 1 (cnt <= OUTS); K % 8 == 0 (checked by the caller) */
INLINE void outs_avx2(const float *x, const int64_t m, int64_t ldx, const int8_t *q, int64_t k, const float *s,
                      const int cnt, float *y, int64_t ldy) {
    __m256 acc[OUTS][GEMV8_ROWS];
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) acc[j][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += 8) {
        if (GEMV8_PREFETCH && !(i & 15)) _mm_prefetch((const char *)q + GEMV8_PREFETCH + i * OUTS, _MM_HINT_T0);
        for (int j = 0; j < cnt; j++) {
            __m128i q8 = _mm_loadl_epi64((const __m128i *)(q + j * k + i));
            __m256 w = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            for (int64_t r = 0; r < m; r++)
                acc[j][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + i), w, acc[j][r]);
        }
    }
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) y[r * ldy + j] = s[j] * hsum8(acc[j][r]);
}

A512 static float hsum16(__m512 v) {
    float l[16];
    _mm512_storeu_ps(l, v);
    float a = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    float b = ((l[8] + l[9]) + (l[10] + l[11])) + ((l[12] + l[13]) + (l[14] + l[15]));
    return a + b;
}

/* as outs_avx2, 16 lanes; K % 16 == 0 (checked by the caller) */
A512 INLINE void outs_avx512(const float *x, const int64_t m, int64_t ldx, const int8_t *q, int64_t k,
                             const float *s, const int cnt, float *y, int64_t ldy) {
    __m512 acc[OUTS][GEMV8_ROWS];
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) acc[j][r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 16) {
        if (GEMV8_PREFETCH) _mm_prefetch((const char *)q + GEMV8_PREFETCH + i * OUTS, _MM_HINT_T0);
        for (int j = 0; j < cnt; j++) {
            __m128i q16 = _mm_loadu_si128((const __m128i *)(q + j * k + i));
            __m512 w = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q16));
            for (int64_t r = 0; r < m; r++)
                acc[j][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + i), w, acc[j][r]);
        }
    }
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) y[r * ldy + j] = s[j] * hsum16(acc[j][r]);
}

/* The loops over outputs, with the row count a constant in each case, so that the accumulators
 * stay in registers (with m only known at run time they lived on the stack, as slow as one chain). */
#define RUN_BODY(OUTS_FN, M)                                                                     \
    for (int64_t g = g0; g < g1; g++) {                                                           \
        int64_t o = g * OUTS;                                                                     \
        if (n - o >= OUTS) OUTS_FN(x, M, ldx, q + o * k, k, scale + o, OUTS, y + o, ldy);         \
        else OUTS_FN(x, M, ldx, q + o * k, k, scale + o, (int)(n - o), y + o, ldy);               \
    }

#define RUN(NAME, OUTS_FN, ATTR)                                                                  \
    ATTR static void NAME(const float *x, int64_t m, int64_t ldx, const int8_t *q, const float *scale, \
                          int64_t n, int64_t k, float *y, int64_t ldy, int nthreads) {            \
        const int64_t groups = (n + OUTS - 1) / OUTS;                                             \
        _Pragma("omp parallel num_threads(nthreads) if (nthreads > 1)")                           \
        {                                                                                         \
            int t = omp_get_thread_num(), nt = omp_get_num_threads();                             \
            int64_t g0 = groups * t / nt, g1 = groups * (t + 1) / nt;                             \
            switch (m) {                                                                          \
            case 1: RUN_BODY(OUTS_FN, 1) break;                                                   \
            case 2: RUN_BODY(OUTS_FN, 2) break;                                                   \
            case 3: RUN_BODY(OUTS_FN, 3) break;                                                   \
            case 4: RUN_BODY(OUTS_FN, 4) break;                                                   \
            default: RUN_BODY(OUTS_FN, m) break;                                                  \
            }                                                                                     \
        }                                                                                         \
    }

RUN(run_avx2, outs_avx2, )
RUN(run_avx512, outs_avx512, A512)

#ifndef GEMV8_VNNI
#define GEMV8_VNNI 1 /* 0: the float path on every machine (an A/B build) */
#endif
#define AVNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
/* Every lane adds k / 16 products of at most 32767 * 127: int32 holds them while k <= 8192. */
#define VNNI_MAX_K 8192

/* as outs_avx512 on int16 rows xq (k apart, row scales sx), 32 weights a step; k % 32 == 0 */
AVNNI INLINE void outs_vnni(const int16_t *xq, const float *sx, const int64_t m, const int8_t *q, int64_t k,
                            const float *s, const int cnt, float *y, int64_t ldy) {
    __m512i acc[OUTS][GEMV8_ROWS];
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) acc[j][r] = _mm512_setzero_si512();
    for (int64_t i = 0; i < k; i += 32) {
        if (GEMV8_PREFETCH) { /* a step reads OUTS x 32 bytes: two lines */
            _mm_prefetch((const char *)q + GEMV8_PREFETCH + i * OUTS, _MM_HINT_T0);
            _mm_prefetch((const char *)q + GEMV8_PREFETCH + i * OUTS + 64, _MM_HINT_T0);
        }
        for (int j = 0; j < cnt; j++) {
            __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + j * k + i)));
            for (int64_t r = 0; r < m; r++)
                acc[j][r] = _mm512_dpwssd_epi32(acc[j][r], _mm512_loadu_si512(xq + r * k + i), w);
        }
    }
    for (int j = 0; j < cnt; j++)
        for (int64_t r = 0; r < m; r++) y[r * ldy + j] = s[j] * (sx[r] * (float)_mm512_reduce_add_epi32(acc[j][r]));
}

AVNNI static void run_vnni(const int16_t *xq, const float *sx, int64_t m, const int8_t *q, const float *scale,
                           int64_t n, int64_t k, float *y, int64_t ldy, int nthreads) {
    const int64_t groups = (n + OUTS - 1) / OUTS;
    #pragma omp parallel num_threads(nthreads) if (nthreads > 1)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t g0 = groups * t / nt, g1 = groups * (t + 1) / nt;
        for (int64_t g = g0; g < g1; g++) {
            int64_t o = g * OUTS;
            int cnt = n - o >= OUTS ? OUTS : (int)(n - o);
            switch (m) { /* the row count a constant, as in RUN */
            case 1: outs_vnni(xq, sx, 1, q + o * k, k, scale + o, cnt, y + o, ldy); break;
            case 2: outs_vnni(xq, sx, 2, q + o * k, k, scale + o, cnt, y + o, ldy); break;
            default: outs_vnni(xq, sx, m, q + o * k, k, scale + o, cnt, y + o, ldy); break;
            }
        }
    }
}

/* Row r of x as int16 with its scale: xq = nearest(x / sx), sx = max|x| / 32767 (1 for a zero row).
 * A row holding a NaN or an infinity gets sx = NaN (and xq 0), so its outputs are NaN, as the float
 * path's would be: callers look for NaN to hand such rows to torch. */
static void quantize_rows(const float *x, int64_t m, int64_t ldx, int64_t k, int16_t *xq, float *sx) {
    for (int64_t r = 0; r < m; r++) {
        const float *row = x + r * ldx;
        float amax = 0.0f;
        int finite = 1;
        for (int64_t i = 0; i < k; i++) {
            float a = fabsf(row[i]);
            finite &= a <= 3.4028235e38f; /* false for NaN and infinities */
            amax = a > amax ? a : amax;
        }
        sx[r] = !finite ? NAN : amax > 0.0f ? amax / 32767.0f : 1.0f;
        for (int64_t i = 0; i < k; i++) xq[r * k + i] = finite ? (int16_t)nearbyintf(row[i] / sx[r]) : 0;
    }
}

static int int16_allowed = 1;

/* 0: the float path from now on, 1: back to the int16 path where it applies (to measure the two). */
void gemv8_allow_int16(int on) { int16_allowed = on; }

/* 1 if gemv8 takes the int16 path for k on this machine (tests model x's rounding by it). */
int gemv8_int16(int64_t k) {
    return GEMV8_VNNI && int16_allowed && k % 32 == 0 && k <= VNNI_MAX_K && __builtin_cpu_supports("avx512vnni") &&
           __builtin_cpu_supports("avx512bw");
}

/* x: m rows of k floats, ldx apart; q: n rows of k int8; scale: n floats; y: m rows, ldy apart.
 * Returns 0, or -1 if the shape is not served (k not a multiple of 8, m outside 1..GEMV8_ROWS). */
int gemv8(const float *x, int64_t m, int64_t ldx, const int8_t *q, const float *scale, int64_t n, int64_t k,
          float *y, int64_t ldy, int nthreads) {
    if (m < 1 || m > GEMV8_ROWS || k % 8) return -1;
    if (gemv8_int16(k)) {
        int16_t *xq = aligned_alloc(64, (size_t)(m * k * 2 + 63) / 64 * 64);
        if (xq) {
            float sx[GEMV8_ROWS];
            quantize_rows(x, m, ldx, k, xq, sx);
            run_vnni(xq, sx, m, q, scale, n, k, y, ldy, nthreads);
            free(xq);
            return 0;
        }
    }
    const int wide = k % 16 == 0 && __builtin_cpu_supports("avx512f");
    if (wide) run_avx512(x, m, ldx, q, scale, n, k, y, ldy, nthreads);
    else run_avx2(x, m, ldx, q, scale, n, k, y, ldy, nthreads);
    return 0;
}
