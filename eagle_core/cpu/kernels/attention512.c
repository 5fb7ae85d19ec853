/* attention.c's attend() with 512-bit vectors, for CPUs with AVX-512 and head sizes 64 and 128: the
 * same bits as the AVX2 path, in fewer instructions and with each key read by fewer tasks.
 *
 * A task is a pair of query vectors that share a key/value head (with GQA the query heads of one kv
 * head, and a tree's rows, all read the same keys): a 512-bit register holds the pair, query a in
 * the low 8 lanes and b in the high 8, so each key's chunk is loaded once (broadcast to both halves)
 * for two queries. Every lane runs the AVX2 path's chain: the same fmas in the same order, and the
 * same tree of adds over the 8 lanes ((0+1)+(2+3)) + ((4+5)+(6+7)), here through in-lane shuffles
 * rather than hadd. The softmax's max is taken 16 lanes at a time (max is exact in any order, and
 * _mm512_max_ps(s, mx) keeps mx when s is NaN, as the scalar `s > mx` does); exp16 is exp8's
 * operations on 16 lanes. The weighted sum of values keeps d/16 accumulators of 16 values per
 * query; a key invisible to one query of the pair (weight 0) is skipped for that query only, as the
 * AVX2 path skips it. So the two paths agree bit for bit (tests/test_attention_kernel.py), and the choice
 * between them depends on the CPU alone: rows stay invariant to how many rows share a call.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "vecmath.h"

#define MASKED (-1e30f)
#define A512 __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))

/* the 8 floats at p in both 256-bit halves (one load: vbroadcastf64x4) */
INLINE A512 __m512 both_halves(const float *p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)p)));
}

/* _mm256_hadd_ps in each 256-bit half: per 128-bit lane [x0+x1, x2+x3, y0+y1, y2+y3] */
INLINE A512 __m512 hadd(__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Scores of the pair qp (interleaved: chunk c of a in lanes 0-7, of b in 8-15, at qp + 16 c / 8)
 * against keys k[0..7] (rows d apart): a's into sa[0..7], b's into sb[0..7], each score the bits of
 * vecmath.h's dot(). */
INLINE A512 void scores8(const float *qp, const float *k, int64_t d, float *sa, float *sb) {
    __m512 p[8];
    for (int j = 0; j < 8; j++) p[j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 8) {
        __m512 qc = _mm512_loadu_ps(qp + 2 * c);
        for (int j = 0; j < 8; j++) p[j] = _mm512_fmadd_ps(qc, both_halves(k + j * d + c), p[j]);
    }
    /* per 128-bit lane of x: lanes 0-3 sums (a), lanes 4-7 sums (a), then b's, for keys 0-3 */
    __m512 x = hadd(hadd(p[0], p[1]), hadd(p[2], p[3]));
    __m512 y = hadd(hadd(p[4], p[5]), hadd(p[6], p[7]));
    __m512 lo = _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)), hi = _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1));
    __m512 sum = _mm512_add_ps(lo, hi); /* [a keys 0-3, b keys 0-3, a keys 4-7, b keys 4-7] */
    __m512 ordered = _mm512_shuffle_f32x4(sum, sum, _MM_SHUFFLE(3, 1, 2, 0)); /* a keys 0-7, b keys 0-7 */
    _mm256_storeu_ps(sa, _mm512_castps512_ps256(ordered));
    _mm256_storeu_pd((double *)sb, _mm512_extractf64x4_pd(_mm512_castps_pd(ordered), 1));
}

/* exp8 (vecmath.h) on 16 lanes: the same operations, so the same bits per value */
INLINE A512 __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(k, _mm512_set1_ps(0.693359375f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(k, _mm512_set1_ps(-2.12194440e-4f)));
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* Scores s[0..last] of one query into softmax weights exp(s * scale + mask - max), 0 where not visible. */
static A512 void weights(float *s, const float *mi, int64_t last, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 vmx = ninf;
    int64_t l = 0;
    for (; l + 16 <= last + 1; l += 16) {
        __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + l), vscale);
        if (mi) {
            __m512 m = _mm512_loadu_ps(mi + l);
            x = _mm512_mask_mov_ps(_mm512_add_ps(x, m), _mm512_cmp_ps_mask(m, _mm512_set1_ps(MASKED), _CMP_LE_OQ), ninf);
        } else {
            x = _mm512_add_ps(x, _mm512_setzero_ps());
        }
        _mm512_storeu_ps(s + l, x);
        vmx = _mm512_max_ps(x, vmx);
    }
    float mx = _mm512_reduce_max_ps(vmx);
    for (; l <= last; l++) {
        if (mi && mi[l] <= MASKED) { s[l] = -INFINITY; continue; }
        s[l] = s[l] * scale + (mi ? mi[l] : 0.0f);
        if (s[l] > mx) mx = s[l];
    }
    const __m512 m16 = _mm512_set1_ps(mx);
    for (l = 0; l + 16 <= last + 1; l += 16) {
        __m512 sv = _mm512_loadu_ps(s + l);
        __mmask16 seen = _mm512_cmp_ps_mask(sv, ninf, _CMP_NEQ_UQ);
        _mm512_storeu_ps(s + l, _mm512_maskz_mov_ps(seen, exp16(_mm512_sub_ps(sv, m16))));
    }
    if (l <= last) {
        float t[16];
        int64_t rest = last + 1 - l;
        for (int64_t j = 0; j < rest; j++) t[j] = s[l + j] - mx;
        for (int64_t j = 0; j < rest; j += 8) exp8_tail(t + j, rest - j < 8 ? rest - j : 8, t + j);
        for (int64_t j = 0; j < rest; j++) s[l + j] = s[l + j] == -INFINITY ? 0.0f : t[j];
    }
}

