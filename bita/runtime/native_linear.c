/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) for a frozen W, at the memory's pace for a few rows: bita's native
 * kernel path (native.py compiles this file once per machine with -march=native and picks the SIMD code below).
 *
 * W is packed once into tiles of TILE = 32 outputs, each tile one contiguous stream: in bfloat16 [K/2][32][2]
 * (pair k of every output: what one AVX512-BF16 dot product takes), in float32 [K][32]; N and K are padded with
 * zero weights. A tile's 32 sums sit in vector lanes, one lane an output, and each output accumulates its
 * products in the order of k, in float32, whatever M is and wherever its row sits: a row's result is the same
 * in a pass of one row and in a pass of many (row-invariant by construction; the kernel plan checks it). No sum
 * crosses lanes. Outputs round to bfloat16 to nearest even, lane by lane. Rows are taken ROWS at a time against a
 * tile, so the tile's weights are read from memory once a pass for up to ROWS rows and from cache after. */
#include "native_simd.h"

#define TILE 32
#define MAX_ROWS 12  /* the most rows a tile function is specialised for (the ROW_CASES below) */
#if defined(__AVX512F__)
#define ROWS 12  /* rows a tile's sweep takes: 12 x 2 accumulators fit AVX-512's 32 registers */
#else
#define ROWS 3   /* 3 x 4 accumulators fit AVX2's 16 */
#endif

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

#define VECS (TILE / LANES)

/* A tile's sums acc [rows][VECS] (+ bias) to y's rows (row stride ldy), the first width of TILE outputs; with a
 * residual (y's shape), y = residual + the product, the product rounded to the dtype first (as torch adds them). */
#define EPILOGUE(type, S)                                                                                        \
    for (int i = 0; i < rows; i++) {                                                                             \
        type *row = y + (size_t)i * ldy;                                                                         \
        const type *add = residual ? residual + (size_t)i * ldy : 0;                                             \
        for (int v = 0; v < VECS; v++) {                                                                         \
            vec sum = bias ? vadd(acc[i][v], vload(bias + v * LANES)) : acc[i][v];                               \
            if (width == TILE) {                                                                                 \
                vstore_##S(row + v * LANES, add ? vadd(vround_##S(sum), vload_##S(add + v * LANES)) : sum);      \
                continue;                                                                                        \
            }                                                                                                    \
            float lanes[LANES];                                                                                  \
            vstore(lanes, sum);                                                                                  \
            for (int j = 0; j < LANES && v * LANES + j < width; j++) {                                           \
                float value = add ? round_##S(lanes[j]) + load_##S(add + v * LANES + j) : lanes[j];              \
                store_##S(row + v * LANES + j, value);                                                           \
            }                                                                                                    \
        }                                                                                                        \
    }

/* One tile against rows rows of x (rows <= ROWS): y [rows][width] = x . tile + bias, sums in float32 lanes. */
static inline __attribute__((always_inline)) void tile_f32(const float *x, const float *p, const float *bias, const float *residual,
                                                           float *y, const int rows, int K, int ldy, int width) {
    vec acc[MAX_ROWS][VECS];
    for (int i = 0; i < rows; i++) for (int v = 0; v < VECS; v++) acc[i][v] = vzero();
    for (int k = 0; k < K; k++) {
        const float *pk = p + (size_t)k * TILE;
        vec w[VECS];
        for (int v = 0; v < VECS; v++) w[v] = vload(pk + v * LANES);
        for (int i = 0; i < rows; i++) {
            vec xv = vbroadcast(x[(size_t)i * K + k]);
            for (int v = 0; v < VECS; v++) acc[i][v] = vfma(xv, w[v], acc[i][v]);
        }
    }
    EPILOGUE(float, f)
}

