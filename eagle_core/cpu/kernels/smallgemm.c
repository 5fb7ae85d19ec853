/* y[M,N] = x[M,K] . W[N,K]^T (+ bias) for few rows M, written for decoding on a CPU.
 *
 * At batch size 1..64 a linear layer is bound by streaming its weights from memory, not by
 * arithmetic, provided the kernel reads each weight once for ALL rows. The weight is packed once
 * into pairs of panels of 8 output features, P[N/16][K][16]: a register tile holds up to 6 rows x
 * 16 outputs of accumulators, and at each k its two 256-bit loads are the next 64 contiguous bytes
 * (one stream from memory per tile, not two), each multiplied by every row of x before the next
 * load. Rows beyond 6 re-read the same pair from L1/L2, not from DRAM (on AVX-512 CPUs 7-12 rows
 * are one tile of 512-bit registers instead, or blocked where this machine measured that faster: below).
 *
 * From 2 rows up a tile also prefetches PREFETCH floats (1 KB) ahead: most of what 5 rows gained
 * over the kernel before (docs/performance.md, "The kernels' choices, measured"); 1 row gains nothing.
 *
 * Batch invariance by construction: every output y[m,n] is one accumulator lane updated as
 * acc = fma(x[m,k], w[n,k], acc) for k = 0..K-1 in that order, starting from 0, whatever M, the
 * tile shape or the thread split. So a row's result is bit-identical alone or inside a batch.
 *
 * Half-precision storage (smallgemm_f16): a weight whose every value is a float16 (a draft head read
 * from its float16 checkpoint) is packed as float16 and widened to float32 on load, exactly; the
 * arithmetic is the float32 kernel's, so the bits are the same, and the head's pass reads half the
 * bytes.
 *
 * Threads: OpenMP over panel pairs, sharing the process's OpenMP runtime (libgomp) with torch.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define NB 8 /* outputs per panel (one __m256); a pair of panels is 16 outputs */
#define PREFETCH 256 /* floats ahead of the loads, for tiles of 2+ rows */
/* The AVX-512 tiles prefetch further: 2048 floats (8 KB); shorter distances were slower, 4096 no faster
 * (docs/performance.md, "The kernels' choices, measured"; scripts/measure_kernel_builds.py). */
#ifndef PREFETCH512
#define PREFETCH512 2048
#endif
/* Into which cache the AVX-512 tiles prefetch: 1 = L2 (prefetcht1), 0 = L1 (prefetcht0), -1 = by the CPU's
 * vendor: L2 on Intel, L1 elsewhere. An L1 prefetch holds one of the core's few L1 miss buffers until its
 * line arrives from memory; an L2 prefetch leaves them to the loads, and was faster there
 * (docs/performance.md, "The kernels' choices, measured"). */
#ifndef PREFETCH512_L2
#define PREFETCH512_L2 (-1)
#endif

/* Pack W[N,K] (row-major) into P[ceil(N/16)][K][16], zero-padding the last pair; as float32, or
 * (half = 1) as float16, rounded to nearest even: exact for a weight whose values are all float16,
 * which is the only kind the engine packs this way. */
static void pack(const float *w, int64_t n, int64_t k, void *p, const int half) {
    int64_t pairs = (n + 2 * NB - 1) / (2 * NB);
    #pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < pairs; q++)
        for (int64_t kk = 0; kk < k; kk++)
            for (int j = 0; j < 2 * NB; j++) {
                int64_t row = q * 2 * NB + j, at = (q * k + kk) * 2 * NB + j;
                float v = row < n ? w[row * k + kk] : 0.0f;
                if (half)
                    ((uint16_t *)p)[at] = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
                else
                    ((float *)p)[at] = v;
            }
}

void pack_weight(const float *w, int64_t n, int64_t k, float *p) { pack(w, n, k, p, 0); }
void pack_weight_f16(const float *w, int64_t n, int64_t k, uint16_t *p) { pack(w, n, k, p, 1); }

/* 8 weights at index i of a packed weight: float32, or float16 widened exactly. */
static inline __attribute__((always_inline)) __m256 loadw(const void *p, int64_t i, const int half) {
    return half ? _mm256_cvtph_ps(_mm_load_si128((const __m128i *)((const uint16_t *)p + i)))
                : _mm256_load_ps((const float *)p + i);
}

