/* Row-invariant attention over a static KV cache: bita's native attention (native.py builds it with
 * native_linear.c and native_layer.c into one library).
 *
 * Row r sees the cache slots j < K where allowed[r, j]; those slots, in slot order, are its *logical* keys, the
 * same sequence in a one-row AR pass and in a tree pass (a tree row's ancestors sit in its slots in depth order;
 * its siblings' slots are not allowed). Everything a row computes is a function of its query and its logical keys
 * alone, summed in an order fixed by them, so a row's output does not depend on the pass's other rows nor on where
 * its keys sit, which is what greedy BiTA's identity with AR needs (bita/runtime/exact_attention.py, the same
 * promise in torch operations):
 *
 *   score    q . k x scale, one key per vector lane: float32 (and bf16 without AVX512-BF16, widened exactly)
 *            q[0] k[0], + q[1] k[1], ... + q[D-1] k[D-1], one fused multiply-add after another in the order of d;
 *            bf16 with AVX512-BF16 one vdpbf16ps per pair p of dimensions in the order of p (it adds q[2p+1] k[2p+1],
 *            then q[2p] k[2p], fused: bf16 products are exact; it reads bf16 subnormals as zero); then times scale.
 *            A function of (q, k) alone, so the pass computes it once for each slot some row sees, whichever rows;
 *   maximum  of the row's scores (exact in any order);
 *   weights  e^(score - max), vexp lane by lane; their sum by logical index t: lane t mod LANES adds its weights in
 *            the order of t, then the lanes' sum (vsum);
 *   output   the weighted values added key after key in logical order, lane by lane over d (one fused
 *            multiply-add per key), times 1 / that sum.
 * No sum crosses lanes but vsum's, once a row and head: no horizontal sum per key.
 *
 * The pass runs in three sweeps, each cut into units that write disjoint outputs (the cut never changes a sum):
 * (1) per key/value head and tile of SPAN slots that some row sees: the tile's keys, transposed in registers so
 * that a key sits in a lane, go to a small buffer (each key read once a pass), and every query row of the head's
 * group scores against them, QUERIES rows at a time, the accumulators in registers; also each row's visible slots,
 * listed in order; (2) per row and head: the scores of its logical keys gathered in logical order, then the
 * weights and 1 / their sum; (3) per key/value head, tile of its heads and of the head dimension, and part of the
 * rows (one a thread): the weighted values, SWEEP slots at a time for each of the part's rows in turn, so that a
 * value is read from memory once a pass and unit and from L1 after, each row's sums carried from sweep to sweep. */
#include <math.h>
#include <stdlib.h>
#include "native_simd.h"
#include "native_attention.h"

#define QUERIES 4      /* query rows (a row's head) a score tile takes at once */
#define CHUNKS 4       /* vectors of the head dimension a value tile takes at once */
#if LANES == 16
#define BLOCKS 3       /* blocks of LANES keys a score tile takes: 4 x 3 accumulators of AVX-512's 32 registers */
#define HEADS 4        /* heads a value tile takes: 4 x 4 accumulators */
#else
#define BLOCKS 2       /* 4 x 2 accumulators of AVX2's 16 registers */
#define HEADS 2        /* 2 x 4 accumulators */
#endif
#define SPAN (BLOCKS * LANES)  /* slots a score tile covers */
#define SWEEP 64       /* slots whose values a value tile takes for each of its rows in turn (kept in L1) */

/* A dtype's LANES values at p[i] as floats, and stored rounded (bf16: bfloat16, else float32). */
static inline vec load_any(const void *p, size_t i, int bf16) {
    return bf16 ? vload_bf16((const uint16_t *)p + i) : vload((const float *)p + i);
}
static inline void store_any(void *p, size_t i, vec v, int bf16) {
    if (bf16) vstore_bf16((uint16_t *)p + i, v);
    else vstore((float *)p + i, v);
}

/* LANES bfloat16 pairs at p as 32-bit lanes (half: LANES / 2 pairs, the other lanes zero), and a lane's pair as
 * the two floats it holds */