#if defined(__AVX512BF16__)
#define BF16_NAME "avx512-bf16"
/* a pair of k at a time: one vdpbf16ps adds x[k] w[k] + x[k+1] w[k+1] to each lane */
static inline __attribute__((always_inline)) void tile_bf16(const uint16_t *x, const uint16_t *p, const float *bias,
                                                            const uint16_t *residual, uint16_t *y, const int rows, int K,
                                                            int ldy, int width) {
    vec acc[MAX_ROWS][VECS];
    for (int i = 0; i < rows; i++) for (int v = 0; v < VECS; v++) acc[i][v] = vzero();
    const int pairs = (K + 1) / 2;
    for (int k2 = 0; k2 < pairs; k2++) {
        const uint16_t *pk = p + (size_t)k2 * TILE * 2;
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(pk), w1 = (__m512bh)_mm512_loadu_si512(pk + 32);
        for (int i = 0; i < rows; i++) {
            uint32_t pair;  /* x[k], x[k + 1] as one 32-bit lane (x[k + 1] zero past an odd K) */
            if (2 * k2 + 1 < K) memcpy(&pair, x + (size_t)i * K + 2 * k2, 4);
            else pair = x[(size_t)i * K + 2 * k2];
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)pair);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xv, w0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xv, w1);
        }
    }
    EPILOGUE(uint16_t, u16)
}
#else
#define BF16_NAME ISA_NAME " (bf16 widened to float32)"
/* a pair of k at a time, widened: x[k] w[k], then x[k+1] w[k+1], added to each lane in that order */
static inline __attribute__((always_inline)) void tile_bf16(const uint16_t *x, const uint16_t *p, const float *bias,
                                                            const uint16_t *residual, uint16_t *y, const int rows, int K,
                                                            int ldy, int width) {
    vec acc[MAX_ROWS][VECS];
    for (int i = 0; i < rows; i++) for (int v = 0; v < VECS; v++) acc[i][v] = vzero();
    const int pairs = (K + 1) / 2;
    for (int k2 = 0; k2 < pairs; k2++) {
        const uint16_t *pk = p + (size_t)k2 * TILE * 2;
        vec even[VECS], odd[VECS];
        for (int v = 0; v < VECS; v++) vload_pairs(pk + v * LANES * 2, &even[v], &odd[v]);
        for (int i = 0; i < rows; i++) {
            vec x0 = vbroadcast(bf16_to_float(x[(size_t)i * K + 2 * k2]));
            vec x1 = vbroadcast(2 * k2 + 1 < K ? bf16_to_float(x[(size_t)i * K + 2 * k2 + 1]) : 0.0f);
            for (int v = 0; v < VECS; v++) acc[i][v] = vfma(x1, odd[v], vfma(x0, even[v], acc[i][v]));
        }
    }
    EPILOGUE(uint16_t, u16)
}
#endif

const char *bita_isa(void) { return BF16_NAME; }

/* tile_<dtype>_by_rows[r]: the tile with rows fixed at r (its loops unrolled, accumulators in registers) */
#define SPECIALISE(name, type)                                                                                    \
    typedef void (*name##_fn)(const type *, const type *, const float *, const type *, type *, int, int, int);                \
    static name##_fn name##_by_rows[ROWS + 1];                                                                   \
    static void name##_init(void) __attribute__((constructor));
#define ROW_CASE(name, type, r)                                                                                   \
    static void name##_##r(const type *x, const type *p, const float *b, const type *add, type *y, int K, int ldy, \
                           int width) {                                                                          \
        name(x, p, b, add, y, r, K, ldy, width);                                                                 \
    }
#define ROW_CASES(name, type) ROW_CASE(name, type, 1) ROW_CASE(name, type, 2) ROW_CASE(name, type, 3)            \
    ROW_CASE(name, type, 4) ROW_CASE(name, type, 5) ROW_CASE(name, type, 6) ROW_CASE(name, type, 7)              \
    ROW_CASE(name, type, 8) ROW_CASE(name, type, 9) ROW_CASE(name, type, 10) ROW_CASE(name, type, 11)            \
    ROW_CASE(name, type, 12)
#define INIT(name)                                                                                                \
    static void name##_init(void) {                                                                              \
        name##_fn all[12] = {name##_1, name##_2, name##_3, name##_4, name##_5, name##_6, name##_7, name##_8,     \
                             name##_9, name##_10, name##_11, name##_12};                                         \
        for (int r = 1; r <= ROWS; r++) name##_by_rows[r] = all[r - 1];                                          \
    }
SPECIALISE(tile_bf16, uint16_t)
SPECIALISE(tile_f32, float)
ROW_CASES(tile_bf16, uint16_t)
ROW_CASES(tile_f32, float)
INIT(tile_bf16)
INIT(tile_f32)

/* x [M, K], p packed, bias [N] float32 or NULL, residual [M, N] or NULL (added to the product), y [M, N];
 * threads: OpenMP threads over the tiles. */
#define LINEAR(name, type, tile, tile_size)                                                                       \
void name(const type *x, const type *p, const float *bias, const type *residual, type *y, int M, int N, int K,   \
          int threads) {                                                                                         \
    int tiles = (N + TILE - 1) / TILE;                                                                           \
    _Pragma("omp parallel for schedule(static) num_threads(threads)")                                            \
    for (int t = 0; t < tiles; t++) {                                                                            \
        int n0 = t * TILE, width = N - n0 < TILE ? N - n0 : TILE;                                                \
        float padded_bias[TILE];                                                                                 \
        const float *b = 0;                                                                                      \
        if (bias) {                                                                                              \
            for (int j = 0; j < TILE; j++) padded_bias[j] = j < width ? bias[n0 + j] : 0.0f;                     \
            b = padded_bias;                                                                                     \
        }                                                                                                        \
        for (int m0 = 0; m0 < M; m0 += ROWS) {                                                                   \
            int rows = M - m0 < ROWS ? M - m0 : ROWS;                                                            \
            tile##_by_rows[rows](x + (size_t)m0 * K, p + t * (tile_size), b,                                     \
                                 residual ? residual + (size_t)m0 * N + n0 : 0, y + (size_t)m0 * N + n0, K, N, width); \
        }                                                                                                        \
    }                                                                                                            \
}
LINEAR(bita_linear_bf16, uint16_t, tile_bf16, (size_t)((K + 1) / 2) * TILE * 2)
LINEAR(bita_linear_f32, float, tile_f32, (size_t)K * TILE)
