/* Products on 4-bit weights (the Q4 panels of q4/kernels.c) with integer dot products, for CPUs
 * without AMX tiles: AVX-512 VNNI (VPDPBUSD on 512-bit vectors: AMD Zen 4, Intel since Cascade
 * Lake) and AVX2 (VPMADDUBSW + VPMADDWD: any x86-64-v3 CPU).
 *
 * The method is ggml's Q4_0 × Q8_0 dot product (llama.cpp, ggml-quants.c: quantize_row_q8_0 and
 * ggml_vec_dot_q4_0_q8_0), written here for qkv's panel layout and for many rows at a time:
 *  - each row of x is quantised per block of 32 inputs: d_x = max|x_block| / 127 (float32),
 *    xq = round(x / d_x) ∈ [−127, 127] (int8), and s = Σ xq over the block (int32);
 *  - a weight is (q − 8)·d_w with q a nibble 0..15: VPDPBUSD multiplies unsigned bytes by signed
 *    bytes, so q goes in as u8 and xq as s8, and the −8 is taken out once per block as −8·s
 *    (the running int32 sum starts there); 32 products of at most 15·127 plus 8·32·127: the int32
 *    sum I = Σ (q − 8)·xq is exact, |I| ≤ 32 512 < 2^24, so converting it to float32 is exact too;
 *  - one scale a block: acc += float(I) · (d_w · d_x), float32 sums across blocks, bias last
 *    (then BERT's GELU, as the other 4-bit kernels).
 * Outputs run across vector lanes (16 a zmm, 8 a ymm), four consecutive inputs in each 32-bit
 * lane, so a row's four bytes of xq are broadcast to every lane. The Q4 panels keep inputs as
 * rows of 16 bytes (output j low nibble, j + 16 high): each panel is transposed into that order,
 * 1024 unpacked bytes a block (expand_panel: a 4 × 16 byte transpose with SSE2 unpacks), once a
 * call, into a per-thread buffer that every row tile then reads.
 *
 * Error bound (tests/kernels/test_q4.py holds the kernel to it, docs/engine.md states it), against
 * the float64 product y = Σ_k x_k·w_k over the dequantized W:
 *   x_k = d_x·xq_k + e_k with |e_k| ≤ d_x/2 (rounding to nearest) plus the float32 rounding of
 *   d_x and x·(127 / max|x|) (3 roundings: ≤ 3·2^-24·127·d_x < 2^-15·d_x), so per block
 *   |e_k| ≤ (1/2 + 2^-15)·d_x. The integer sums are exact, so
 *     Σ_b d_w·d_x·I_b = Σ_k w_k·(x_k − e_k)  and  |quantisation error| ≤ (1/2 + 2^-15)·Σ_b d_x,b·Σ_{k∈b} |w_k|;
 *   since |q − 8| ≤ 8, Σ_{k∈b}|w_k| ≤ 256·|d_w,b|: at most 128.01·Σ_b |d_w,b|·d_x,b per output.
 *   The float32 work adds, for nb = K/32 blocks (one rounding of d_w·d_x, nb fused multiply-adds
 *   into the running sum, then the bias: Higham §3.1), at most γ_(nb+2)·(Σ_b |d_w·d_x·I_b| + |b|),
 *   and Σ_b |d_w·d_x·I_b| ≤ Σ_k |w_k|·(|x_k| + |e_k|); γ_n = n·2^-24 / (1 − n·2^-24). So
 *     |ŷ − y| ≤ Q + γ_(nb+2)·(Σ_k |x_k||w_k| + Q + |b|),  Q = (1/2 + 2^-15)·Σ_b d_x,b·Σ_{k∈b} |w_k|,
 *   the bound tests/kernels/test_q4.py asserts (GELU after: its slope ≤ 1.13).
 * The first term dominates: about 2^-8 of the block's largest |x| per weight magnitude, where the
 * float32 and tile kernels' error is about 2^-24·K. It is a worst case; the errors of a real
 * product are of both signs and mostly cancel (multilingual-e5-small's embeddings stay at cosine
 * ≥ 0.9995 to the float64 model: tests/model/test_e5_int8.py).
 * NaN or infinite activations do not survive quantisation as they do in float32: not for encoders.
 *
 * The caller (qkv.kernels.q4) runs a unit only where qkv_q4_int_cpu() says the CPU and OS have it;
 * each function carries its own target attribute, so the library builds for any x86-64 target.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PANEL 32
#define QBLOCK 32
#define QBLOCK_BYTES (PANEL * 4 + QBLOCK * PANEL / 2) /* 640: q4/kernels.c's layout */
#define WBLOCK 1024                                    /* a block transposed: 8 groups × 2 halves × 64 bytes */

