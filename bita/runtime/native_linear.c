/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) for a frozen W, at the memory's pace for a few rows and near the FMA
 * units' pace for many: bita's native kernel path (native.py compiles this file once per machine with
 * -march=native and picks the SIMD code below).
 *
 * W is packed once into tiles of TILE = 32 outputs, each tile one contiguous stream: in bfloat16 [K/2][32][2]
 * (pair k of every output), in float32 [K][32]; N and K are padded with zero weights. A tile's 32 sums sit in
 * vector lanes, one lane an output, and each output accumulates its products in the order of k, in float32, one
 * fused multiply-add a product (bfloat16 widened to float32 exactly: a bf16 product is exact in float32, so each
 * step rounds once, as vdpbf16ps does; a pair is taken odd k first, then even, vdpbf16ps's order, which gives its
 * results bitwise wherever no input or partial sum is subnormal), whatever M is and wherever its row sits: a row's
 * result is the same in a pass of one row and in a pass of many (row-invariant by construction; the kernel plan
 * checks it). No sum crosses lanes. Outputs round to bfloat16 to nearest even, lane by lane.
 *
 * Why float32 FMAs, and vdpbf16ps beside them (tile_dot, the plan's "dot" kernel, where the CPU has AVX512-BF16): on
 * Intel's Sapphire/Emerald Rapids vdpbf16ps (32 products) issues one per two cycles where two 16-product FMAs issue
 * each cycle, so widened FMAs do a row's arithmetic in half the time (plus a shift and an AND a pair and 16 outputs,
 * shared by the sweep's rows); on AMD's Zen 4 each issues once a cycle, so vdpbf16ps does it in half the time of
 * the FMAs. The kernel plan times both; a one-row pass is bound by memory either way.
 *
 * A pass first copies x into a panel, a block of rows at a time, k-major ([k][rows] float32: bf16 widened, K padded
 * to the packing's depth), so that a sweep broadcasts every row's x[k] from one pointer at fixed offsets (reading
 * x's rows through 12 pointers spilled them to the stack: a load more per row and k). Rows are split into blocks
 * of at most ROWS, as even as can be (16 rows: 8 + 8, not 12 + 4, whose 4-row sweep had too few sums in flight to
 * hide the FMA's latency); each block sweeps a tile (on AVX2 each half of it, 16 outputs: its 16 registers hold
 * ROWS x 2 sums, 4 weight vectors and 2 broadcasts) with its sums in registers, the tile's weights read from
 * memory once a pass (prefetched PREFETCH bytes ahead into L1, PREFETCH_L2 into L2) and from cache by the later
 * blocks. */
#include <stdlib.h>
#include "native_simd.h"

#define TILE 32
#define VECS (TILE / LANES)
#define SPAN 2              /* vectors of outputs a sweep keeps per row: 32 outputs on AVX-512, 16 on AVX2 */
#define PARTS (VECS / SPAN) /* sweeps a tile takes per block of rows */
#define MAX_ROWS 12         /* the most rows a sweep function is specialised for (the ROW_CASES below) */
#if defined(__AVX512F__)
#define ROWS 12  /* rows a sweep takes: 12 x 2 sums, 4 weight vectors and broadcasts fit AVX-512's 32 registers */
#else
#define ROWS 5   /* 5 x 2 sums, 4 weight vectors and 2 broadcasts fit AVX2's 16 */
#endif
#define PREFETCH 4096      /* bytes ahead of a sweep's reads that it prefetches into L1 (1 and 2 KB were slower) */
#define PREFETCH_L2 32768  /* and into L2: 8-14 % off 8-16-row bf16 products on a Zen 4, 4-19 % in fp32 (16 KB: less;
                            * 64 KB, or into L3: the same) */

int bita_tile(void) { return TILE; }

/* w [N, K] -> p [ceil(N / TILE)][ceil(K / 2)][TILE][2] (bf16) or [ceil(N / TILE)][K][TILE] (f32), zero-padded. */
void bita_pack_bf16(const uint16_t *w, uint16_t *p, int N, int K) {
    int tiles = (N + TILE - 1) / TILE, pairs = (K + 1) / 2;
    memset(p, 0, (size_t)tiles * pairs * TILE * 2 * sizeof(uint16_t));
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            p[(((size_t)(n / TILE) * pairs + k / 2) * TILE + n % TILE) * 2 + k % 2] = w[(size_t)n * K + k];
}

void bita_pack_f32(const float *w, float *p, int N, int K) {
    int tiles = (N + TILE - 1) / TILE;
    memset(p, 0, (size_t)tiles * K * TILE * sizeof(float));
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            p[((size_t)(n / TILE) * K + k) * TILE + n % TILE] = w[(size_t)n * K + k];
}

/* A sweep's sums acc [rows][SPAN] (+ bias) to y's rows (row stride ldy), outputs c0 = part * SPAN * LANES on of the
 * tile's first width; with a residual (y's shape), y = residual + the product, the product rounded to the dtype
 * first (as torch adds them). */
#define EPILOGUE(type, S)                                                                                        \
    for (int i = 0; i < rows; i++) {                                                                             \
        type *row = y + (size_t)i * ldy;                                                                         \
        const type *add = residual ? residual + (size_t)i * ldy : 0;                                             \
        for (int v = 0; v < SPAN; v++) {                                                                         \
            const int c = (part * SPAN + v) * LANES;                                                             \
            vec sum = bias ? vadd(acc[i][v], vload(bias + c)) : acc[i][v];                                       \
            if (c + LANES <= width) {                                                                            \
                vstore_##S(row + c, add ? vadd(vround_##S(sum), vload_##S(add + c)) : sum);                      \
                continue;                                                                                        \
            }                                                                                                    \
            float lanes[LANES];                                                                                  \
            vstore(lanes, sum);                                                                                  \
            for (int j = 0; j < LANES && c + j < width; j++) {                                                   \
                float value = add ? round_##S(lanes[j]) + load_##S(add + c + j) : lanes[j];                      \
                store_##S(row + c + j, value);                                                                   \
            }                                                                                                    \
        }                                                                                                        \
    }

/* the two cache lines PREFETCH bytes past p into L1, and those PREFETCH_L2 past it into L2 (prefetcht1) (a macro: gcc
 * 12 dropped _mm_prefetch inside an inline function) */
#define prefetch(p)                                                                                              \
    (__builtin_prefetch((const char *)(p) + PREFETCH), __builtin_prefetch((const char *)(p) + PREFETCH + 64),    \
     __builtin_prefetch((const char *)(p) + PREFETCH_L2, 0, 2),                                                  \
     __builtin_prefetch((const char *)(p) + PREFETCH_L2 + 64, 0, 2))

/* One part of a tile against rows rows (rows <= ROWS) of the panel xp [K][rows]: y [rows][width] = x . tile + bias. */
static inline __attribute__((always_inline)) void tile_f32(const float *xp, const float *p, const float *bias,
                                                           const float *residual, float *y, const int rows, int K,
                                                           int ldy, int width, int part) {
    vec acc[MAX_ROWS][SPAN];
    for (int i = 0; i < rows; i++) for (int v = 0; v < SPAN; v++) acc[i][v] = vzero();
    const float *pk = p + part * SPAN * LANES;
    for (int k = 0; k < K; k++, pk += TILE, xp += rows) {
        prefetch(pk);
        const vec w0 = vload(pk), w1 = vload(pk + LANES);
        for (int i = 0; i < rows; i++) {
            const vec xv = vbroadcast(xp[i]);
            acc[i][0] = vfma(xv, w0, acc[i][0]);
            acc[i][1] = vfma(xv, w1, acc[i][1]);
        }
    }
    EPILOGUE(float, f)
}

/* bf16: the panel xp [2 ceil(K / 2)][rows] (x widened, 0 past K), a pair of k at a time: x[k+1] w[k+1], then
 * x[k] w[k], each added to its lane's sum by one FMA. */
static inline __attribute__((always_inline)) void tile_bf16(const float *xp, const uint16_t *p, const float *bias,
                                                            const uint16_t *residual, uint16_t *y, const int rows,
                                                            int K, int ldy, int width, int part) {
    vec acc[MAX_ROWS][SPAN];
    for (int i = 0; i < rows; i++) for (int v = 0; v < SPAN; v++) acc[i][v] = vzero();
    const int pairs = (K + 1) / 2;
    const uint16_t *pk = p + part * SPAN * LANES * 2;
    for (int k2 = 0; k2 < pairs; k2++, pk += TILE * 2, xp += 2 * rows) {
        prefetch(pk);
        vec even0, odd0, even1, odd1;
        vload_pairs(pk, &even0, &odd0);
        vload_pairs(pk + LANES * 2, &even1, &odd1);
        for (int i = 0; i < rows; i++) {
            const vec x1 = vbroadcast(xp[rows + i]), x0 = vbroadcast(xp[i]);
            acc[i][0] = vfma(x0, even0, vfma(x1, odd0, acc[i][0]));
            acc[i][1] = vfma(x0, even1, vfma(x1, odd1, acc[i][1]));
        }
    }
    EPILOGUE(uint16_t, u16)
}

/* bf16 by vdpbf16ps (where the CPU has AVX512-BF16): the panel xp [ceil(K / 2)][rows] holds x's pairs as they lie
 * in x (0 past K), and one instruction adds a lane's two products to its sum, odd k first, then even, each rounded
 * once: tile_bf16's order and roundings in half its instructions, but with subnormal inputs and partial sums taken
 * as zero (the instruction's DAZ and FTZ), so its bits may differ from tile_bf16's where any is subnormal. */
#if defined(__AVX512BF16__)
static inline __attribute__((always_inline)) void tile_dot(const uint32_t *xp, const uint16_t *p, const float *bias,
                                                           const uint16_t *residual, uint16_t *y, const int rows,
                                                           int K, int ldy, int width, int part) {
    vec acc[MAX_ROWS][SPAN];
    for (int i = 0; i < rows; i++) for (int v = 0; v < SPAN; v++) acc[i][v] = vzero();
    const int pairs = (K + 1) / 2;
    const uint16_t *pk = p + part * SPAN * LANES * 2;
    for (int k2 = 0; k2 < pairs; k2++, pk += TILE * 2, xp += rows) {
        prefetch(pk);
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(pk), w1 = (__m512bh)_mm512_loadu_si512(pk + LANES * 2);
        for (int i = 0; i < rows; i++) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xp[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xv, w0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xv, w1);
        }
    }
    EPILOGUE(uint16_t, u16)
}
#endif

#if defined(__AVX512BF16__)
const char *bita_isa(void) { return ISA_NAME " (bf16 widened to float32, or vdpbf16ps: the dot kernel)"; }
#else
const char *bita_isa(void) { return ISA_NAME " (bf16 widened to float32)"; }
#endif

/* tile_<dtype>_by_rows[r]: the sweep with rows fixed at r (its loops unrolled, sums in registers); panel: the
 * type of the panel's elements */
#define ROW_CASE(name, panel, type, r)                                                                            \
    static void name##_##r(const panel *xp, const type *p, const float *b, const type *add, type *y, int K,       \
                           int ldy, int width, int part) {                                                       \
        name(xp, p, b, add, y, r, K, ldy, width, part);                                                          \
    }
