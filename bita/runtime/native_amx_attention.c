/* Row-invariant attention over a static KV cache in bfloat16 on Intel's AMX tiles: native_attention.c's promise (a
 * row's output is a function of its query and its logical keys alone, whatever else its pass holds and wherever its
 * keys sit) with the scores and the weighted values as tile products (TDPBF16PS, rounding as native_amx.c says:
 * per output, a chunk's even-k and odd-k products summed apart in the order of k, then added, then added to the
 * chunks' sum so far). native_attention.c's bita_attend_bf16 calls it where the library holds it (the compiler
 * enables AMX-BF16) and Linux granted the process the tiles, for a head dimension that is a multiple of 32.
 *
 *   score    q . k, chunk after chunk of 32 dimensions, times scale: a function of (q, k) alone (C [16 keys][16
 *            queries] = the keys as the cache holds them . the queries packed into pairs; a C row reads its key's
 *            row alone and a column its query's column alone);
 *   weights  native_attention.h's weigh (float32, in logical order, and 1 / their sum), then rounded to bfloat16
 *            (as transformers' eager attention rounds its probabilities to the values' dtype);
 *   output   the weights . the values of the row's logical keys, chunk after chunk of 32 logical keys (a row's
 *            last chunk padded with zero weights), times 1 / the sum, rounded to bfloat16.
 *
 * A tile's 16 query rows share its B tile of values. Where every row of the tile reads slots 32c .. 32c + 31 as
 * its logical keys 32c .. 32c + 31 (an AR pass always; a tree pass below its first tree slot), the chunk is one
 * product with the values packed once a unit. Elsewhere (a chunk holding tree slots, which rows see by their
 * ancestry) each pass row of the tile takes its own product: its own weights against its own keys' values, the
 * tile's other rows zero. A zero weight adds +0 (or -0) to a sum that is never -0, so a row's sums are those of
 * its own products in its own order, the same in a pass of one row and of many.
 *
 * One sweep, its unit a key/value head's tile of 16 query rows, on one thread, so that everything it makes stays in
 * that core's cache: its pass rows' visible slots (native_attention.h's list_visible), the scores of every block of
 * 16 slots those rows see, each row's weights, then the weighted values, 4 blocks of 16 head dimensions at a time in
 * C tiles 0-3, the values of a chunk every row reads in place packed as the first group of dimensions reaches it (32
 * slots a B tile of 16 slot pairs; a few hundred instructions a chunk, so a head's tiles each pack their own rather
 * than wait for one another). (Made in a first sweep and used in a second, by the other core half the time, the
 * values and scores cost more to fetch than to compute: 24 us a layer for one row after 300 cached instead of 18,
 * here.) Every tile is configured 16 rows x 64 bytes (native_amx.c's bita_amx_configure); a tile's rows past the
 * head's query rows are computed and dropped. */
#include <stdlib.h>
#include "native_simd.h"
#include "native_attention.h"

#if defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__AVX512F__)
#include <omp.h>

void bita_amx_configure(int rows);  /* native_amx.c: this thread's tiles, 0-4 rows x 64 bytes, 5-7 16 x 64 */

#define TILE 16   /* query rows a tile holds; slots a score product takes; head dims a value C tile holds */
#define CHUNK 32  /* dimensions (scores) or logical keys (values) a product takes at once */
#define PACKED (TILE * TILE)  /* uint32 (bf16 pairs) in a B tile */
#define C_TILES 4 /* value C tiles at once: tiles 0-3, A tile 4, B tile 5 */

/* Values for 32 logical keys as B tiles of head dims [16 first, 16 (first + blocks)) (blocks even): rows[t] the
 * value row of key t (NULL: zeros); out [blocks][16 key pairs][16 dims] pairs (key 2p's value in the low half). */