void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width); /* float32/kernels.c */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define INT_VNNI 1 /* AVX-512 F, BW and VNNI (and AVX2), with the OS saving the ZMM state */
#define INT_AVX2 2 /* AVX2 and FMA, with the OS saving the YMM state */

/* What this CPU and OS offer the integer products (bits above). GCC's __builtin_cpu_supports reads
 * CPUID and, for AVX and AVX-512, XGETBV (whether the OS saves the YMM / ZMM state). */
int64_t qkv_q4_int_cpu(void)
{
    __builtin_cpu_init();
    int64_t bits = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) bits |= INT_AVX2;
    if ((bits & INT_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vnni"))
        bits |= INT_VNNI; /* x is quantised with AVX2 on either unit */
    return bits;
}

static __thread void *q_buf = NULL, *w_buf = NULL; /* per-thread scratch kept between calls */
static __thread size_t q_have = 0, w_have = 0;
void *qkv_q4_grow(void **buf, size_t *have, size_t need); /* q4/amx.c */

#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* One block of 32 floats v as the integer products read it: xq (int8), d_x and −8·Σ xq, the sum
 * VPDPBUSD's unsigned nibbles owe back. AVX2 (every CPU with either unit has it). VCVTPS2DQ rounds
 * to nearest even (the default MXCSR), as numpy.rint in the tests. */
T_AVX2 static inline __attribute__((always_inline)) void quantize_block(const float *v, int8_t *xq, float *dx,
                                                                        int32_t *corr)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), lim = _mm256_set1_epi32(127);
    __m256 a[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        a[i] = _mm256_loadu_ps(v + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, a[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i q[4], sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) { /* |x·inv| ≤ 127 but for rounding: clamp all the same */
        q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(a[i], inv));
        q[i] = _mm256_max_epi32(_mm256_min_epi32(q[i], lim), _mm256_sub_epi32(_mm256_setzero_si256(), lim));
        sum = _mm256_add_epi32(sum, q[i]);
    }
    /* int32 → int8: the packs work within 128-bit lanes; the permute puts the 4-byte groups back in order */
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256((__m256i *)xq, _mm256_permutevar8x32_epi32(p, order));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    *dx = amax / 127.0f;
    *corr = -8 * _mm_cvtsi128_si32(s4);
}

/* quantize_block on two zmm, for the VNNI unit: the same steps on the same values (the maximum,
 * 127 / max, the products, VCVTPS2DQ's rounding and the clamp are exact or correctly rounded lane
 * by lane), so the same xq, d_x and −8·Σ xq bit for bit (tests/kernels/test_q4.py: the two units
 * give the same bits). Fewer instructions: one 16-lane maximum, VPMOVSDB's narrowing for the
 * packs (after the clamp to ±127, so it never saturates), Σ xq by VPSADBW on xq + 128. */
T_VNNI static inline __attribute__((always_inline)) void quantize_block_512(const float *v, int8_t *xq, float *dx,
                                                                            int32_t *corr)
{
    const __m512 a0 = _mm512_loadu_ps(v), a1 = _mm512_loadu_ps(v + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a0), _mm512_abs_ps(a1)));
    const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
    const __m512i q0 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a0, inv)), lim), nlim);
    const __m512i q1 = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a1, inv)), lim), nlim);
    const __m256i b = _mm256_set_m128i(_mm512_cvtsepi32_epi8(q1), _mm512_cvtsepi32_epi8(q0));
    _mm256_storeu_si256((__m256i *)xq, b);
    /* Σ (xq + 128) over each 8 bytes (xq + 128 is xq XOR 0x80 as an unsigned byte), then the 4 sums */
    const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(b, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    *dx = amax / 127.0f;
    *corr = -8 * ((int32_t)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128);
}

