/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) for a frozen W held in a GGUF's blocks (native_blocks.h), with the
 * activations quantised to 8 bits as llama.cpp's integer dot products take them: each row's block of 32 inputs
 * becomes a scale dx = max|x| / 127 (float32) and 32 integers qx = round(x / dx) (nearest even) in -127..127, and a
 * block's sum over k of w[k] x[k] is computed in integers, exactly:
 *
 *   Q4_0  d dx (sum qw qx - 8 sum qx)      Q4_1  d dx sum qw qx + m (dx sum qx)      Q8_0  d dx sum qw qx
 *
 * then added to the output's float32 sum, block after block, in the order of the blocks. The integer sums are
 * exact and each row's scaling runs in an order fixed by the row alone, so a row's result depends on nothing but
 * the row (row-invariant by construction) and a pass of 16 rows costs far less than 16 passes of one: a weight's
 * block is unpacked once, in registers, for every row of a sweep, and each instruction multiplies 32 (AVX2) or 64
 * (AVX-512) pairs of bytes. Its bits are its own (the rounding of x to 8 bits): not native_blocks.c's.
 *
 * The integer products, by what the CPU has (INTEGER_DOTS names it): vpdpbusd (AVX512-VNNI, AVX-VNNI: 4 byte
 * products into an int32 lane an instruction), else vpmaddubsw (pairs into int16) then vpmaddwd by ones (into
 * int32): a Q4 block's 8 pair sums added in int16 first (at most 8 x 2 x 15 x 127 = 30480: no overflow), a Q8_0
 * group's widened at once (a pair is at most 2 x 128 x 127). vpmaddubsw takes unsigned weights: Q8_0's are taken as
 * |q| times x with q's sign (vpsignb; AVX-512, which has no vpsignb, negates x under q's sign mask); vpdpbusd takes
 * Q8_0's as q + 128 and subtracts 128 sum qx.
 *
 * bita_blocks_q8_pack repacks the file's blocks into tiles of 32 outputs (bita_blocks_size bytes, as
 * native_blocks.c's): per tile and block the 32 outputs' d (and m), then their integers in groups of 4 consecutive
 * bytes of the file's block, an output's group in one int32 lane: Q4 groups j = 0..3 hold the nibbles of
 * k = 4j..4j+3 (low) and 16+4j..16+4j+3 (high), Q8_0 groups j = 0..7 the bytes of k = 4j..4j+3. */
#include "native_blocks.h"

#if !defined(__AVX512F__) || defined(__AVX512BW__) /* AVX-512 without BW (no byte products): not built */

/* a quantised block of a row: 8 words of qx, sum qx and sum qx of its first 16 (int32), dx, dx sum qx (float32) */
#define WORDS 12
#define SUM_Q 8
#define SUM_Q_LOW 9
#define SCALE 10
#define SCALED_SUM 11
#define GROUP_STRIDE (4 * TILE)  /* bytes between a tile's integer groups */

