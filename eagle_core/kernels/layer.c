/* One decoder layer of a Llama-type model (Llama, Qwen2, Mistral) for a few rows, in one call.
 *
 * The lean forward (eagle_core/lean.py) runs a layer as ~25 torch operations and 5 kernel calls;
 * at batch size 1 on a 2-core CPU their Python and dispatch cost (~0.15 ms a layer, 30 layers) is a
 * third of a decode step whose products take ~10 ms. This function does the whole layer:
 *
 *     x = RMSNorm(h) -> qkv = x [Wq; Wk; Wv]^T (+ b) -> RoPE on q and k -> k, v into the cache
 *     -> attention (attention.c) -> h += out Wo^T (+ b) -> x = RMSNorm(h)
 *     -> gu = x [Wgate; Wup]^T (+ b) -> a = silu(gate) * up -> h += a Wdown^T (+ b)
 *
 * with the products through smallgemm.c on the weights the lean forward packed. Row invariance,
 * which makes a greedy EAGLE run reproduce vanilla decoding exactly: every operation here computes
 * a row from that row alone in a fixed order (the norm's sum of squares over 8 lanes in index order,
 * then the lanes in a fixed tree; RoPE, residual adds and silu elementwise), and the products and
 * attention are row-invariant by their own construction. Compiled with -ffp-contract=off, so each
 * expression rounds as written.
 *
 * Against transformers' own forward: the products, RoPE, the residual adds and the attention give
 * the same bits as the lean torch path; the norm's sum and silu's exp are computed differently from
 * torch's vectorised reductions and exp, so the layer agrees with transformers to float32 rounding
 * (about 1e-6 relative), not bit for bit (tests/test_lean.py).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vecmath.h"

void smallgemm(const float *x, int64_t m, int64_t ldx, const float *p, int64_t n, int64_t k,
               const float *bias, float *y, int64_t ldy, int nthreads);
void smallgemm_f16(const float *x, int64_t m, int64_t ldx, const uint16_t *p, int64_t n, int64_t k,
                   const float *bias, float *y, int64_t ldy, int nthreads);

int gemv8(const float *x, int64_t m, int64_t ldx, const int8_t *q, const float *scale, int64_t n, int64_t k,
          float *y, int64_t ldy, int nthreads);

/* y = x W^T (+ bias) on a weight packed as float32 (half = 0) or float16 (half = 1), or stored as int8
 * rows after their n float32 scales (half = 2: gemv8.c, a draft head's kernels.SmallGemm8 state; 8
 * rows a call, then the bias added as torch adds it, so the bits are SmallGemm8.run's). */
static void gemm(int half, const float *x, int64_t m, int64_t ldx, const void *p, int64_t n, int64_t k,
                 const float *bias, float *y, int64_t ldy, int nthreads) {
    if (half == 2) {
        const float *s = (const float *)p;
        for (int64_t r = 0; r < m; r += 8)
            gemv8(x + r * ldx, m - r < 8 ? m - r : 8, ldx, (const int8_t *)(s + n), s, n, k, y + r * ldy, ldy,
                  nthreads);
        if (bias)
            for (int64_t r = 0; r < m; r++)
                for (int64_t o = 0; o < n; o++) y[r * ldy + o] += bias[o];
    } else if (half)
        smallgemm_f16(x, m, ldx, (const uint16_t *)p, n, k, bias, y, ldy, nthreads);
    else
        smallgemm(x, m, ldx, (const float *)p, n, k, bias, y, ldy, nthreads);
}
int attend(const float *q, const float *k, const float *v, const float *mask, float *out, int64_t H, int64_t G,
           int64_t n, int64_t L, int64_t d, int64_t ldh, float scale, int causal, int nthreads);

/* x[r] = w * (h[r] * (1 / sqrt(mean(h[r]^2) + eps))), elementwise in the order transformers writes it. */
static void rms_norm(const float *h, const float *w, float eps, int64_t m, int64_t D, float *x) {
    for (int64_t r = 0; r < m; r++) {
        const float *hr = h + r * D;
        __m256 acc = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= D; j += 8) {
            __m256 v = _mm256_loadu_ps(hr + j);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(v, v));
        }
        float lane[8];
        _mm256_storeu_ps(lane, acc);
        float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        for (; j < D; j++) s += hr[j] * hr[j];
        float inv = 1.0f / sqrtf(s / (float)D + eps);
        float *xr = x + r * D;
        for (j = 0; j < D; j++) xr[j] = w[j] * (hr[j] * inv);
    }
}

/* silu(g) * u = g / (1 + exp(-g)) * u over n values (8 lanes at a time; the tail through exp8 too). */
static void silu_mul(const float *g, const float *u, int64_t n, float *out) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 gv = _mm256_loadu_ps(g + j);
        __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, gv))));
        _mm256_storeu_ps(out + j, _mm256_mul_ps(s, _mm256_loadu_ps(u + j)));
    }
    if (j < n) {
        float gb[8] = {0}, ub[8] = {0}, ob[8];
        for (int64_t i = j; i < n; i++) gb[i - j] = g[i], ub[i - j] = u[i];
        __m256 gv = _mm256_loadu_ps(gb);
        __m256 s = _mm256_div_ps(gv, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, gv))));
        _mm256_storeu_ps(ob, _mm256_mul_ps(s, _mm256_loadu_ps(ub)));
        for (int64_t i = j; i < n; i++) out[i] = ob[i - j];
    }
}