/* One panel's blocks transposed for the integer products: block kb at w + kb·1024, group g
 * (inputs 4g..4g + 3) at + g·128: 64 bytes of outputs 0..15, then 64 of outputs 16..31, output j's
 * four nibbles (inputs 4g..4g + 3, values 0..15) in bytes 4j..4j + 3. SSE2 only: any x86-64. */
static void expand_panel(const uint8_t *panel, int64_t nb, uint8_t *w)
{
    const __m128i m = _mm_set1_epi8(15);
    for (int64_t kb = 0; kb < nb; kb++) {
        const uint8_t *q = panel + kb * QBLOCK_BYTES + PANEL * 4;
        uint8_t *o = w + kb * WBLOCK;
        for (int g = 0; g < 8; g++) {
            const __m128i r0 = _mm_loadu_si128((const __m128i *)(q + (4 * g) * 16));
            const __m128i r1 = _mm_loadu_si128((const __m128i *)(q + (4 * g + 1) * 16));
            const __m128i r2 = _mm_loadu_si128((const __m128i *)(q + (4 * g + 2) * 16));
            const __m128i r3 = _mm_loadu_si128((const __m128i *)(q + (4 * g + 3) * 16));
            const __m128i a = _mm_unpacklo_epi8(r0, r1), b = _mm_unpackhi_epi8(r0, r1);
            const __m128i c = _mm_unpacklo_epi8(r2, r3), d = _mm_unpackhi_epi8(r2, r3);
            const __m128i v[4] = {_mm_unpacklo_epi16(a, c), _mm_unpackhi_epi16(a, c), /* outputs 0-3, 4-7 */
                                  _mm_unpacklo_epi16(b, d), _mm_unpackhi_epi16(b, d)}; /* 8-11, 12-15 */
            for (int i = 0; i < 4; i++) {
                _mm_store_si128((__m128i *)(o + g * 128 + 16 * i), _mm_and_si128(v[i], m));
                _mm_store_si128((__m128i *)(o + g * 128 + 64 + 16 * i), _mm_and_si128(_mm_srli_epi16(v[i], 4), m));
            }
        }
    }
}

/* expand_panel for the VNNI unit, the same bytes: a group's four input rows are 64 contiguous
 * bytes (row i in 128-bit lane i, output j's byte at 16·i + j); VPERMD gathers the dword of
 * outputs 4L..4L + 3 from each row into lane L, VPSHUFB transposes each lane's 4 × 4 bytes so
 * output j's four inputs are adjacent, and the nibbles are split as there. One load, four vector
 * operations and two stores a group against four loads, 18 and eight (AVX-512 F and BW only). */
T_VNNI static void expand_panel_512(const uint8_t *panel, int64_t nb, uint8_t *w)
{
    const __m512i m = _mm512_set1_epi8(15);
    const __m512i lanes = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i bytes = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    for (int64_t kb = 0; kb < nb; kb++) {
        const uint8_t *q = panel + kb * QBLOCK_BYTES + PANEL * 4;
        uint8_t *o = w + kb * WBLOCK;
        for (int g = 0; g < 8; g++) {
            const __m512i v = _mm512_loadu_si512((const void *)(q + g * 64));
            const __m512i t = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(lanes, v), bytes);
            _mm512_store_si512((void *)(o + g * 128), _mm512_and_si512(t, m));
            _mm512_store_si512((void *)(o + g * 128 + 64), _mm512_and_si512(_mm512_srli_epi16(t, 4), m));
        }
    }
}

static inline int32_t load4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ------------------------------------------------------------------ AVX-512 VNNI: 16 outputs a zmm */
#define VNNI_ROWS 6 /* 6 rows × (2 int32 + 2 float32 sums) = 24 zmm, + 2 weights, the broadcast, the scales */

