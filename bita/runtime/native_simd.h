/* What bita's native kernels (native_linear.c, native_attention.c, native_layer.c) share: bfloat16 <-> float32,
 * the float32 vector operations of the machine's widest SIMD (AVX-512, else AVX2 with FMA), chosen at compile
 * time (-march=native), and per-dtype loads, stores and roundings. Each kernel sums in an order fixed by its own data, never by how many rows a pass holds. */
#ifndef BITA_NATIVE_SIMD_H
#define BITA_NATIVE_SIMD_H
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

static inline float bf16_to_float(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t float_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#if defined(__AVX512F__)
#define LANES 16
typedef __m512 vec;
static inline vec vzero(void) { return _mm512_setzero_ps(); }
static inline vec vbroadcast(float f) { return _mm512_set1_ps(f); }
static inline vec vload(const float *p) { return _mm512_loadu_ps(p); }
static inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline void vstore(float *p, vec v) { _mm512_storeu_ps(p, v); }
/* 16 bf16 pairs (32 values) -> the even-k and odd-k halves as floats */
static inline void vload_pairs(const uint16_t *p, vec *even, vec *odd) {
    __m512i v = _mm512_loadu_si512(p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}
static inline vec vload_bf16(const uint16_t *p) {  /* LANES bf16 -> floats */
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
static inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm512_sub_ps(a, b); }
static inline vec vmul(vec a, vec b) { return _mm512_mul_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm512_max_ps(a, b); }
static inline vec vmin(vec a, vec b) { return _mm512_min_ps(a, b); }
static inline vec vdiv(vec a, vec b) { return _mm512_div_ps(a, b); }
static inline vec vfloor(vec a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
static inline vec vpow2(vec n) {  /* 2^n for whole n in [-126, 127] */
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
}
static inline vec vzero_below(vec x, vec limit, vec y) {  /* y, with 0 where x < limit */
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, limit, _CMP_LT_OQ), y, _mm512_setzero_ps());
}
static inline float vsum(vec v) { return _mm512_reduce_add_ps(v); }  /* the lanes' sum, in one fixed order */
#if defined(__AVX512BF16__)
static inline void vstore_bf16(uint16_t *p, vec v) { _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(v)); }
#else
static inline void vstore_bf16(uint16_t *p, vec v) {  /* float_to_bf16, lane by lane */
    __m512i u = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                                                         _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), 16);
    __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    rounded = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, nan);
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(rounded));
}
#endif
#define ISA_NAME "avx512"
#elif defined(__AVX2__) && defined(__FMA__)
#define LANES 8
typedef __m256 vec;
static inline vec vzero(void) { return _mm256_setzero_ps(); }
static inline vec vbroadcast(float f) { return _mm256_set1_ps(f); }
static inline vec vload(const float *p) { return _mm256_loadu_ps(p); }
static inline vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline void vstore(float *p, vec v) { _mm256_storeu_ps(p, v); }
static inline void vload_pairs(const uint16_t *p, vec *even, vec *odd) {
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    *odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}
static inline vec vload_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline vec vadd(vec a, vec b) { return _mm256_add_ps(a, b); }
static inline vec vsub(vec a, vec b) { return _mm256_sub_ps(a, b); }
static inline vec vmul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vec vmax(vec a, vec b) { return _mm256_max_ps(a, b); }
static inline vec vmin(vec a, vec b) { return _mm256_min_ps(a, b); }
static inline vec vdiv(vec a, vec b) { return _mm256_div_ps(a, b); }
static inline vec vfloor(vec a) { return _mm256_floor_ps(a); }
static inline vec vpow2(vec n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
}
static inline vec vzero_below(vec x, vec limit, vec y) {
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, limit, _CMP_LT_OQ));
}
static inline float vsum(vec v) {  /* the lanes' sum, in one fixed order: halves, then quarters, then pairs */
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}
static inline void vstore_bf16(uint16_t *p, vec v) {  /* float_to_bf16, lane by lane */
    __m256i u = _mm256_castps_si256(v), one = _mm256_set1_epi32(1);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                                                         _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), 16);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    rounded = _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0xD8);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}
#define ISA_NAME "avx2"
#else
#error "the native kernel needs AVX2 and FMA, or AVX-512"
#endif

/* e^x, lane by lane: Cephes' range reduction and polynomial; 0 below -87.3 (where e^x leaves float32's normal
 * range) and for -inf, x clamped to 88.3 above. A lane's result depends on its own x alone. */
static inline vec vexp(vec x) {
    vec low = vbroadcast(-87.3f), clamped = vmin(vmax(x, low), vbroadcast(88.3f));
    vec n = vfloor(vfma(clamped, vbroadcast(1.44269504088896341f), vbroadcast(0.5f)));
    vec r = vsub(vsub(clamped, vmul(n, vbroadcast(0.693359375f))), vmul(n, vbroadcast(-2.12194440e-4f)));
    vec y = vbroadcast(1.9875691500e-4f);
    y = vfma(y, r, vbroadcast(1.3981999507e-3f));
    y = vfma(y, r, vbroadcast(8.3334519073e-3f));
    y = vfma(y, r, vbroadcast(4.1665795894e-2f));
    y = vfma(y, r, vbroadcast(1.6666665459e-1f));
    y = vfma(y, r, vbroadcast(5.0000001201e-1f));
    y = vadd(vfma(y, vmul(r, r), r), vbroadcast(1.0f));
    return vzero_below(x, low, vmul(y, vpow2(n)));
}

/* per dtype (suffix u16: bfloat16, f: float32): LANES values (or one) loaded as floats, stored rounded, and rounded to the dtype and back */
static inline vec vload_u16(const uint16_t *p) { return vload_bf16(p); }
static inline vec vload_f(const float *p) { return vload(p); }
static inline void vstore_u16(uint16_t *p, vec v) { vstore_bf16(p, v); }
static inline void vstore_f(float *p, vec v) { vstore(p, v); }
static inline vec vround_u16(vec v) { uint16_t narrow[LANES]; vstore_bf16(narrow, v); return vload_bf16(narrow); }
static inline vec vround_f(vec v) { return v; }
static inline float load_u16(const uint16_t *p) { return bf16_to_float(*p); }
static inline float load_f(const float *p) { return *p; }
static inline void store_u16(uint16_t *p, float v) { *p = float_to_bf16(v); }
static inline void store_f(float *p, float v) { *p = v; }
static inline float round_u16(float v) { return bf16_to_float(float_to_bf16(v)); }
static inline float round_f(float v) { return v; }

#endif
