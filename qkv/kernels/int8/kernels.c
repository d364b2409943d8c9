/* int8 products for float32 models (precision="int8"): W quantised once per output column and
 * block of BLOCK = 64 inputs (symmetric, wq ∈ [−127, 127], s_w[b, n] = max_{k∈b} |W[k, n]| / 127,
 * ggml's Q8_0 blocks, twice as long), x per row and block of 64 as each call starts, asymmetric (xq ∈ [−128, 127],
 * zero point z, s_x[r, b] = (hi − lo) / 255 over the block's range [lo, hi] ∋ 0), exact int32 sums,
 * one scale multiply-add per (row, block, column):
 *   y[r, n] = Σ_b T[r, b, n]·(s_x[r, b]·s_w[b, n]) + b[n],   T = Σ_{k∈b} (xq[r, k] − z[r, b])·wq[k, n].
 * The layout, the NumPy twin and the measurements that chose this are in __init__.py beside this file.
 *
 * The recipe is the one dynamic-quantisation engines use (ONNX Runtime's MatMulInteger with a
 * zero point for the uint8 activations, per tensor there; the VNNI and AVX2 integer dot products of
 * ggml's q8_0 code, one scale multiply per block); written here for qkv's layout, per row and block
 * rather than per tensor for x, and with the GELU and bias of BERT fused after the sums.
 *
 * Units, each behind a CPUID/XGETBV check (qkv_q4_int_cpu, q4/int8.c: the same features):
 *  - VNNI (AVX-512 F/BW/VNNI): VPDPBUSD multiplies unsigned bytes by signed bytes and adds four
 *    products into an int32 lane without saturation. x goes in shifted, xq + 128 ∈ [0, 255] (u8),
 *    the weights as they are (s8); the shift and the zero point are taken back per block and
 *    column: T = Σ (xq + 128)·wq − (z + 128)·Σ_{k∈b} wq[k, n]. 4 rows × 48 columns: 12 int32 sums
 *    and 12 float32 sums stay in zmm registers; per four inputs, 3 weight loads and 4 broadcasts
 *    feed 12 VPDPBUSD.
 *  - AVX2: VPMADDUBSW (u8 × s8, pairs summed into int16 with saturation) then VPMADDWD by ones
 *    (pairs into int32). x goes in as |xq| ≤ 128 (u8; −128 stays 0x80 = 128) and its sign moves
 *    onto the weights (VPSIGNB, as ggml's mul_sum_i8_pairs does): pairs stay within
 *    2·128·127 = 32512, never saturate; T = Σ xq·wq − z·Σ wq, the VNNI unit's integer exactly.
 * Either way T is exact, and so is its float32 value: |Σ (xq + 128)·wq|, |(z + 128)·Σ wq| ≤
 * 255·127·64 < 2^24, so converting the sum and one fused multiply-add with the zero point's term
 * give T without rounding. The units and the twin therefore make the same bits.
 *
 * Error bound of one product (tests/kernels/test_int8.py holds every unit to it, at block edges
 * and odd shapes; docs/engine.md states it), against the float64 product y = Σ_k x_k·w_k + b:
 *   x_k = s_x·(xq_k − z) + e_k with |e_k| ≤ s_x/2 + (the float32 roundings of d = hi − lo,
 *   of 255/d and d/255 and of x·255/d, on |x·255/d| ≤ 255, and the clamp at 127 that they may
 *   cause) ≤ (1/2 + 2^-13)·s_x; w_k = s_w·wq_k + f_k with |f_k| ≤ (1/2 + 2^-13)·s_w (rounded once,
 *   at packing). T is exact; s = s_x·s_w rounds once, each block's fused multiply-add once, the
 *   bias add once: every term sees at most nb + 2 roundings. So, ε = 1/2 + 2^-13, b(k) input k's block,
 *     |ŷ − y| ≤ Σ_k (ε·s_x,b(k)·|w_k| + ε·s_w,b(k)·|x_k| + ε²·s_x,b(k)·s_w,b(k))
 *               + γ_(nb+2)·(Σ_k (|x_k| + ε·s_x,b(k))(|w_k| + ε·s_w,b(k)) + |b|),   γ_n = n·u / (1 − n·u).
 *   The first sum dominates: each input off by at most half of 1/255 of its block's range, each
 *   weight by half of 1/127 of its block's largest |w|. It is a worst case; real errors are of both
 *   signs and mostly cancel (all-MiniLM-L6-v2's embeddings: docs/engine.md, "int8 for float32
 *   models"). GELU follows (slope ≤ 1.13).
 * NaN or infinite activations do not survive quantisation as they do in float32: not for encoders.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GROUP 16 /* columns per group of the packed weights: one zmm of int32 */