/* y[r, 0:32] = Σ_kb float(I_kb)·(d_w·d_x) (+ bias) for r < rr rows of one panel. */
T_VNNI static inline __attribute__((always_inline)) void vnni_tile(const int8_t *xq, const float *dx,
                                                                   const int32_t *corr, int64_t K, const uint8_t *w,
                                                                   const uint8_t *panel, const float *bias, float *y,
                                                                   int64_t ldy, const int rr)
{
    const int64_t nb = K / QBLOCK;
    __m512 f0[VNNI_ROWS], f1[VNNI_ROWS];
    for (int r = 0; r < rr; r++) f0[r] = f1[r] = _mm512_setzero_ps();
    for (int64_t kb = 0; kb < nb; kb++) {
        const uint8_t *wb = w + kb * WBLOCK;
        const int8_t *xb = xq + kb * QBLOCK;
        __m512i i0[VNNI_ROWS], i1[VNNI_ROWS];
        for (int r = 0; r < rr; r++) i0[r] = i1[r] = _mm512_set1_epi32(corr[r * nb + kb]);
        for (int g = 0; g < 8; g++) {
            const __m512i w0 = _mm512_load_si512((const void *)(wb + g * 128));
            const __m512i w1 = _mm512_load_si512((const void *)(wb + g * 128 + 64));
            for (int r = 0; r < rr; r++) {
                const __m512i xv = _mm512_set1_epi32(load4(xb + r * K + 4 * g));
                i0[r] = _mm512_dpbusd_epi32(i0[r], w0, xv);
                i1[r] = _mm512_dpbusd_epi32(i1[r], w1, xv);
            }
        }
        const float *dw = (const float *)(panel + kb * QBLOCK_BYTES);
        const __m512 d0 = _mm512_loadu_ps(dw), d1 = _mm512_loadu_ps(dw + 16);
        for (int r = 0; r < rr; r++) {
            const __m512 s = _mm512_set1_ps(dx[r * nb + kb]);
            f0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[r]), _mm512_mul_ps(d0, s), f0[r]);
            f1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[r]), _mm512_mul_ps(d1, s), f1[r]);
        }
    }
    const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    for (int r = 0; r < rr; r++) {
        _mm512_storeu_ps(y + r * ldy, _mm512_add_ps(f0[r], b0));
        _mm512_storeu_ps(y + r * ldy + 16, _mm512_add_ps(f1[r], b1));
    }
}

T_VNNI static void vnni_rows(const int8_t *xq, const float *dx, const int32_t *corr, int64_t K, const uint8_t *w,
                             const uint8_t *panel, const float *bias, float *y, int64_t ldy, int64_t rr)
{
    switch (rr) { /* a constant row count per case: the sums stay in registers */
    case 1: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 1); break;
    case 2: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 2); break;
    case 3: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 3); break;
    case 4: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 4); break;
    case 5: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 5); break;
    default: vnni_tile(xq, dx, corr, K, w, panel, bias, y, ldy, VNNI_ROWS); break;
    }
}

/* ------------------------------------------------------- AVX2: 8 outputs a ymm, VPMADDUBSW + VPMADDWD */
#define AVX2_ROWS 2 /* 2 rows × 4 int32 sums + 4 weights + the broadcast and the ones: 16 ymm */

/* As vnni_tile; VPMADDUBSW sums pairs of u8·s8 into int16 (at most 2·15·127: no saturation),
 * VPMADDWD by ones sums pairs of those into int32: the four-byte sums of VPDPBUSD. The float32
 * sums stay in an L1 array (16 registers hold only the integer ones). */
