/* Row-invariant attention over a static KV cache: bita's native attention (native.py builds it with
 * native_linear.c and native_layer.c into one library).
 *
 * Row r sees the cache slots j < K where allowed[r, j]; those slots, in slot order, are its *logical* keys, the
 * same sequence in a one-row AR pass and in a tree pass (a tree row's ancestors sit in its slots in depth order;
 * its siblings' slots are not allowed). Everything a row computes is indexed by its logical keys alone: the
 * scores (dot products over the head dimension in lanes, then the lanes' sum), their maximum, e^(score - max)
 * (vexp, lane by lane), the weights' sum (lanes by logical index, then their sum) and the weighted values (added
 * key after key in logical order). So a row's output does not depend on the pass's other rows nor on where its
 * keys sit, which is what greedy BiTA's identity with AR needs (bita/runtime/exact_attention.py, the same promise
 * in torch operations). Queries of the G heads that share a key/value head are taken together, so each key and
 * value is read once per row and group. */
#include <math.h>
#include <stdlib.h>
#include "native_simd.h"

#define MAX_GROUPS 16  /* query heads per key/value head */
#define MAX_DIM 256   /* head dimension, a multiple of LANES */

/* q [R, H, D], keys/values [KV, capacity, D], allowed [R, K] (0/1 bytes), out [R, H, D]; H = KV x groups;
 * S: the dtype's suffix of native_simd.h's loads and stores (u16: bfloat16, f: float32). */
#define ATTEND(name, type, S)                                                                                    \
void name(const type *q, const type *keys, const type *values, const uint8_t *allowed, type *out, int R, int H,  \
          int KV, int D, int capacity, int K, float scale, int threads) {                                        \
    int groups = H / KV, chunks = D / LANES;                                                                     \
    _Pragma("omp parallel num_threads(threads)")                                                                 \
    {                                                                                                            \
        int *slots = malloc(sizeof(int) * (K + LANES));                                                          \
        float *scores = malloc(sizeof(float) * groups * (K + LANES));                                            \
        _Pragma("omp for schedule(static)")                                                                      \
        for (int item = 0; item < R * KV; item++) {                                                              \
            int r = item / KV, g = item % KV, count = 0, padded;                                                 \
            for (int j = 0; j < K; j++) if (allowed[(size_t)r * K + j]) slots[count++] = j;                      \
            padded = (count + LANES - 1) / LANES * LANES;                                                        \
            vec query[MAX_GROUPS][MAX_DIM / LANES], total[MAX_GROUPS], acc[MAX_GROUPS][MAX_DIM / LANES];         \
            float best[MAX_GROUPS];                                                                              \
            for (int h = 0; h < groups; h++) {                                                                   \
                for (int c = 0; c < chunks; c++) query[h][c] = vload_##S(q + ((size_t)r * H + g * groups + h) * D + c * LANES); \
                best[h] = -INFINITY;                                                                             \
            }                                                                                                    \
            for (int t = 0; t < count; t++) {  /* scores, in logical order */                                    \
                const type *key = keys + ((size_t)g * capacity + slots[t]) * D;                                  \
                vec k[MAX_DIM / LANES];                                                                          \
                for (int c = 0; c < chunks; c++) k[c] = vload_##S(key + c * LANES);                               \
                for (int h = 0; h < groups; h++) {                                                               \
                    vec dot = vzero();                                                                           \
                    for (int c = 0; c < chunks; c++) dot = vfma(query[h][c], k[c], dot);                         \
                    float s = vsum(dot) * scale;                                                                 \
                    scores[h * (K + LANES) + t] = s;                                                             \
                    if (s > best[h]) best[h] = s;                                                                \
                }                                                                                                \
            }                                                                                                    \
            for (int h = 0; h < groups; h++) {  /* weights e^(s - max), by logical index; their sum */           \
                float *row = scores + h * (K + LANES);                                                           \
                for (int t = count; t < padded; t++) row[t] = -INFINITY;                                         \
                vec sum = vzero(), top = vbroadcast(best[h]);                                                    \
                for (int t = 0; t < padded; t += LANES) {                                                        \
                    vec w = vexp(vsub(vload(row + t), top));                                                     \
                    vstore(row + t, w);                                                                          \
                    sum = vadd(sum, w);                                                                          \
                }                                                                                                \
                total[h] = sum;                                                                                  \
                for (int c = 0; c < chunks; c++) acc[h][c] = vzero();                                            \
            }                                                                                                    \
            for (int t = 0; t < count; t++) {  /* weighted values, key after key in logical order */             \
                const type *value = values + ((size_t)g * capacity + slots[t]) * D;                              \
                vec v[MAX_DIM / LANES];                                                                          \
                for (int c = 0; c < chunks; c++) v[c] = vload_##S(value + c * LANES);                               \
                for (int h = 0; h < groups; h++) {                                                               \
                    vec w = vbroadcast(scores[h * (K + LANES) + t]);                                             \
                    for (int c = 0; c < chunks; c++) acc[h][c] = vfma(w, v[c], acc[h][c]);                       \
                }                                                                                                \
            }                                                                                                    \
            for (int h = 0; h < groups; h++) {                                                                   \
                float sum = vsum(total[h]), norm = sum > 0.0f ? 1.0f / sum : 0.0f, lanes[LANES];                 \
                type *o = out + ((size_t)r * H + g * groups + h) * D;                                            \
                for (int c = 0; c < chunks; c++) {                                                               \
                    vstore(lanes, vmul(acc[h][c], vbroadcast(norm)));                                            \
                    for (int i = 0; i < LANES; i++) store_##S(o + c * LANES + i, lanes[i]);                       \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        free(slots);                                                                                             \
        free(scores);                                                                                            \
    }                                                                                                            \
}

ATTEND(bita_attend_bf16, uint16_t, u16)
ATTEND(bita_attend_f32, float, f)

int bita_attention_limits(int *groups, int *dim) { *groups = MAX_GROUPS; *dim = MAX_DIM; return LANES; }
