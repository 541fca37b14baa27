/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) for a frozen W held as a GGUF file holds it: blocks of 32 inputs, each
 * a row's scale d (and offset m) in float16 and 32 small integers q. The weight a block stands for is exact in
 * float32 (gguf-py's de-quantisation, which transformers' GGUF loader runs): Q4_1 d * q + m (q in 0..15; d * q is
 * exact, so one FMA rounds it as numpy's product then sum does), Q4_0 d * (q - 8) (the same with m = -8 d, exact
 * in float16), Q8_0 d * q (q in -128..127; exact).
 *
 * bita_blocks_pack repacks a weight's blocks once into tiles of TILE = 32 outputs (native_tiles.h), never larger
 * than the file's blocks (a 64-byte header, then per tile and block of 32 inputs: the 32 outputs' d, their m
 * (nibbles), then the integers k-major: a nibble pair (k, k + 1) a byte for Q4, a byte a k for Q8; outputs past N
 * zero). A sweep widens each k's 32 weights in registers, once for all its rows, and adds x[k] w[k] to each
 * output's float32 sum by one FMA in the order of k: the arithmetic of native_linear.c's float32 tile on the
 * de-quantised weight, so in float32 a row's result is that kernel's, bit for bit, and in a pass of one row or of
 * many the same (row-invariant by construction). bf16 activations are widened to float32 as they enter the panel
 * and the weights stay exact (not rounded to bf16, as the dense bf16 path's are): the output rounds to bf16.
 *
 * Where the CPU has AVX512-BF16, the dot sweep (bita_blocks_dot_linear, bf16 activations) sums x[k] q[k] over a
 * block by vdpbf16ps on the integers themselves and scales the sum by d (and the block's sum of x by m): fewer
 * instructions a weight, other bits (row-invariant by construction too). */
#include "native_blocks.h"

#define DOT_SWEEP 8  /* rows the dot sweep takes: 8 x 3 sums (two chains and the total), constants and a broadcast */
#if defined(__AVX512F__)
#define SWEEP 8  /* rows a sweep takes: 8 x 2 sums, d and m, 4 widened weights and a broadcast in 32 registers */
#else
#define SWEEP 4  /* 4 x 2 sums, d and m, 2-4 widened weights and a broadcast in 16 */
#endif

/* LANES float16 -> float; LANES unsigned / signed bytes -> int32 lanes; int32 lanes -> float */
#if defined(__AVX512F__)
typedef __m512i ivec;
static inline ivec vwiden_u8(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline ivec vwiden_i8(const uint8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline vec vint(ivec v) { return _mm512_cvtepi32_ps(v); }
static inline ivec vlow4(ivec v) { return _mm512_and_si512(v, _mm512_set1_epi32(15)); }
static inline ivec vhigh4(ivec v) { return _mm512_srli_epi32(v, 4); }
#else
typedef __m256i ivec;
static inline ivec vwiden_u8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline ivec vwiden_i8(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline vec vint(ivec v) { return _mm256_cvtepi32_ps(v); }
static inline ivec vlow4(ivec v) { return _mm256_and_si256(v, _mm256_set1_epi32(15)); }
static inline ivec vhigh4(ivec v) { return _mm256_srli_epi32(v, 4); }
#endif

/* Bytes of bita_blocks_pack's copy of a weight [N, K] of ggml type ``type`` (0: a type or shape it cannot take). */
long long bita_blocks_size(int type, int N, int K) {
    return block_type(type) && block_type(type)->float_kernel ? packed_size(type, N, K) : 0;
}

/* raw [N][K / 32 blocks] as the file holds them (``type``: Q4_0, Q4_1 or Q8_0) -> p (bita_blocks_size bytes).
 * Returns 0, or -1 for a type or shape it cannot take. */
int bita_blocks_pack(const uint8_t *raw, uint8_t *p, int type, int N, int K) {
    const long long size = bita_blocks_size(type, N, K);
    if (!size) return -1;
    write_header(p, size, type, N, K);
    const int blocks = K / QK, in_block = file_block(type), out_block = packed_block(type);
    for (int n = 0; n < N; n++)
        for (int b = 0; b < blocks; b++) {
            const uint8_t *from = raw + ((size_t)n * blocks + b) * in_block;
            uint8_t *to = p + HEADER + ((size_t)(n / TILE) * blocks + b) * out_block;
            const int lane = n % TILE;
            memcpy(to + 2 * lane, from, 2);  /* d */
            if (type == GGML_Q8_0) {
                for (int k = 0; k < QK; k++) to[integers_at(type) + k * TILE + lane] = from[2 + k];
                continue;
            }
            if (type == GGML_Q4_1) memcpy(to + 2 * TILE + 2 * lane, from + 2, 2);  /* m (Q4_0's, -8 d, is computed) */
            /* k < 16: the low nibble of byte k, else the high one of byte k - 16 */
            const uint8_t *qs = from + (type == GGML_Q4_1 ? 4 : 2);
            for (int k = 0; k < QK; k += 2) {
                const int low = k < 16 ? qs[k] & 15 : qs[k - 16] >> 4, high = k + 1 < 16 ? qs[k + 1] & 15
                                                                                          : qs[k + 1 - 16] >> 4;
                to[integers_at(type) + (k / 2) * TILE + lane] = (uint8_t)(low | high << 4);
            }
        }
    return 0;
}

/* A block's weights of k = 2j and k + 1 for LANES outputs from ``at`` (float32, exact): Q4 blocks d q + m, by one
 * FMA (d q is exact), Q8_0 blocks d q. ``block``: the tile's block; d, m: the outputs' scale and offset. */
static inline void q4_pair(const uint8_t *block, int type, int j, int at, vec d, vec m, vec *even, vec *odd) {
    const ivec pairs = vwiden_u8(block + integers_at(type) + j * TILE + at);
    *even = vfma(d, vint(vlow4(pairs)), m);
    *odd = vfma(d, vint(vhigh4(pairs)), m);
}
static inline void q8_pair(const uint8_t *block, int j, int at, vec d, vec *even, vec *odd) {
    const uint8_t *q = block + integers_at(GGML_Q8_0) + 2 * j * TILE + at;
    *even = vmul(d, vint(vwiden_i8(q)));
    *odd = vmul(d, vint(vwiden_i8(q + TILE)));
}
/* The offsets m of a Q4 block's LANES outputs from ``at`` (scales d): Q4_1's as stored, Q4_0's -8 d (exact). */
static inline vec q4_offsets(const uint8_t *block, int type, int at, vec d) {
    return type == GGML_Q4_1 ? vload_half(block + 2 * TILE + 2 * at) : vmul(d, vbroadcast(-8.0f));
}
/* A block's weights of k = 2j and 2j + 1 for LANES outputs from ``at``, of ggml type ``type`` (a constant where
 * inlined: each sweep below is compiled for one type). */
static inline __attribute__((always_inline)) void block_pair(const uint8_t *block, int type, int j, int at,
                                                             vec *even, vec *odd) {
    const vec d = vload_half(block + 2 * at);
    if (type == GGML_Q8_0) q8_pair(block, j, at, d, even, odd);
    else q4_pair(block, type, j, at, d, q4_offsets(block, type, at, d), even, odd);
}

/* One part of a tile of ``type`` blocks against rows rows of the panel xp [K][rows]: y [rows][width] = x . tile +
 * bias, x[k] w[k] added to each output's sum by one FMA in the order of k. */
#define FMA_TILE(name, type, S, kind)                                                                                \
static inline __attribute__((always_inline)) void name(const float *xp, const uint8_t *p, const float *bias,         \
                                                       const type *residual, type *y, const int rows, int K,         \
                                                       int ldy, int width, int part) {                               \
    vec acc[MAX_ROWS][SPAN];                                                                                         \
    for (int i = 0; i < rows; i++) for (int v = 0; v < SPAN; v++) acc[i][v] = vzero();                               \
    const int block = packed_block(kind), first = part * SPAN * LANES;                                               \
    for (int b = 0; b < K / QK; b++, p += block) {                                                                   \
        for (int line = 0; line < block; line += 128) prefetch(p + line);                                            \
        for (int j = 0; j < QK / 2; j++, xp += 2 * rows) {                                                           \
            vec even[SPAN], odd[SPAN];                                                                               \
            for (int v = 0; v < SPAN; v++) block_pair(p, kind, j, first + v * LANES, &even[v], &odd[v]);             \
            for (int i = 0; i < rows; i++) {                                                                         \
                const vec x0 = vbroadcast(xp[i]);                                                                    \
                for (int v = 0; v < SPAN; v++) acc[i][v] = vfma(x0, even[v], acc[i][v]);                             \
            }                                                                                                        \
            for (int i = 0; i < rows; i++) {                                                                         \
                const vec x1 = vbroadcast(xp[rows + i]);                                                             \
                for (int v = 0; v < SPAN; v++) acc[i][v] = vfma(x1, odd[v], acc[i][v]);                              \
            }                                                                                                        \
        }                                                                                                            \
    }                                                                                                                \
    EPILOGUE(type, S)                                                                                                \
}

/* The sweeps and products of one block type (suffix t: q4_0, q4_1, q8_0), in float32 and in bf16 activations. */
#define FMA_KERNELS(t, kind)                                                                                         \
    FMA_TILE(t##_f32, float, f, kind)                                                                                \
    FMA_TILE(t##_bf16, uint16_t, u16, kind)                                                                          \
    ROW_CASES(t##_f32, float, uint8_t, float)                                                                        \
    ROW_CASES(t##_bf16, float, uint8_t, uint16_t)                                                                    \
    LINEAR(static, t##_linear_f32, float, uint8_t, float, t##_f32, (size_t)(K / QK) * packed_block(kind), K,         \
           panel_f, f, SWEEP, PARTS)                                                                                 \
    LINEAR(static, t##_linear_bf16, uint16_t, uint8_t, float, t##_bf16, (size_t)(K / QK) * packed_block(kind), K,    \
           panel_u16, u16, SWEEP, PARTS)
FMA_KERNELS(q4_0, GGML_Q4_0)
FMA_KERNELS(q4_1, GGML_Q4_1)
FMA_KERNELS(q8_0, GGML_Q8_0)

#if defined(__AVX512BF16__)
/* A block's integers of k = 2j and 2j + 1 for 16 outputs from ``at`` as bf16 pairs (exact: |q| <= 128), as
 * vdpbf16ps takes them: Q4 nibbles looked up in a table of 0..15, Q8_0 bytes widened to float32 (whose low half
 * is then 0). */
static inline __attribute__((always_inline)) __m512bh integer_pairs(const uint8_t *block, int type, int j, int at) {
    if (type == GGML_Q8_0) {
        const uint8_t *q = block + integers_at(type) + 2 * j * TILE + at;
        const __m512i even = _mm512_castps_si512(vint(vwiden_i8(q)));
        const __m512i odd = _mm512_castps_si512(vint(vwiden_i8(q + TILE)));
        return (__m512bh)_mm512_ternarylogic_epi32(_mm512_srli_epi32(even, 16), odd,
                                                   _mm512_set1_epi32((int)0xffff0000u), 0xf8);  /* a | (b & c) */
    }
    const __m512i small = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x4170, 0x4160, 0x4150,
                                           0x4140, 0x4130, 0x4120, 0x4110, 0x4100, 0x40e0, 0x40c0, 0x40a0, 0x4080,
                                           0x4040, 0x4000, 0x3f80, 0);  /* bf16 of 0..15 */
    const __m512i bytes = vwiden_u8(block + integers_at(type) + j * TILE + at);
    const __m512i index = _mm512_ternarylogic_epi32(bytes, _mm512_slli_epi32(bytes, 12), _mm512_set1_epi32(0x000f000f),
                                                    0xa8);  /* (a | b) & c: the even nibble low, the odd one high */
    return (__m512bh)_mm512_permutexvar_epi16(index, small);
}

/* The dot sweep (bf16 activations, where the CPU has AVX512-BF16): one vector of 16 outputs (part: which half of the
 * tile), each block's sums of x[k] q[k] by vdpbf16ps (each product exact; each pair of them and the sum rounded
 * once, subnormals taken as zero), then d times that sum plus m times the block's sum of x (the panel's last K / 32
 * entries a row, float32 bits), each by one FMA. The weights are never rounded, and a pair of k for 16 outputs costs
 * 4 instructions to widen (de-quantising each weight and rounding it to bf16 took 9: 4.9 ms instead of 3.5 for a
 * one-row pass of the default model's linears on a 2-vCPU AMD EPYC of family 25 model 17, 16.4 instead of 14.2 for
 * 16 rows). A row's block sums in two chains (even and odd pairs), added at the block's end: one chain made a pass
 * of few rows wait on vdpbf16ps' latency (there, 3.2 ms instead of 4.2 at one row, 5.0 instead of 6.2 at four).
 * Its bits are its own: no dense kernel sums in this order. */
#define DOT_TILE(name, kind)                                                                                         \
static inline __attribute__((always_inline)) void name(const uint32_t *xp, const uint8_t *p, const float *bias,      \
                                                       const uint16_t *residual, uint16_t *y, const int rows,        \
                                                       int K, int ldy, int width, int part) {                        \
    vec acc[MAX_ROWS][1];                                                                                            \
    for (int i = 0; i < rows; i++) acc[i][0] = vzero();                                                              \
    const float *sums = (const float *)(xp + (size_t)(K / 2) * rows);                                                \
    const int block = packed_block(kind), at = part * LANES;                                                         \
    for (int b = 0; b < K / QK; b++, p += block, sums += rows) {                                                     \
        for (int line = 0; line < block; line += 128) prefetch(p + line);                                            \
        vec even[MAX_ROWS], odd[MAX_ROWS];  /* two chains a row: half the latency a block waits on */                \
        for (int i = 0; i < rows; i++) even[i] = odd[i] = vzero();                                                   \
        for (int j = 0; j < QK / 2; j += 2, xp += 2 * rows) {                                                        \
            const __m512bh w0 = integer_pairs(p, kind, j, at), w1 = integer_pairs(p, kind, j + 1, at);               \
            for (int i = 0; i < rows; i++) {                                                                         \
                even[i] = _mm512_dpbf16_ps(even[i], (__m512bh)_mm512_set1_epi32((int)xp[i]), w0);                    \
                odd[i] = _mm512_dpbf16_ps(odd[i], (__m512bh)_mm512_set1_epi32((int)xp[rows + i]), w1);               \
            }                                                                                                        \
        }                                                                                                            \
        const vec d = vload_half(p + 2 * at);                                                                        \
        for (int i = 0; i < rows; i++) acc[i][0] = vfma(d, vadd(even[i], odd[i]), acc[i][0]);                        \
        if (kind != GGML_Q8_0) {                                                                                     \
            const vec m = q4_offsets(p, kind, at, d);                                                                \
            for (int i = 0; i < rows; i++) acc[i][0] = vfma(m, vbroadcast(sums[i]), acc[i][0]);                      \
        }                                                                                                            \
    }                                                                                                                \
    EPILOGUE_OF(uint16_t, u16, 1)                                                                                    \
}

/* The dot sweep's panel: x's pairs as they lie in memory for k2 < K / 2, then each block's sum of x in the order
 * of k (float32 bits). */
static inline uint32_t panel_pair_sums(const uint16_t *x, int m, int k2, int K) {
    if (k2 < K / 2) return panel_pair(x, m, k2, K);
    const uint16_t *row = x + (size_t)m * K + (size_t)(k2 - K / 2) * QK;
    float sum = 0.0f;
    for (int k = 0; k < QK; k++) sum += bf16_to_float(row[k]);
    uint32_t bits;
    memcpy(&bits, &sum, 4);
    return bits;
}
#define DOT_KERNELS(t, kind)                                                                                         \
    DOT_TILE(t##_dot, kind)                                                                                          \
    ROW_CASES(t##_dot, uint32_t, uint8_t, uint16_t)                                                                  \
    LINEAR(static, t##_linear_dot, uint16_t, uint8_t, uint32_t, t##_dot, (size_t)(K / QK) * packed_block(kind),      \
           K / 2 + K / QK, panel_pair_sums, u16, DOT_SWEEP, VECS)
DOT_KERNELS(q4_0, GGML_Q4_0)
DOT_KERNELS(q4_1, GGML_Q4_1)
DOT_KERNELS(q8_0, GGML_Q8_0)

/* bita_blocks_linear_bf16's product by the dot sweep */
void bita_blocks_dot_linear(const uint16_t *x, const uint8_t *p, const float *bias, const uint16_t *residual,
                            uint16_t *y, int M, int N, int K, int threads) {
    BY_TYPE(p, linear_dot(x, p + HEADER, bias, residual, y, M, N, K, threads))
}

#endif

/* x [M, K], p bita_blocks_pack's copy of W [N, K], bias [N] float32 or NULL, residual [M, N] or NULL, y [M, N], in
 * float32 (_f32) or bf16 (_bf16); threads: OpenMP threads over the tiles. */
void bita_blocks_linear_f32(const float *x, const uint8_t *p, const float *bias, const float *residual, float *y,
                            int M, int N, int K, int threads) {
    BY_TYPE(p, linear_f32(x, p + HEADER, bias, residual, y, M, N, K, threads))
}

void bita_blocks_linear_bf16(const uint16_t *x, const uint8_t *p, const float *bias, const uint16_t *residual,
                             uint16_t *y, int M, int N, int K, int threads) {
    BY_TYPE(p, linear_bf16(x, p + HEADER, bias, residual, y, M, N, K, threads))
}