T_AVX2 static inline __attribute__((always_inline)) void avx2_tile(const int8_t *xq, const float *dx,
                                                                   const int32_t *corr, int64_t K, const uint8_t *w,
                                                                   const uint8_t *panel, const float *bias, float *y,
                                                                   int64_t ldy, const int rr)
{
    const int64_t nb = K / QBLOCK;
    const __m256i ones = _mm256_set1_epi16(1);
    float acc[AVX2_ROWS][PANEL] __attribute__((aligned(32)));
    memset(acc, 0, sizeof acc);
    for (int64_t kb = 0; kb < nb; kb++) {
        const uint8_t *wb = w + kb * WBLOCK;
        const int8_t *xb = xq + kb * QBLOCK;
        __m256i s[AVX2_ROWS][4];
        for (int r = 0; r < rr; r++)
            for (int h = 0; h < 4; h++) s[r][h] = _mm256_set1_epi32(corr[r * nb + kb]);
        for (int g = 0; g < 8; g++) {
            __m256i wv[4];
            for (int h = 0; h < 4; h++) wv[h] = _mm256_load_si256((const __m256i *)(wb + g * 128 + 32 * h));
            for (int r = 0; r < rr; r++) {
                const __m256i xv = _mm256_set1_epi32(load4(xb + r * K + 4 * g));
                for (int h = 0; h < 4; h++)
                    s[r][h] = _mm256_add_epi32(s[r][h], _mm256_madd_epi16(_mm256_maddubs_epi16(wv[h], xv), ones));
            }
        }
        const float *dw = (const float *)(panel + kb * QBLOCK_BYTES);
        for (int r = 0; r < rr; r++) {
            const __m256 sx = _mm256_set1_ps(dx[r * nb + kb]);
            for (int h = 0; h < 4; h++) {
                const __m256 sc = _mm256_mul_ps(_mm256_loadu_ps(dw + 8 * h), sx);
                _mm256_store_ps(acc[r] + 8 * h,
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][h]), sc, _mm256_load_ps(acc[r] + 8 * h)));
            }
        }
    }
    for (int r = 0; r < rr; r++)
        for (int h = 0; h < 4; h++) {
            const __m256 b = bias ? _mm256_loadu_ps(bias + 8 * h) : _mm256_setzero_ps();
            _mm256_storeu_ps(y + r * ldy + 8 * h, _mm256_add_ps(_mm256_load_ps(acc[r] + 8 * h), b));
        }
}

T_AVX2 static void avx2_rows(const int8_t *xq, const float *dx, const int32_t *corr, int64_t K, const uint8_t *w,
                             const uint8_t *panel, const float *bias, float *y, int64_t ldy, int64_t rr)
{
    if (rr == 1) avx2_tile(xq, dx, corr, K, w, panel, bias, y, ldy, 1);
    else avx2_tile(xq, dx, corr, K, w, panel, bias, y, ldy, AVX2_ROWS);
}

static int cpu_bits = -1;
static __thread void *h_buf = NULL; /* the feed-forward's hidden layer in int8 blocks (qkv_q4_int_ffn) */
static __thread size_t h_have = 0;

/* Whether unit (1: AVX-512 VNNI, 2: AVX2) runs here and takes the shape. */
static int int_ok(int64_t K, int64_t N, int64_t unit)
{
    if (cpu_bits < 0) cpu_bits = (int)qkv_q4_int_cpu();
    if (K % QBLOCK || N % PANEL || K <= 0) return 0;
    return (unit == 1 && (cpu_bits & INT_VNNI)) || (unit == 2 && (cpu_bits & INT_AVX2));
}

/* Rows of x as int8 blocks: xq [R, K], d_x [R, K/32], −8·Σ xq [R, K/32], in one buffer. */
typedef struct {
    int8_t *xq;
    float *dx;
    int32_t *corr;
} qrows;

/* rows × nb blocks of 32 floats (row i's block b at src + i·lds + b·32) as rows r0 … and blocks b0 …
 * of the int8 rows q (width inputs a row) by quantize_block: xq, d_x and −8·Σ xq. Used for x [R, K]
 * (every block of every row) and for a tile of the feed-forward's hidden layer (one block). One pass
 * over x, but against only N/64 integer dot products per input for N outputs, so it must be vector
 * code (scalar, it took as long as the product for N = 384). The VNNI unit (1) takes
 * quantize_block_512, the same numbers. Own functions per target: quantize_block needs AVX2, which
 * callers without that target may not inline. */