#define GROUP_BYTES (GROUP * 4)
#ifndef BLOCK
#define BLOCK 64 /* inputs per scale of x (one row's block) and of W (one column's block): K is padded to whole blocks.
                  * Any multiple of 32 up to 512 (|I| ≤ 255·127·BLOCK < 2^24 keeps T exact in float32); the
                  * caller passes its own (qkv.kernels.int8.BLOCK) and a mismatch is refused, never run */
#endif
#if BLOCK % 32 || BLOCK > 512
#error "BLOCK: a multiple of 32, at most 512"
#endif
#define CHUNK 24 /* rows quantised and multiplied together. Small, so that a chunk's outputs (24 × N floats)
                  * do not push the weights out of L2 between chunks: MiniLM's four products in turn,
                  * 768 rows, VNNI (SPR, QKV_ISA=avx512bf16, noisy): 300 GOP/s with 96 rows or 192, 430-476
                  * with 24; 12-30 alike */

void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width); /* float32/kernels.c */
int64_t qkv_q4_int_cpu(void);                                              /* q4/int8.c: 1 VNNI, 2 AVX2 */
void *qkv_q4_grow(void **buf, size_t *have, size_t need);                  /* q4/amx.c */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma")))

static __thread void *xq_buf = NULL;
static __thread size_t xq_have = 0;

/* Rows x [rr, K] -> xq [rr, Kp] int8 per block of BLOCK inputs, asymmetric (a zero point per
 * block, as ONNX Runtime's uint8 activations and ggml's Q4_1/Q8_1 blocks keep a minimum): lo =
 * min(min x, 0), hi = max(max x, 0), d = hi − lo, inv = 255/d, z = −128 − rint(lo·inv),
 * xq = rint(x·inv) + z ∈ [−128, 127], so x ≈ s_x·(xq − z) with s_x = d/255: all 256 levels on the
 * block's range, where the symmetric ±max|x| used 255 levels on twice the range of a one-sided
 * block (post-GELU inputs: [−0.17, max]). Writes s_x [rr, Kp / BLOCK] and zc = z (+128 when
 * `shift`: the VNNI unit's unsigned bytes xq + 128, XOR 0x80). Past K xq = z, a zero (the weights
 * are zero there too). AVX2 on both units (either CPU has it). VCVTPS2DQ rounds to nearest even
 * (the default MXCSR), as numpy.rint in the twin; minima and maxima are order-free, so the twin
 * makes the same bytes. */
