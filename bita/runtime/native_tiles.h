/* What native_linear.c's dense tiles and native_blocks.c's GGUF blocks share: a tile of TILE outputs swept in
 * parts of SPAN vectors, rows in blocks as even as can be, each sweep's epilogue (bias, residual, rounding), the
 * prefetch distances and the thread's panel of x. */
#ifndef BITA_NATIVE_TILES_H
#define BITA_NATIVE_TILES_H
#include <stdlib.h>
#include "native_simd.h"

#define TILE 32
#define VECS (TILE / LANES)
#define SPAN 2              /* vectors of outputs a sweep keeps per row: 32 outputs on AVX-512, 16 on AVX2 */
#define PARTS (VECS / SPAN) /* sweeps a tile takes per block of rows */
#define MAX_ROWS 12         /* the most rows a sweep function is specialised for (ROW_CASES) */
#if defined(__AVX512F__)
#define ROWS 12  /* rows a sweep takes: 12 x 2 sums, 4 weight vectors and broadcasts fit AVX-512's 32 registers */
#else
#define ROWS 5   /* 5 x 2 sums, 4 weight vectors and 2 broadcasts fit AVX2's 16 */
#endif
#define PREFETCH 4096      /* bytes ahead of a sweep's reads that it prefetches into L1 (1 and 2 KB were slower) */
#define PREFETCH_L2 32768  /* and into L2: 8-14 % off 8-16-row bf16 products on a Zen 4, 4-19 % in fp32 (16 KB: less;
                            * 64 KB, or into L3: the same) */

/* A sweep's sums acc [rows][span] (+ bias) to y's rows (row stride ldy), outputs c0 = part * span * LANES on of the
 * tile's first width; with a residual (y's shape), y = residual + the product, the product rounded to the dtype
 * first (as torch adds them). EPILOGUE: span SPAN. */
#define EPILOGUE(type, S) EPILOGUE_OF(type, S, SPAN)
#define EPILOGUE_OF(type, S, span)                                                                                   \
    for (int i = 0; i < rows; i++) {                                                                                 \
        type *row = y + (size_t)i * ldy;                                                                             \
        const type *add = residual ? residual + (size_t)i * ldy : 0;                                                 \
        for (int v = 0; v < (span); v++) {                                                                           \
            const int c = (part * (span) + v) * LANES;                                                               \
            vec sum = bias ? vadd(acc[i][v], vload(bias + c)) : acc[i][v];                                           \
            if (c + LANES <= width) {                                                                                \
                vstore_##S(row + c, add ? vadd(vround_##S(sum), vload_##S(add + c)) : sum);                          \
                continue;                                                                                            \
            }                                                                                                        \
            float lanes[LANES];                                                                                      \
            vstore(lanes, sum);                                                                                      \
            for (int j = 0; j < LANES && c + j < width; j++) {                                                       \
                float value = add ? round_##S(lanes[j]) + load_##S(add + c + j) : lanes[j];                          \
                store_##S(row + c + j, value);                                                                       \
            }                                                                                                        \
        }                                                                                                            \
    }

/* the two cache lines PREFETCH bytes past p into L1, and those PREFETCH_L2 past it into L2 (prefetcht1) (a macro: gcc
 * 12 dropped _mm_prefetch inside an inline function) */
#define prefetch(p)                                                                                                  \
    (__builtin_prefetch((const char *)(p) + PREFETCH), __builtin_prefetch((const char *)(p) + PREFETCH + 64),        \
     __builtin_prefetch((const char *)(p) + PREFETCH_L2, 0, 2),                                                      \
     __builtin_prefetch((const char *)(p) + PREFETCH_L2 + 64, 0, 2))

/* The calling thread's scratch buffer ``slot`` (0: the panel LINEAR fills; 1: a pass's rows as 8-bit integers,
 * native_blocks_q8.c) of at least size 4-byte elements (kept between passes; NULL where memory runs out). */
#define SCRATCH_SLOTS 2
static inline void *scratch_of(int slot, size_t size) {
    static _Thread_local void *buffers[SCRATCH_SLOTS];
    static _Thread_local size_t capacity[SCRATCH_SLOTS];
    if (size > capacity[slot]) {
        void *grown = malloc(size * 4);
        if (!grown) return 0;
        free(buffers[slot]);
        buffers[slot] = grown;
        capacity[slot] = size;
    }
    return buffers[slot];
}
static inline void *panel_of(size_t size) { return scratch_of(0, size); }

/* y's count elements NaN (store_<out>): what a product writes where it has no memory for its scratch, never a
 * wrong number */
#define FILL_NAN(out, y, count) for (size_t i = 0; i < (count); i++) store_##out((y) + i, __builtin_nanf(""))

/* Block b of M rows split into blocks of at most ROWS, as even as can be: its first row and its row count. */
static inline void block_of(int b, int M, int blocks, int *m0, int *rows) {
    int base = M / blocks, extra = M % blocks;
    *m0 = b * base + (b < extra ? b : extra);
    *rows = base + (b < extra);
}

/* The panel's element k of row m (m0 + i): x widened to float (0 past K). */
static inline float panel_f(const float *x, int m, int k, int K) { return k < K ? x[(size_t)m * K + k] : 0.0f; }
static inline float panel_u16(const uint16_t *x, int m, int k, int K) {
    return k < K ? bf16_to_float(x[(size_t)m * K + k]) : 0.0f;
}