/* One tile: R rows (R <= 6) x one pair of panels at p (its second panel may be absent: the last
 * odd panel, zero-padded in the packing, whose 8 outputs are not computed), in registers and written to y[0..R)[n0..n0+16) with the bias added. The accumulators are named
 * variables, not an array, so that the compiler keeps all of them in ymm registers. */
#define ZERO2(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define FMA2(r)                                                                 \
    if (R > r) {                                                                \
        __m256 b = _mm256_broadcast_ss(x + r * ldx + kk);                      \
        c##r##0 = _mm256_fmadd_ps(b, w0, c##r##0);                              \
        c##r##1 = _mm256_fmadd_ps(b, w1, c##r##1);                              \
    }
#define FMA1(r) \
    if (R > r) c##r##0 = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * ldx + kk), w0, c##r##0);
#define STORE(r) if (R > r) put(y + r * ldy, n0, n, bias, c##r##0, c##r##1, cols);

static inline __attribute__((always_inline)) void put(float *y, int64_t n0, int64_t n, const float *bias,
                                                      __m256 lo, __m256 hi, int cols) {
    float buf[16];
    _mm256_storeu_ps(buf, lo);
    _mm256_storeu_ps(buf + 8, hi);
    for (int j = 0; j < cols && n0 + j < n; j++) y[n0 + j] = bias ? buf[j] + bias[n0 + j] : buf[j];
}

static inline __attribute__((always_inline)) void tile(const float *x, int64_t ldx, const int R,
        const void *p, const int half, int two, int64_t k, float *y, int64_t ldy, int64_t n0, int64_t n,
        const float *bias) {
    ZERO2(0) ZERO2(1) ZERO2(2) ZERO2(3) ZERO2(4) ZERO2(5)
    const int64_t esize = half ? 2 : 4, ahead = PREFETCH * 4; /* bytes per weight; prefetch distance */
    if (two) {
        for (int64_t kk = 0; kk < k; kk++) {
            if (R > 1) _mm_prefetch((const char *)p + kk * 2 * NB * esize + ahead, _MM_HINT_T0);
            __m256 w0 = loadw(p, kk * 2 * NB, half), w1 = loadw(p, kk * 2 * NB + NB, half);
            FMA2(0) FMA2(1) FMA2(2) FMA2(3) FMA2(4) FMA2(5)
        }
    } else {
        for (int64_t kk = 0; kk < k; kk++) {
            __m256 w0 = loadw(p, kk * 2 * NB, half);
            FMA1(0) FMA1(1) FMA1(2) FMA1(3) FMA1(4) FMA1(5)
        }
    }
    int cols = two ? 16 : 8;
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
}

#define TILE_FN(R)                                                                                   \
    static void tile_##R(const float *x, int64_t ldx, const void *p, int two, int64_t k,           \
                         float *y, int64_t ldy, int64_t n0, int64_t n, const float *bias) {         \
        tile(x, ldx, R, p, 0, two, k, y, ldy, n0, n, bias);                                         \
    }                                                                                                \
    static void tile16_##R(const float *x, int64_t ldx, const void *p, int two, int64_t k,         \
                           float *y, int64_t ldy, int64_t n0, int64_t n, const float *bias) {       \
        tile(x, ldx, R, p, 1, two, k, y, ldy, n0, n, bias);                                         \
    }
TILE_FN(1) TILE_FN(2) TILE_FN(3) TILE_FN(4) TILE_FN(5) TILE_FN(6)
typedef void (*tile_fn)(const float *, int64_t, const void *, int, int64_t, float *, int64_t,
                        int64_t, int64_t, const float *);
static const tile_fn TILES[2][7] = {{0, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6},
                                    {0, tile16_1, tile16_2, tile16_3, tile16_4, tile16_5, tile16_6}};


/* AVX-512 (where the CPU has it), for 1-12 rows: a pair of panels is one 512-bit register and a
 * tile of up to 12 rows x 16 outputs fits the 32 registers, so 7-12 rows are one tile (one pass
 * over each weight, its memory traffic overlapping the arithmetic) instead of two 6-row tiles; 16 rows
 * as one tile were slower than three, so not used there. 1-6 rows take these tiles too (half the
 * instructions of the AVX2 tile), faster where the 512-bit units are full width (docs/performance.md,
 * "The kernels' choices, measured"). Every output is still one accumulator updated by fma in k order:
 * the same bits as the AVX2 tiles. */