/* int32 lanes of LANES outputs: loads, broadcasts, nibbles, sums; the byte products (INTEGER_DOTS) */
#if defined(__AVX512F__)
typedef __m512i ivec;
static inline ivec iload(const uint8_t *p) { return _mm512_loadu_si512(p); }
static inline ivec iset(int32_t v) { return _mm512_set1_epi32(v); }
static inline ivec izero(void) { return _mm512_setzero_si512(); }
static inline ivec ilow4(ivec v) { return _mm512_and_si512(v, _mm512_set1_epi8(15)); }
static inline ivec ihigh4(ivec v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15)); }
static inline ivec iadd(ivec a, ivec b) { return _mm512_add_epi32(a, b); }
static inline vec ifloat(ivec v) { return _mm512_cvtepi32_ps(v); }
static inline ivec iround(vec v) { return _mm512_cvtps_epi32(v); }
static inline void istore(int32_t *p, ivec v) { _mm512_storeu_si512(p, v); }
#if defined(__AVX512VNNI__)
#define VNNI 1
#define INTEGER_DOTS "avx512-vnni"
static inline ivec idot(ivec acc, ivec u, ivec s) { return _mm512_dpbusd_epi32(acc, u, s); }
#else
#define INTEGER_DOTS "avx512bw"
static inline ivec ipairs(ivec u, ivec s) { return _mm512_maddubs_epi16(u, s); }
static inline ivec iadd16(ivec a, ivec b) { return _mm512_add_epi16(a, b); }
static inline ivec iwiden(ivec pairs) { return _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)); }
static inline ivec iabs8(ivec v) { return _mm512_abs_epi8(v); }
static inline ivec isign8(ivec x, ivec w) { return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), izero(), x); }
#endif
#else
typedef __m256i ivec;
static inline ivec iload(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline ivec iset(int32_t v) { return _mm256_set1_epi32(v); }
static inline ivec izero(void) { return _mm256_setzero_si256(); }
static inline ivec ilow4(ivec v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
static inline ivec ihigh4(ivec v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15)); }
static inline ivec iadd(ivec a, ivec b) { return _mm256_add_epi32(a, b); }
static inline vec ifloat(ivec v) { return _mm256_cvtepi32_ps(v); }
static inline ivec iround(vec v) { return _mm256_cvtps_epi32(v); }
static inline void istore(int32_t *p, ivec v) { _mm256_storeu_si256((__m256i *)p, v); }
#if defined(__AVXVNNI__)
#define VNNI 1
#define INTEGER_DOTS "avx-vnni"
static inline ivec idot(ivec acc, ivec u, ivec s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#else
#define INTEGER_DOTS "avx2"
static inline ivec ipairs(ivec u, ivec s) { return _mm256_maddubs_epi16(u, s); }
static inline ivec iadd16(ivec a, ivec b) { return _mm256_add_epi16(a, b); }
static inline ivec iwiden(ivec pairs) { return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)); }
static inline ivec iabs8(ivec v) { return _mm256_abs_epi8(v); }
static inline ivec isign8(ivec x, ivec w) { return _mm256_sign_epi8(x, w); }
#endif
#endif

/* A Q4 block's running sums (VNNI: int32; else int16 pair sums, widened by q4_total) plus u . s; a Q8_0 group's:
 * w its bytes as packed, w_abs their magnitudes (unused under VNNI, where w is q + 128). */
#if defined(VNNI)
#define Q8_OFFSET 128
static inline ivec q4_dot(ivec acc, ivec u, ivec s) { return idot(acc, u, s); }
static inline ivec q4_total(ivec acc) { return acc; }
static inline ivec q8_dot(ivec acc, ivec w, ivec w_abs, ivec s) { (void)w_abs; return idot(acc, w, s); }
static inline ivec q8_magnitudes(ivec w) { return w; }
static inline ivec bytes_dot(ivec acc, ivec w0, ivec s0, ivec w1, ivec s1) { return idot(idot(acc, w0, s0), w1, s1); }
#else
#define Q8_OFFSET 0
static inline ivec q4_dot(ivec acc, ivec u, ivec s) { return iadd16(acc, ipairs(u, s)); }
static inline ivec q4_total(ivec acc) { return iwiden(acc); }
static inline ivec q8_dot(ivec acc, ivec w, ivec w_abs, ivec s) {
    return iadd(acc, iwiden(ipairs(w_abs, isign8(s, w))));
}
static inline ivec q8_magnitudes(ivec w) { return iabs8(w); }
/* two groups of bytes in 0..63: their pair sums added in int16 (at most 2 x 2 x 63 x 127 = 32004), then widened */
static inline ivec bytes_dot(ivec acc, ivec w0, ivec s0, ivec w1, ivec s1) {
    return iadd(acc, iwiden(iadd16(ipairs(w0, s0), ipairs(w1, s1))));
}
#endif

#if defined(__AVX512F__)
#define Q8_SWEEP 12  /* 12 x 2 sums (integer and float), 2 weight vectors, a broadcast and constants in 32 registers */
#else
#define Q8_SWEEP 5   /* 5 x 2 sums, 2 weight vectors, a broadcast and 2 constants in 16 */
#endif

/* v as it is, to the compiler: a register it may not merge with other sums (gcc otherwise reassociates a block's
 * integer sums into a tree whose partial sums spill to the stack: 40 % slower here) */
#define KEEP(v) __asm__("" : "+x"(v))

static inline float as_float(uint32_t bits) { float f; memcpy(&f, &bits, 4); return f; }
static inline uint32_t float_bits(float f) { uint32_t bits; memcpy(&bits, &f, 4); return bits; }