T_AVX2 static void quantize_rows(const float *x, int64_t rr, int64_t K, int64_t Kp, int8_t *xq, float *sx,
                                 float *zc, int shift)
{
    const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-128);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i flip = _mm256_set1_epi8(shift ? (char)0x80 : 0);
    const int64_t nb = Kp / BLOCK;
    for (int64_t r = 0; r < rr; r++)
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + r * K + b * BLOCK;
            int8_t *q = xq + r * Kp + b * BLOCK;
            const int64_t n = K - b * BLOCK < BLOCK ? K - b * BLOCK : BLOCK; /* the last block may be short */
            float lo = 0.0f, hi = 0.0f;
            if (n == BLOCK) {
                __m256 mn = _mm256_setzero_ps(), mx = _mm256_setzero_ps();
                for (int i = 0; i < BLOCK; i += 8) {
                    const __m256 t = _mm256_loadu_ps(v + i);
                    mn = _mm256_min_ps(mn, t);
                    mx = _mm256_max_ps(mx, t);
                }
                __m128 l = _mm_min_ps(_mm256_castps256_ps128(mn), _mm256_extractf128_ps(mn, 1));
                __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
                l = _mm_min_ps(l, _mm_movehl_ps(l, l));
                h = _mm_max_ps(h, _mm_movehl_ps(h, h));
                lo = _mm_cvtss_f32(_mm_min_ss(l, _mm_movehdup_ps(l)));
                hi = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
            } else {
                for (int64_t i = 0; i < n; i++) {
                    lo = v[i] < lo ? v[i] : lo;
                    hi = v[i] > hi ? v[i] : hi;
                }
            }
            const float d = hi - lo;
            const float inv = d > 0.0f ? 255.0f / d : 0.0f;
            const float lq = lo * inv; /* a separate statement: no fused multiply-add with what follows */
            const float z = -128.0f - __builtin_rintf(lq);
            sx[r * nb + b] = d / 255.0f;
            zc[r * nb + b] = z + (shift ? 128.0f : 0.0f);
            const int zi = (int)z;
            if (n == BLOCK) {
                const __m256 vi = _mm256_set1_ps(inv);
                const __m256i vz = _mm256_set1_epi32(zi);
                for (int c = 0; c < BLOCK; c += 32) { /* 32 inputs to one ymm of bytes */
                    __m256i t[4];
                    for (int j = 0; j < 4; j++) {
                        t[j] = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + c + 8 * j), vi)), vz);
                        t[j] = _mm256_max_epi32(_mm256_min_epi32(t[j], lim), nlim);
                    }
                    /* int32 → int8: the packs work within 128-bit lanes; the permute puts the groups back in order */
                    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]), _mm256_packs_epi32(t[2], t[3]));
                    _mm256_storeu_si256((__m256i *)(q + c), _mm256_xor_si256(_mm256_permutevar8x32_epi32(p, order), flip));
                }
            } else {
                for (int64_t i = 0; i < BLOCK; i++) {
                    const float vx = i < n ? v[i] * inv : 0.0f;
                    float t = __builtin_rintf(vx) + z;
                    t = t > 127.0f ? 127.0f : (t < -128.0f ? -128.0f : t);
                    q[i] = (int8_t)((int)t ^ (shift ? 0x80 : 0));
                }
            }
        }
}

static inline int32_t load4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ------------------------------------------------------------------ AVX-512 VNNI: 16 columns a zmm */
#define VNNI_ROWS 4
#define VNNI_GROUPS 3 /* 12 int32 sums and 12 float32 sums in registers, 3 weights, a broadcast: 28 zmm */

/* y[r, g·16 ..] for rr rows and ng groups from column group g0. Per block: 12 int32 sums,
 * I = Σ (xq + 128)·wq; then T = I − zc·Σ_{k∈block} wq (zc = z + 128: the shift and the zero point
 * taken back at once, exactly: |I|, |zc·colsum| ≤ 255·127·BLOCK < 2^24) and acc += T·(s_x·s_w),
 * acc in registers too; at the end y = acc + b. Those four float operations per block and (row,
 * group) are what blocks with a zero point and a weight scale cost (the symmetric blocks of 64 with
 * one scale a column had two): per 8 VPDPBUSD at blocks of 32, MiniLM's four products at 768 rows
 * ran at ~0.74× that old kernel's speed here (SPR, QKV_ISA=avx512bf16, load ~8; with the float sums
 * in an L1 array, the old kernel's 6 × 4 tile, at ~0.68×); per 16 at blocks of 64, the whole
 * encoder on titles is 1.14× [1.09–1.18] as fast as at 32 (paired, load ~4). */