static inline vec load_pairs(const uint16_t *p, int half) {
#if LANES == 16
    return _mm512_castsi512_ps(half ? _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)p))
                                    : _mm512_loadu_si512(p));
#else
    return _mm256_castsi256_ps(half ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p))
                                    : _mm256_loadu_si256((const __m256i *)p));
#endif
}
static inline void split_pairs(vec pairs, vec *even, vec *odd) {
#if LANES == 16
    __m512i v = _mm512_castps_si512(pairs);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
#else
    __m256i v = _mm256_castps_si256(pairs);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
#endif
}

/* n query rows q[i] (D floats) against the SPAN keys of kt [BLOCKS][D][LANES] (key b x LANES + lane in lane):
 * s[i][key] = (q . key, its products added in the order of d) x scale. */
static inline __attribute__((always_inline)) void score_tile(const float *const *q, const float *kt, float *const *s,
                                                             int D, float scale, const int n) {
    vec acc[QUERIES][BLOCKS];
    for (int i = 0; i < n; i++) for (int b = 0; b < BLOCKS; b++) acc[i][b] = vzero();
    for (int d = 0; d < D; d++)
        for (int b = 0; b < BLOCKS; b++) {
            vec k = vload(kt + ((size_t)b * D + d) * LANES);
            for (int i = 0; i < n; i++) acc[i][b] = vfma(vbroadcast(q[i][d]), k, acc[i][b]);
        }
    for (int i = 0; i < n; i++)
        for (int b = 0; b < BLOCKS; b++) vstore(s[i] + b * LANES, vmul(acc[i][b], vbroadcast(scale)));
}

static void score_rows(const float *const *q, const float *kt, float *const *s, int D, float scale, int n) {
    switch (n) {  /* n fixed, so that the tile's loops unroll and its accumulators stay in registers */
    case 1: score_tile(q, kt, s, D, scale, 1); break;
    case 2: score_tile(q, kt, s, D, scale, 2); break;
    case 3: score_tile(q, kt, s, D, scale, 3); break;
    default: score_tile(q, kt, s, D, scale, 4); break;
    }
}

#if defined(__AVX512BF16__)
/* score_tile for bfloat16 queries q[i] and keys kt [BLOCKS][D / 2][LANES] as pairs (d = 2p, 2p + 1 in one 32-bit
 * lane): one vdpbf16ps per pair p, in the order of p, adds q[2p+1] k[2p+1], then q[2p] k[2p] to each lane (fused:
 * the products of bfloat16 values are exact; bf16 subnormals read as zero), then times scale. */
static inline __attribute__((always_inline)) void score_tile_pairs(const uint16_t *const *q, const float *kt,
                                                                   float *const *s, int D, float scale, const int n) {
    vec acc[QUERIES][BLOCKS];
    for (int i = 0; i < n; i++) for (int b = 0; b < BLOCKS; b++) acc[i][b] = vzero();
    for (int p = 0; p < D / 2; p++)
        for (int b = 0; b < BLOCKS; b++) {
            __m512bh k = (__m512bh)_mm512_castps_si512(vload(kt + ((size_t)b * D / 2 + p) * LANES));
            for (int i = 0; i < n; i++) {
                uint32_t pair;
                memcpy(&pair, q[i] + 2 * p, 4);
                acc[i][b] = _mm512_dpbf16_ps(acc[i][b], k, (__m512bh)_mm512_set1_epi32((int)pair));
            }
        }
    for (int i = 0; i < n; i++)
        for (int b = 0; b < BLOCKS; b++) vstore(s[i] + b * LANES, vmul(acc[i][b], vbroadcast(scale)));
}

static void score_rows_pairs(const uint16_t *const *q, const float *kt, float *const *s, int D, float scale, int n) {
    switch (n) {
    case 1: score_tile_pairs(q, kt, s, D, scale, 1); break;
    case 2: score_tile_pairs(q, kt, s, D, scale, 2); break;
    case 3: score_tile_pairs(q, kt, s, D, scale, 3); break;
    default: score_tile_pairs(q, kt, s, D, scale, 4); break;
    }
}
#define PAIRED 1  /* bf16 scores by vdpbf16ps on the keys' pairs */
#else
#define PAIRED 0
#endif

