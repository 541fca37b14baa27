/* What bita's two row-invariant attentions (native_attention.c on vector lanes, native_amx_attention.c on AMX tiles)
 * share: the register transpose of a tile of keys, which slots a row sees in logical order, and a row's softmax
 * weights taken in that order. */
#ifndef BITA_NATIVE_ATTENTION_H
#define BITA_NATIVE_ATTENTION_H
#include <math.h>
#include "native_simd.h"

#define MAX_GROUPS 16  /* query heads per key/value head (what native.py lets through) */
#define MAX_DIM 256    /* head dimension, a multiple of LANES (likewise) */

/* LANES vectors of LANES lanes, transposed in registers: m[i] lane d <- m[d] lane i */
static inline void transpose(vec *m) {
#if LANES == 16
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {  /* per 128-bit quarter q: rows i, i+1 at columns 4q, 4q+1 and 4q+2, 4q+3 */
        t[i] = _mm512_unpacklo_ps(m[i], m[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(m[i], m[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)  /* u[i + e], quarter q: rows i .. i+3 at column 4q + e */
        for (int e = 0; e < 4; e++) {
            __m512d a = _mm512_castps_pd(t[i + e / 2]), b = _mm512_castps_pd(t[i + 2 + e / 2]);
            u[i + e] = _mm512_castpd_ps(e % 2 ? _mm512_unpackhi_pd(a, b) : _mm512_unpacklo_pd(a, b));
        }
    for (int e = 0; e < 4; e++) {  /* column 4q + e: quarter q of u[e], u[4 + e], u[8 + e], u[12 + e] */
        __m512 low0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), high0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
        __m512 low1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88);
        __m512 high1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
        m[e] = _mm512_shuffle_f32x4(low0, low1, 0x88);
        m[4 + e] = _mm512_shuffle_f32x4(high0, high1, 0x88);
        m[8 + e] = _mm512_shuffle_f32x4(low0, low1, 0xdd);
        m[12 + e] = _mm512_shuffle_f32x4(high0, high1, 0xdd);
    }
#else
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {  /* per 128-bit half h: rows i, i+1 at columns 4h, 4h+1 and 4h+2, 4h+3 */
        t[i] = _mm256_unpacklo_ps(m[i], m[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(m[i], m[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)  /* u[i + e], half h: rows i .. i+3 at column 4h + e */
        for (int e = 0; e < 4; e++) {
            __m256d a = _mm256_castps_pd(t[i + e / 2]), b = _mm256_castps_pd(t[i + 2 + e / 2]);
            u[i + e] = _mm256_castpd_ps(e % 2 ? _mm256_unpackhi_pd(a, b) : _mm256_unpacklo_pd(a, b));
        }
    for (int e = 0; e < 4; e++) {  /* column 4h + e: half h of u[e], u[4 + e] */
        m[e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x20);
        m[4 + e] = _mm256_permute2f128_ps(u[e], u[4 + e], 0x31);
    }
#endif
}

/* whether some row sees a slot of [start, end) */
static inline int seen(const uint8_t *allowed, int R, int K, int start, int end) {
    for (int r = 0; r < R; r++)
        for (int j = start; j < end; j++)
            if (allowed[(size_t)r * K + j]) return 1;
    return 0;
}

/* The slots row sees (sees [K] 0/1 bytes) in slot order into list [K]: its logical keys; *lead: how many of them are
 * slots 0, 1, ... (list[t] = t). Returns their count. */
static inline int list_visible(const uint8_t *sees, int K, int *list, int *lead) {
    int count, first = 0;
    while (first < K && sees[first]) list[first] = first, first++;
    for (int j = count = first; j < K; j++) {
        list[count] = j;
        count += sees[j] != 0;
    }
    *lead = first;
    return count;
}

/* A row's softmax weights in logical order: row [>= count rounded up to LANES] holds the row's scores by slot;
 * row[t] <- e^(score of slot list[t] - their maximum) for t < count, 0 after it up to a whole LANES. Their sum by
 * logical index t (lane t mod LANES adds in the order of t, then vsum). Returns 1 / that sum (0 where it is 0). */
static inline float weigh(float *row, const int *list, int lead, int count) {
    const int padded = (count + LANES - 1) / LANES * LANES;
    for (int t = lead; t < count; t++) row[t] = row[list[t]];  /* list[t] >= t: not overwritten */
    for (int t = count; t < padded; t++) row[t] = -INFINITY;
    vec most = vbroadcast(-INFINITY);
    for (int t = 0; t < padded; t += LANES) most = vmax(most, vload(row + t));
    float lanes[LANES], best = -INFINITY;
    vstore(lanes, most);
    for (int i = 0; i < LANES; i++) best = lanes[i] > best ? lanes[i] : best;
    vec sum = vzero(), top = vbroadcast(best);
    for (int t = 0; t < padded; t += LANES) {
        vec w = vexp(vsub(vload(row + t), top));
        vstore(row + t, w);
        sum = vadd(sum, w);
    }
    const float total = vsum(sum);
    return total > 0.0f ? 1.0f / total : 0.0f;
}

#endif
