/* What native_blocks.c (float activations) and native_blocks_q8.c (8-bit activations) share of a GGUF's blocks: each
 * block type's facts, named once (ggml's type_traits), the packed copy's header, and the product's dispatch by type.
 * A block holds 32 inputs of one row: its scale d (and offset m) in float16 and 32 small integers q; a K-quant's
 * super-block 256 inputs, in sub-blocks of 32 (Q4_K, Q5_K: a 6-bit scale and offset each) or 16 (Q6_K: an 8-bit
 * scale each), times the super-block's float16 d (and dmin). */
#ifndef BITA_NATIVE_BLOCKS_H
#define BITA_NATIVE_BLOCKS_H
#include "native_tiles.h"

#define QK 32      /* inputs a block holds */
#define HEADER 64  /* bytes before a packed copy's tiles: the type, N, K */

/* ggml's type numbers, as GGUF files store them */
enum { GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q8_0 = 8, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14 };
enum { NIBBLES, BYTES, SIGNED };  /* a packed block's integers: q in 0..15 two a byte; q in 0..63 a byte; int8 */

/* A block type's facts: its block in the file (file_bytes for file_inputs inputs: Q4_0 d, 16 nibble pairs; Q4_1 d,
 * m, 16 nibble pairs; Q5_0 d, 32 high bits, 16 nibble pairs; Q8_0 d, 32 int8; Q4_K d, dmin, 12 bytes of scales, 128
 * of nibbles; Q5_K those and 32 bytes of high bits; Q6_K 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
 * scales, d), and a tile's block of 32 inputs packed: the 32 outputs' scales (float16 d as the file holds it, or
 * "wide": float32, one a sub-block of 32 or ``halves`` of 16), their offsets m where ``offset`` (Q4_1: float16;
 * Q4_K, Q5_K: float32 -dmin m), then their integers (``form``; ``shift``: q - shift is the integer the weight scales,
 * a block summing shift sum qx less), which begin at integers_at; packed_bytes in all. float_kernel: native_blocks.c
 * reads it too (the others native_blocks_q8.c alone). */
typedef struct {
    int type, file_bytes, file_inputs, packed_bytes, integers_at, float_kernel, wide, halves, offset, form, shift;
} BlockType;
#define NIBBLE_BYTES (TILE * QK / 2)
#define BYTE_BYTES (TILE * QK)
static const BlockType BLOCK_TYPES[] = {
    {GGML_Q4_0, 18, 32, 2 * TILE + NIBBLE_BYTES, 2 * TILE, 1, 0, 1, 0, NIBBLES, 8},
    {GGML_Q4_1, 20, 32, 4 * TILE + NIBBLE_BYTES, 4 * TILE, 1, 0, 1, 1, NIBBLES, 0},
    {GGML_Q8_0, 34, 32, 2 * TILE + BYTE_BYTES, 2 * TILE, 1, 0, 1, 0, SIGNED, 0},
    {GGML_Q5_0, 22, 32, 4 * TILE + BYTE_BYTES, 4 * TILE, 0, 1, 1, 0, BYTES, 16},
    {GGML_Q4_K, 144, 256, 8 * TILE + NIBBLE_BYTES, 8 * TILE, 0, 1, 1, 1, NIBBLES, 0},
    {GGML_Q5_K, 176, 256, 8 * TILE + BYTE_BYTES, 8 * TILE, 0, 1, 1, 1, BYTES, 0},
    {GGML_Q6_K, 210, 256, 8 * TILE + BYTE_BYTES, 8 * TILE, 0, 1, 2, 0, BYTES, 32},
};

/* ``type``'s facts (NULL: not a type the kernels read); a constant where ``type`` is one (each sweep is compiled for
 * one type). */
static inline const BlockType *block_type(int type) {
    for (size_t i = 0; i < sizeof BLOCK_TYPES / sizeof *BLOCK_TYPES; i++)
        if (BLOCK_TYPES[i].type == type) return &BLOCK_TYPES[i];
    return 0;
}
static inline int packed_block(int type) { return block_type(type) ? block_type(type)->packed_bytes : 0; }
static inline int file_block(int type) { return block_type(type) ? block_type(type)->file_bytes : 0; }
static inline int integers_at(int type) { return block_type(type) ? block_type(type)->integers_at : 0; }
/* bytes of the file's blocks for one row of K inputs (0: K is not a whole number of blocks) */
static inline long long file_row_bytes(int type, int K) {
    const BlockType *facts = block_type(type);
    return facts && K > 0 && K % facts->file_inputs == 0 ? (long long)K / facts->file_inputs * facts->file_bytes : 0;
}

/* LANES float16 -> float */
#if defined(__AVX512F__)
static inline vec vload_half(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
#else
static inline vec vload_half(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
#endif

/* The product of a packed copy by its type (its header's first int, which the pack wrote: one of BLOCK_TYPES). */
#define BY_TYPE(p, call)                                                                                             \
    switch (*(const int32_t *)(p)) {                                                                                 \
        case GGML_Q4_0: q4_0_##call; break;                                                                          \
        case GGML_Q4_1: q4_1_##call; break;                                                                          \
        default: q8_0_##call;                                                                                        \
    }
/* the same over every type native_blocks_q8.c reads */
#define BY_ANY_TYPE(p, call)                                                                                         \
    switch (*(const int32_t *)(p)) {                                                                                 \
        case GGML_Q4_0: q4_0_##call; break;                                                                          \
        case GGML_Q4_1: q4_1_##call; break;                                                                          \
        case GGML_Q5_0: q5_0_##call; break;                                                                          \
        case GGML_Q4_K: q4_k_##call; break;                                                                          \
        case GGML_Q5_K: q5_k_##call; break;                                                                          \
        case GGML_Q6_K: q6_k_##call; break;                                                                          \
        default: q8_0_##call;                                                                                        \
    }

/* Bytes of a packed copy of a weight [N, K] of ggml type ``type`` (0: a type or shape it cannot take): whole tiles,
 * blocks of 32 inputs. */
static inline long long packed_size(int type, int N, int K) {
    if (!file_row_bytes(type, K) || N <= 0) return 0;
    return HEADER + (long long)((N + TILE - 1) / TILE) * (K / QK) * packed_block(type);
}

/* p's header: the type, N, K, after size bytes zeroed */
static inline void write_header(uint8_t *p, long long size, int type, int N, int K) {
    memset(p, 0, (size_t)size);
    const int32_t header[3] = {type, N, K};
    memcpy(p, header, sizeof header);
}

#endif
