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
#include "native_tiles.h"

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

ROW_CASES(tile_bf16, float, uint16_t, uint16_t)
ROW_CASES(tile_f32, float, float, float)
#if defined(__AVX512BF16__)
ROW_CASES(tile_dot, uint32_t, uint16_t, uint16_t)
#endif

LINEAR(, bita_linear_bf16, uint16_t, uint16_t, float, tile_bf16, (size_t)((K + 1) / 2) * TILE * 2, (K + 1) / 2 * 2,
       panel_u16, u16, ROWS, PARTS)
LINEAR(, bita_linear_f32, float, float, float, tile_f32, (size_t)K * TILE, K, panel_f, f, ROWS, PARTS)
#if defined(__AVX512BF16__)
/* bf16 by vdpbf16ps on native_linear.c's packing (bita_pack_bf16): the "dot" kernel of the plan */
LINEAR(, bita_dot_linear, uint16_t, uint16_t, uint32_t, tile_dot, (size_t)((K + 1) / 2) * TILE * 2, (K + 1) / 2,
       panel_pair, u16, ROWS, PARTS)
#endif