#define QUANTIZE_BLOCKS(name, target, block)                                                                  \
    target static void name(const float *src, int64_t lds, int64_t rows, int64_t nb, const qrows *q,         \
                            int64_t width, int64_t r0, int64_t b0)                                            \
    {                                                                                                         \
        const int64_t qnb = width / QBLOCK;                                                                   \
        for (int64_t i = 0; i < rows; i++)                                                                    \
            for (int64_t b = 0; b < nb; b++)                                                                  \
                block(src + i * lds + b * QBLOCK, q->xq + (r0 + i) * width + (b0 + b) * QBLOCK,               \
                      q->dx + (r0 + i) * qnb + b0 + b, q->corr + (r0 + i) * qnb + b0 + b);                    \
    }
QUANTIZE_BLOCKS(quantize_blocks_avx2, T_AVX2, quantize_block)
QUANTIZE_BLOCKS(quantize_blocks_512, T_VNNI, quantize_block_512)

static void quantize_blocks(int64_t unit, const float *src, int64_t lds, int64_t rows, int64_t nb, const qrows *q,
                            int64_t width, int64_t r0, int64_t b0)
{
    if (unit == 1) quantize_blocks_512(src, lds, rows, nb, q, width, r0, b0);
    else quantize_blocks_avx2(src, lds, rows, nb, q, width, r0, b0);
}

/* expand_panel, by the unit's own instructions (the same bytes). */
static void expand(int64_t unit, const uint8_t *panel, int64_t nb, uint8_t *w)
{
    if (unit == 1) expand_panel_512(panel, nb, w);
    else expand_panel(panel, nb, w);
}

static int qrows_get(void **buf, size_t *have, int64_t R, int64_t K, qrows *q)
{
    const size_t xq_bytes = (size_t)(R * K + 63) / 64 * 64, d_bytes = (size_t)(R * (K / QBLOCK)) * 4;
    uint8_t *b = qkv_q4_grow(buf, have, xq_bytes + 2 * d_bytes);
    if (!b) return -1;
    q->xq = (int8_t *)b;
    q->dx = (float *)(b + xq_bytes);
    q->corr = (int32_t *)(b + xq_bytes + d_bytes);
    return 0;
}

/* The rows r … r + rr − 1 (rr ≤ the unit's row step) of one panel: y = their sums (+ bias). */
static void panel_rows(int64_t unit, const qrows *q, int64_t r, int64_t rr, int64_t K, const uint8_t *w,
                       const uint8_t *panel, const float *bias, float *y, int64_t ldy)
{
    const int64_t nb = K / QBLOCK;
    if (unit == 1) vnni_rows(q->xq + r * K, q->dx + r * nb, q->corr + r * nb, K, w, panel, bias, y, ldy, rr);
    else avx2_rows(q->xq + r * K, q->dx + r * nb, q->corr + r * nb, K, w, panel, bias, y, ldy, rr);
}

/* y [R, N] = x̂ · W (+ bias) for x already in int8 blocks. Panels outermost: each is transposed
 * once into an L1/L2 buffer (w) and every row tile reads it. */
static void int_product(int64_t unit, const qrows *q, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                        const float *bias, float *y, uint8_t *w)
{
    const int64_t nb = K / QBLOCK, per_panel = nb * QBLOCK_BYTES, step = unit == 1 ? VNNI_ROWS : AVX2_ROWS;
    for (int64_t p = 0; p < N / PANEL; p++) {
        const uint8_t *panel = panels + p * per_panel;
        expand(unit, panel, nb, w);
        for (int64_t r = 0; r < R; r += step)
            panel_rows(unit, q, r, R - r < step ? R - r : step, K, w, panel, bias ? bias + p * PANEL : NULL,
                       y + r * N + p * PANEL, N);
    }
}

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), then GELU if gelu (then bias must be given);
 * W as Q4 panels, K and N multiples of 32; unit 1: AVX-512 VNNI, 2: AVX2. Returns 0, or -1 when it
 * could not run (the CPU lacks the unit, a shape or no memory): the caller then runs the float32
 * kernel. */
