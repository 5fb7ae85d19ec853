/* The draft LM head from 8-bit weights: y = x W^T with W's rows stored as int8 and a float32 scale.
 *
 * The drafter's LM-head product reads its rows (8,192 x 576 for SmolLM2's reduced draft
 * vocabulary) twice a cycle, right after a verification has streamed the target's weights through
 * the caches, so they come from memory each time: on an Intel Xeon (family 6, model 167) the same
 * rows from float32 instead of float16 storage cost +0.83 ms a cycle, ~44 us per MB read
 * (docs/performance.md). Stored as int8 with one scale per row they are half the float16 bytes.
 * These numbers only choose the draft (the target verifies every token from its own float32
 * weights), so the output cannot change; the draft's q moves by the rounding (tau measured in
 * docs/performance.md).
 *
 *   y[r][o] = scale[o] * sum_k x[r][k] * q[o][k]
 *
 * Each output is one thread's: 8 (AVX2) or 16 (AVX-512) lane sums in order of k, then the lanes
 * added in a fixed order, so a row's result is the same alone or in any batch, with any thread
 * count (how outputs are grouped changes no sum). m <= GEMV8_ROWS rows per call (the drafter
 * has 1-2).
 */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

#define GEMV8_ROWS 8
#define A512 __attribute__((target("avx512f")))

static float hsum8(__m256 v) {
    float l[8];
    _mm256_storeu_ps(l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* Bytes ahead of the current group of rows to prefetch, one cache line per step of k: the rows
 * come from memory (see above), and without it the product read them at ~9 GB/s, below float16
 * storage read by smallgemm (which prefetches): 517 us against 565 for half the bytes. */
#ifndef GEMV8_PREFETCH
#define GEMV8_PREFETCH 8192
#endif

/* OUTS outputs at a time: OUTS x m independent accumulator chains (one chain per output stalls on
 * the FMA's latency: 0.45 ms for the 8,192 rows, slower than float16 storage warm). */
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
 * stay in registers (with m only known at run time they lived on the stack: ~0.45 ms). */
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

/* x: m rows of k floats, ldx apart; q: n rows of k int8; scale: n floats; y: m rows, ldy apart.
 * Returns 0, or -1 if the shape is not served (k not a multiple of 8, m outside 1..GEMV8_ROWS). */
int gemv8(const float *x, int64_t m, int64_t ldx, const int8_t *q, const float *scale, int64_t n, int64_t k,
          float *y, int64_t ldy, int nthreads) {
    if (m < 1 || m > GEMV8_ROWS || k % 8) return -1;
    const int wide = k % 16 == 0 && __builtin_cpu_supports("avx512f");
    if (wide) run_avx512(x, m, ldx, q, scale, n, k, y, ldy, nthreads);
    else run_avx2(x, m, ldx, q, scale, n, k, y, ldy, nthreads);
    return 0;
}
