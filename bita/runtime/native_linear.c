/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) for a frozen W, at the memory's pace for a few rows: bita's native
 * kernel path (native.py compiles this file once per machine with -march=native and picks the SIMD code below).
 *
 * W is packed once into tiles of TILE = 32 outputs, each tile one contiguous stream: in bfloat16 [K/2][32][2]
 * (pair k of every output: what one AVX512-BF16 dot product takes), in float32 [K][32]; N and K are padded with
 * zero weights. A tile's 32 sums sit in vector lanes, one lane an output, and each output accumulates its
 * products in the order of k, in float32, whatever M is and wherever its row sits: a row's result is the same
 * in a pass of one row and in a pass of many (row-invariant by construction; the kernel plan checks it). No sum
 * crosses lanes. Outputs round to bfloat16 to nearest even. Rows are taken ROWS at a time against a tile, so
 * the tile's weights are read from memory once a pass for up to ROWS rows and from cache after. */
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

#define TILE 32
#define ROWS 6

static inline float bf16_to_float(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t float_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

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

#if defined(__AVX512F__)
#define LANES 16
typedef __m512 vec;
static inline vec vzero(void) { return _mm512_setzero_ps(); }
static inline vec vbroadcast(float f) { return _mm512_set1_ps(f); }
static inline vec vload(const float *p) { return _mm512_loadu_ps(p); }
static inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline void vstore(float *p, vec v) { _mm512_storeu_ps(p, v); }
/* 16 bf16 pairs (32 values) -> the even-k and odd-k halves as floats */
static inline void vload_pairs(const uint16_t *p, vec *even, vec *odd) {
    __m512i v = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}
#define ISA_NAME "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define LANES 8
typedef __m256 vec;
static inline vec vzero(void) { return _mm256_setzero_ps(); }
static inline vec vbroadcast(float f) { return _mm256_set1_ps(f); }
static inline vec vload(const float *p) { return _mm256_loadu_ps(p); }
static inline vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline void vstore(float *p, vec v) { _mm256_storeu_ps(p, v); }
static inline void vload_pairs(const uint16_t *p, vec *even, vec *odd) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}
#define ISA_NAME "avx2"
#else
#error "the native kernel needs AVX2 and FMA, or AVX-512"
#endif
#define VECS (TILE / LANES)

/* One tile's outputs for rows rows of x (rows <= ROWS): sums in float32 lanes, written to out [rows][TILE]. */
static inline __attribute__((always_inline)) void tile_f32(const float *x, const float *p, float *out, const int rows,
                                                           int K) {
    vec acc[ROWS][VECS];
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
    for (int i = 0; i < rows; i++) for (int v = 0; v < VECS; v++) vstore(out + i * TILE + v * LANES, acc[i][v]);
}

#if defined(__AVX512BF16__)
#define BF16_NAME "avx512-bf16"
/* a pair of k at a time: one vdpbf16ps adds x[k] w[k] + x[k+1] w[k+1] to each lane */
static inline __attribute__((always_inline)) void tile_bf16(const uint16_t *x, const uint16_t *p, float *out,
                                                            const int rows, int K) {
    __m512 acc[ROWS][2];
    for (int i = 0; i < rows; i++) { acc[i][0] = _mm512_setzero_ps(); acc[i][1] = _mm512_setzero_ps(); }
    const int pairs = (K + 1) / 2;
    for (int k2 = 0; k2 < pairs; k2++) {
        const uint16_t *pk = p + (size_t)k2 * TILE * 2;
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(pk), w1 = (__m512bh)_mm512_loadu_si512(pk + 32);
        for (int i = 0; i < rows; i++) {
            uint32_t pair = x[(size_t)i * K + 2 * k2];
            if (2 * k2 + 1 < K) pair |= (uint32_t)x[(size_t)i * K + 2 * k2 + 1] << 16;
            __m512bh xv = (__m512bh)_mm512_set1_epi32((int)pair);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xv, w0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xv, w1);
        }
    }
    for (int i = 0; i < rows; i++) {
        _mm512_storeu_ps(out + i * TILE, acc[i][0]);
        _mm512_storeu_ps(out + i * TILE + 16, acc[i][1]);
    }
}
#else
#define BF16_NAME ISA_NAME " (bf16 widened to float32)"
/* a pair of k at a time, widened: x[k] w[k], then x[k+1] w[k+1], added to each lane in that order */
static inline __attribute__((always_inline)) void tile_bf16(const uint16_t *x, const uint16_t *p, float *out,
                                                            const int rows, int K) {
    vec acc[ROWS][VECS];
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
    for (int i = 0; i < rows; i++) for (int v = 0; v < VECS; v++) vstore(out + i * TILE + v * LANES, acc[i][v]);
}
#endif

const char *bita_isa(void) { return BF16_NAME; }

#define SPECIALISE(name, type)                                                                                    \
    static void name##_1(const type *x, const type *p, float *o, int K) { name(x, p, o, 1, K); }                \
    static void name##_2(const type *x, const type *p, float *o, int K) { name(x, p, o, 2, K); }                \
    static void name##_3(const type *x, const type *p, float *o, int K) { name(x, p, o, 3, K); }                \
    static void name##_4(const type *x, const type *p, float *o, int K) { name(x, p, o, 4, K); }                \
    static void name##_5(const type *x, const type *p, float *o, int K) { name(x, p, o, 5, K); }                \
    static void name##_6(const type *x, const type *p, float *o, int K) { name(x, p, o, 6, K); }                \
    static void (*const name##_by_rows[ROWS + 1])(const type *, const type *, float *, int) = {                 \
        0, name##_1, name##_2, name##_3, name##_4, name##_5, name##_6};
SPECIALISE(tile_bf16, uint16_t)
SPECIALISE(tile_f32, float)

/* x [M, K], p packed, bias [N] float32 or NULL, y [M, N]; threads: OpenMP threads over the tiles. */
void bita_linear_bf16(const uint16_t *x, const uint16_t *p, const float *bias, uint16_t *y, int M, int N, int K,
                      int threads) {
    int tiles = (N + TILE - 1) / TILE;
    size_t tile_size = (size_t)((K + 1) / 2) * TILE * 2;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < tiles; t++) {
        float out[ROWS * TILE];
        int n0 = t * TILE, width = N - n0 < TILE ? N - n0 : TILE;
        for (int m0 = 0; m0 < M; m0 += ROWS) {
            int rows = M - m0 < ROWS ? M - m0 : ROWS;
            tile_bf16_by_rows[rows](x + (size_t)m0 * K, p + t * tile_size, out, K);
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < width; j++)
                    y[(size_t)(m0 + i) * N + n0 + j] = float_to_bf16(out[i * TILE + j] + (bias ? bias[n0 + j] : 0.0f));
        }
    }
}

void bita_linear_f32(const float *x, const float *p, const float *bias, float *y, int M, int N, int K, int threads) {
    int tiles = (N + TILE - 1) / TILE;
    size_t tile_size = (size_t)K * TILE;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < tiles; t++) {
        float out[ROWS * TILE];
        int n0 = t * TILE, width = N - n0 < TILE ? N - n0 : TILE;
        for (int m0 = 0; m0 < M; m0 += ROWS) {
            int rows = M - m0 < ROWS ? M - m0 : ROWS;
            tile_f32_by_rows[rows](x + (size_t)m0 * K, p + t * tile_size, out, K);
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < width; j++)
                    y[(size_t)(m0 + i) * N + n0 + j] = out[i * TILE + j] + (bias ? bias[n0 + j] : 0.0f);
        }
    }
}