T_VNNI static inline __attribute__((always_inline)) void vnni_tile(const int8_t *xq, int64_t Kp, const float *sx,
                                                                   const float *zc, const int8_t *w,
                                                                   int64_t gstride, const float *sw,
                                                                   const float *colsum, int64_t N,
                                                                   const float *bias, float *y, int64_t ldy,
                                                                   const int rr, const int ng)
{
    const int64_t nb = Kp / BLOCK;
    __m512 acc[VNNI_ROWS][VNNI_GROUPS];
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < ng; j++) acc[r][j] = _mm512_setzero_ps();
    for (int64_t kb = 0; kb < nb; kb++) {
        __m512i is[VNNI_ROWS][VNNI_GROUPS];
        for (int r = 0; r < rr; r++)
            for (int j = 0; j < ng; j++) is[r][j] = _mm512_setzero_si512();
        const int8_t *wb = w + kb * (BLOCK / 4) * GROUP_BYTES;
        const int8_t *xb = xq + kb * BLOCK;
#pragma GCC unroll 16
        for (int k = 0; k < BLOCK / 4; k++) {
            __m512i wv[VNNI_GROUPS];
            for (int j = 0; j < ng; j++) wv[j] = _mm512_load_si512((const void *)(wb + j * gstride + k * GROUP_BYTES));
            for (int r = 0; r < rr; r++) {
                const __m512i xv = _mm512_set1_epi32(load4(xb + r * Kp + 4 * k));
                for (int j = 0; j < ng; j++) is[r][j] = _mm512_dpbusd_epi32(is[r][j], xv, wv[j]);
            }
        }
        const float *swb = sw + kb * N, *csb = colsum + kb * N;
        for (int r = 0; r < rr; r++) {
            const __m512 s = _mm512_set1_ps(sx[r * nb + kb]), z = _mm512_set1_ps(zc[r * nb + kb]);
            for (int j = 0; j < ng; j++) {
                const __m512 t = _mm512_fnmadd_ps(z, _mm512_loadu_ps(csb + j * GROUP), _mm512_cvtepi32_ps(is[r][j]));
                acc[r][j] = _mm512_fmadd_ps(t, _mm512_mul_ps(s, _mm512_loadu_ps(swb + j * GROUP)), acc[r][j]);
            }
        }
    }
    for (int j = 0; j < ng; j++) {
        const __m512 b = bias ? _mm512_loadu_ps(bias + j * GROUP) : _mm512_setzero_ps();
        for (int r = 0; r < rr; r++) _mm512_storeu_ps(y + r * ldy + j * GROUP, _mm512_add_ps(acc[r][j], b));
    }
}

#define VNNI_CASE(R) \
    case R: \
        if (ng == 3) vnni_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, R, 3); \
        else if (ng == 2) vnni_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, R, 2); \
        else vnni_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, R, 1); \
        break;

T_VNNI static void vnni_block(const int8_t *xq, int64_t Kp, const float *sx, const float *zc, const int8_t *w,
                              int64_t gstride, const float *sw, const float *colsum, int64_t N, const float *bias,
                              float *y, int64_t ldy, int64_t rr, int64_t ng)
{
    switch (rr) { /* constant row and group counts per case: the sums stay in registers */
    VNNI_CASE(1) VNNI_CASE(2) VNNI_CASE(3)
    default: VNNI_CASE(VNNI_ROWS)
    }
}

/* ------------------------------------------------------- AVX2: 8 columns a ymm, VPMADDUBSW + VPMADDWD */
#define AVX2_ROWS 2
#define AVX2_VECS 4 /* 32 columns: 2 × 4 int32 sums, 4 weights, the broadcast, |x|, ones: ≤ 16 ymm */

/* As vnni_tile, with I = Σ xq·wq (xq ∈ [−128, 127] as it is, zc = z): |xq| ≤ 128 as u8 against
 * the weights carrying xq's sign (VPSIGNB), so a pair is at most 2·128·127 = 32512 and VPMADDUBSW
 * never saturates; T = I − z·Σ wq is the VNNI unit's integer, exactly. */