#define WIDE 12
#define A512 __attribute__((target("avx512f")))
/* set with has_avx512(), before the tiles' first use */
static int prefetch_l2 = PREFETCH512_L2 < 0 ? 0 : PREFETCH512_L2;
static inline __attribute__((always_inline)) A512 __m512 loadw16(const void *p, int64_t i, const int half) {
    return half ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)((const uint16_t *)p + i)))
                : _mm512_load_ps((const float *)p + i);
}
static inline __attribute__((always_inline)) A512 void tile512(const float *x, int64_t ldx, const int R,
        const void *p, const int half, int two, int64_t k, float *y, int64_t ldy, int64_t n0, int64_t n,
        const float *bias) {
    __m512 c[WIDE];
    for (int r = 0; r < R; r++) c[r] = _mm512_setzero_ps();
    const int64_t esize = half ? 2 : 4, ahead = PREFETCH512 * 4;
    const int l2 = prefetch_l2;
    for (int64_t kk = 0; kk < k; kk++) {
        if (l2) /* a loop-invariant test: the compiler makes two loops of this one */
            _mm_prefetch((const char *)p + kk * 2 * NB * esize + ahead, _MM_HINT_T1);
        else
            _mm_prefetch((const char *)p + kk * 2 * NB * esize + ahead, _MM_HINT_T0);
        __m512 w = loadw16(p, kk * 2 * NB, half);
        for (int r = 0; r < R; r++) c[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + kk]), w, c[r]);
    }
    int cols = two ? 16 : 8;
    for (int r = 0; r < R; r++) {
        float buf[16];
        _mm512_storeu_ps(buf, c[r]);
        float *yr = y + r * ldy;
        for (int j = 0; j < cols && n0 + j < n; j++) yr[n0 + j] = bias ? buf[j] + bias[n0 + j] : buf[j];
    }
}
#define TILE512_FN(R)                                                                                  \
    static A512 void tile512_##R(const float *x, int64_t ldx, const void *p, int two, int64_t k,      \
                                 float *y, int64_t ldy, int64_t n0, int64_t n, const float *bias) {   \
        tile512(x, ldx, R, p, 0, two, k, y, ldy, n0, n, bias);                                         \
    }                                                                                                   \
    static A512 void tile512h_##R(const float *x, int64_t ldx, const void *p, int two, int64_t k,     \
                                  float *y, int64_t ldy, int64_t n0, int64_t n, const float *bias) {  \
        tile512(x, ldx, R, p, 1, two, k, y, ldy, n0, n, bias);                                         \
    }
TILE512_FN(1) TILE512_FN(2) TILE512_FN(3) TILE512_FN(4) TILE512_FN(5) TILE512_FN(6)
TILE512_FN(7) TILE512_FN(8) TILE512_FN(9) TILE512_FN(10) TILE512_FN(11) TILE512_FN(12)
static const tile_fn TILES512[2][WIDE + 1] = {
    {0, tile512_1, tile512_2, tile512_3, tile512_4, tile512_5, tile512_6, tile512_7, tile512_8, tile512_9,
     tile512_10, tile512_11, tile512_12},
    {0, tile512h_1, tile512h_2, tile512h_3, tile512h_4, tile512h_5, tile512h_6, tile512h_7, tile512h_8,
     tile512h_9, tile512h_10, tile512h_11, tile512h_12}};


/* AVX-512, from blocked_from rows (13, more than one tile holds, unless the machine's measured choice
 * says fewer: below): the rows are cut into tiles of nearly equal height (<= block_height) and each tile covers two pairs of panels (32 outputs, 2R accumulators), so even a 7-row tile
 * has 14 independent sums in flight and reads each broadcast of x once for 32 outputs. The k steps run
 * in blocks of KB: every tile prefetches its share of the next block while it computes on this one, so
 * the block is in L1 for all the tiles and each weight is streamed once for all rows. A tile's sums are kept between blocks in
 * `acc` as float32, exactly, so every output is still one accumulator updated by fma in k order from 0:
 * the same bits as the tiles above, for any row count (docs/performance.md, "No cliff past 12 rows"). */
