/* A Llama-family decoder stack, one pass in one call: the layers' native kernels called in the order, on the
 * arguments, that lean_llama.py's run_layers calls them from Python on the native path (RMSNorm, the fused Q/K/V
 * product, rotary, the cache write, attention, the O product adding the residual, RMSNorm, the gate/up product,
 * SiLU x up, the down product adding the residual, the next RMSNorm), so a row's bits are the same either way; only
 * the ~300 Python calls a pass, their checks and the OpenMP threads' sleep between them are gone (a one-row pass of
 * the default model: 12.0 ms instead of 23.5 on a 2-vCPU Xeon). native_stack.py checks the arguments once a pass. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void bita_rms_norm_bf16(const uint16_t *, const uint16_t *, uint16_t *, int, int, int, float, int);
void bita_rms_norm_f32(const float *, const float *, float *, int, int, int, float, int);
void bita_rotary_bf16(uint16_t *, const uint16_t *, const uint16_t *, int, int, int, int, int);
void bita_rotary_f32(float *, const float *, const float *, int, int, int, int, int);
void bita_silu_mul_bf16(const uint16_t *, uint16_t *, int, int, int);
void bita_silu_mul_f32(const float *, float *, int, int, int);
void bita_linear_bf16(const uint16_t *, const uint16_t *, const float *, const uint16_t *, uint16_t *, int, int, int,
                      int);
void bita_linear_f32(const float *, const float *, const float *, const float *, float *, int, int, int, int);
void bita_blocks_linear_bf16(const uint16_t *, const uint8_t *, const float *, const uint16_t *, uint16_t *, int, int,
                             int, int);
void bita_blocks_linear_f32(const float *, const uint8_t *, const float *, const float *, float *, int, int, int, int);
void bita_attend_bf16(const uint16_t *, const uint16_t *, const uint16_t *, const uint8_t *, uint16_t *, int, int,
                      int, int, int, int, float, int);
void bita_attend_f32(const float *, const float *, const float *, const uint8_t *, float *, int, int, int, int, int,
                     int, float, int);
/* weak: native_amx.c defines the first only where the compiler enabled AMX-BF16, native_linear.c and native_blocks.c
 * the others only where it enabled AVX512-BF16 (native_stack.py asks for each only there) */
void bita_amx_linear(const uint16_t *, const uint16_t *, const float *, const uint16_t *, uint16_t *, int, int, int,
                     int) __attribute__((weak));
void bita_dot_linear(const uint16_t *, const uint16_t *, const float *, const uint16_t *, uint16_t *, int, int, int,
                     int) __attribute__((weak));
void bita_blocks_dot_linear(const uint16_t *, const uint8_t *, const float *, const uint16_t *, uint16_t *, int, int,
                            int, int) __attribute__((weak));
/* weak: native_blocks_q8.c defines these wherever AVX-512 comes with AVX512-BW, or the CPU has no AVX-512 */
void bita_blocks_q8_linear_bf16(const uint16_t *, const uint8_t *, const float *, const uint16_t *, uint16_t *, int,
                                int, int, int) __attribute__((weak));
void bita_blocks_q8_linear_f32(const float *, const uint8_t *, const float *, const float *, float *, int, int, int,
                               int) __attribute__((weak));

enum { NORM_IN, QKV, QKV_BIAS, OUT, OUT_BIAS, NORM_POST, GATE_UP, GATE_UP_BIAS, DOWN, DOWN_BIAS, PER_LAYER };

/* the products' kernel: native.py's KERNELS (Kernel.stack); the last three read GGUF blocks (native_blocks.c,
 * native_blocks_q8.c) */
enum { KERNEL_NATIVE, KERNEL_AMX, KERNEL_DOT, KERNEL_BLOCKS, KERNEL_BLOCKS_DOT, KERNEL_BLOCKS_Q8 };

typedef struct {
    int bf16, kernel, threads;
} Kernels;

static void rms_norm(Kernels k, const void *x, const void *weight, void *out, int R, int H, float eps) {
    if (k.bf16) bita_rms_norm_bf16(x, weight, out, R, H, H, eps, k.threads);
    else bita_rms_norm_f32(x, weight, out, R, H, H, eps, k.threads);
}

static void linear(Kernels k, const void *x, int64_t packed, int64_t bias, const void *residual, void *y, int M, int N,
                   int K) {
    const float *b = (const float *)(intptr_t)bias;
    const uint8_t *blocks = (const uint8_t *)(intptr_t)packed;
    if (k.kernel == KERNEL_BLOCKS_DOT) bita_blocks_dot_linear(x, blocks, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_BLOCKS_Q8 && k.bf16)
        bita_blocks_q8_linear_bf16(x, blocks, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_BLOCKS_Q8) bita_blocks_q8_linear_f32(x, blocks, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_BLOCKS && k.bf16)
        bita_blocks_linear_bf16(x, blocks, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_BLOCKS) bita_blocks_linear_f32(x, blocks, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_AMX)
        bita_amx_linear(x, (const void *)(intptr_t)packed, b, residual, y, M, N, K, k.threads);
    else if (k.kernel == KERNEL_DOT)
        bita_dot_linear(x, (const void *)(intptr_t)packed, b, residual, y, M, N, K, k.threads);
    else if (k.bf16) bita_linear_bf16(x, (const void *)(intptr_t)packed, b, residual, y, M, N, K, k.threads);
    else bita_linear_f32(x, (const void *)(intptr_t)packed, b, residual, y, M, N, K, k.threads);
}