T_AVX2 static inline __attribute__((always_inline)) void avx2_tile(const int8_t *xq, int64_t Kp, const float *sx,
                                                                   const float *zc, const int8_t *w,
                                                                   int64_t gstride, const float *sw,
                                                                   const float *colsum, int64_t N,
                                                                   const float *bias, float *y, int64_t ldy,
                                                                   const int rr, const int nv)
{
    const int64_t nb = Kp / BLOCK;
    const __m256i ones = _mm256_set1_epi16(1);
    float acc[AVX2_ROWS][AVX2_VECS * 8] __attribute__((aligned(32)));
    memset(acc, 0, sizeof acc);
    for (int64_t kb = 0; kb < nb; kb++) {
        __m256i is[AVX2_ROWS][AVX2_VECS];
        for (int r = 0; r < rr; r++)
            for (int j = 0; j < nv; j++) is[r][j] = _mm256_setzero_si256();
        const int8_t *wb = w + kb * (BLOCK / 4) * GROUP_BYTES;
        const int8_t *xb = xq + kb * BLOCK;
        for (int k = 0; k < BLOCK / 4; k++) { /* unrolling it made this unit slower (85-108 against 124-139 GOP/s) */
            __m256i wv[AVX2_VECS]; /* vector j: columns 8j..8j + 7 of the tile; a group holds two */
            for (int j = 0; j < nv; j++)
                wv[j] = _mm256_load_si256((const __m256i *)(wb + (j / 2) * gstride + k * GROUP_BYTES + (j % 2) * 32));
            for (int r = 0; r < rr; r++) {
                const __m256i xv = _mm256_set1_epi32(load4(xb + r * Kp + 4 * k));
                const __m256i ax = _mm256_sign_epi8(xv, xv); /* |xq| ≤ 128 as u8 (−128 stays 0x80 = 128) */
                for (int j = 0; j < nv; j++) {
                    const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[j], xv)); /* ≤ 2·128·127 a pair */
                    is[r][j] = _mm256_add_epi32(is[r][j], _mm256_madd_epi16(p, ones));
                }
            }
        }
        const float *swb = sw + kb * N, *csb = colsum + kb * N;
        for (int r = 0; r < rr; r++) {
            const __m256 s = _mm256_set1_ps(sx[r * nb + kb]), z = _mm256_set1_ps(zc[r * nb + kb]);
            for (int j = 0; j < nv; j++) {
                const __m256 t = _mm256_fnmadd_ps(z, _mm256_loadu_ps(csb + 8 * j), _mm256_cvtepi32_ps(is[r][j]));
                const __m256 sc = _mm256_mul_ps(s, _mm256_loadu_ps(swb + 8 * j));
                _mm256_store_ps(acc[r] + 8 * j, _mm256_fmadd_ps(t, sc, _mm256_load_ps(acc[r] + 8 * j)));
            }
        }
    }
    for (int j = 0; j < nv; j++) {
        const __m256 b = bias ? _mm256_loadu_ps(bias + 8 * j) : _mm256_setzero_ps();
        for (int r = 0; r < rr; r++) _mm256_storeu_ps(y + r * ldy + 8 * j, _mm256_add_ps(_mm256_load_ps(acc[r] + 8 * j), b));
    }
}

T_AVX2 static void avx2_block(const int8_t *xq, int64_t Kp, const float *sx, const float *zc, const int8_t *w,
                              int64_t gstride, const float *sw, const float *colsum, int64_t N, const float *bias,
                              float *y, int64_t ldy, int64_t rr, int64_t ng)
{
    if (rr == 1 && ng == 2) avx2_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, 1, 4);
    else if (rr == 1) avx2_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, 1, 2);
    else if (ng == 2) avx2_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, AVX2_ROWS, 4);
    else avx2_tile(xq, Kp, sx, zc, w, gstride, sw, colsum, N, bias, y, ldy, AVX2_ROWS, 2);
}