int64_t qkv_q4_int(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N, const float *bias,
                   int gelu, float *y, int64_t unit)
{
    if (!int_ok(K, N, unit) || (gelu && !bias)) return -1;
    if (R <= 0) return 0;
    qrows q;
    uint8_t *w = qkv_q4_grow(&w_buf, &w_have, (size_t)(K / QBLOCK * WBLOCK));
    if (!w || qrows_get(&q_buf, &q_have, R, K, &q) != 0) return -1;
    quantize_blocks(unit, x, K, R, K / QBLOCK, &q, K, 0, 0);
    int_product(unit, &q, R, K, panels, N, gelu ? NULL : bias, y, w);
    if (gelu) qkv_bias_gelu(y, bias, R, N); /* gelu(sum + bias): the order the other kernels keep */
    return 0;
}

/* The feed-forward block's two products in one call: y [R, N] = GELU(x·W_in + b_in)·W_out (+ b_out,
 * may be NULL), x [R, K], W_in [K, I], W_out [I, N] as Q4 panels. The same numbers as qkv_q4_int
 * twice (with gelu, then without) bit for bit: each row tile's sums of W_in's panel go through the
 * same qkv_bias_gelu and the same quantize_block as there, but while the tile is in L1 — the
 * hidden layer (R × I, 4.7 MB float32 for 32 titles of e5) is never written as float32 nor read
 * back to be quantised, only its int8 blocks (a quarter of the bytes). Returns 0, or -1 as
 * qkv_q4_int (nothing written). */
int64_t qkv_q4_int_ffn(const float *x, int64_t R, int64_t K, const uint8_t *w_in, int64_t I, const float *b_in,
                       const uint8_t *w_out, int64_t N, const float *b_out, float *y, int64_t unit)
{
    if (!int_ok(K, I, unit) || !int_ok(I, N, unit) || !b_in) return -1;
    if (R <= 0) return 0;
    const int64_t nbk = K / QBLOCK, nbi = I / QBLOCK, step = unit == 1 ? VNNI_ROWS : AVX2_ROWS;
    qrows q, h;
    uint8_t *w = qkv_q4_grow(&w_buf, &w_have, (size_t)((nbk > nbi ? nbk : nbi) * WBLOCK));
    if (!w || qrows_get(&q_buf, &q_have, R, K, &q) != 0 || qrows_get(&h_buf, &h_have, R, I, &h) != 0) return -1;
    quantize_blocks(unit, x, K, R, K / QBLOCK, &q, K, 0, 0);
    float tile[VNNI_ROWS * PANEL] __attribute__((aligned(64)));
    for (int64_t p = 0; p < nbi; p++) { /* panel p of W_in gives block p of every hidden row */
        const uint8_t *panel = w_in + p * nbk * QBLOCK_BYTES;
        expand(unit, panel, nbk, w);
        for (int64_t r = 0; r < R; r += step) {
            const int64_t rr = R - r < step ? R - r : step;
            panel_rows(unit, &q, r, rr, K, w, panel, NULL, tile, PANEL);
            qkv_bias_gelu(tile, b_in + p * PANEL, rr, PANEL);
            quantize_blocks(unit, tile, PANEL, rr, 1, &h, I, r, p);
        }
    }
    int_product(unit, &h, R, I, w_out, N, b_out, y, w);
    return 0;
}

#else /* not x86-64 with GCC/Clang: no integer products; qkv runs the float32 kernel */
int64_t qkv_q4_int_cpu(void) { return 0; }
int64_t qkv_q4_int(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N, const float *bias,
                   int gelu, float *y, int64_t unit)
{
    (void)x, (void)R, (void)K, (void)panels, (void)N, (void)bias, (void)gelu, (void)y, (void)unit;
    return -1;
}
int64_t qkv_q4_int_ffn(const float *x, int64_t R, int64_t K, const uint8_t *w_in, int64_t I, const float *b_in,
                       const uint8_t *w_out, int64_t N, const float *b_out, float *y, int64_t unit)
{
    (void)x, (void)R, (void)K, (void)w_in, (void)I, (void)b_in, (void)w_out, (void)N, (void)b_out, (void)y, (void)unit;
    return -1;
}
#endif