/* A row's block of 32 inputs (from vload_<S>) quantised into WORDS words at out. */
#define QUANTISE(S, type)                                                                                            \
static void quantise_##S(const type *x, uint32_t *words, int M, int K) {                                             \
    for (size_t block = 0; block < (size_t)M * (K / QK); block++) {                                                  \
        const type *in = x + block * QK;                                                                             \
        uint32_t *out = words + block * WORDS;                                                                       \
        vec v[QK / LANES], largest = vzero();                                                                        \
        for (int j = 0; j < QK / LANES; j++) {                                                                       \
            v[j] = vload_##S(in + j * LANES);                                                                        \
            largest = vmax(largest, vmax(v[j], vsub(vzero(), v[j])));                                                \
        }                                                                                                            \
        float lanes[LANES], amax = 0.0f;                                                                             \
        vstore(lanes, largest);                                                                                      \
        for (int j = 0; j < LANES; j++) amax = lanes[j] > amax || lanes[j] != lanes[j] ? lanes[j] : amax;            \
        const float dx = amax / 127.0f, inverse = dx != 0.0f ? 1.0f / dx : 0.0f;                                     \
        int32_t q[QK];                                                                                               \
        for (int j = 0; j < QK / LANES; j++)                                                                         \
            istore(q + j * LANES, iround(vmul(v[j], vbroadcast(inverse))));                                          \
        int8_t bytes[QK];                                                                                            \
        int32_t sum = 0;                                                                                             \
        for (int k = 0; k < QK; k++) bytes[k] = (int8_t)q[k], sum += (int8_t)q[k];                                   \
        memcpy(out, bytes, QK);                                                                                      \
        int32_t low = 0;                                                                                             \
        for (int k = 0; k < QK / 2; k++) low += (int8_t)q[k];                                                        \
        out[SUM_Q] = (uint32_t)sum;                                                                                  \
        out[SUM_Q_LOW] = (uint32_t)low;                                                                              \
        out[SCALE] = float_bits(dx);                                                                                 \
        out[SCALED_SUM] = float_bits(dx * (float)sum);                                                               \
    }                                                                                                                \
}
QUANTISE(f, float)
QUANTISE(u16, uint16_t)

/* The panel's word k of row m: the quantised rows as they lie (K / 32 blocks of WORDS a row). */
static inline uint32_t panel_word(const uint32_t *x, int m, int k, int K) {
    return x[(size_t)m * (K / QK) * WORDS + k];
}

/* One block's exact integer sums for LANES outputs against rows rows: q the outputs' first group, xp the block's
 * words [WORDS][rows]; low[i] = sum over k of qw qx less shift sum qx (Q8_0: Q8_OFFSET sum qx), over the block, or
 * for a type of two halves (Q6_K) over its first 16 k, and high[i] over its last 16. */
static inline __attribute__((always_inline)) void block_sums(const uint8_t *q, int kind, const uint32_t *xp,
                                                             const int rows, ivec *low, ivec *high) {
    const BlockType *facts = block_type(kind);
    const int halves = facts->halves;
    ivec acc[MAX_ROWS], second[MAX_ROWS];
    for (int i = 0; i < rows; i++) acc[i] = second[i] = izero();
    if (facts->form == SIGNED) {
        for (int g = 0; g < QK / 4; g++) {
            const ivec w = iload(q + g * GROUP_STRIDE), w_abs = q8_magnitudes(w);
            for (int i = 0; i < rows; i++) {
                acc[i] = q8_dot(acc[i], w, w_abs, iset((int32_t)xp[g * rows + i]));
                KEEP(acc[i]);
            }
        }
    } else if (facts->form == NIBBLES) {
        for (int g = 0; g < QK / 8; g++) {
            const ivec nibbles = iload(q + g * GROUP_STRIDE), low4 = ilow4(nibbles), high4 = ihigh4(nibbles);
            for (int i = 0; i < rows; i++) {
                acc[i] = q4_dot(q4_dot(acc[i], low4, iset((int32_t)xp[g * rows + i])), high4,
                                iset((int32_t)xp[(g + 4) * rows + i]));
                KEEP(acc[i]);
            }
        }
        for (int i = 0; i < rows; i++) acc[i] = q4_total(acc[i]);
    } else {
        for (int g = 0; g < QK / 4; g += 2) {
            ivec *into = halves == 2 && g >= QK / 8 ? second : acc;
            const ivec w0 = iload(q + g * GROUP_STRIDE), w1 = iload(q + (g + 1) * GROUP_STRIDE);
            for (int i = 0; i < rows; i++) {
                into[i] = bytes_dot(into[i], w0, iset((int32_t)xp[g * rows + i]), w1,
                                    iset((int32_t)xp[(g + 1) * rows + i]));
                KEEP(into[i]);
            }
        }
    }
    const int32_t shift = facts->form == SIGNED ? Q8_OFFSET : facts->shift;
    for (int i = 0; i < rows; i++) {
        const int32_t sum = (int32_t)xp[SUM_Q * rows + i], first = (int32_t)xp[SUM_Q_LOW * rows + i];
        low[i] = iadd(acc[i], iset(-shift * (halves == 2 ? first : sum)));
        if (halves == 2) high[i] = iadd(second[i], iset(-shift * (sum - first)));
    }
}

