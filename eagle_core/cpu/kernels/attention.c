/* Attention for a few query rows against a KV cache, written for decoding on a CPU.
 *
 * out[i,h,:] = sum_l softmax_l(q[h,i].k[g,l] * scale + mask[i,l]) v[g,l]   (g = h / (H/G): GQA)
 *
 * A decode step or a verification tree has 1..64 query rows and a cache of hundreds of keys:
 * torch's flash-attention kernel spends far more on setting up than on the arithmetic there.
 *
 * Row invariance by construction: a query row visits only the keys it may see (mask above
 * MASKED, and for a causal call keys up to its own position), in cache order, and every reduction
 * (dot product over d, max, sum of exp, weighted sum of values) runs in a fixed order over those
 * keys alone. A tree node that sees the context plus its ancestors therefore gets the same bits as
 * the same token decoded one at a time, where those keys are the whole cache. The softmax's exp is
 * vecmath.h's exp8, lane by lane the same bits wherever a key falls, in place of libm's scalar expf,
 * which cost too much of the kernel's time (docs/performance.md, "The kernels' choices, measured").
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "vecmath.h"

#define MASKED (-1e30f) /* additive mask values at or below this are "not visible" */

/* Scores of one query against 8 consecutive keys (rows ldk apart) for d % 8 == 0: per key the same
 * 8-lane FMA sequence as dot(), then the 8 lane vectors reduced together by a tree of horizontal adds
 * whose pairing per key is dot()'s ((0+1)+(2+3)) + ((4+5)+(6+7)), so each score has the same bits. */
static inline __m256 dot8(const float *q, const float *k, int64_t ldk, int64_t d) {
    __m256 p[8];
    for (int j = 0; j < 8; j++) p[j] = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 8) {
        __m256 qc = _mm256_loadu_ps(q + c);
        for (int j = 0; j < 8; j++) p[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k + j * ldk + c), p[j]);
    }
    __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(p[0], p[1]), _mm256_hadd_ps(p[2], p[3]));
    __m256 y = _mm256_hadd_ps(_mm256_hadd_ps(p[4], p[5]), _mm256_hadd_ps(p[6], p[7]));
    __m256 lo = _mm256_permute2f128_ps(x, y, 0x20), hi = _mm256_permute2f128_ps(x, y, 0x31);
    return _mm256_add_ps(lo, hi); /* lanes: keys 0..7 */
}

/* q: [H][n][d]; k, v: [G][L][d] with kv heads ldh floats apart (rows d apart); mask: [n][L] additive
 * or NULL; out: [n][H][d]. causal: row i sees keys 0 .. L - n + i (used when mask is NULL).
 * Returns 0, or -1 if out of memory. */
int attend512(const float *q, const float *k, const float *v, const float *mask, float *out, int64_t H,
              int64_t G, int64_t n, int64_t L, int64_t d, int64_t ldh, float scale, int causal, int nthreads);
static int wide_wanted = 1;
/* 0: every call takes the AVX2 path below (tests compare the two paths' bits); 1: the AVX-512 path
 * where the CPU has it and d is 64 or 128. Returns the previous setting. */
int attention_wide(int on) {
    int was = wide_wanted;
    wide_wanted = on;
    return was;
}
static int wide(int64_t d) {
    static int has = -1;
    if (has < 0) has = __builtin_cpu_supports("avx512f") ? 1 : 0;
    return has && wide_wanted && (d == 64 || d == 128);
}