/* weights [L * PER_LAYER + 1]: each layer's addresses in the enum's order (a packed weight as ``native.pack`` made
 * it for the kernel, a bias float32 [out] or 0), then the final norm's; kernel: KERNEL_* (AMX, DOT and BLOCKS_DOT: bf16
 * only, where the library holds them; else NATIVE runs, or for BLOCKS_DOT, BLOCKS; BLOCKS_Q8 where it holds it);
 * x [R, hidden] the rows' input (contiguous, not written), out [R, hidden] the final norm's output;
 * cos, sin [R, D] each row's rotary; allowed [R, K] which cache slots each row sees (K <= capacity);
 * kv [L, 2, kv_heads, capacity, D] the cache, the rows written at slots start .. start + R - 1;
 * inter: the MLP's width. Returns 0, or -1 where scratch memory could not be had or BLOCKS_Q8 is not held
 * (nothing computed; native.pack makes no BLOCKS_Q8 copy there). */
int bita_stack(const int64_t *weights, int L, int bf16, int kernel, const void *x, void *out, const void *cos,
               const void *sin, const uint8_t *allowed, int K, void *kv, int capacity, int start, int R, int hidden,
               int heads, int kv_heads, int D, int inter, float eps, float scale, int threads) {
    const int held = bf16 && (kernel == KERNEL_AMX ? !!bita_amx_linear
                              : kernel == KERNEL_DOT ? !!bita_dot_linear
                              : kernel == KERNEL_BLOCKS_DOT && bita_blocks_dot_linear);
    if (kernel == KERNEL_BLOCKS_Q8 && !bita_blocks_q8_linear_f32) return -1;  /* its copy is its own: no fallback */
    const int fallback = kernel >= KERNEL_BLOCKS ? KERNEL_BLOCKS : KERNEL_NATIVE;
    const Kernels k = {bf16, held || kernel == KERNEL_BLOCKS || kernel == KERNEL_BLOCKS_Q8 ? kernel : fallback,
                       threads};
    const size_t size = bf16 ? 2 : 4, width = (size_t)(heads + 2 * kv_heads) * D, q_size = (size_t)heads * D;
    const size_t kv_size = (size_t)kv_heads * D, lengths[] = {R * (size_t)hidden, R * (size_t)hidden,
        R * (size_t)hidden, R * width, R * q_size, R * q_size, R * 2 * (size_t)inter, R * (size_t)inter};
    char *parts[8], *scratch;
    size_t total = 0;
    for (int i = 0; i < 8; i++) total += lengths[i];
    if (!(scratch = malloc(total * size))) return -1;
    for (size_t i = 0, at = 0; i < 8; at += lengths[i++]) parts[i] = scratch + at * size;
    char *stream[2] = {parts[0], parts[1]}, *normed = parts[2], *projected = parts[3], *query = parts[4];
    char *attended = parts[5], *gate_up = parts[6], *activated = parts[7];
    const size_t layer_kv = 2 * kv_size * capacity, row_bytes = D * size;
    const void *residual = x;
    rms_norm(k, x, (const void *)(intptr_t)weights[NORM_IN], normed, R, hidden, eps);
    for (int l = 0; l < L; l++) {
        const int64_t *w = weights + (size_t)l * PER_LAYER;
        const void *norm_next = (const void *)(intptr_t)weights[(size_t)(l + 1) * PER_LAYER];  /* or the final */
        char *keys = (char *)kv + (size_t)l * layer_kv * size, *values = keys + kv_size * capacity * size;
        linear(k, normed, w[QKV], w[QKV_BIAS], 0, projected, R, (int)width, hidden);
        if (bf16) bita_rotary_bf16((void *)projected, cos, sin, R, heads + kv_heads, D, (int)width, threads);
        else bita_rotary_f32((void *)projected, cos, sin, R, heads + kv_heads, D, (int)width, threads);
        for (int r = 0; r < R; r++) {
            const char *row = projected + (size_t)r * width * size;
            memcpy(query + (size_t)r * q_size * size, row, q_size * size);
            for (int h = 0; h < kv_heads; h++) {
                const size_t slot = ((size_t)h * capacity + start + r) * row_bytes;
                memcpy(keys + slot, row + (q_size + (size_t)h * D) * size, row_bytes);
                memcpy(values + slot, row + (q_size + kv_size + (size_t)h * D) * size, row_bytes);
            }
        }
        if (bf16) bita_attend_bf16((void *)query, (void *)keys, (void *)values, allowed, (void *)attended, R, heads,
                                   kv_heads, D, capacity, K, scale, threads);
        else bita_attend_f32((void *)query, (void *)keys, (void *)values, allowed, (void *)attended, R, heads,
                             kv_heads, D, capacity, K, scale, threads);
        linear(k, attended, w[OUT], w[OUT_BIAS], residual, stream[0], R, hidden, (int)q_size);
        rms_norm(k, stream[0], (const void *)(intptr_t)w[NORM_POST], normed, R, hidden, eps);
        linear(k, normed, w[GATE_UP], w[GATE_UP_BIAS], 0, gate_up, R, 2 * inter, hidden);
        if (bf16) bita_silu_mul_bf16((void *)gate_up, (void *)activated, R, inter, threads);
        else bita_silu_mul_f32((void *)gate_up, (void *)activated, R, inter, threads);
        linear(k, activated, w[DOWN], w[DOWN_BIAS], stream[0], stream[1], R, hidden, inter);
        rms_norm(k, stream[1], norm_next, l + 1 < L ? normed : out, R, hidden, eps);
        residual = stream[1];  /* the next layer's O product writes stream[0] again: no output is its input */
    }
    free(scratch);
    return 0;
}
