/* What the acceptance walk reads from each row of the target's logits, in one call.
 *
 * Greedy verification needs, per tree node, the argmax of its logits (the target's choice) and,
 * for the p the app shows, the row's log-sum-exp. torch computes them as two calls (max, then
 * logsumexp, which itself makes several passes and a temporary the size of the rows); for a few
 * rows of a 49,152-token vocabulary that was a tenth of a decode step's non-product work on a 2-core
 * CPU (docs/performance.md, "The kernels' choices, measured"). Here each row is read twice while it
 * sits in the core's cache:
 *
 *   max, argmax   the largest value and its FIRST index (torch.max / argmax on ties)
 *   lse           max + log(sum_i exp(x_i - max)), the exp being vecmath.h's exp8
 *
 * A row's results depend only on that row (rows are spread over threads whole), so they do not
 * change with how many rows a call has. A row holding a NaN gets a NaN lse, and one of only -inf an
 * infinite or NaN one: the caller then falls back to torch (whose argmax is a NaN's index).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "vecmath.h"

/* Returns 1 if the row holds a NaN (exp8's clamp would hide it). */
static int row_max(const float *x, int64_t V, float *max_out, int64_t *arg_out) {
    __m256 vmax = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
    __m256i vidx = _mm256_set1_epi32(0), idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i step = _mm256_set1_epi32(8);
    int64_t i = 0;
    for (; i + 8 <= V; i += 8) { /* per lane: strictly greater replaces, so a lane keeps its first index */
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 gt = _mm256_cmp_ps(v, vmax, _CMP_GT_OQ);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        vmax = _mm256_blendv_ps(vmax, v, gt);
        vidx = _mm256_blendv_epi8(vidx, idx, _mm256_castps_si256(gt));
        idx = _mm256_add_epi32(idx, step);
    }
    float lm[8];
    int32_t li[8];
    _mm256_storeu_ps(lm, vmax);
    _mm256_storeu_si256((__m256i *)li, vidx);
    float m = -INFINITY;
    int64_t a = 0;
    for (int j = 0; j < 8; j++) /* the largest value; on ties the smallest index across lanes */
        if (lm[j] > m || (lm[j] == m && li[j] < a)) { m = lm[j]; a = li[j]; }
    if (m == -INFINITY) a = 0;
    int bad = _mm256_movemask_ps(nan) != 0;
    for (; i < V; i++) { /* the tail's indices are above every vector index: strictly greater only */
        if (x[i] > m) { m = x[i]; a = i; }
        bad |= isnan(x[i]);
    }
    *max_out = m;
    *arg_out = a;
    return bad;
}

/* log(sum_i exp(x_i - m)) over the row */
static float row_logsum(const float *x, int64_t V, float m) {
    __m256 mm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= V; i += 32) {
        s0 = _mm256_add_ps(s0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mm)));
        s1 = _mm256_add_ps(s1, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mm)));
        s2 = _mm256_add_ps(s2, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), mm)));
        s3 = _mm256_add_ps(s3, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), mm)));
    }
    for (; i + 8 <= V; i += 8) s0 = _mm256_add_ps(s0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mm)));
    float lane[8], sum = 0.0f;
    _mm256_storeu_ps(lane, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (int j = 0; j < 8; j++) sum += lane[j];
    for (; i < V; i += 8) { /* the tail, at most 7 values, through the same exp8 lanes */
        float d[8], e[8];
        int64_t n = V - i < 8 ? V - i : 8;
        for (int64_t j = 0; j < n; j++) d[j] = x[i + j] - m;
        exp8_tail(d, n, e);
        for (int64_t j = 0; j < n; j++) sum += e[j];
    }
    return logf(sum);
}

/* x: rows x V floats, row r at x + r * ld. Writes max_out[r], arg_out[r] and lse_out[r]; returns how
 * many rows got a lse that is not finite (the caller then uses torch), so nothing is read back. */
int row_stats(const float *x, int64_t rows, int64_t V, int64_t ld, float *max_out, int64_t *arg_out,
              float *lse_out, int nthreads) {
    int bad_rows = 0;
    #pragma omp parallel for schedule(static) num_threads(nthreads) if (nthreads > 1 && rows > 1) reduction(+:bad_rows)
    for (int64_t r = 0; r < rows; r++) {
        int bad = row_max(x + r * ld, V, max_out + r, arg_out + r);
        lse_out[r] = bad ? NAN : max_out[r] + row_logsum(x + r * ld, V, max_out[r]);
        bad_rows += !isfinite(lse_out[r]);
    }
    return bad_rows;
}

/* Insert value v at index i into the descending list (val, idx) of `have` <= k entries, after any
 * equal values (so on ties the smaller index, seen first, stays first); returns the new count. */
static int top_insert(float *val, int64_t *idx, int have, int k, float v, int64_t i) {
    int j = have < k ? have : k - 1;  /* the slot that opens (the last one is dropped when full) */
    while (j > 0 && val[j - 1] < v) { val[j] = val[j - 1]; idx[j] = idx[j - 1]; j--; }
    val[j] = v; idx[j] = i;
    return have < k ? have + 1 : k;
}

/* The k largest values of each row as log-softmax values, (x - max) - log(sum exp(x - max)) (the
 * order of torch.log_softmax's operations, with exp8's sum), and their indices: descending, on ties
 * the smaller index first. For the drafter, which needs only its top k per row: torch made three
 * calls (log_softmax over the whole row, topk, exp). One pass keeps the k best, comparing a vector
 * of 8 with the current k-th value and looking at single values only where one is larger; a
 * second pass sums the exponentials. Returns how many rows hold a NaN, fewer than k finite values
 * or a sum that is not finite (the caller then uses torch). k <= 64. */
int row_topk(const float *x, int64_t rows, int64_t V, int64_t ld, int k, float *val_out, int64_t *idx_out) {
    int bad_rows = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * ld;
        float *val = val_out + r * k;
        int64_t *idx = idx_out + r * k;
        int have = 0;
        float thr = -INFINITY;  /* a value enters if larger than this: the k-th once there are k */
        __m256 vthr = _mm256_set1_ps(thr), nan = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= V; i += 8) {
            __m256 v = _mm256_loadu_ps(row + i);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(v, vthr, _CMP_GT_OQ));
            if (!hit) continue;
            for (int j = 0; j < 8; j++) {
                if (row[i + j] > thr) {
                    have = top_insert(val, idx, have, k, row[i + j], i + j);
                    if (have == k) thr = val[k - 1];
                }
            }
            vthr = _mm256_set1_ps(thr);
        }
        int bad = _mm256_movemask_ps(nan) != 0;
        for (; i < V; i++) {
            bad |= isnan(row[i]);
            if (row[i] > thr) {
                have = top_insert(val, idx, have, k, row[i], i);
                if (have == k) thr = val[k - 1];
            }
        }
        if (bad || have < k) { bad_rows++; continue; }
        float m = val[0], ls = row_logsum(row, V, m);
        if (!isfinite(ls)) { bad_rows++; continue; }
        for (int j = 0; j < k; j++) val[j] = (val[j] - m) - ls;
    }
    return bad_rows;
}