/* Heads h < nh of one row, chunks c < nc of the head dimension, from value (float32, or bfloat16 where bf16; each
 * slot's row D values apart, at the tile's first chunk): acc [h][c] (LANES floats each, CHUNKS to a head) += the sum
 * over t < count, in the order of t, of w[h][t] x the value of slot slots[t] (one fused multiply-add per key and
 * lane, onto acc's sums). */
static inline __attribute__((always_inline)) void value_tile(const float *const *w, const void *value, int D,
                                                             const int *slots, int count, float *acc, const int nh,
                                                             const int nc, const int bf16) {
    vec sum[HEADS][CHUNKS];
    for (int h = 0; h < nh; h++) for (int c = 0; c < nc; c++) sum[h][c] = vload(acc + (h * CHUNKS + c) * LANES);
    for (int t = 0; t < count; t++) {
        vec x[CHUNKS];
        for (int c = 0; c < nc; c++) x[c] = load_any(value, (size_t)slots[t] * D + c * LANES, bf16);
        for (int h = 0; h < nh; h++) {
            vec weight = vbroadcast(w[h][t]);
            for (int c = 0; c < nc; c++) sum[h][c] = vfma(weight, x[c], sum[h][c]);
        }
    }
    for (int h = 0; h < nh; h++) for (int c = 0; c < nc; c++) vstore(acc + (h * CHUNKS + c) * LANES, sum[h][c]);
}

#define VALUE_CASE(nh, nc) case nh * 8 + nc:                                                              \
    if (bf16) value_tile(w, value, D, slots, count, acc, nh, nc, 1);                                          \
    else value_tile(w, value, D, slots, count, acc, nh, nc, 0);                                               \
    break;
#define VALUE_CASES(nh) VALUE_CASE(nh, 1) VALUE_CASE(nh, 2) VALUE_CASE(nh, 3) VALUE_CASE(nh, 4)
static void value_rows(const float *const *w, const void *value, int D, const int *slots, int count, float *acc,
                       int nh, int nc, int bf16) {
    switch (nh * 8 + nc) {  /* nh, nc and bf16 fixed, as in score_rows */
    VALUE_CASES(1) VALUE_CASES(2)
#if HEADS == 4
    VALUE_CASES(3) VALUE_CASES(4)
#endif
    }
}

/* part i of n things cut into parts of at most most, as even as can be: [*start, *end) */
static inline int parts(int n, int most) { return (n + most - 1) / most; }
static inline void part(int n, int count, int i, int *start, int *end) {
    *start = (int)((long)i * n / count);
    *end = (int)((long)(i + 1) * n / count);
}

/* q [R, H, D], keys/values [KV, capacity, D], allowed [R, K] (0/1 bytes), out [R, H, D] in bfloat16 (bf16) or
 * float32; H = KV x groups. */
