/* The elementwise work of a Llama-family layer, one call each instead of several torch operations: RMSNorm,
 * rotary embedding (in place) and SiLU(gate) x up, in bfloat16 or float32. Each computes in float32 what
 * transformers computes, rounding to the tensor's dtype where its torch operations store a result (so bfloat16
 * results stay within one rounding of transformers'); a row's result depends on that row alone, and every sum
 * runs in an order fixed by the row's length (row-invariant by construction). */
#include <math.h>
#include "native_simd.h"

/* out [R, H] = weight * (x / sqrt(mean(x^2) + eps)), x [R, H] (rows ``stride`` apart), weight [H]: transformers'
 * LlamaRMSNorm (the normalised row rounded to the dtype, then times the weight, rounded) */
#define RMS_NORM(name, type, S)                                                                                  \
void name(const type *x, const type *weight, type *out, int R, int H, int stride, float eps, int threads) {     \
    _Pragma("omp parallel for schedule(static) num_threads(threads) if (R > 1)")                                 \
    for (int r = 0; r < R; r++) {                                                                                \
        const type *row = x + (size_t)r * stride;                                                                \
        type *o = out + (size_t)r * H;                                                                           \
        vec squares = vzero();                                                                                   \
        int h = 0;                                                                                               \
        for (; h + LANES <= H; h += LANES) { vec v = vload_##S(row + h); squares = vfma(v, v, squares); }        \
        float total = vsum(squares);                                                                             \
        for (int t = h; t < H; t++) { float v = load_##S(row + t); total += v * v; }                             \
        float scale = 1.0f / sqrtf(total / H + eps);                                                             \
        for (h = 0; h + LANES <= H; h += LANES)                                                                  \
            vstore_##S(o + h, vmul(vload_##S(weight + h), vround_##S(vmul(vload_##S(row + h), vbroadcast(scale))))); \
        for (int t = h; t < H; t++) store_##S(o + t, load_##S(weight + t) * round_##S(load_##S(row + t) * scale)); \
    }                                                                                                            \
}
RMS_NORM(bita_rms_norm_bf16, uint16_t, u16)
RMS_NORM(bita_rms_norm_f32, float, f)

/* x [R, heads, D] (rows ``stride`` apart, heads D apart) rotated in place by cos, sin [R, D] (each row's
 * position): x cos + rotate_half(x) sin, rotate_half(x) = (-x[D/2:], x[:D/2]); each product and the sum rounded */
#define ROTARY(name, type, S)                                                                                    \
void name(type *x, const type *cos, const type *sin, int R, int heads, int D, int stride, int threads) {        \
    int half = D / 2;                                                                                            \
    _Pragma("omp parallel for schedule(static) num_threads(threads) if (R > 1)")                                 \
    for (int r = 0; r < R; r++) {                                                                                \
        const type *c = cos + (size_t)r * D, *s = sin + (size_t)r * D;                                           \
        for (int head = 0; head < heads; head++) {                                                               \
            type *v = x + (size_t)r * stride + (size_t)head * D;                                                 \
            float rotated[512];                                                                                  \
            for (int i = 0; i < D; i++) rotated[i] = i < half ? -load_##S(v + i + half) : load_##S(v + i - half); \
            int i = 0;                                                                                           \
            for (; i + LANES <= D; i += LANES) {                                                                 \
                vec first = vround_##S(vmul(vload_##S(v + i), vload_##S(c + i)));                                \
                vec second = vround_##S(vmul(vround_##S(vload(rotated + i)), vload_##S(s + i)));                 \
                vstore_##S(v + i, vadd(first, second));                                                          \
            }                                                                                                    \
            for (; i < D; i++)                                                                                   \
                store_##S(v + i, round_##S(load_##S(v + i) * load_##S(c + i)) + round_##S(rotated[i] * load_##S(s + i))); \
        }                                                                                                        \
    }                                                                                                            \
}
ROTARY(bita_rotary_bf16, uint16_t, u16)
ROTARY(bita_rotary_f32, float, f)

/* gate_up [R, 2I] (gate, then up) -> out [R, I] = silu(gate) * up, silu(g) = g / (1 + e^-g) rounded */
#define SILU_MUL(name, type, S)                                                                                  \
void name(const type *gate_up, type *out, int R, int I, int threads) {                                           \
    _Pragma("omp parallel for schedule(static) num_threads(threads) if (R > 1)")                                 \
    for (int r = 0; r < R; r++) {                                                                                \
        const type *gate = gate_up + (size_t)r * 2 * I, *up = gate + I;                                          \
        type *o = out + (size_t)r * I;                                                                           \
        int i = 0;                                                                                               \
        for (; i + LANES <= I; i += LANES) {                                                                     \
            vec g = vload_##S(gate + i);                                                                         \
            vec silu = vround_##S(vdiv(g, vadd(vbroadcast(1.0f), vexp(vsub(vzero(), g)))));                      \
            vstore_##S(o + i, vmul(silu, vload_##S(up + i)));                                                    \
        }                                                                                                        \
        for (; i < I; i++) {                                                                                     \
            float lanes[LANES], g = load_##S(gate + i);                                                          \
            vstore(lanes, vexp(vbroadcast(-g)));                                                                 \
            store_##S(o + i, round_##S(g / (1.0f + lanes[0])) * load_##S(up + i));                              \
        }                                                                                                        \
    }                                                                                                            \
}
SILU_MUL(bita_silu_mul_bf16, uint16_t, u16)
SILU_MUL(bita_silu_mul_f32, float, f)