/* Rotary embedding of one head vector: out[i] = x[i] * cos[i] + x[(i + d/2) % d] * sin'[i], where
 * sin' has its first half negated (so the second term is rotate_half(x) * sin, exactly). */
static inline void rope(const float *x, const float *cos, const float *sin, int64_t d, float *out) {
    int64_t half = d / 2;
    for (int64_t i = 0; i < half; i++) out[i] = x[i] * cos[i] + x[i + half] * sin[i];
    for (int64_t i = half; i < d; i++) out[i] = x[i] * cos[i] + x[i - half] * sin[i];
}

/* The calling thread's scratch buffer, grown as needed and kept (never freed: at most a few MB a
 * thread). A malloc / free per call passes glibc's mmap threshold from 5 rows up, so every layer
 * of a verification mapped fresh pages (faulted in by both OpenMP threads) and unmapped them. */
static __thread float *scratch_buf = NULL;
static __thread size_t scratch_cap = 0;

static float *scratch(size_t floats) {
    if (floats > scratch_cap) {
        float *p = (float *)realloc(scratch_buf, sizeof(float) * floats);
        if (!p) return NULL;
        scratch_buf = p;
        scratch_cap = floats;
    }
    return scratch_buf;
}

/* h: [m][D] the residual stream, updated in place. ln1/ln2: [D]; the input of the q/k/v product is
 * RMSNorm(h) with ln1, or (ln1 NULL) xin [m][K1], or (both NULL) h itself (a draft head's layer:
 * EAGLE-2's first layer has no input norm, EAGLE-3's takes two normed halves). wqkv, wo, wgu, wdown:
 * weights packed by pack_weight (half = 0) or pack_weight_f16 (half = 1), or int8 rows (half = 2, see
 * gemm); bqkv, bo, bgu, bdown: biases or NULL. cos, sin: [m][d] (sin with its first half negated).
 * kbuf, vbuf: one layer's cache buffers, kv heads ldh floats apart, rows d apart, with room for
 * L0 + m rows; the new keys / values are written at rows L0 .. L0 + m - 1. mask:
 * [m][L0 + m] additive (at or below -1e30: not visible) or NULL for causal. Returns 0, or -1 if out
 * of memory. */
int decoder_layer(float *h, int64_t m, int64_t D, int64_t H, int64_t G, int64_t d, int64_t I,
                  const float *ln1, float eps1, const float *ln2, float eps2,
                  const void *wqkv, const float *bqkv, const void *wo, const float *bo,
                  const void *wgu, const float *bgu, const void *wdown, const float *bdown,
                  const float *cos, const float *sin, float *kbuf, float *vbuf, int64_t ldh, int64_t L0,
                  const float *mask, float scale, int nthreads, const float *xin, int64_t K1, int half) {
    const int64_t nqkv = (H + 2 * G) * d, hd = H * d;
    /* scratch: x [m][max(D, hd, I)] (norm output, then silu(gate) * up), qkv [m][nqkv],
     * q [H][m][d], att [m][hd], y [m][max(D, 2I)] (product outputs) */
    int64_t xw = D > hd ? D : hd;
    if (I > xw) xw = I;
    const int64_t yw = D > 2 * I ? D : 2 * I;
    float *x = scratch((size_t)m * (xw + nqkv + hd + hd + yw));
    if (!x) return -1;
    float *qkv = x + m * xw, *q = qkv + m * nqkv, *att = q + m * hd, *y = att + m * hd;

    const float *in = h;
    if (ln1) {
        rms_norm(h, ln1, eps1, m, D, x);
        in = x;
        K1 = D;
    } else if (xin) {
        in = xin;
    } else {
        K1 = D;
    }
    gemm(half, in, m, K1, wqkv, nqkv, K1, bqkv, qkv, nqkv, nthreads);
    for (int64_t r = 0; r < m; r++) {
        const float *row = qkv + r * nqkv, *c = cos + r * d, *s = sin + r * d;
        for (int64_t j = 0; j < H; j++) rope(row + j * d, c, s, d, q + (j * m + r) * d);
        for (int64_t g = 0; g < G; g++) {
            rope(row + (H + g) * d, c, s, d, kbuf + g * ldh + (L0 + r) * d);
            memcpy(vbuf + g * ldh + (L0 + r) * d, row + (H + G + g) * d, sizeof(float) * d);
        }
    }
    if (attend(q, kbuf, vbuf, mask, att, H, G, m, L0 + m, d, ldh, scale, mask == NULL, nthreads)) return -1;
    gemm(half, att, m, hd, wo, D, hd, bo, y, D, nthreads);
    for (int64_t i = 0; i < m * D; i++) h[i] = h[i] + y[i];

    rms_norm(h, ln2, eps2, m, D, x);
    gemm(half, x, m, D, wgu, 2 * I, D, bgu, y, 2 * I, nthreads);
    for (int64_t r = 0; r < m; r++) silu_mul(y + r * 2 * I, y + r * 2 * I + I, I, x + r * I);
    gemm(half, x, m, I, wdown, D, I, bdown, y, D, nthreads);
    for (int64_t i = 0; i < m * D; i++) h[i] = h[i] + y[i];
    return 0;
}
