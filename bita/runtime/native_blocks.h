/* What native_blocks.c (float activations) and native_blocks_q8.c (8-bit activations) share of a GGUF's blocks: each
 * block type's facts, named once (ggml's type_traits), the packed copy's header, and the product's dispatch by type.
 * A block holds 32 inputs of one row: its scale d (and offset m) in float16 and 32 small integers q. */
#ifndef BITA_NATIVE_BLOCKS_H
#define BITA_NATIVE_BLOCKS_H
#include "native_tiles.h"

#define QK 32      /* inputs a block holds */
#define HEADER 64  /* bytes before a packed copy's tiles: the type, N, K */

enum { GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q8_0 = 8 };  /* ggml's type numbers, as GGUF files store them */

/* A block type's facts: a row's block in the file (Q4_0: d, 16 nibble pairs; Q4_1: d, m, 16 nibble pairs; Q8_0: d,
 * 32 int8), a tile's block packed (the 32 outputs' d, their m, then their integers: half a byte a Q4 weight, a byte
 * a Q8 one), and where in it the integers begin. */
typedef struct {
    int type, file_bytes, packed_bytes, integers_at;
} BlockType;
#define Q4_INTEGERS (TILE * QK / 2)
#define Q8_INTEGERS (TILE * QK)
static const BlockType BLOCK_TYPES[] = {
    {GGML_Q4_0, 18, 2 * TILE + Q4_INTEGERS, 2 * TILE},
    {GGML_Q4_1, 20, 4 * TILE + Q4_INTEGERS, 4 * TILE},
    {GGML_Q8_0, 34, 2 * TILE + Q8_INTEGERS, 2 * TILE},
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

/* Bytes of a packed copy of a weight [N, K] of ggml type ``type`` (0: a type or shape the kernels cannot take): both
 * packings (native_blocks.c's, native_blocks_q8.c's) are of this size. */
long long bita_blocks_size(int type, int N, int K);

/* p's header: the type, N, K, after size bytes zeroed */
static inline void write_header(uint8_t *p, long long size, int type, int N, int K) {
    memset(p, 0, (size_t)size);
    const int32_t header[3] = {type, N, K};
    memcpy(p, header, sizeof header);
}

#endif
