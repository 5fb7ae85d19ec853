/* One decoder layer of a Llama-type model (Llama, Qwen2, Mistral) for a few rows, in one call.
 *
 * The lean forward (eagle_core/cpu/forward.py) runs a layer as ~25 torch operations and 5 kernel
 * calls; at batch size 1 on a 2-core CPU their Python and dispatch cost, over 30 layers, is a fifth to
 * a third of a decode step (docs/performance.md, "The kernels' choices, measured"). This function
 * does the whole layer:
 *
 *     x = RMSNorm(h) -> qkv = x [Wq; Wk; Wv]^T (+ b) -> RoPE on q and k -> k, v into the cache
 *     -> attention (attention.c) -> h += out Wo^T (+ b) -> x = RMSNorm(h)
 *     -> gu = x [Wgate; Wup]^T (+ b) -> a = silu(gate) * up -> h += a Wdown^T (+ b)
 *
 * with the products through smallgemm.c on the weights the lean forward packed, or in the gguf weight
 * format through qblocks.c on the file's own blocks (integer sums per block). Row invariance,
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

/* The gguf weight format's products (cpu/quant_linear.py): qblocks.c's qb_matmul on a GGUF file's own
 * Q4_1 / Q8_0 blocks, packed by qb_pack. qblocks.c is its own library (built and tuned apart); the
 * Python side hands its entry point here once (layer_set_qblocks), so the process runs one copy of it. */
typedef int (*QbMatmul)(int fmt, const float *x, int64_t m, int64_t K, const uint8_t *w, int64_t n, float *y,
                        int64_t ldy, int nthreads, int path, int tile);
static QbMatmul qb_matmul_fn = NULL;

void layer_set_qblocks(void *fn) { qb_matmul_fn = (QbMatmul)fn; }

int layer_has_qblocks(void) { return qb_matmul_fn != NULL; }

enum { KIND_F32 = 0, KIND_F16 = 1, KIND_INT8 = 2, KIND_Q4_1 = 3, KIND_Q8_0 = 4 };

/* y = x W^T (+ bias) on a weight of storage `kind`: packed as float32 (0) or float16 (1), stored as
 * int8 rows after their n float32 scales (2: gemv8.c, a draft head's kernels.SmallGemm8 state; 8 rows
 * a call, then the bias added as torch adds it, so the bits are SmallGemm8.run's), or a GGUF's blocks
 * packed by qb_pack (3: Q4_1, 4: Q8_0; qb_matmul with its default path and tile, as QuantLinear.forward
 * calls it, then the bias added as QuantLinear.forward adds it: the same bits). Blocks read x rows
 * packed (ldx == k). Returns 0, -1 out of memory, -3 blocks not served (no qb_matmul registered, a
 * shape qb_matmul refuses). */
static int gemm(int kind, const float *x, int64_t m, int64_t ldx, const void *p, int64_t n, int64_t k,
                const float *bias, float *y, int64_t ldy, int nthreads) {
    if (kind == KIND_Q4_1 || kind == KIND_Q8_0) {
        if (!qb_matmul_fn || ldx != k) return -3;
        int rc = qb_matmul_fn(kind - KIND_Q4_1, x, m, k, (const uint8_t *)p, n, y, ldy, nthreads, 0, 0);
        if (rc) return rc == -2 ? -1 : -3;
    } else if (kind == KIND_INT8) {
        const float *s = (const float *)p;
        for (int64_t r = 0; r < m; r += 8)
            gemv8(x + r * ldx, m - r < 8 ? m - r : 8, ldx, (const int8_t *)(s + n), s, n, k, y + r * ldy, ldy,
                  nthreads);
    } else if (kind == KIND_F16) {
        smallgemm_f16(x, m, ldx, (const uint16_t *)p, n, k, bias, y, ldy, nthreads);
        return 0;
    } else {
        smallgemm(x, m, ldx, (const float *)p, n, k, bias, y, ldy, nthreads);
        return 0;
    }
    if (bias)
        for (int64_t r = 0; r < m; r++)
            for (int64_t o = 0; o < n; o++) y[r * ldy + o] += bias[o];
    return 0;
}

/* decoder_layer's `kinds`: one storage kind for all four products (below 16), or with bit 16 set one
 * kind per product in 4 bits each (q/k/v, o, gate/up, down from the lowest), for a file whose
 * products mix Q4_1 and Q8_0. */
static inline int kind_of(int kinds, int j) { return kinds >> 16 ? (kinds >> (4 * j)) & 15 : kinds; }

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

/* A scratch buffer of the calling thread, grown as needed and kept (never freed: at most a few MB a
 * thread). A malloc / free per call passes glibc's mmap threshold from 5 rows up, so every layer
 * of a verification mapped fresh pages (faulted in by both OpenMP threads) and unmapped them. */