/* oa = sum_l wa[l] v[l] / sum_l wa[l] over l <= la (ob likewise; ob NULL: a alone), keys with weight
 * 0 skipped per query, D16 = d / 16 accumulators of 16 values per query, in key order. */
INLINE A512 void values(const float *wa, const float *wb, int64_t la, int64_t lb, const float *v, int D16,
                        float *oa, float *ob) {
    __m512 A[8], B[8];
    for (int c = 0; c < D16; c++) A[c] = B[c] = _mm512_setzero_ps();
    float ta = 0.0f, tb = 0.0f;
    const int64_t last = ob && lb > la ? lb : la, d = 16 * D16;
    for (int64_t l = 0; l <= last; l++) {
        float pa = l <= la ? wa[l] : 0.0f, pb = ob && l <= lb ? wb[l] : 0.0f;
        const float *vl = v + l * d;
        if (pa != 0.0f && pb != 0.0f) {
            ta += pa, tb += pb;
            __m512 xa = _mm512_set1_ps(pa), xb = _mm512_set1_ps(pb);
            for (int c = 0; c < D16; c++) {
                __m512 vc = _mm512_loadu_ps(vl + 16 * c);
                A[c] = _mm512_fmadd_ps(xa, vc, A[c]);
                B[c] = _mm512_fmadd_ps(xb, vc, B[c]);
            }
        } else if (pa != 0.0f) {
            ta += pa;
            __m512 xa = _mm512_set1_ps(pa);
            for (int c = 0; c < D16; c++) A[c] = _mm512_fmadd_ps(xa, _mm512_loadu_ps(vl + 16 * c), A[c]);
        } else if (pb != 0.0f) {
            tb += pb;
            __m512 xb = _mm512_set1_ps(pb);
            for (int c = 0; c < D16; c++) B[c] = _mm512_fmadd_ps(xb, _mm512_loadu_ps(vl + 16 * c), B[c]);
        }
    }
    __m512 ia = _mm512_set1_ps(ta > 0.0f ? 1.0f / ta : 0.0f), ib = _mm512_set1_ps(tb > 0.0f ? 1.0f / tb : 0.0f);
    for (int c = 0; c < D16; c++) {
        _mm512_storeu_ps(oa + 16 * c, _mm512_mul_ps(A[c], ia));
        if (ob) _mm512_storeu_ps(ob + 16 * c, _mm512_mul_ps(B[c], ib));
    }
}

/* One task: queries a and b (b < 0: a alone) of kv head g; query j is head g * rep + j / n, row j % n. */
static A512 void pair(const float *q, const float *kg, const float *vg, const float *mask, float *out, int64_t H,
                      int64_t n, int64_t L, int64_t d, int64_t rep, int64_t g, int64_t a, int64_t b, float scale,
                      int causal, float *qp, float *sa, float *sb) {
    const int64_t ha = g * rep + a / n, ia = a % n, hb = b < 0 ? ha : g * rep + b / n, ib = b < 0 ? ia : b % n;
    const float *qa = q + (ha * n + ia) * d, *qb = q + (hb * n + ib) * d;
    const int64_t la = causal && !mask ? L - n + ia : L - 1, lb = causal && !mask ? L - n + ib : L - 1;
    const int64_t last = la > lb ? la : lb;
    for (int64_t c = 0; c < d; c += 8)
        for (int j = 0; j < 8; j++) qp[2 * c + j] = qa[c + j], qp[2 * c + 8 + j] = qb[c + j];
    int64_t l = 0;
    for (; l + 8 <= last + 1; l += 8) scores8(qp, kg + l * d, d, sa + l, sb + l);
    for (; l <= last; l++) sa[l] = dot(qa, kg + l * d, d), sb[l] = dot(qb, kg + l * d, d);
    weights(sa, mask ? mask + ia * L : 0, la, scale);
    if (b >= 0) weights(sb, mask ? mask + ib * L : 0, lb, scale);
    float *oa = out + (ia * H + ha) * d, *ob = b < 0 ? 0 : out + (ib * H + hb) * d;
    if (d == 64) values(sa, sb, la, lb, vg, 4, oa, ob);
    else values(sa, sb, la, lb, vg, 8, oa, ob);
}

/* attend() (attention.c) for d = 64 or 128 on a CPU with AVX-512F. */
int attend512(const float *q, const float *k, const float *v, const float *mask, float *out, int64_t H,
              int64_t G, int64_t n, int64_t L, int64_t d, int64_t ldh, float scale, int causal, int nthreads) {
    int failed = 0;
    const int64_t rep = H / G, per = rep * n, pairs = (per + 1) / 2;
    #pragma omp parallel num_threads(nthreads) if (nthreads > 1 && G * pairs > 1)
    {
        float *qp = (float *)malloc(sizeof(float) * (2 * d + 2 * (L + 16)));
        if (!qp) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < G * pairs; t++) {
            if (!qp) continue;
            int64_t g = t / pairs, a = 2 * (t % pairs), b = a + 1 < per ? a + 1 : -1;
            pair(q, k + g * ldh, v + g * ldh, mask, out, H, n, L, d, rep, g, a, b, scale, causal, qp, qp + 2 * d,
                 qp + 2 * d + L + 16);
        }
        free(qp);
    }
    return failed ? -1 : 0;
}