static void pack_values(const uint16_t *const *rows, int first, int blocks, uint32_t *out) {
    __m512i low, high;  /* word j of a pair row: (j odd: the odd key, else the even key)'s dim j / 2 (+ 16) */
    uint16_t index[2][32];
    for (int j = 0; j < 32; j++) index[0][j] = (uint16_t)(j % 2 * 32 + j / 2), index[1][j] = index[0][j] + 16;
    low = _mm512_loadu_si512(index[0]);
    high = _mm512_loadu_si512(index[1]);
    for (int p = 0; p < CHUNK / 2; p++)
        for (int b = 0; b < blocks; b += 2) {
            const uint16_t *even = rows[2 * p], *odd = rows[2 * p + 1];
            const __m512i e = even ? _mm512_loadu_si512(even + (first + b) * TILE) : _mm512_setzero_si512();
            const __m512i o = odd ? _mm512_loadu_si512(odd + (first + b) * TILE) : _mm512_setzero_si512();
            _mm512_storeu_si512(out + ((size_t)b * CHUNK / 2 + p) * TILE, _mm512_permutex2var_epi16(e, low, o));
            _mm512_storeu_si512(out + ((size_t)(b + 1) * CHUNK / 2 + p) * TILE, _mm512_permutex2var_epi16(e, high, o));
        }
}

/* The query rows of key/value head g as B tiles: out [ceil(Q / 16)][D / 32][16 dimension pairs][16 query rows]
 * pairs, zeros past Q = R x groups; query row i: row i / groups, head g x groups + i % groups of q [R, H, D]. */
static void pack_queries(const uint16_t *q, int g, int R, int H, int groups, int D, uint32_t *out) {
    const int Q = R * groups, pairs = D / 2, q_tiles = (Q + TILE - 1) / TILE;
    memset(out, 0, sizeof(uint32_t) * (size_t)q_tiles * pairs * TILE);
    for (int i = 0; i < Q; i++) {
        const uint16_t *row = q + ((size_t)(i / groups) * H + g * groups + i % groups) * D;
        for (int p = 0; p < pairs; p++)
            memcpy(out + (((size_t)(i / TILE) * (D / CHUNK) + p / TILE) * TILE + p % TILE) * TILE + i % TILE,
                   row + 2 * p, sizeof(uint32_t));
    }
}

/* Scores of a query tile (its packed queries, D / 32 B tiles) with the keys of slots [start, end) (at most 16, rows
 * D apart; the A tiles), times scale, into scores[m x stride + start ..] for the tile's rows m < rows. padded:
 * 16 x D bf16 of scratch for a last block. */
static void score_block(const uint16_t *keys, int start, int end, int D, const uint32_t *queries, float scale,
                        float *scores, size_t stride, int rows, uint16_t *padded) {
    const uint16_t *a = keys + (size_t)start * D;
    if (end - start < TILE) {  /* the last block: its keys, then zeros (the cache may end before 16) */
        memset(padded, 0, sizeof(uint16_t) * TILE * D);
        memcpy(padded, a, sizeof(uint16_t) * (size_t)(end - start) * D);
        a = padded;
    }
    float sums[TILE * TILE];
    _tile_zero(0);
    for (int c = 0; c < D / CHUNK; c++) {
        _tile_loadd(4, a + c * CHUNK, D * sizeof(uint16_t));
        _tile_loadd(5, queries + (size_t)c * PACKED, TILE * sizeof(uint32_t));
        _tile_dpbf16ps(0, 4, 5);
    }
    _tile_stored(0, sums, TILE * sizeof(float));
    vec m[TILE];
    for (int k = 0; k < TILE; k++) m[k] = vload(sums + k * TILE);
    transpose(m);  /* m[n]: query row n's scores with the block's keys */
    for (int n = 0; n < rows; n++) vstore(scores + n * stride + start, vmul(m[n], vbroadcast(scale)));
}