#ifndef KB
#define KB 128 /* 64 ran the same on the Xeon, 256 10% slower at 13-16 rows */
#endif
/* Into which cache the blocked path prefetches: L1 (0) on every CPU. Its block is read again by every
 * tile, so it belongs in L1; on the Xeon, where the one-tile path prefetches into L2 (prefetch_l2),
 * L1 here was 3% faster at 8-16 rows and no prefetch 20-30% slower (docs/performance.md, "What was
 * tried"; scripts/measure_kernel_builds.py --builds BLOCK512_L2=1 BLOCK512_L2=0 --rows 8,13,16). */
#ifndef BLOCK512_L2
#define BLOCK512_L2 0
#endif
#define BLOCK_ROWS 48 /* rows sharing one pass over the weights; more rows take further passes */
static inline __attribute__((always_inline)) A512 void block512(const float *x, int64_t ldx, const int R,
        const int NP, const char *p, int64_t pstride, const int half, int64_t k0, int64_t k1, float *acc,
        const int first, const char *next, int64_t nstep) {
    __m512 c0[WIDE], c1[WIDE];
    for (int r = 0; r < R; r++) {
        c0[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * 32);
        if (NP > 1) c1[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * 32 + 16);
    }
    const int64_t esize = half ? 2 : 4;
    for (int64_t kk = k0; kk < k1; kk++) {
        /* every tile prefetches its share of the next block (`next`, one 64-byte line of each pair per
         * `nstep` bytes of its own progress), so the memory streams while all the tiles compute */
        const char *f = next + ((kk - k0) * nstep >> 6 << 6);
        if (BLOCK512_L2) {
            _mm_prefetch(f, _MM_HINT_T1);
            if (NP > 1) _mm_prefetch(f + pstride, _MM_HINT_T1);
        } else {
            _mm_prefetch(f, _MM_HINT_T0);
            if (NP > 1) _mm_prefetch(f + pstride, _MM_HINT_T0);
        }
        __m512 w0 = loadw16(p, kk * 2 * NB, half);
        if (NP > 1) {
            __m512 w1 = loadw16(p + pstride, kk * 2 * NB, half);
            for (int r = 0; r < R; r++) {
                __m512 b = _mm512_set1_ps(x[r * ldx + kk]);
                c0[r] = _mm512_fmadd_ps(b, w0, c0[r]);
                c1[r] = _mm512_fmadd_ps(b, w1, c1[r]);
            }
        } else {
            for (int r = 0; r < R; r++) c0[r] = _mm512_fmadd_ps(_mm512_set1_ps(x[r * ldx + kk]), w0, c0[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(acc + r * 32, c0[r]);
        if (NP > 1) _mm512_storeu_ps(acc + r * 32 + 16, c1[r]);
    }
}
typedef void (*block_fn)(const float *, int64_t, const char *, int64_t, int64_t, int64_t, float *, int, const char *,
                         int64_t);
#define BLOCK512_FN(R)                                                                                         \
    static A512 void blk_##R##_1(const float *x, int64_t ldx, const char *p, int64_t ps, int64_t k0, int64_t k1, \
                                 float *acc, int first, const char *nx, int64_t ns) { block512(x, ldx, R, 1, p, ps, 0, k0, k1, acc, first, nx, ns); } \
    static A512 void blk_##R##_2(const float *x, int64_t ldx, const char *p, int64_t ps, int64_t k0, int64_t k1, \
                                 float *acc, int first, const char *nx, int64_t ns) { block512(x, ldx, R, 2, p, ps, 0, k0, k1, acc, first, nx, ns); } \
    static A512 void blkh_##R##_1(const float *x, int64_t ldx, const char *p, int64_t ps, int64_t k0, int64_t k1, \
                                  float *acc, int first, const char *nx, int64_t ns) { block512(x, ldx, R, 1, p, ps, 1, k0, k1, acc, first, nx, ns); } \
    static A512 void blkh_##R##_2(const float *x, int64_t ldx, const char *p, int64_t ps, int64_t k0, int64_t k1, \
                                  float *acc, int first, const char *nx, int64_t ns) { block512(x, ldx, R, 2, p, ps, 1, k0, k1, acc, first, nx, ns); }
BLOCK512_FN(1) BLOCK512_FN(2) BLOCK512_FN(3) BLOCK512_FN(4) BLOCK512_FN(5) BLOCK512_FN(6)
BLOCK512_FN(7) BLOCK512_FN(8) BLOCK512_FN(9) BLOCK512_FN(10) BLOCK512_FN(11) BLOCK512_FN(12)
#define BLK_ROW(R) {{blk_##R##_1, blk_##R##_2}, {blkh_##R##_1, blkh_##R##_2}}
static const block_fn BLOCKS512[WIDE + 1][2][2] = {
    {{0, 0}, {0, 0}}, BLK_ROW(1), BLK_ROW(2), BLK_ROW(3), BLK_ROW(4), BLK_ROW(5), BLK_ROW(6),
    BLK_ROW(7), BLK_ROW(8), BLK_ROW(9), BLK_ROW(10), BLK_ROW(11), BLK_ROW(12)};