typedef struct {
    float *buf;
    size_t cap;
} Scratch;

static float *grown(Scratch *s, size_t floats) {
    if (floats > s->cap) {
        float *p = (float *)realloc(s->buf, sizeof(float) * floats);
        if (!p) return NULL;
        s->buf = p;
        s->cap = floats;
    }
    return s->buf;
}

static __thread Scratch layer_scratch = {NULL, 0};

static float *scratch(size_t floats) { return grown(&layer_scratch, floats); }

/* h: [m][D] the residual stream, updated in place. ln1/ln2: [D]; the input of the q/k/v product is
 * RMSNorm(h) with ln1, or (ln1 NULL) xin [m][K1], or (both NULL) h itself (a draft head's layer:
 * EAGLE-2's first layer has no input norm, EAGLE-3's takes two normed halves). wqkv, wo, wgu, wdown:
 * weights packed by pack_weight (half = 0) or pack_weight_f16 (half = 1), or int8 rows (half = 2, see
 * gemm); bqkv, bo, bgu, bdown: biases or NULL. cos, sin: [m][d] (sin with its first half negated).
 * kbuf, vbuf: one layer's cache buffers, kv heads ldh floats apart, rows d apart, with room for
 * L0 + m rows; the new keys / values are written at rows L0 .. L0 + m - 1. mask:
 * [m][L0 + m] additive (at or below -1e30: not visible) or NULL for causal. Returns 0, -1 if out
 * of memory, -3 if a product on blocks was not served (gemm). */
int decoder_layer(float *h, int64_t m, int64_t D, int64_t H, int64_t G, int64_t d, int64_t I,
                  const float *ln1, float eps1, const float *ln2, float eps2,
                  const void *wqkv, const float *bqkv, const void *wo, const float *bo,
                  const void *wgu, const float *bgu, const void *wdown, const float *bdown,
                  const float *cos, const float *sin, float *kbuf, float *vbuf, int64_t ldh, int64_t L0,
                  const float *mask, float scale, int nthreads, const float *xin, int64_t K1, int kinds) {
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
    int rc = gemm(kind_of(kinds, 0), in, m, K1, wqkv, nqkv, K1, bqkv, qkv, nqkv, nthreads);
    if (rc) return rc;
    for (int64_t r = 0; r < m; r++) {
        const float *row = qkv + r * nqkv, *c = cos + r * d, *s = sin + r * d;
        for (int64_t j = 0; j < H; j++) rope(row + j * d, c, s, d, q + (j * m + r) * d);
        for (int64_t g = 0; g < G; g++) {
            rope(row + (H + g) * d, c, s, d, kbuf + g * ldh + (L0 + r) * d);
            memcpy(vbuf + g * ldh + (L0 + r) * d, row + (H + G + g) * d, sizeof(float) * d);
        }
    }
    if (attend(q, kbuf, vbuf, mask, att, H, G, m, L0 + m, d, ldh, scale, mask == NULL, nthreads)) return -1;
    if ((rc = gemm(kind_of(kinds, 1), att, m, hd, wo, D, hd, bo, y, D, nthreads))) return rc;
    for (int64_t i = 0; i < m * D; i++) h[i] = h[i] + y[i];

    rms_norm(h, ln2, eps2, m, D, x);
    if ((rc = gemm(kind_of(kinds, 2), x, m, D, wgu, 2 * I, D, bgu, y, 2 * I, nthreads))) return rc;
    for (int64_t r = 0; r < m; r++) silu_mul(y + r * 2 * I, y + r * 2 * I + I, I, x + r * I);
    if ((rc = gemm(kind_of(kinds, 3), x, m, I, wdown, D, I, bdown, y, D, nthreads))) return rc;
    for (int64_t i = 0; i < m * D; i++) h[i] = h[i] + y[i];
    return 0;
}

/* One layer's decoder_layer arguments for decoder_layers (eagle_core/cpu/layer_loop.py's LayerCall, field
 * for field): its weights, which stay between forwards, its cache buffers (set again when they grow),
 * and where the residual stream entering it is copied ([m][D], or NULL: not captured). */
typedef struct {
    const float *ln1, *ln2;
    float eps1, eps2, scale;
    int kinds;
    const void *w[4];
    const float *b[4];
    float *kbuf, *vbuf;
    int64_t ldh;
    float *capture;
} LayerCall;

/* decoder_layer for each of nl layers in turn, every layer's new cache rows written from L0: the
 * forward's layer loop in one call, rather than a Python call of ~40 arguments a layer. The same calls,
 * so the same bits. Returns 0, or the first failing layer's code. */