static void attend(const void *q, const void *keys, const void *values, const uint8_t *allowed, void *out, int R,
                   int H, int KV, int D, int capacity, int K, float scale, int threads, int bf16) {
    int groups = H / KV, chunks = D / LANES, tiles = (K + SPAN - 1) / SPAN, width = tiles * SPAN;
    int row_tiles = parts(R * groups, QUERIES), head_tiles = parts(groups, HEADS), chunk_tiles = parts(chunks, CHUNKS);
    int row_parts = threads < R ? threads : R > 1 ? R : 1;  /* (3) cuts the rows into one part a thread */
    size_t queries = bf16 && !PAIRED ? (size_t)R * H * D : 0, scored = (size_t)R * H * width;
    float *buffer = malloc(sizeof(float) * (queries + scored + (size_t)R * H));
    float *widened_q = buffer, *scores = widened_q + queries, *norms = scores + scored;
    const float *qf = queries ? widened_q : (const float *)q;  /* queries in float32 (for bf16 without vdpbf16ps) */
    int *slots = malloc(sizeof(int) * ((size_t)R * K + 2 * R)), *counts = slots + (size_t)R * K, *leads = counts + R;
    for (size_t i = 0; i < queries; i += LANES) vstore(widened_q + i, vload_bf16((const uint16_t *)q + i));
    _Pragma("omp parallel num_threads(threads)")
    {
        float *kt = malloc(sizeof(float) * BLOCKS * D * LANES);
        float *sums = malloc(sizeof(float) * (size_t)(R / row_parts + 1) * HEADS * CHUNKS * LANES);  /* (3)'s rows */
        int *done = malloc(sizeof(int) * (R / row_parts + 1));  /* each row's keys taken so far */
        _Pragma("omp for schedule(dynamic)")
        for (int unit = 0; unit < KV * tiles + R; unit++) {  /* (1) score tiles, then each row's visible slots */
            if (unit >= KV * tiles) {
                const int r = unit - KV * tiles;
                counts[r] = list_visible(allowed + (size_t)r * K, K, slots + (size_t)r * K, leads + r);
                continue;
            }
            int g = unit / tiles, start = unit % tiles * SPAN, end = start + SPAN < K ? start + SPAN : K;
            if (!seen(allowed, R, K, start, end)) continue;
            for (int b = 0; b < BLOCKS; b++)  /* float32 keys LANES dimensions at a time; bf16 keys LANES pairs */
                for (int c = 0; c < (bf16 ? (chunks + 1) / 2 : chunks); c++) {
                    int half = bf16 && 2 * c + 1 == chunks;  /* the last LANES / 2 pairs of an odd chunks */
                    vec m[LANES];
                    for (int i = 0; i < LANES; i++) {
                        int j = start + b * LANES + i;
                        size_t at = ((size_t)g * capacity + j) * D + c * LANES * (1 + bf16);
                        m[i] = j >= end ? vzero() : bf16 ? load_pairs((const uint16_t *)keys + at, half)
                                                         : vload((const float *)keys + at);
                    }
                    transpose(m);
                    for (int d = 0; d < (half ? LANES / 2 : LANES); d++) {
                        if (!bf16 || PAIRED) {  /* as loaded: dimension, or pair, c x LANES + d */
                            vstore(kt + ((size_t)b * D / (1 + bf16) + c * LANES + d) * LANES, m[d]);
                            continue;
                        }
                        vec even, odd;  /* bf16 widened: dimensions 2 (c x LANES + d) and the next */
                        split_pairs(m[d], &even, &odd);
                        vstore(kt + ((size_t)b * D + 2 * (c * LANES + d)) * LANES, even);
                        vstore(kt + ((size_t)b * D + 2 * (c * LANES + d) + 1) * LANES, odd);
                    }
                }
            for (int tile = 0; tile < row_tiles; tile++) {
                int first, last;
                part(R * groups, row_tiles, tile, &first, &last);
                size_t head[QUERIES];  /* query rows i of the group: row i / groups, head g x groups + i % groups */
                float *into[QUERIES];
                for (int i = first; i < last; i++) {
                    head[i - first] = (size_t)(i / groups) * H + g * groups + i % groups;
                    into[i - first] = scores + head[i - first] * width + start;
                }
#if PAIRED
                if (bf16) {
                    const uint16_t *pairs[QUERIES];
                    for (int i = 0; i < last - first; i++) pairs[i] = (const uint16_t *)q + head[i] * D;
                    score_rows_pairs(pairs, kt, into, D, scale, last - first);
                    continue;
                }
#endif
                const float *rows[QUERIES];
                for (int i = 0; i < last - first; i++) rows[i] = qf + head[i] * D;
                score_rows(rows, kt, into, D, scale, last - first);
            }
        }
        _Pragma("omp for schedule(dynamic)")
        for (int head = 0; head < R * H; head++) {  /* (2) weights in logical order, and 1 / their sum */
            const int r = head / H;
            norms[head] = weigh(scores + (size_t)head * width, slots + (size_t)r * K, leads[r], counts[r]);
        }
        _Pragma("omp for schedule(dynamic)")
        for (int unit = 0; unit < KV * head_tiles * chunk_tiles * row_parts; unit++) {  /* (3) weighted values */
            int g = unit / (head_tiles * chunk_tiles * row_parts), first, last, from, to, top, bottom;
            part(groups, head_tiles, unit / (chunk_tiles * row_parts) % head_tiles, &first, &last);
            part(chunks, chunk_tiles, unit / row_parts % chunk_tiles, &from, &to);
            part(R, row_parts, unit % row_parts, &top, &bottom);
            size_t offset = (size_t)g * capacity * D + from * LANES;  /* the tile's first chunk of slot 0 */
            const void *value = bf16 ? (const void *)((const uint16_t *)values + offset)
                                     : (const void *)((const float *)values + offset);
            memset(done, 0, sizeof(int) * (bottom - top));
            memset(sums, 0, sizeof(float) * (bottom - top) * HEADS * CHUNKS * LANES);
            for (int start = 0; start < K; start += SWEEP)  /* SWEEP slots at a time, for each row in turn */
                for (int r = top; r < bottom; r++) {
                    const int *list = slots + (size_t)r * K;
                    int t = done[r - top], end = t;
                    while (end < counts[r] && list[end] < start + SWEEP) end++;
                    const float *w[HEADS];
                    for (int h = first; h < last; h++)
                        w[h - first] = scores + ((size_t)r * H + g * groups + h) * width + t;
                    value_rows(w, value, D, list + t, end - t, sums + (size_t)(r - top) * HEADS * CHUNKS * LANES,
                               last - first, to - from, bf16);
                    done[r - top] = end;
                }
            for (int r = top; r < bottom; r++)
                for (int h = first; h < last; h++) {
                    size_t head = (size_t)r * H + g * groups + h;
                    const float *acc = sums + ((size_t)(r - top) * HEADS + h - first) * CHUNKS * LANES;
                    for (int c = from; c < to; c++)
                        store_any(out, head * D + c * LANES, vmul(vload(acc + (c - from) * LANES), vbroadcast(norms[head])),
                                  bf16);
                }
        }
        free(kt);
        free(sums);
        free(done);
    }
    free(buffer);
    free(slots);
}