/* C tiles 0 .. count-1 += A (tile 4, loaded by the caller) . the count B tiles at b. */
static inline void accumulate(const uint32_t *b, int count) {
    _tile_loadd(5, b, TILE * sizeof(uint32_t));
    _tile_dpbf16ps(0, 4, 5);
    if (count > 1) { _tile_loadd(5, b + PACKED, TILE * sizeof(uint32_t)); _tile_dpbf16ps(1, 4, 5); }
    if (count > 2) { _tile_loadd(5, b + 2 * PACKED, TILE * sizeof(uint32_t)); _tile_dpbf16ps(2, 4, 5); }
    if (count > 3) { _tile_loadd(5, b + 3 * PACKED, TILE * sizeof(uint32_t)); _tile_dpbf16ps(3, 4, 5); }
}

/* A row's logical keys 32c .. 32c + 31 are slots 32c .. 32c + 31 (or it has none there): count, lead as
 * list_visible gives them. */
static inline int reads_in_place(int count, int lead, int c) {
    return count <= c * CHUNK || lead >= (count < (c + 1) * CHUNK ? count : (c + 1) * CHUNK);
}

/* q [R, H, D], keys/values [KV, capacity, D], allowed [R, K] (0/1 bytes), out [R, H, D], all bfloat16; H = KV x
 * groups, D a multiple of 32. Query row i of key/value head g: row i / groups, head g x groups + i % groups. */