#define ROW_CASES(name, panel, type) ROW_CASE(name, panel, type, 1) ROW_CASE(name, panel, type, 2)                \
    ROW_CASE(name, panel, type, 3) ROW_CASE(name, panel, type, 4) ROW_CASE(name, panel, type, 5)                 \
    ROW_CASE(name, panel, type, 6) ROW_CASE(name, panel, type, 7) ROW_CASE(name, panel, type, 8)                 \
    ROW_CASE(name, panel, type, 9) ROW_CASE(name, panel, type, 10) ROW_CASE(name, panel, type, 11)               \
    ROW_CASE(name, panel, type, 12)                                                                              \
    static void (*const name##_by_rows[MAX_ROWS + 1])(const panel *, const type *, const float *, const type *, \
                                                      type *, int, int, int, int) = {                            \
        0, name##_1, name##_2, name##_3, name##_4, name##_5, name##_6, name##_7, name##_8, name##_9, name##_10,  \
        name##_11, name##_12};
ROW_CASES(tile_bf16, float, uint16_t)
ROW_CASES(tile_f32, float, float)
#if defined(__AVX512BF16__)
ROW_CASES(tile_dot, uint32_t, uint16_t)
#endif

/* The calling thread's panel of at least size 4-byte elements (kept between passes; NULL where memory runs out). */
static void *panel_of(size_t size) {
    static _Thread_local void *panel;
    static _Thread_local size_t capacity;
    if (size > capacity) {
        void *grown = malloc(size * 4);
        if (!grown) return 0;
        free(panel);
        panel = grown;
        capacity = size;
    }
    return panel;
}

/* Block b of M rows split into blocks of at most ROWS, as even as can be: its first row and its row count. */
static inline void block_of(int b, int M, int blocks, int *m0, int *rows) {
    int base = M / blocks, extra = M % blocks;
    *m0 = b * base + (b < extra ? b : extra);
    *rows = base + (b < extra);
}

/* The panel's element k of row m (m0 + i) for each kernel: x widened to float (0 past K), or x's pair k as it lies
 * in memory (0 past K: a last odd k pairs x[K - 1] with 0). */
static inline float panel_f(const float *x, int m, int k, int K) { return k < K ? x[(size_t)m * K + k] : 0.0f; }
static inline float panel_u16(const uint16_t *x, int m, int k, int K) {
    return k < K ? bf16_to_float(x[(size_t)m * K + k]) : 0.0f;
}
static inline uint32_t panel_pair(const uint16_t *x, int m, int k2, int K) {
    const uint16_t *row = x + (size_t)m * K;
    return row[2 * k2] | (2 * k2 + 1 < K ? (uint32_t)row[2 * k2 + 1] << 16 : 0u);
}

/* x [M, K], p packed, bias [N] float32 or NULL, residual [M, N] or NULL (added to the product), y [M, N];
 * threads: OpenMP threads over the tiles. depth: the panel's elements per row; fill: panel_<kernel>. */
#define LINEAR(name, type, panel, tile, tile_size, depth, fill, out)                                              \
void name(const type *x, const type *p, const float *bias, const type *residual, type *y, int M, int N, int K,   \
          int threads) {                                                                                         \
    const int tiles = (N + TILE - 1) / TILE, blocks = (M + ROWS - 1) / ROWS, D = (depth);                        \
    panel *xp = panel_of((size_t)M * D);                                                                         \
    if (!xp) { /* no memory for the panel: NaN, never a wrong number */                                          \
        for (size_t i = 0; i < (size_t)M * N; i++) store_##out(y + i, __builtin_nanf(""));                       \
        return;                                                                                                  \
    }                                                                                                            \
    for (int b = 0; b < blocks; b++) {                                                                           \
        int m0, rows;                                                                                            \
        block_of(b, M, blocks, &m0, &rows);                                                                      \
        panel *block = xp + (size_t)m0 * D;                                                                      \
        for (int i = 0; i < rows; i++)                                                                           \
            for (int k = 0; k < D; k++) block[(size_t)k * rows + i] = fill(x, m0 + i, k, K);                     \
    }                                                                                                            \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                                            \
    for (int t = 0; t < tiles; t++) {                                                                            \
        int n0 = t * TILE, width = N - n0 < TILE ? N - n0 : TILE;                                                \
        float padded_bias[TILE];                                                                                 \
        const float *bt = 0;                                                                                     \
        if (bias) {                                                                                              \
            for (int j = 0; j < TILE; j++) padded_bias[j] = j < width ? bias[n0 + j] : 0.0f;                     \
            bt = padded_bias;                                                                                    \
        }                                                                                                        \
        for (int b = 0; b < blocks; b++) {                                                                       \
            int m0, rows;                                                                                        \
            block_of(b, M, blocks, &m0, &rows);                                                                  \
            for (int part = 0; part < PARTS; part++)                                                             \
                tile##_by_rows[rows](xp + (size_t)m0 * D, p + t * (tile_size), bt,                               \
                                     residual ? residual + (size_t)m0 * N + n0 : 0, y + (size_t)m0 * N + n0, K, N, \
                                     width, part);                                                               \
        }                                                                                                        \
    }                                                                                                            \
}
LINEAR(bita_linear_bf16, uint16_t, float, tile_bf16, (size_t)((K + 1) / 2) * TILE * 2, (K + 1) / 2 * 2, panel_u16,
       u16)
LINEAR(bita_linear_f32, float, float, tile_f32, (size_t)K * TILE, K, panel_f, f)
#if defined(__AVX512BF16__)
/* bf16 by vdpbf16ps on native_linear.c's packing (bita_pack_bf16): the "dot" kernel of the plan */
LINEAR(bita_dot_linear, uint16_t, uint32_t, tile_dot, (size_t)((K + 1) / 2) * TILE * 2, (K + 1) / 2, panel_pair, u16)
#endif