extern int bita_amx_granted;  /* native_amx.c: Linux granted this process the tiles (asked as the library loads) */
void bita_amx_attend_bf16(const uint16_t *, const uint16_t *, const uint16_t *, const uint8_t *, uint16_t *, int, int,
                          int, int, int, int, float, int) __attribute__((weak));  /* where AMX-BF16 is compiled in */

/* Whether bf16 attention with heads of dimension D runs on the AMX tiles: where this library has them and the process
 * may use them (native_amx_attention.c; a head dimension that is a multiple of 32), else on vector lanes; one kernel
 * for every pass of a process. */
int bita_attention_on_tiles(int D) { return bita_amx_attend_bf16 && bita_amx_granted && D % 32 == 0; }

void bita_attend_bf16(const uint16_t *q, const uint16_t *keys, const uint16_t *values, const uint8_t *allowed,
                      uint16_t *out, int R, int H, int KV, int D, int capacity, int K, float scale, int threads) {
    if (bita_attention_on_tiles(D))
        bita_amx_attend_bf16(q, keys, values, allowed, out, R, H, KV, D, capacity, K, scale, threads);
    else
        attend(q, keys, values, allowed, out, R, H, KV, D, capacity, K, scale, threads, 1);
}

void bita_attend_f32(const float *q, const float *keys, const float *values, const uint8_t *allowed, float *out,
                     int R, int H, int KV, int D, int capacity, int K, float scale, int threads) {
    attend(q, keys, values, allowed, out, R, H, KV, D, capacity, K, scale, threads, 0);
}

int bita_attention_limits(int *groups, int *dim) { *groups = MAX_GROUPS; *dim = MAX_DIM; return LANES; }