int decoder_layers(float *h, int64_t m, int64_t D, int64_t H, int64_t G, int64_t d, int64_t I,
                   const LayerCall *layers, int64_t nl, const float *cos, const float *sin, int64_t L0,
                   const float *mask, int nthreads) {
    for (int64_t i = 0; i < nl; i++) {
        const LayerCall *c = layers + i;
        if (c->capture) memcpy(c->capture, h, sizeof(float) * (size_t)(m * D));
        int rc = decoder_layer(h, m, D, H, G, d, I, c->ln1, c->eps1, c->ln2, c->eps2, c->w[0], c->b[0], c->w[1],
                               c->b[1], c->w[2], c->b[2], c->w[3], c->b[3], cos, sin, c->kbuf, c->vbuf, c->ldh, L0,
                               mask, c->scale, nthreads, NULL, D, c->kinds);
        if (rc) return rc;
    }
    return 0;
}

/* ---- A draft head's whole drafting pass in one call (eagle_core/cpu/fused_pass.py) -------------
 *
 * A drafting pass through torch is ~30 operations and five kernel calls around the layer above: the
 * embedding rows, a cat, the fc product (EAGLE-1/2) or the two input norms (EAGLE-3), RoPE rows, the
 * mask, the draft LM head, its top k, the ids. Cheap when warm; but a pass runs right after a
 * verification has streamed ~540 MB through the caches, and there each Python and torch step meets
 * its code and data cold, many times slower (docs/performance.md, "The kernels' choices, measured").
 * Here the pass makes the same operations through the same kernels: for EAGLE-1/2 its results are the
 * torch path's bits; EAGLE-3's norms are rms_norm's above, equal to torch's to float32 rounding. */

int row_topk(const float *x, int64_t rows, int64_t V, int64_t ld, int k, float *val_out, int64_t *idx_out);

/* What a head's pass reads that does not change between calls. Storages: 0 float32 panels,
 * 1 float16 panels, 2 int8 rows (as gemm above). */
typedef struct {
    const float *embed; /* the target's embedding table [vocab][D] */
    int64_t vocab, D, H, G, d, I;
    const void *fc;     /* EAGLE-1/2: cat(embed, feature) [2D] -> [D]; EAGLE-3: the captured layers [F] -> [D] */
    const float *fc_bias;
    const float *ln1, *ln2; /* the layer's norms (ln1 NULL: no input norm, EAGLE-2's first layer) */
    float eps1, eps2, scale;
    int fc_kind, layer_kind, lm_kind;
    const void *w[4];   /* q/k/v, o, gate/up, down */
    const float *b[4];
    const void *lm;     /* the draft LM head [lm_n][D] */
    int64_t lm_n;
    const int64_t *vocab_map; /* draft id -> target id, or NULL */
    /* EAGLE-3 (eagle3 = 1): q/k/v read cat(norm(embed), norm(h)); the residual is h, or norm(h) with
     * norm_before_residual; the LM head reads lm_norm(h); a catch-up's features are F = fc_in wide */
    int eagle3, norm_before_residual;
    const float *emb_norm, *hidden_norm, *lm_norm;
    float emb_eps, hidden_eps, lm_eps;
    int64_t fc_in;
} HeadPass;

static __thread Scratch pass_scratch_ = {NULL, 0}; /* the pass's own: decoder_layer uses layer_scratch */

static float *pass_scratch(size_t floats) { return grown(&pass_scratch_, floats); }

/* The k best draft tokens of m rows x [m][D]: log-softmax values (descending) and target ids.
 * Returns 0; 1 where rows.c's row_topk cannot serve (the caller then uses torch); -1 out of memory. */
int lm_top(const HeadPass *p, const float *x, int64_t m, int k, float *top_v, int64_t *top_i, int nthreads) {
    const int64_t D = p->D;
    float *logits = pass_scratch((size_t)(m * p->lm_n + (p->lm_norm ? m * D : 0)));
    if (!logits) return -1;
    if (p->lm_norm) { /* EAGLE-3: the head's final norm first */
        float *xn = logits + m * p->lm_n;
        rms_norm(x, p->lm_norm, p->lm_eps, m, D, xn);
        x = xn;
    }
    gemm(p->lm_kind, x, m, D, p->lm, p->lm_n, D, NULL, logits, p->lm_n, nthreads);
    if (row_topk(logits, m, p->lm_n, p->lm_n, k, top_v, top_i)) return 1;
    if (p->vocab_map)
        for (int64_t i = 0; i < m * k; i++) top_i[i] = p->vocab_map[top_i[i]];
    return 0;
}