int attend(const float *q, const float *k, const float *v, const float *mask, float *out, int64_t H, int64_t G,
           int64_t n, int64_t L, int64_t d, int64_t ldh, float scale, int causal, int nthreads) {
    if (wide(d)) return attend512(q, k, v, mask, out, H, G, n, L, d, ldh, scale, causal, nthreads);
    int failed = 0;
    int64_t rep = H / G;
    #pragma omp parallel num_threads(nthreads) if (nthreads > 1 && H * n > 1)
    {
        float *s = (float *)malloc(sizeof(float) * (L + 8));
        float *acc = (float *)malloc(sizeof(float) * d);
        if (!s || !acc) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < H * n; t++) {
            if (!s || !acc) continue;
            int64_t h = t / n, i = t % n, g = h / rep;
            const float *qi = q + (h * n + i) * d, *kg = k + g * ldh, *vg = v + g * ldh;
            const float *mi = mask ? mask + i * L : 0;
            int64_t last = causal && !mask ? L - n + i : L - 1; /* the last key this row may see */
            int64_t l = 0;
            if (d % 8 == 0)
                for (; l + 8 <= last + 1; l += 8) _mm256_storeu_ps(s + l, dot8(qi, kg + l * d, d, d));
            for (; l <= last; l++) s[l] = dot(qi, kg + l * d, d);
            float mx = -INFINITY;
            for (l = 0; l <= last; l++) {
                if (mi && mi[l] <= MASKED) { s[l] = -INFINITY; continue; }
                s[l] = s[l] * scale + (mi ? mi[l] : 0.0f);
                if (s[l] > mx) mx = s[l];
            }
            /* the weights exp(s - mx), 0 for a key not visible: 8 at a time through exp8, the tail
             * through the same lanes (a key's weight has the same bits wherever it falls) */
            const __m256 vmx = _mm256_set1_ps(mx), ninf = _mm256_set1_ps(-INFINITY);
            for (l = 0; l + 8 <= last + 1; l += 8) {
                __m256 sv = _mm256_loadu_ps(s + l), hidden = _mm256_cmp_ps(sv, ninf, _CMP_EQ_OQ);
                _mm256_storeu_ps(s + l, _mm256_andnot_ps(hidden, exp8(_mm256_sub_ps(sv, vmx))));
            }
            if (l <= last) {
                float t[8];
                int64_t rest = last + 1 - l;
                for (int64_t j = 0; j < rest; j++) t[j] = s[l + j] - mx;
                exp8_tail(t, rest, t);
                for (int64_t j = 0; j < rest; j++) s[l + j] = s[l + j] == -INFINITY ? 0.0f : t[j];
            }
            float total = 0.0f;
            float *o = out + (i * H + h) * d;
            if (d == 64) { /* the common head size: the weighted sum of values stays in registers */
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
                for (l = 0; l <= last; l++) {
                    float p = s[l];
                    if (p == 0.0f) continue; /* not visible (adding 0 would change no bit either) */
                    total += p;
                    const float *vl = vg + l * d;
                    __m256 pv = _mm256_set1_ps(p);
                    a0 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl), a0);
                    a1 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 8), a1);
                    a2 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 16), a2);
                    a3 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 24), a3);
                    a4 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 32), a4);
                    a5 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 40), a5);
                    a6 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 48), a6);
                    a7 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + 56), a7);
                }
                _mm256_storeu_ps(acc, a0); _mm256_storeu_ps(acc + 8, a1);
                _mm256_storeu_ps(acc + 16, a2); _mm256_storeu_ps(acc + 24, a3);
                _mm256_storeu_ps(acc + 32, a4); _mm256_storeu_ps(acc + 40, a5);
                _mm256_storeu_ps(acc + 48, a6); _mm256_storeu_ps(acc + 56, a7);
            } else {
                for (int64_t j = 0; j < d; j++) acc[j] = 0.0f;
                for (l = 0; l <= last; l++) {
                    float p = s[l];
                    if (p == 0.0f) continue;
                    total += p;
                    const float *vl = vg + l * d;
                    int64_t j = 0;
                    __m256 pv = _mm256_set1_ps(p);
                    for (; j + 8 <= d; j += 8)
                        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(pv, _mm256_loadu_ps(vl + j), _mm256_loadu_ps(acc + j)));
                    for (; j < d; j++) acc[j] = fmaf(p, vl[j], acc[j]);
                }
            }
            float inv = total > 0.0f ? 1.0f / total : 0.0f; /* a row that sees nothing gets zeros */
            for (int64_t j = 0; j < d; j++) o[j] = acc[j] * inv;
        }
        free(s);
        free(acc);
    }
    return failed ? -1 : 0;
}