/* Where AVX-512 products switch to product_blocked, and its tallest tile: from `blocked_from` rows
 * (2..WIDE + 1) a product takes product_blocked, cut into tiles of at most `block_height` rows (1..WIDE);
 * below, one tile of up to WIDE rows per pair of panels. Every output gets the same bits either way
 * (one accumulator, fma in k order from 0), so the choice is speed alone, and it differs by CPU: on a
 * Zen 5 one 12-row tile was the fastest (docs/performance.md, "No cliff past 12 rows"), on a 2-vCPU
 * Xeon 9-12 rows ran 5-10% faster blocked in tiles of 6-8. Chosen per machine on first use
 * (ftuning.py); until then the compiled defaults below. */
#ifndef BLOCKED_FROM
#define BLOCKED_FROM (WIDE + 1)
#endif
static int blocked_from = BLOCKED_FROM, block_height = WIDE;

/* -> 0, or -1 for a value out of range (nothing set then). */
int smallgemm_set_blocking(int from, int height) {
    if (from < 2 || from > WIDE + 1 || height < 1 || height > WIDE) return -1;
    blocked_from = from;
    block_height = height;
    return 0;
}

/* out[0..1] = the blocking in use; -> 1 where it applies (the CPU has AVX-512), else 0 */
int smallgemm_get_blocking(int *out) {
    out[0] = blocked_from;
    out[1] = block_height;
    return __builtin_cpu_supports("avx512f") ? 1 : 0;
}

/* m >= blocked_from rows on AVX-512: pairs of pairs of panels shared out to the threads, BLOCK_ROWS rows a pass. */
static A512 void product_blocked(const float *x, int64_t m, int64_t ldx, const void *p, const int half, int64_t n,
                                 int64_t k, const float *bias, float *y, int64_t ldy, int nthreads) {
    const int64_t esize = half ? 2 : 4, pstride = k * 2 * NB * esize;
    const int64_t pairs = (n + 2 * NB - 1) / (2 * NB), duos = (pairs + 1) / 2;
    int64_t chunk = duos / (16 * (int64_t)(nthreads > 0 ? nthreads : 1));
    if (chunk < 1) chunk = 1;
    #pragma omp parallel for schedule(guided, chunk) num_threads(nthreads) if (nthreads > 1 && duos > 1)
    for (int64_t du = 0; du < duos; du++) {
        float acc[BLOCK_ROWS * 32] __attribute__((aligned(64)));
        const int np = 2 * du + 1 < pairs ? 2 : 1;
        const char *pp = (const char *)p + 2 * du * pstride;
        for (int64_t m0 = 0; m0 < m; m0 += BLOCK_ROWS) {
            const int64_t mb = m - m0 < BLOCK_ROWS ? m - m0 : BLOCK_ROWS, tiles = (mb + block_height - 1) / block_height;
            for (int64_t k0 = 0; k0 < k; k0 += KB) {
                const int64_t k1 = k0 + KB < k ? k0 + KB : k, line = 2 * NB * esize; /* bytes of one k step */
                /* the next block's bytes: the rest of this pair after k1, or the next duo's first block
                 * (the same thread's next duo, usually: the chunks are runs of consecutive duos) */
                const char *next = k1 < k ? pp + k1 * line : pp + 2 * pstride;
                const int64_t span = (k1 < k ? (k - k1 < KB ? k - k1 : KB) : KB) * line;
                for (int64_t t = 0, r0 = 0; t < tiles; t++) {
                    const int R = (int)((mb - r0 + (tiles - t) - 1) / (tiles - t)); /* nearly equal heights */
                    /* tile t prefetches the t-th of `tiles` equal parts of `span`, spread over its k steps */
                    const int64_t part = span / tiles, step = (part + (k1 - k0) - 1) / (k1 - k0);
                    BLOCKS512[R][half][np - 1](x + (m0 + r0) * ldx, ldx, pp, pstride, k0, k1, acc + r0 * 32,
                                               k0 == 0, next + t * part, step);
                    r0 += R;
                }
            }
            for (int64_t r = 0; r < mb; r++) {
                float *yr = y + (m0 + r) * ldy;
                for (int j = 0; j < 16 * np; j++) {
                    const int64_t o = 2 * du * 2 * NB + j;
                    if (o < n) yr[o] = bias ? acc[r * 32 + j] + bias[o] : acc[r * 32 + j];
                }
            }
        }
    }
}