/* The input of the q/k/v product for n rows, into x [n][2D], and the residual into h [n][D].
 * EAGLE-1/2: x = cat(embed, feature) and h = fc(x) (the layer then reads h itself). EAGLE-3: the
 * feature g (fuse: fc over the F-wide captured layers, else the row given), x = cat(norm(embed),
 * norm(g)), h = g or norm(g). e: the embedding rows [n][D], f: the feature rows. */
static void pass_input(const HeadPass *p, const float *e, const float *const *f, int64_t n, int fuse, float *x,
                       float *g, float *h, int nthreads) {
    const int64_t D = p->D;
    if (!p->eagle3) {
        for (int64_t r = 0; r < n; r++) {
            memcpy(x + r * 2 * D, e + r * D, sizeof(float) * D);
            memcpy(x + r * 2 * D + D, f[r], sizeof(float) * D);
        }
        gemm(p->fc_kind, x, n, 2 * D, p->fc, D, 2 * D, p->fc_bias, h, D, nthreads);
        return;
    }
    if (fuse) { /* x holds the captured rows for the moment: n x F <= the scratch's n x max(2D, F) */
        for (int64_t r = 0; r < n; r++) memcpy(x + r * p->fc_in, f[r], sizeof(float) * p->fc_in);
        gemm(p->fc_kind, x, n, p->fc_in, p->fc, D, p->fc_in, p->fc_bias, g, D, nthreads);
    } else {
        for (int64_t r = 0; r < n; r++) memcpy(g + r * D, f[r], sizeof(float) * D);
    }
    for (int64_t r = 0; r < n; r++) {
        rms_norm(e + r * D, p->emb_norm, p->emb_eps, 1, D, x + r * 2 * D);
        rms_norm(g + r * D, p->hidden_norm, p->hidden_eps, 1, D, x + r * 2 * D + D);
        memcpy(h + r * D, p->norm_before_residual ? x + r * 2 * D + D : g + r * D, sizeof(float) * D);
    }
}

/* n rows: tokens[r] and the feature at feats[r] (D floats; F with fuse, EAGLE-3's catch-up) at head
 * position pos0 + r * pos_step. h [n][D] receives the layer's output; the new keys / values go to
 * rows L0.. of kbuf / vbuf (as decoder_layer). cos_t / sin_t: RoPE tables [rope_rows][d]. mask:
 * [n][L0 + n] bytes, nonzero = may attend, or NULL for causal. k > 0: the top k of rows
 * top_from..n-1 as lm_top. Returns 0, 1 (the top k not served: h is), -1 out of memory, -2 a token
 * outside the table, -3 a position outside the RoPE tables. */
int head_pass(const HeadPass *p, const int64_t *tokens, const float *const *feats, int64_t n, int fuse,
              int64_t pos0, int64_t pos_step, const float *cos_t, const float *sin_t, int64_t rope_rows, float *kbuf,
              float *vbuf, int64_t ldh, int64_t L0, const uint8_t *mask, float *h, int64_t top_from, int k,
              float *top_v, int64_t *top_i, int nthreads) {
    const int64_t D = p->D, d = p->d, L = L0 + n, xw = p->fc_in > 2 * D ? p->fc_in : 2 * D;
    float *x = pass_scratch((size_t)(n * xw + 2 * n * D + 2 * n * d + (mask ? n * L : 0)));
    if (!x) return -1;
    float *e = x + n * xw, *g = e + n * D, *cos = g + n * D, *sin = cos + n * d, *amask = mask ? sin + n * d : NULL;
    for (int64_t r = 0; r < n; r++) {
        int64_t pos = pos0 + r * pos_step;
        if (tokens[r] < 0 || tokens[r] >= p->vocab) return -2;
        if (pos < 0 || pos >= rope_rows) return -3;
        memcpy(e + r * D, p->embed + tokens[r] * D, sizeof(float) * D);
        memcpy(cos + r * d, cos_t + pos * d, sizeof(float) * d);
        memcpy(sin + r * d, sin_t + pos * d, sizeof(float) * d);
    }
    if (mask)
        for (int64_t i = 0; i < n * L; i++) amask[i] = mask[i] ? 0.0f : -INFINITY;
    pass_input(p, e, feats, n, fuse && p->eagle3, x, g, h, nthreads);
    if (decoder_layer(h, n, D, p->H, p->G, d, p->I, p->ln1, p->eps1, p->ln2, p->eps2, p->w[0], p->b[0], p->w[1],
                      p->b[1], p->w[2], p->b[2], p->w[3], p->b[3], cos, sin, kbuf, vbuf, ldh, L0, amask, p->scale,
                      nthreads, p->eagle3 ? x : NULL, p->eagle3 ? 2 * D : D, p->layer_kind))
        return -1;
    return k > 0 ? lm_top(p, h + top_from * D, n - top_from, k, top_v, top_i, nthreads) : 0;
}