/* The panel's element k2 of row m for the dot kernel: x's pair k2 as it lies in memory (0 past K: a last odd k
 * pairs x[K - 1] with 0). */
static inline uint32_t panel_pair(const uint16_t *x, int m, int k2, int K) {
    const uint16_t *row = x + (size_t)m * K;
    return row[2 * k2] | (2 * k2 + 1 < K ? (uint32_t)row[2 * k2 + 1] << 16 : 0u);
}

/* tile_<dtype>_by_rows[r]: the sweep with rows fixed at r (its loops unrolled, sums in registers); panel: the
 * type of the panel's elements, weights: the packed weights', type: x's and y's */
#define ROW_CASE(name, panel, weights, type, r)                                                                      \
    static void name##_##r(const panel *xp, const weights *p, const float *b, const type *add, type *y, int K,       \
                           int ldy, int width, int part) {                                                           \
        name(xp, p, b, add, y, r, K, ldy, width, part);                                                              \
    }
#define ROW_CASES(name, panel, weights, type)                                                                   \
    ROW_CASE(name, panel, weights, type, 1) ROW_CASE(name, panel, weights, type, 2)                              \
    ROW_CASE(name, panel, weights, type, 3) ROW_CASE(name, panel, weights, type, 4)                              \
    ROW_CASE(name, panel, weights, type, 5) ROW_CASE(name, panel, weights, type, 6)                              \
    ROW_CASE(name, panel, weights, type, 7) ROW_CASE(name, panel, weights, type, 8)                              \
    ROW_CASE(name, panel, weights, type, 9) ROW_CASE(name, panel, weights, type, 10)                             \
    ROW_CASE(name, panel, weights, type, 11)                                                                     \
    ROW_CASE(name, panel, weights, type, 12)                                                                         \
    static void (*const name##_by_rows[MAX_ROWS + 1])(const panel *, const weights *, const float *, const type *,   \
                                                      type *, int, int, int, int) = {                                \
        0, name##_1, name##_2, name##_3, name##_4, name##_5, name##_6, name##_7, name##_8, name##_9, name##_10,      \
        name##_11, name##_12};
/* x [M, K] (of type ``input``: a row's depth elements where it is not ``type``), p packed, bias [N] float32 or
 * NULL, residual [M, N] or NULL (added to the product), y [M, N]; threads: OpenMP threads over the tiles. storage:
 * the function's (static or none); weights: the packed weights' type; tile_size: a tile's elements of it; depth:
 * the panel's elements per row; fill: panel_<kernel>; sweep: the most rows a sweep takes (at most MAX_ROWS); parts:
 * the sweeps a tile takes per block of rows (PARTS, or for a sweep of one vector of outputs VECS). */
#define LINEAR(storage, name, type, weights, panel, tile, tile_size, depth, fill, out, sweep, parts)                 \
    LINEAR_OF(storage, name, type, type, weights, panel, tile, tile_size, depth, fill, out, sweep, parts)
#define LINEAR_OF(storage, name, input, type, weights, panel, tile, tile_size, depth, fill, out, sweep, parts)        \
storage void name(const input *x, const weights *p, const float *bias, const type *residual, type *y, int M, int N, \
                  int K, int threads) {                                                                              \
    const int tiles = (N + TILE - 1) / TILE, blocks = (M + (sweep) - 1) / (sweep), D = (depth);                      \
    panel *xp = panel_of((size_t)M * D);                                                                             \
    if (!xp) { /* no memory for the panel: NaN, never a wrong number */                                              \
        FILL_NAN(out, y, (size_t)M * N);                                                                             \
        return;                                                                                                      \
    }                                                                                                                \
    for (int b = 0; b < blocks; b++) {                                                                               \
        int m0, rows;                                                                                                \
        block_of(b, M, blocks, &m0, &rows);                                                                          \
        panel *block = xp + (size_t)m0 * D;                                                                          \
        for (int i = 0; i < rows; i++)                                                                               \
            for (int k = 0; k < D; k++) block[(size_t)k * rows + i] = fill(x, m0 + i, k, K);                         \
    }                                                                                                                \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                                                \
    for (int t = 0; t < tiles; t++) {                                                                                \
        int n0 = t * TILE, width = N - n0 < TILE ? N - n0 : TILE;                                                    \
        float padded_bias[TILE];                                                                                     \
        const float *bt = 0;                                                                                         \
        if (bias) {                                                                                                  \
            for (int j = 0; j < TILE; j++) padded_bias[j] = j < width ? bias[n0 + j] : 0.0f;                         \
            bt = padded_bias;                                                                                        \
        }                                                                                                            \
        for (int b = 0; b < blocks; b++) {                                                                           \
            int m0, rows;                                                                                            \
            block_of(b, M, blocks, &m0, &rows);                                                                      \
            for (int part = 0; part < (parts); part++)                                                               \
                tile##_by_rows[rows](xp + (size_t)m0 * D, p + t * (tile_size), bt,                                   \
                                     residual ? residual + (size_t)m0 * N + n0 : 0, y + (size_t)m0 * N + n0, K, N,   \
                                     width, part);                                                                   \
        }                                                                                                            \
    }                                                                                                                \
}
#endif