/* LANES outputs' scales from ``at`` (the file's float16, or float32 where wide) of half h of a packed block p, and
 * their offsets (Q4_1: float16; wide: float32 after the scales). */
static inline vec block_scales(const uint8_t *p, int kind, int at, int h) {
    return block_type(kind)->wide ? vload((const float *)p + h * TILE + at) : vload_half(p + 2 * at);
}
static inline vec block_offsets(const uint8_t *p, int kind, int at) {
    const BlockType *facts = block_type(kind);
    return facts->wide ? vload((const float *)p + facts->halves * TILE + at) : vload_half(p + 2 * TILE + 2 * at);
}

/* One part (LANES outputs) of a tile of ``kind`` blocks against rows rows of the panel xp [K / 32 * WORDS][rows]:
 * per block, d dx times the exact integer sum (and Q4_1's m dx sum qx) added to each output's float32 sum. */
#define Q8_TILE(name, type, S, kind)                                                                                 \
static inline __attribute__((always_inline)) void name(const uint32_t *xp, const uint8_t *p, const float *bias,      \
                                                       const type *residual, type *y, const int rows, int K,         \
                                                       int ldy, int width, int part) {                               \
    vec acc[MAX_ROWS][1];                                                                                            \
    for (int i = 0; i < rows; i++) acc[i][0] = vzero();                                                              \
    const int block = packed_block(kind), at = part * LANES;                                                         \
    for (int b = 0; b < K / QK; b++, p += block, xp += WORDS * rows) {                                               \
        for (int line = 0; line < block; line += 128) prefetch(p + line);                                            \
        ivec low[MAX_ROWS], high[MAX_ROWS];                                                                          \
        block_sums(p + integers_at(kind) + 4 * at, kind, xp, rows, low, high);                                       \
        for (int h = 0; h < block_type(kind)->halves; h++) {                                                         \
            const vec d = block_scales(p, kind, at, h);                                                              \
            for (int i = 0; i < rows; i++)                                                                           \
                acc[i][0] = vfma(vmul(d, vbroadcast(as_float(xp[SCALE * rows + i]))), ifloat(h ? high[i] : low[i]),  \
                                 acc[i][0]);                                                                         \
        }                                                                                                            \
        if (block_type(kind)->offset) {                                                                              \
            const vec m = block_offsets(p, kind, at);                                                                \
            for (int i = 0; i < rows; i++)                                                                           \
                acc[i][0] = vfma(m, vbroadcast(as_float(xp[SCALED_SUM * rows + i])), acc[i][0]);                     \
        }                                                                                                            \
    }                                                                                                                \
    EPILOGUE_OF(type, S, 1)                                                                                          \
}

