/* y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) (+ residual[M, N]) in bfloat16 on Intel's AMX tiles: bita's amx kernel
 * path (native.py builds it into the native library; where the compiler's -march=native does not enable AMX-BF16
 * it holds only bita_amx_enable, which says so).
 *
 * W is packed once into blocks of 16 outputs, each block one contiguous stream of chunks of 32 inputs, a chunk the
 * B tile TDPBF16PS reads: [ceil(N / 16)][ceil(K / 32)][16 pairs of k][16 outputs][2] (1 KB, rows of 64 bytes), N and
 * K padded with zero weights. x's rows go to A tiles as they lie ([rows][32 k] bf16, row stride K), or from a copy
 * whose rows are padded with zeros to whole chunks where K is not a multiple of 32. A block of up to 16 rows
 * accumulates in C tiles [rows][16] float32, GROUP blocks of outputs at once (GROUP C tiles, the A tile and B tiles
 * within the 8 tile registers); the tiles are configured with the rows the block really has.
 *
 * Rounding, from the ISA reference's pseudocode for TDPBF16PS (Intel SDM, "Intel AMX instructions"): for each row m
 * and output n of the C tile, the chunk's 16 even-k products and its 16 odd-k products accumulate into two float32
 * sums in the order of k (a bf16 product is exact in float32; each add rounds to nearest even, with DAZ and FTZ:
 * subnormal inputs read as zero, subnormal results are flushed, MXCSR ignored), then the two sums are added and the
 * result added to C[m][n]. Row m's sum reads row m of A and the B tile alone, and the chunks are taken in the order
 * of k, whatever M is and wherever the row sits in its tile or its pass: a row's result is the same in a pass of one
 * row and in a pass of many (row-invariant by construction; the kernel plan checks it, tests/runtime/
 * test_native_bf16_kernels.py too). The order is not native_linear.c's (one FMA a product), so the bits differ from
 * the native path's, not between passes. The epilogue adds the bias in float32 and rounds to bf16 to nearest even; with
 * a residual, y = residual + the product rounded to bf16 first (as torch adds them, as native_linear.c does).
 *
 * Linux grants the tile data state per process (arch_prctl ARCH_REQ_XCOMP_PERM, once, before any tile instruction:
 * bita_amx_enable, which native.py calls as it loads the library); the tile configuration is per thread, loaded by
 * each OpenMP thread at each call (another library may have configured the thread's tiles since). Threads split
 * the blocks of outputs into contiguous ranges as even as can be; a sweep prefetches each block's stream PREFETCH
 * bytes ahead. */
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "native_simd.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int bita_amx_granted;  /* bita_amx_enable succeeded: bf16 attention runs on the tiles (native_amx_attention.c) */

#if defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__AVX512F__)
#include <omp.h>

#define BLOCK 16  /* outputs a C tile holds: LANES on AVX-512, one vector a tile row */
#define CHUNK 32  /* inputs a tile row of A holds (64 bytes of bf16) */
#define GROUP 4   /* blocks of outputs a sweep accumulates at once: C tiles 0-3, A tile 4, B tiles 5-7 */
#define TILE_ROWS 16
#define TILE_BYTES 64  /* the bytes of every tile's row */
#define CHUNK_SIZE (CHUNK * BLOCK) /* bf16 in a packed chunk */
#define PREFETCH 2048  /* bytes ahead in each block's stream that a sweep prefetches (none, 4 and 8 KB were slower) */

/* 0 where this process may use the tiles (asked of Linux once a process; asking again is harmless), else errno. */
int bita_amx_enable(void) {
    const int status = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) ? errno : 0;
    bita_amx_granted = !status;
    return status;
}

/* w [N, K] -> p [ceil(N / BLOCK)][ceil(K / CHUNK)][CHUNK / 2][BLOCK][2], zero-padded. */
void bita_amx_pack(const uint16_t *w, uint16_t *p, int N, int K) {
    const int blocks = (N + BLOCK - 1) / BLOCK, chunks = (K + CHUNK - 1) / CHUNK;
    memset(p, 0, (size_t)blocks * chunks * CHUNK_SIZE * sizeof(uint16_t));
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            p[((((size_t)(n / BLOCK) * chunks + k / CHUNK) * (CHUNK / 2) + k % CHUNK / 2) * BLOCK + n % BLOCK) * 2 +
              k % 2] = w[(size_t)n * K + k];
}

/* This thread's tiles: 0-4 (C, A) with rows rows, 5-7 (B) with a chunk's 16 pairs of k; every row 64 bytes (the
 * AMX attention, native_amx_attention.c, configures all 16 rows). */
void bita_amx_configure(int rows) {
    struct { uint8_t palette, start_row, reserved[14]; uint16_t bytes[16]; uint8_t rows[16]; } config = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        config.bytes[t] = TILE_BYTES;
        config.rows[t] = t < 5 ? rows : CHUNK / 2;
    }
    __asm__ volatile("" : : "m"(config) : "memory");  /* GCC 12 does not see that LDTILECFG reads config: out of
                                                        * line, this function's stores to it were dropped */
    _tile_loadconfig(&config);
}

