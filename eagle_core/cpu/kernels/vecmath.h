/* Vector maths shared by the CPU kernels (attention.c, attention512.c, layer.c). */
#ifndef EAGLE_VECMATH_H
#define EAGLE_VECMATH_H
#include <immintrin.h>
#include <stdint.h>

/* exp(x) for 8 lanes: x = k ln2 + r (|r| <= ln2 / 2, ln2 split in two parts so k ln2 is exact),
 * exp(r) by a degree-6 Taylor polynomial in Horner form (relative error ~2e-7 over that range), then
 * scaled by 2^k through the exponent bits. Inputs are clamped to [-87, 88] (the float range). The
 * same operations in the same order for every lane, so a value's result does not depend on its
 * neighbours (row invariance). */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(k, _mm256_set1_ps(0.693359375f)));
    r = _mm256_sub_ps(r, _mm256_mul_ps(k, _mm256_set1_ps(-2.12194440e-4f)));
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(0.5f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* exp8 of n <= 8 values from x into out (the lanes past n are padding): the same bits per value as
 * a full vector, so a value's exp does not depend on whether it sits in a vector or a tail. */
static inline void exp8_tail(const float *x, int64_t n, float *out) {
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; i++) buf[i] = x[i];
    _mm256_storeu_ps(buf, exp8(_mm256_loadu_ps(buf)));
    for (int64_t i = 0; i < n; i++) out[i] = buf[i];
}

/* a . b over d floats: 8 fma lanes, then the lanes summed ((0+1)+(2+3)) + ((4+5)+(6+7)), then the
 * tail. The attention kernels' vector paths reproduce exactly this order, so every path gives the same bits. */
static inline float dot(const float *a, const float *b, int64_t d) {
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
    float lane[8];
    _mm256_storeu_ps(lane, acc);
    float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (; j < d; j++) s += a[j] * b[j];
    return s;
}

#endif