void bita_amx_attend_bf16(const uint16_t *q, const uint16_t *keys, const uint16_t *values, const uint8_t *allowed,
                          uint16_t *out, int R, int H, int KV, int D, int capacity, int K, float scale, int threads) {
    const int groups = H / KV, Q = R * groups, q_tiles = (Q + TILE - 1) / TILE, blocks = (K + TILE - 1) / TILE;
    const int chunks = (K + CHUNK - 1) / CHUNK, span = chunks * CHUNK, dims = D / TILE;
    const int pass_rows = TILE / groups + 2;  /* at most, in a tile of query rows */
    const size_t chunk_size = (size_t)dims * PACKED, head_queries = (size_t)q_tiles * D / 2 * TILE;  /* uint32 */
    /* each thread's scratch for its unit (4-byte words): its rows' scores [16][span], the values of its head's chunks
     * that every row reads in place, packed, its pass rows' visible slots, counts and leads, its rows' bf16 weights */
    const size_t per_thread = (size_t)TILE * span + chunks * chunk_size + (size_t)pass_rows * (K + 2) + TILE * span / 2;
    uint32_t *packed_q = malloc(sizeof(uint32_t) * (KV * head_queries + threads * per_thread));
    if (!packed_q) {  /* no memory for the scratch: NaN, never a wrong number */
        for (size_t i = 0; i < (size_t)R * H * D; i++) out[i] = 0x7fc0;
        return;
    }
    for (int g = 0; g < KV; g++) pack_queries(q, g, R, H, groups, D, packed_q + g * head_queries);
    _Pragma("omp parallel num_threads(threads)")
    {
        uint32_t *mine = packed_q + KV * head_queries + omp_get_thread_num() * per_thread;
        float *scores = (float *)mine;
        uint32_t *packed = mine + (size_t)TILE * span, own[C_TILES * PACKED];
        int *slots = (int *)(packed + chunks * chunk_size), *counts = slots + (size_t)pass_rows * K;
        int *leads = counts + pass_rows;
        uint16_t *weights = (uint16_t *)(leads + pass_rows);
        uint16_t own_weights[TILE * CHUNK], padded[TILE * MAX_DIM];
        const uint16_t *rows_of[CHUNK];
        float sums[TILE * TILE], norms[TILE];
        bita_amx_configure(TILE);
        _Pragma("omp for schedule(dynamic)")
        for (int unit = 0; unit < KV * q_tiles; unit++) {  /* a key/value head's tile of query rows */
            const int g = unit / q_tiles, t = unit % q_tiles, rows = Q - t * TILE < TILE ? Q - t * TILE : TILE;
            const int top = t * TILE / groups, bottom = (t * TILE + rows - 1) / groups;  /* the tile's pass rows */
            const uint16_t *head_values = values + (size_t)g * capacity * D;
            int longest = 0;
            for (int r = top; r <= bottom; r++) {
                counts[r - top] = list_visible(allowed + (size_t)r * K, K, slots + (size_t)(r - top) * K, leads + r - top);
                longest = counts[r - top] > longest ? counts[r - top] : longest;
            }
            for (int b = 0; b < blocks; b++) {  /* scores */
                const int start = b * TILE, end = start + TILE < K ? start + TILE : K;
                if (seen(allowed + (size_t)top * K, bottom - top + 1, K, start, end))
                    score_block(keys + (size_t)g * capacity * D, start, end, D,
                                packed_q + g * head_queries + (size_t)t * (D / CHUNK) * PACKED, scale, scores, span,
                                rows, padded);
            }
            for (int m = 0; m < rows; m++) {  /* weights */
                const int r = (t * TILE + m) / groups - top, padded_count = (counts[r] + LANES - 1) / LANES * LANES;
                norms[m] = weigh(scores + (size_t)m * span, slots + (size_t)r * K, leads[r], counts[r]);
                for (int j = 0; j < padded_count; j += LANES)  /* weigh's zeros after the count */
                    vstore_bf16(weights + (size_t)m * span + j, vload(scores + (size_t)m * span + j));
                memset(weights + (size_t)m * span + padded_count, 0, sizeof(uint16_t) * (span - padded_count));
            }
            for (int first = 0; first < dims; first += C_TILES) {  /* weighted values */
                const int count = dims - first < C_TILES ? dims - first : C_TILES;
                _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
                for (int c = 0; c * CHUNK < longest; c++) {
                    int shared = 1;
                    for (int r = 0; r <= bottom - top && shared; r++) shared = reads_in_place(counts[r], leads[r], c);
                    if (shared) {
                        if (!first) {  /* packed once, every head dimension, for the dimension groups after */
                            for (int i = 0; i < CHUNK; i++)
                                rows_of[i] = c * CHUNK + i < K ? head_values + (size_t)(c * CHUNK + i) * D : 0;
                            pack_values(rows_of, 0, dims, packed + (size_t)c * chunk_size);
                        }
                        _tile_loadd(4, weights + c * CHUNK, span * sizeof(uint16_t));
                        accumulate(packed + (size_t)c * chunk_size + (size_t)first * PACKED, count);
                        continue;
                    }
                    for (int r = 0; r <= bottom - top; r++) {  /* row by row: its weights, its keys' values */
                        if (counts[r] <= c * CHUNK) continue;
                        memset(own_weights, 0, sizeof own_weights);
                        for (int m = 0; m < rows; m++)
                            if ((t * TILE + m) / groups - top == r)
                                memcpy(own_weights + m * CHUNK, weights + (size_t)m * span + c * CHUNK,
                                       sizeof(uint16_t) * CHUNK);
                        for (int i = 0; i < CHUNK; i++)
                            rows_of[i] = c * CHUNK + i < counts[r]
                                ? head_values + (size_t)slots[(size_t)r * K + c * CHUNK + i] * D : 0;
                        pack_values(rows_of, first, count, own);
                        _tile_loadd(4, own_weights, CHUNK * sizeof(uint16_t));
                        accumulate(own, count);
                    }
                }
                for (int j = 0; j < count; j++) {
                    switch (j) {  /* tile numbers are immediates */
                    case 0: _tile_stored(0, sums, TILE * sizeof(float)); break;
                    case 1: _tile_stored(1, sums, TILE * sizeof(float)); break;
                    case 2: _tile_stored(2, sums, TILE * sizeof(float)); break;
                    default: _tile_stored(3, sums, TILE * sizeof(float)); break;
                    }
                    for (int m = 0; m < rows; m++) {
                        const int i = t * TILE + m;
                        vstore_bf16(out + ((size_t)(i / groups) * H + g * groups + i % groups) * D + (first + j) * TILE,
                                    vmul(vload(sums + m * TILE), vbroadcast(norms[m])));
                    }
                }
            }
        }
    }
    free(packed_q);
}
#endif