/* The sweeps and products of one block type (suffix t), in float32 and in bf16 activations. */
#define Q8_KERNELS(t, kind)                                                                                          \
    Q8_TILE(t##_q8_f32, float, f, kind)                                                                              \
    Q8_TILE(t##_q8_bf16, uint16_t, u16, kind)                                                                        \
    ROW_CASES(t##_q8_f32, uint32_t, uint8_t, float)                                                                  \
    ROW_CASES(t##_q8_bf16, uint32_t, uint8_t, uint16_t)                                                              \
    LINEAR_OF(static, t##_q8_linear_f32, uint32_t, float, uint8_t, uint32_t, t##_q8_f32,                             \
              (size_t)(K / QK) * packed_block(kind), (K / QK) * WORDS, panel_word, f, Q8_SWEEP, VECS)                \
    LINEAR_OF(static, t##_q8_linear_bf16, uint32_t, uint16_t, uint8_t, uint32_t, t##_q8_bf16,                        \
              (size_t)(K / QK) * packed_block(kind), (K / QK) * WORDS, panel_word, u16, Q8_SWEEP, VECS)
Q8_KERNELS(q4_0, GGML_Q4_0)
Q8_KERNELS(q4_1, GGML_Q4_1)
Q8_KERNELS(q8_0, GGML_Q8_0)
Q8_KERNELS(q5_0, GGML_Q5_0)
Q8_KERNELS(q4_k, GGML_Q4_K)
Q8_KERNELS(q5_k, GGML_Q5_K)
Q8_KERNELS(q6_k, GGML_Q6_K)

/* Q4_K's and Q5_K's 6-bit scale and offset of sub-block j from their 12 bytes (ggml's get_scale_min_k4) */
static void scale_and_min(const uint8_t *bytes, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = bytes[j] & 63, *min = bytes[j + 4] & 63;
    } else {
        *scale = (bytes[j + 4] & 15) | (bytes[j - 4] >> 6) << 4;
        *min = (bytes[j + 4] >> 4) | (bytes[j] >> 6) << 4;
    }
}

/* Block b (of 32 inputs) of a row of the file: its 32 integers q (as ``form`` packs them: q in 0..15, 0..63, or
 * Q8_0's int8 bytes), and for a wide type its scales (one, or Q6_K's two of 16) and offset, exact in float32
 * (d sc, -dmin m: products of a float16 and a small integer), as gguf-py de-quantises them. */
static void decode_block(int type, const uint8_t *row, int b, uint8_t q[QK], float scale[2], float *offset) {
    const BlockType *facts = block_type(type);
    const uint8_t *from = row + (size_t)b * QK / facts->file_inputs * facts->file_bytes;
    const int sub = b * QK % facts->file_inputs / QK;  /* a super-block's sub-block of 32 */
    const float d = _cvtsh_ss((uint16_t)(from[0] | from[1] << 8));
    if (type == GGML_Q8_0) {
        memcpy(q, from + 2, QK);
    } else if (type == GGML_Q4_0 || type == GGML_Q4_1 || type == GGML_Q5_0) {
        const uint8_t *nibbles = from + (type == GGML_Q4_0 ? 2 : type == GGML_Q4_1 ? 4 : 6);
        uint32_t high_bits;
        memcpy(&high_bits, from + 2, 4);
        for (int k = 0; k < QK; k++)
            q[k] = (uint8_t)((k < 16 ? nibbles[k] & 15 : nibbles[k - 16] >> 4)
                             | (type == GGML_Q5_0 ? (high_bits >> k & 1) << 4 : 0));
        scale[0] = d;
    } else if (type == GGML_Q4_K || type == GGML_Q5_K) {
        const uint8_t *nibbles = from + (type == GGML_Q4_K ? 16 : 48) + 32 * (sub / 2), *high_bits = from + 16;
        int sc, m;
        scale_and_min(from + 4, sub, &sc, &m);
        for (int k = 0; k < QK; k++)
            q[k] = (uint8_t)((sub % 2 ? nibbles[k] >> 4 : nibbles[k] & 15)
                             | (type == GGML_Q5_K ? (high_bits[k] >> sub & 1) << 4 : 0));
        scale[0] = d * (float)sc;
        *offset = -_cvtsh_ss((uint16_t)(from[2] | from[3] << 8)) * (float)m;
    } else { /* Q6_K: 128-input halves, each 4 runs of 32: low nibbles of ql (two rows of 32), then high ones */
        const int half = sub / 4, run = sub % 4;
        const uint8_t *low = from + 64 * half + 32 * (run % 2), *high = from + 128 + 32 * half;
        const int8_t *scales = (const int8_t *)(from + 192);
        for (int k = 0; k < QK; k++)
            q[k] = (uint8_t)((run < 2 ? low[k] & 15 : low[k] >> 4) | (high[k] >> 2 * run & 3) << 4);
        const float d6 = _cvtsh_ss((uint16_t)(from[208] | from[209] << 8));
        scale[0] = d6 * (float)scales[2 * sub], scale[1] = d6 * (float)scales[2 * sub + 1];
    }
}

/* Bytes of bita_blocks_q8_pack's copy of a weight [N, K] of ggml type ``type`` (0: a type or shape it cannot take) */
long long bita_blocks_q8_size(int type, int N, int K) { return packed_size(type, N, K); }

/* raw [N][file_row_bytes] as the file holds the rows (``type``: one of BLOCK_TYPES) -> p (bita_blocks_q8_size
 * bytes). Returns 0, or -1 for a type or shape it cannot take. */
int bita_blocks_q8_pack(const uint8_t *raw, uint8_t *p, int type, int N, int K) {
    const long long size = packed_size(type, N, K), row_bytes = file_row_bytes(type, K);
    if (!size) return -1;
    write_header(p, size, type, N, K);
    const BlockType *facts = block_type(type);
    const int blocks = K / QK, out_block = facts->packed_bytes;
    const uint8_t flip = facts->form == SIGNED && Q8_OFFSET ? 0x80 : 0;  /* q + 128 as vpdpbusd's unsigned bytes */
    for (int n = 0; n < N; n++)
        for (int b = 0; b < blocks; b++) {
            const uint8_t *row = raw + (size_t)n * row_bytes, *from = row + (size_t)b * facts->file_bytes;
            uint8_t *to = p + HEADER + ((size_t)(n / TILE) * blocks + b) * out_block, q[QK];
            const int lane = n % TILE;
            float scale[2] = {0.0f, 0.0f}, offset = 0.0f;
            decode_block(type, row, b, q, scale, &offset);
            if (facts->wide) {
                for (int h = 0; h < facts->halves; h++) memcpy(to + 4 * (h * TILE + lane), &scale[h], 4);
                if (facts->offset) memcpy(to + 4 * (facts->halves * TILE + lane), &offset, 4);
            } else {
                memcpy(to + 2 * lane, from, 2);                                       /* d, as the file holds it */
                if (facts->offset) memcpy(to + 2 * TILE + 2 * lane, from + 2, 2);     /* Q4_1's m */
            }
            uint8_t *integers = to + facts->integers_at + 4 * lane;
            if (facts->form == NIBBLES)
                for (int j = 0; j < QK / 2; j++) integers[j / 4 * GROUP_STRIDE + j % 4] = q[j] | q[j + 16] << 4;
            else
                for (int j = 0; j < QK; j++) integers[j / 4 * GROUP_STRIDE + j % 4] = q[j] ^ flip;
        }
    return 0;
}

/* x [M, K], p bita_blocks_q8_pack's copy of W [N, K], bias [N] float32 or NULL, residual [M, N] or NULL, y [M, N],
 * in float32 (_f32) or bf16 (_bf16); threads: OpenMP threads over the tiles. x's rows are quantised first, into the
 * calling thread's scratch slot 1. */
#define Q8_LINEAR(S, type, store)                                                                                    \
void bita_blocks_q8_linear_##S(const type *x, const uint8_t *p, const float *bias, const type *residual, type *y,   \
                               int M, int N, int K, int threads) {                                                   \
    uint32_t *words = scratch_of(1, (size_t)M * (K / QK) * WORDS);                                                   \
    if (!words) {                                                                                                    \
        FILL_NAN(store, y, (size_t)M * N);                                                                           \
        return;                                                                                                      \
    }                                                                                                                \
    quantise_##store(x, words, M, K);                                                                                \
    BY_ANY_TYPE(p, q8_linear_##S(words, p + HEADER, bias, residual, y, M, N, K, threads))                            \
}
Q8_LINEAR(f32, float, f)
Q8_LINEAR(bf16, uint16_t, u16)

/* The byte products this build runs: "avx512-vnni", "avx-vnni", "avx512bw" or "avx2". */
const char *bita_blocks_q8_isa(void) { return INTEGER_DOTS; }

#endif