/* C tiles 0..blocks-1 = rows of a (row stride lda bf16) . the packed blocks from p on (each stride bf16 apart),
 * chunk after chunk, then stored to sums [rows][GROUP * BLOCK]. */
static void sweep(const uint16_t *a, size_t lda, const uint16_t *p, size_t stride, int blocks, int chunks,
                  float *sums) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int c = 0; c < chunks; c++, a += CHUNK, p += CHUNK_SIZE) {
        for (int j = 0; j < blocks; j++)
            for (int line = 0; line < CHUNK_SIZE * 2; line += 64)
                __builtin_prefetch((const char *)(p + j * stride) + PREFETCH + line);
        _tile_loadd(4, a, lda * 2);
        _tile_loadd(5, p, TILE_BYTES);
        _tile_dpbf16ps(0, 4, 5);
        if (blocks > 1) { _tile_loadd(6, p + stride, TILE_BYTES); _tile_dpbf16ps(1, 4, 6); }
        if (blocks > 2) { _tile_loadd(7, p + 2 * stride, TILE_BYTES); _tile_dpbf16ps(2, 4, 7); }
        if (blocks > 3) { _tile_loadd(5, p + 3 * stride, TILE_BYTES); _tile_dpbf16ps(3, 4, 5); }
    }
    const int ldsums = GROUP * BLOCK * sizeof(float);
    _tile_stored(0, sums, ldsums);
    if (blocks > 1) _tile_stored(1, sums + BLOCK, ldsums);
    if (blocks > 2) _tile_stored(2, sums + 2 * BLOCK, ldsums);
    if (blocks > 3) _tile_stored(3, sums + 3 * BLOCK, ldsums);
}

/* sums [rows][GROUP * BLOCK] (+ bias) to y's rows from column n0 on, width outputs; with a residual (y's shape),
 * residual + the sum rounded to bf16 first. */
static void store(const float *sums, const float *bias, const uint16_t *residual, uint16_t *y, int rows, int N,
                  int n0, int width) {
    for (int i = 0; i < rows; i++, sums += GROUP * BLOCK) {
        uint16_t *row = y + (size_t)i * N + n0;
        const uint16_t *add = residual ? residual + (size_t)i * N + n0 : 0;
        for (int c = 0; c < width; c += BLOCK) {
            if (c + BLOCK <= width) {
                const vec sum = bias ? vadd(vload(sums + c), vload(bias + n0 + c)) : vload(sums + c);
                vstore_u16(row + c, add ? vadd(vround_u16(sum), vload_u16(add + c)) : sum);
                continue;
            }
            for (int j = c; j < width; j++) {
                const float sum = bias ? sums[j] + bias[n0 + j] : sums[j];
                store_u16(row + j, add ? round_u16(sum) + load_u16(add + j) : sum);
            }
        }
    }
}

/* x [M, K], p packed, bias [N] float32 or NULL, residual [M, N] or NULL (added to the product), y [M, N];
 * threads: OpenMP threads over the blocks of outputs. */
void bita_amx_linear(const uint16_t *x, const uint16_t *p, const float *bias, const uint16_t *residual, uint16_t *y,
                     int M, int N, int K, int threads) {
    const int blocks = (N + BLOCK - 1) / BLOCK, chunks = (K + CHUNK - 1) / CHUNK, lda = chunks * CHUNK;
    const size_t stride = (size_t)chunks * CHUNK_SIZE;
    uint16_t *padded = 0;
    if (K != lda) { /* rows padded with zeros to whole chunks */
        padded = calloc((size_t)M * lda, sizeof(uint16_t));
        if (!padded) { /* no memory for the copy: NaN, never a wrong number */
            for (size_t i = 0; i < (size_t)M * N; i++) y[i] = 0x7fc0;
            return;
        }
        for (int i = 0; i < M; i++) memcpy(padded + (size_t)i * lda, x + (size_t)i * K, K * sizeof(uint16_t));
    }
    const uint16_t *a = padded ? padded : x;
    const size_t lda_a = padded ? lda : K;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), count = omp_get_num_threads();
        const int first = (int)((long)blocks * t / count), last = (int)((long)blocks * (t + 1) / count);
        float sums[TILE_ROWS * GROUP * BLOCK];
        int configured = 0; /* the tiles are left configured: releasing them cost 2.6 us a call and thread here */
        for (int b = first; b < last; b += GROUP) {
            const int group = last - b < GROUP ? last - b : GROUP, n0 = b * BLOCK;
            const int width = N - n0 < group * BLOCK ? N - n0 : group * BLOCK;
            for (int m0 = 0; m0 < M; m0 += TILE_ROWS) {
                const int rows = M - m0 < TILE_ROWS ? M - m0 : TILE_ROWS;
                if (rows != configured) bita_amx_configure(configured = rows);
                sweep(a + m0 * lda_a, lda_a, p + b * stride, stride, group, chunks, sums);
                store(sums, bias, residual ? residual + (size_t)m0 * N : 0, y + (size_t)m0 * N, rows, N, n0, width);
            }
        }
    }
    free(padded);
}
#else
/* -1: this build holds no AMX code (the compiler's -march=native did not enable AMX-BF16 here) */
int bita_amx_enable(void) { return -1; }
#endif