static int cpu_bits = -1;

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), then BERT's GELU if gelu (bias given then);
 * W packed by qkv.kernels.int8.pack_int8: wq [N/16, Kp/4, 64] int8 (Kp = K rounded up to BLOCK),
 * s_w [Kp/BLOCK, N] and Σ_{k∈block} wq [Kp/BLOCK, N] (float32: small integers, exact). unit 1: AVX-512 VNNI, 2: AVX2. Returns 0, or -1 when it
 * could not run (the CPU lacks the unit, a shape, no memory): the caller then runs the NumPy twin.
 * Rows in chunks of CHUNK (quantised once); within a chunk, 48 (VNNI) or 32 (AVX2) columns at a
 * time, the weights of those columns (Kp × 48 or 32 bytes) staying in L1/L2 while every row block
 * of the chunk reads them; the GELU runs on the chunk while it is in cache. */
int64_t qkv_i8_gemm(const float *x, int64_t R, int64_t K, const int8_t *wq, const float *sw,
                    const float *colsum, int64_t N, const float *bias, int gelu, float *y, int64_t unit, int64_t block)
{
    if (cpu_bits < 0) cpu_bits = (int)qkv_q4_int_cpu();
    if (block != BLOCK || K <= 0 || K > 65536 || N % GROUP || (gelu && !bias)) return -1;
    if (!((unit == 1 && (cpu_bits & 1)) || (unit == 2 && (cpu_bits & 2)))) return -1;
    if (R <= 0) return 0;
    const int64_t Kp = (K + BLOCK - 1) / BLOCK * BLOCK, nb = Kp / BLOCK, ngroups = N / GROUP;
    const int64_t gstride = Kp / 4 * GROUP_BYTES, chunk = R < CHUNK ? R : CHUNK;
    uint8_t *buf = qkv_q4_grow(&xq_buf, &xq_have, (size_t)(chunk * Kp + 64 + 2 * chunk * nb * 4));
    if (!buf) return -1;
    int8_t *xq = (int8_t *)buf;
    float *sx = (float *)(buf + (chunk * Kp + 63) / 64 * 64), *zc = sx + chunk * nb;
    const float *b = gelu ? NULL : bias;
    for (int64_t r0 = 0; r0 < R; r0 += chunk) {
        const int64_t rc = R - r0 < chunk ? R - r0 : chunk;
        quantize_rows(x + r0 * K, rc, K, Kp, xq, sx, zc, unit == 1);
        const int64_t gstep = unit == 1 ? VNNI_GROUPS : 2, rstep = unit == 1 ? VNNI_ROWS : AVX2_ROWS;
        for (int64_t g = 0; g < ngroups; g += gstep) {
            const int64_t ng = ngroups - g < gstep ? ngroups - g : gstep;
            const int8_t *w = wq + g * gstride;
            for (int64_t r = 0; r < rc; r += rstep) {
                const int64_t rr = rc - r < rstep ? rc - r : rstep;
                float *yo = y + (r0 + r) * N + g * GROUP;
                const float *bo = b ? b + g * GROUP : NULL;
                if (unit == 1)
                    vnni_block(xq + r * Kp, Kp, sx + r * nb, zc + r * nb, w, gstride, sw + g * GROUP, colsum + g * GROUP,
                               N, bo, yo, N, rr, ng);
                else
                    avx2_block(xq + r * Kp, Kp, sx + r * nb, zc + r * nb, w, gstride, sw + g * GROUP, colsum + g * GROUP,
                               N, bo, yo, N, rr, ng);
            }
        }
        if (gelu) qkv_bias_gelu(y + r0 * N, bias, rc, N); /* gelu(sum + bias), as the other kernels */
    }
    return 0;
}

#else /* not x86-64 with GCC/Clang: no integer products; qkv runs the NumPy twin */
int64_t qkv_i8_gemm(const float *x, int64_t R, int64_t K, const int8_t *wq, const float *sw,
                    const float *colsum, int64_t N, const float *bias, int gelu, float *y, int64_t unit, int64_t block)
{
    (void)block, (void)x, (void)R, (void)K, (void)wq, (void)sw, (void)colsum, (void)N, (void)bias, (void)gelu, (void)y, (void)unit;
    return -1;
}
#endif