static int has_avx512(void) {
    static int known = -1;
    if (known < 0) {
        known = __builtin_cpu_supports("avx512f") ? 1 : 0;
        if (PREFETCH512_L2 < 0) prefetch_l2 = __builtin_cpu_is("intel") ? 1 : 0;
    }
    return known;
}

/* x: [M,K] rows ldx apart; p: packed weight (pack_weight, or pack_weight_f16 with half = 1);
 * y: [M,N] rows ldy apart; bias: [N] or NULL. */
static void product(const float *x, int64_t m, int64_t ldx, const void *p, const int half, int64_t n, int64_t k,
                    const float *bias, float *y, int64_t ldy, int nthreads) {
    if (m >= blocked_from && has_avx512()) {
        product_blocked(x, m, ldx, p, half, n, k, bias, y, ldy, nthreads);
        return;
    }
    const int64_t esize = half ? 2 : 4;
    const int wide = m <= WIDE && has_avx512();
    int64_t panels = (n + NB - 1) / NB, pairs = (panels + 1) / 2;
    /* Guided chunks (large first, none smaller than ~1/16 of a thread's share): when another
     * process takes a core (a browser on a 2-core machine), the running thread takes over the
     * work instead of waiting at the barrier, and most of each weight is still read as one long
     * stream per thread; faster than equal chunks of 1/16 (docs/performance.md, "The kernels' choices,
     * measured"). */
    int64_t chunk = pairs / (16 * (int64_t)(nthreads > 0 ? nthreads : 1));
    if (chunk < 1) chunk = 1;
    #pragma omp parallel for schedule(guided, chunk) num_threads(nthreads) if (nthreads > 1 && pairs > 1)
    for (int64_t pr = 0; pr < pairs; pr++) {
        int64_t q = 2 * pr; /* the pair's first panel */
        const char *pp = (const char *)p + pr * k * 2 * NB * esize;
        int two = q + 1 < panels;
        /* tiles of nearly equal height: 8 rows run as 4+4, not 6+2 (AVX2), or as one (AVX-512) */
        const int maxr = wide ? WIDE : 6;
        int64_t tiles = (m + maxr - 1) / maxr, m0 = 0;
        for (int64_t t = 0; t < tiles; t++) {
            int R = (int)((m - m0 + (tiles - t) - 1) / (tiles - t));
            tile_fn f = wide ? TILES512[half][R] : TILES[half][R];
            f(x + m0 * ldx, ldx, pp, two, k, y + m0 * ldy, ldy, q * NB, n, bias);
            m0 += R;
        }
    }
}

void smallgemm(const float *x, int64_t m, int64_t ldx, const float *p, int64_t n, int64_t k,
               const float *bias, float *y, int64_t ldy, int nthreads) {
    product(x, m, ldx, p, 0, n, k, bias, y, ldy, nthreads);
}

void smallgemm_f16(const float *x, int64_t m, int64_t ldx, const uint16_t *p, int64_t n, int64_t k,
                   const float *bias, float *y, int64_t ldy, int nthreads) {
    product(x, m, ldx, p, 1, n, k, bias, y, ldy, nthreads);
}

/* Streaming read of n floats with all threads: the bandwidth a weight-bound step can reach. */
float stream_read(const float *a, int64_t n, int nthreads) {
    float total = 0.0f;
    #pragma omp parallel num_threads(nthreads) reduction(+ : total)
    {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(),
               s3 = _mm256_setzero_ps();
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < n / 32; i++) {
            const float *q = a + 32 * i;
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(q));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(q + 8));
            s2 = _mm256_add_ps(s2, _mm256_loadu_ps(q + 16));
            s3 = _mm256_add_ps(s3, _mm256_loadu_ps(q + 24));
        }
        float buf[8];
        _mm256_storeu_ps(buf, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        for (int j = 0; j < 8; j++) total += buf[j];
    }
    return total;
}

