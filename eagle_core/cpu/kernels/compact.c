/* A KV cache compacted to the accepted path, every layer in one call.
 *
 * After a verification the target's cache holds the context, then one entry per tree node; only
 * the accepted path's entries stay, moved down to follow the context. torch does that per layer
 * and per keys / values (an index_select and a copy into a slice: 60 pairs of calls for a 30-layer
 * model) for a few rows of a few hundred bytes each (its cost: docs/performance.md, "The kernels'
 * choices, measured").
 *
 * bufs[b] is one layer's keys or values for batch 1: `heads[b]` heads, head h's row t at
 * bufs[b] + h * head_stride[b] + t * row_stride[b] (bytes), `row_bytes[b]` bytes a row.
 * For j = 0 .. m-1, row context + j <- row context + src[j], where src[j] >= j (true of a path through
 * a tree listed parents first; the caller checks it), so going up in j never overwrites a row still
 * to be read; a row is never copied onto itself.
 */
#include <stdint.h>
#include <string.h>

void move_rows(char **bufs, const int64_t *heads, const int64_t *head_stride, const int64_t *row_stride,
               const int64_t *row_bytes, int64_t nbufs, int64_t context, const int64_t *src, int64_t m) {
    for (int64_t b = 0; b < nbufs; b++)
        for (int64_t h = 0; h < heads[b]; h++) {
            char *base = bufs[b] + h * head_stride[b] + context * row_stride[b];
            for (int64_t j = 0; j < m; j++)
                if (src[j] != j) memcpy(base + j * row_stride[b], base + src[j] * row_stride[b], (size_t)row_bytes[b]);
        }
}
