/* qkv's compiled kernels (float32): the encoder's matrix products, its fused attention, and its
 * element-wise steps, each in one pass over memory.
 *
 * - Products: the blocked product on weights packed once into column panels (qkv_gemm, bias and
 *   GELU applied tile by tile), and a few-row product on float16 panels (qkv_panel_matmul_f16bits).
 *   The encoder's products run here, not in BLAS, whenever these kernels are loaded.
 * - Attention: steps 2-5 for every head of a text, fused, each block's scores in L1
 *   (qkv_attention_heads), and the tiles of the online softmax that qkv.attention's tiled path uses.
 * - Element-wise: NumPy makes one pass over memory per operation (the exact GELU is about twenty of
 *   them, LayerNorm with its residual eight, a masked softmax six); here each step is one plain loop
 *   whose temporaries stay in registers. The compiler vectorises it (`#pragma omp simd`, built with
 *   -fopenmp-simd, no OpenMP runtime). exp and erf are written out below (exp_f32, gelu_f32) so
 *   that the loops call no library function; no -ffast-math (it would let the compiler assume that
 *   no value is ever inf or NaN, and masked scores are -inf).
 *
 * Built at install time by hatch_build.py into qkv/kernels/_kernels.so (qkv/kernels/build.py);
 * qkv/kernels/cpu.py loads it with ctypes and qkv/kernels/float32/__init__.py and holds a NumPy twin of every function, which the tests compare it with. One file of
 * about 540 lines, past the project's ~500, on purpose: it is one library from one compiler call,
 * and its parts share the inline exp/GELU and the panel layout (PANEL), which must not diverge.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The instruction sets the compiler was allowed to use everywhere in this library (its -march),
 * named as Linux's /proc/cpuinfo names them: qkv.kernels.cpu refuses to load a library built for
 * features this CPU lacks (it would die of SIGILL at the first product), and `qkv info` names the
 * target. The bfloat16 and AMX kernels are not counted: they carry target attributes of their own
 * and run only after CPUID says the CPU has them (bfloat16/kernels.c). */
const char *qkv_built_for(void)
{
    return ""
#if defined(__AVX__)
           " avx"
#endif
#if defined(__AVX2__)
           " avx2"
#endif
#if defined(__FMA__)
           " fma"
#endif
#if defined(__F16C__)
           " f16c"
#endif
#if defined(__AVX512F__)
           " avx512f"
#endif
#if defined(__AVX512BW__)
           " avx512bw"
#endif
#if defined(__AVX512DQ__)
           " avx512dq"
#endif
#if defined(__AVX512VL__)
           " avx512vl"
#endif
#if defined(__AVX512BF16__)
           " avx512_bf16"
#endif
#if defined(__AVX512VBMI__)
           " avx512vbmi"
#endif
#if defined(__AVX512VNNI__)
           " avx512_vnni"
#endif
#if defined(__AMX_TILE__)
           " amx_tile"
#endif
#if defined(__AMX_BF16__)
           " amx_bf16"
#endif
        ;
}

/* exp(x) for the softmax, inlined so the loops around it vectorise without a call: x = n·ln2 + r
 * with |r| ≤ ln2/2 (ln2 split in two parts so n·ln2 is exact, after Cody & Waite), e^r from its
 * Taylor series to degree 7 (truncation < 6e-9, below float32 rounding), 2^n put into the
 * exponent bits. exp(x) = 0 for x below -87.3 (where float32 leaves the normal range) and so for
 * -inf, the masked scores. Valid for x ≤ 88 (callers pass scores minus their row maximum, or
 * scores bounded by |q|·|k| ≤ 80). */
static inline float exp_f32(float x)
{
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xc = x < -87.3f ? -87.3f : x;
    const float round = 12582912.0f; /* 1.5·2^23: adding and subtracting it rounds to an integer */
    float n = (xc * log2e + round) - round;
    float r = xc - n * ln2_hi - n * ln2_lo;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;  /* 2^n as float32 bits */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x < -87.3f ? 0.0f : p * two_n;
}

/* x·Φ(x), the exact GELU of BERT, with erf from Abramowitz & Stegun 7.1.26 (absolute error
 * ≤ 1.5e-7, float32's resolution near 1; the same formula as the NumPy twin): for z = |x|/√2,
 * 1 - erf(z) = P(t)·exp(-z²) with t = 1/(1 + p·z), so Φ(|x|) - ½ = ½ - ½·P(t)·exp(-x²/2). */
static inline float gelu_f32(float x)
{
    const float p = 0.3275911f * 0.70710678118654752f;
    const float a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f,
                a5 = 1.061405429f;
    float ax = x < 0.0f ? -x : x;
    float t = 1.0f / (1.0f + p * ax);
    float poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))));
    float half = 0.5f - 0.5f * poly * exp_f32(-0.5f * x * x); /* Φ(|x|) - ½ */
    return x * (x < 0.0f ? 0.5f - half : 0.5f + half);
}

/* x[i] = LayerNorm(x[i] + bias + res[i]) · g + beta over rows of ``width``; bias and res may be
 * NULL. Two passes over each row (mean, then variance of the centred values), as the textbook
 * formula, with the row in L1 cache; the sums are kept in double, which costs nothing measurable
 * here and keeps the result closer to exact than float32 sums would. */
void qkv_add_layernorm(float *x, const float *res, const float *bias, const float *g,
                       const float *beta, int64_t rows, int64_t width, float eps)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = x + i * width;
        const float *q = res ? res + i * width : NULL;
        if (q && bias) {
#pragma omp simd
            for (int64_t j = 0; j < width; j++) r[j] += q[j] + bias[j];
        } else if (q) {
#pragma omp simd
            for (int64_t j = 0; j < width; j++) r[j] += q[j];
        } else if (bias) {
#pragma omp simd
            for (int64_t j = 0; j < width; j++) r[j] += bias[j];
        }
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < width; j++) sum += r[j];
        const double mean = sum / (double)width;
        double var = 0.0;
#pragma omp simd reduction(+ : var)
        for (int64_t j = 0; j < width; j++) { double c = r[j] - mean; var += c * c; }
        const float inv = (float)(1.0 / sqrt(var / (double)width + eps));
        const float m = (float)mean;
#pragma omp simd
        for (int64_t j = 0; j < width; j++) r[j] = (r[j] - m) * inv * g[j] + beta[j];
    }
}

/* Softmax of each row of scale·s, in place, for rows of length n. Row i sees only its first
 * valid[i / group] entries (keys after them are padding and get weight 0); valid may be NULL
 * (every entry). A row with no valid entry becomes zeros. scale must be positive. */
void qkv_softmax_rows(float *s, int64_t rows, int64_t n, float scale, const int64_t *valid,
                      int64_t group)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = s + i * n;
        int64_t m = valid ? valid[i / group] : n;
        if (m > n) m = n;
        if (m <= 0) { memset(r, 0, (size_t)n * sizeof(float)); continue; }
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < m; j++) mx = r[j] > mx ? r[j] : mx;
        if (mx == -INFINITY) { memset(r, 0, (size_t)n * sizeof(float)); continue; }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < m; j++) { float e = exp_f32((r[j] - mx) * scale); r[j] = e; sum += e; }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int64_t j = 0; j < m; j++) r[j] *= inv;
        if (m < n) memset(r + m, 0, (size_t)(n - m) * sizeof(float));
    }
}

/* One key tile of the online softmax (the running-max recurrence of FlashAttention, Dao et al.
 * 2022), in place on rows of s (row stride ld, n keys): with m the running max of each row and l
 * its running sum,
 *     m' = max(m, max_j s_ij),  s_ij = exp(s_ij - m'),  corr = exp(m - m'),  l = l·corr + Σ_j s_ij
 * and corr is returned so the caller can rescale its running weighted sum of V. Scores are
 * already scaled; masked ones are -inf. A row with no finite score yet keeps m = -inf, l = 0 and
 * gets zeros (corr = 1). */
void qkv_online_softmax_tile(float *s, int64_t rows, int64_t n, int64_t ld, float *m, float *l,
                             float *corr)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = s + i * ld;
        float mx = m[i];
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < n; j++) mx = r[j] > mx ? r[j] : mx;
        if (mx == -INFINITY) {
            memset(r, 0, (size_t)n * sizeof(float));
            corr[i] = 1.0f;
            continue;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; j++) { float e = exp_f32(r[j] - mx); r[j] = e; sum += e; }
        const float c = exp_f32(m[i] - mx); /* exp(-inf) = 0 on a row's first finite tile */
        corr[i] = c;
        l[i] = l[i] * c + sum;
        m[i] = mx;
    }
}

/* The same tile step when no shift is needed (the caller has bounded every score by |q|·|k| ≤ 80,
 * so exp cannot overflow): s_ij = exp(s_ij), l += Σ_j s_ij. Softmax is the same for any shift,
 * and skipping the running max saves a pass over the tile and every rescaling. */
void qkv_exp_tile(float *s, int64_t rows, int64_t n, int64_t ld, float *l)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = s + i * ld;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; j++) { float e = exp_f32(r[j]); r[j] = e; sum += e; }
        l[i] += sum;
    }
}

/* ---------------------------------------------------------------- products for a few rows
 * y = x·W (+ bias) for x of a few rows (a lone query: one row per token). Such a product reads
 * every weight once and does little with it, so it is bound by how fast W streams from memory;
 * BLAS packs W into its own layout on every call, and W's rows are N floats apart, so each step
 * of the walk down W lands on a new page, where the hardware prefetcher stops.
 * Here W comes packed once (qkv.kernels.float32.pack_panels) into column panels of PANEL values stored
 * one after another, [N / PANEL][K][PANEL], so the walk is sequential, and each panel row serves
 * up to ROWS rows of x while it sits in registers: ROWS × PANEL/16 accumulators of 16 floats (16
 * of the 32 AVX-512 registers). This product reads float16 panels (IEEE binary16, half the memory
 * traffic, widened to float32 as they are read; sums stay float32); float32 panels are read by
 * the blocked product further down (qkv_gemm), which does better at any row count. GCC's vector
 * extension keeps the code plain C, on vectors as wide as the build's registers (VW below). */
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif
#define PANEL 32
int64_t qkv_panel_width(void) { return PANEL; } /* read by qkv.kernels: the layout is one contract */
/* Vectors of VW floats: 16 with AVX-512; 8 in an AVX2 build, whose 16 ymm registers hold a
 * 16-float vector only in two halves that GCC moves through memory at every step (the products
 * and the fused attention ran 50× slower so). Tiles are sized to the registers the build has; each
 * output is the same chain of operations either way, so both builds give the same bits. */
#if defined(__AVX512F__)
#define VW 16
#else
#define VW 8
#endif
#define NV (16 / VW)
typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
static inline vf load_v(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void store_v(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* exp_f32 lane by lane on a vector of VW floats (GCC vector extensions, so any target). */
static inline vf exp_v(vf x)
{
    const vf log2e = (vf){0} + 1.44269504088896341f, ln2_hi = (vf){0} + 0.693359375f,
             ln2_lo = (vf){0} + -2.12194440e-4f, round = (vf){0} + 12582912.0f, low = (vf){0} - 87.3f;
    const vi under = x < low; /* -1 where x < -87.3 */
    const vf xc = (vf)(((vi)x & ~under) | ((vi)low & under));
    const vf n = (xc * log2e + round) - round;
    const vf r = xc - n * ln2_hi - n * ln2_lo;
    vf p = (vf){0} + 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const vi bits = (__builtin_convertvector(n, vi) + 127) << 23;
    return (vf)((vi)(p * (vf)bits) & ~under);
}

/* gelu_f32 lane by lane (the same formula, step by step): the GELU of the blocked product,
 * applied to each finished tile while it is in L1, and of bias_gelu. GCC left the scalar
 * gelu_f32 under `omp simd` unvectorised in an AVX2 build (the masked return of exp_f32): the
 * feed-forward product with its GELU ran at 55 GFLOP/s there against 102 without, on 2048 rows;
 * 93 with this (paired A/B, the same bits). Applying it to the sums still in registers instead
 * was no faster and cost the AVX-512 build's plain products 1-4% (code layout). */
static inline vf gelu_v(vf x)
{
    const float p = 0.3275911f * 0.70710678118654752f;
    const vi sign = (vi)x & (int32_t)0x80000000; /* |x| and the sign by masks: 2 instructions fewer
                                                 * than compares and blends, every float's bits the
                                                 * same (0.5 + (−half) is 0.5 − half; ±0 give ±0) */
    const vf ax = (vf)((vi)x & 0x7fffffff);
    const vf t = ((vf){0} + 1.0f) / ((vf){0} + 1.0f + p * ax);
    const vf poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const vf half = 0.5f - 0.5f * poly * exp_v(-0.5f * x * x);
    return x * (0.5f + (vf)((vi)half ^ sign));
}

/* h[i, j] = gelu(h[i, j] + b[j]): whole vectors by gelu_v, the row's tail by gelu_f32. */
void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width)
{
    for (int64_t i = 0; i < rows; i++) {
        float *r = h + i * width;
        int64_t j = 0;
        for (; j + VW <= width; j += VW) store_v(r + j, gelu_v(load_v(r + j) + load_v(b + j)));
        for (; j < width; j++) r[j] = gelu_f32(r[j] + b[j]);
    }
}

#if defined(__AVX512F__)
#define ROWS 8 /* rows of x per register tile of the few-row product: 8 × 32 columns in 16 zmm */
#else
#define ROWS 3 /* 3 × 32 columns in 12 ymm */
#endif


/* One binary16 value (bits) as a float, for machines without the conversion instruction. */
static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, NaN */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13); /* normal: rebias 15 -> 127 */
    } else if (man) {
        int shift = 0; /* subnormal: normalise the mantissa */
        while (!(man & 0x400)) { man <<= 1; shift++; }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ff) << 13);
    } else {
        bits = sign; /* ±0 */
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline vf load_f16(const uint16_t *p) /* VW binary16 values, widened */
{
    vf v;
#if defined(__AVX512F__)
    __m512 r = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    memcpy(&v, &r, sizeof v);
#elif defined(__F16C__) && defined(__AVX__)
    __m256 r = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    memcpy(&v, &r, sizeof v);
#else
    for (int j = 0; j < VW; j++) v[j] = half_to_float(p[j]);
#endif
    return v;
}

/* y[r, 0:PANEL] = bias + Σ_k x[r, k]·panel[k, 0:PANEL] for r < rr; the compiler specialises the
 * r-loops for each constant rr below, so the accumulators live in registers. */
#define PANEL_PRODUCT(T, LOAD)                                                                     \
    static inline void panel_rows_##T(const float *x, int64_t K, const T *panel, const float *bias, \
                                      float *y, int64_t ldy, const int rr)                         \
    {                                                                                              \
        vf acc[ROWS][PANEL / VW];                                                                  \
        for (int r = 0; r < rr; r++)                                                               \
            for (int j = 0; j < PANEL / VW; j++) acc[r][j] = bias ? load_v(bias + j * VW) : (vf){0}; \
        for (int64_t k = 0; k < K; k++) {                                                          \
            vf w[PANEL / VW];                                                                      \
            for (int j = 0; j < PANEL / VW; j++) w[j] = LOAD(panel + k * PANEL + j * VW);          \
            for (int r = 0; r < rr; r++) {                                                         \
                const float xr = x[r * K + k];                                                     \
                for (int j = 0; j < PANEL / VW; j++) acc[r][j] += xr * w[j];                       \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < rr; r++)                                                               \
            for (int j = 0; j < PANEL / VW; j++) store_v(y + r * ldy + j * VW, acc[r][j]);         \
    }                                                                                              \
    static void panel_block_##T(const float *x, int64_t K, const T *p, const float *b, float *y,  \
                                int64_t ldy, int64_t rr)                                           \
    {                                                                                              \
        switch (rr) {                                                                              \
        case 1: panel_rows_##T(x, K, p, b, y, ldy, 1); break;                                      \
        case 2: panel_rows_##T(x, K, p, b, y, ldy, 2); break;                                      \
        case 3: panel_rows_##T(x, K, p, b, y, ldy, 3 < ROWS ? 3 : ROWS); break;                    \
        case 4: panel_rows_##T(x, K, p, b, y, ldy, 4 < ROWS ? 4 : ROWS); break;                    \
        case 5: panel_rows_##T(x, K, p, b, y, ldy, 5 < ROWS ? 5 : ROWS); break;                    \
        case 6: panel_rows_##T(x, K, p, b, y, ldy, 6 < ROWS ? 6 : ROWS); break;                    \
        case 7: panel_rows_##T(x, K, p, b, y, ldy, 7 < ROWS ? 7 : ROWS); break;                    \
        default: panel_rows_##T(x, K, p, b, y, ldy, ROWS); break;                                  \
        }                                                                                          \
    }                                                                                              \
    /* y [R, N] = x [R, K] · W + bias (bias may be NULL), W as panels [N / PANEL][K][PANEL]. */    \
    void qkv_panel_matmul_##T(const float *x, int64_t R, int64_t K, const T *panels, int64_t N,    \
                              const float *bias, float *y)                                         \
    {                                                                                              \
        for (int64_t p = 0; p < N / PANEL; p++) {                                                  \
            const T *panel = panels + p * K * PANEL;                                               \
            const float *b = bias ? bias + p * PANEL : NULL;                                       \
            for (int64_t r = 0; r < R; r += ROWS)                                                  \
                panel_block_##T(x + r * K, K, panel, b, y + r * N + p * PANEL, N,                  \
                                R - r < ROWS ? R - r : ROWS);                                      \
        }                                                                                          \
    }

typedef uint16_t f16bits;
PANEL_PRODUCT(f16bits, load_f16) /* float32 panels go to qkv_gemm below, faster for every row count */

/* ------------------------------------------------------------------ matrix product, blocked
 * y = x·W (+ bias) for any number of rows, from the same layout of panels in float32, arranged for
 * the caches in the way of GotoBLAS / BLIS (Goto & van de Geijn 2008; Van Zee & van de Geijn
 * 2015): the rows of x in blocks of MC, the columns in blocks of NC, the inner dimension in
 * blocks of KC. For one block of GEMM_ROWS rows of x (GEMM_ROWS × KC floats, in L1) the kernel
 * walks every panel of the column block (KC × 32 floats each, from L2, prefetched PREFETCH
 * rows ahead), keeping a GEMM_ROWS × 32 tile of y in 24 of the 32 vector registers: per step of k,
 * two loads of W and GEMM_ROWS broadcasts of x feed 2·GEMM_ROWS fused multiply-adds.
 * Why not BLAS: the weights are fixed, so they are packed once instead of on every call, and the
 * bias and the GELU are applied while each tile is still in L1, not in passes over memory.
 * Measured on the reviews batch (2048 rows) against OpenBLAS: see docs/engine.md.
 * The other order, BLIS's (each W panel's KC × 32 block kept in L1 for every row strip of an MC
 * block, x packed [k][GEMM_ROWS] per strip and read from L2; Goto & van de Geijn 2008, sec. 4.2;
 * Van Zee & van de Geijn 2015), was tried for 2048 rows: 0.70-0.94x this one on the four MiniLM
 * shapes (MC 96-240, KC 128-256, NC 384-1536; same bits), in a paired A/B. Here x's strip
 * (GEMM_ROWS × KC) stays in L1 and W streams from L2 with its prefetch; at 2048 rows this runs at
 * 180-215 GFLOP/s against the 245 of 24 independent FMA chains on this Xeon's core. */
#define GEMM_MC 120 /* rows of x per block: MC × KC floats stay in L2 */
#define GEMM_NC 384 /* columns per block: KC × NC floats of W stay in L2 */
#define GEMM_KC 384 /* the whole of K = 384 in one block: one running sum per output, bias last */
#define PREFETCH 8
/* The tile: 12 rows × 32 columns in 24 of AVX-512's 32 zmm registers; in an AVX2 build (16 ymm
 * registers) 3 rows × 32 columns in 12, W's four vectors read as operands. */
#if defined(__AVX512F__)
#define GEMM_ROWS 12
#else
#define GEMM_ROWS 3
#endif
#define GEMM_VECS (PANEL / VW)

/* always_inline: otherwise GCC keeps one copy with rr a runtime value, and a branch per row */
static inline __attribute__((always_inline)) void gemm_tile(
    const float *x, int64_t ldx, int64_t kk, const float *panel, float *y, int64_t ldy,
    const float *bias, int accumulate, const int rr)
{
    vf acc[GEMM_ROWS][GEMM_VECS];
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < GEMM_VECS; j++)
            acc[r][j] = accumulate ? load_v(y + r * ldy + j * VW) : (vf){0};
    for (int64_t k = 0; k < kk; k++) {
        __builtin_prefetch(panel + (k + PREFETCH) * PANEL, 0, 3);
        __builtin_prefetch(panel + (k + PREFETCH) * PANEL + 16, 0, 3);
        vf w[GEMM_VECS];
        for (int j = 0; j < GEMM_VECS; j++) w[j] = load_v(panel + k * PANEL + j * VW);
        for (int r = 0; r < rr; r++) {
            const float xr = x[r * ldx + k];
            for (int j = 0; j < GEMM_VECS; j++) acc[r][j] += xr * w[j];
        }
    }
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < GEMM_VECS; j++) {
            if (bias) acc[r][j] += load_v(bias + j * VW); /* added to the finished sum, as BLAS-plus-bias does */
            store_v(y + r * ldy + j * VW, acc[r][j]);
        }
}

static void gemm_block(const float *x, int64_t ldx, int64_t kk, const float *panel, float *y,
                       int64_t ldy, const float *bias, int accumulate, int64_t rr)
{
    switch (rr) { /* a constant row count per case: the compiler keeps the tile in registers */
    case 1: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 1); break;
    case 2: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 2); break;
#if GEMM_ROWS > 3
    case 3: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 3); break;
    case 4: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 4); break;
    case 5: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 5); break;
    case 6: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 6); break;
    case 7: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 7); break;
    case 8: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 8); break;
    case 9: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 9); break;
    case 10: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 10); break;
    case 11: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, 11); break;
#endif
    default: gemm_tile(x, ldx, kk, panel, y, ldy, bias, accumulate, GEMM_ROWS); break;
    }
}

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), W as float32 panels [N / PANEL][K][PANEL];
 * gelu != 0: then y = gelu(y) (BERT's exact GELU), each tile as soon as its sums are complete. */
void qkv_gemm(const float *x, int64_t R, int64_t K, const float *panels, int64_t N,
              const float *bias, int gelu, float *y)
{
    for (int64_t n0 = 0; n0 < N; n0 += GEMM_NC) {
        const int64_t p1 = (n0 + GEMM_NC < N ? n0 + GEMM_NC : N) / PANEL;
        for (int64_t r0 = 0; r0 < R; r0 += GEMM_MC) {
            const int64_t r1 = r0 + GEMM_MC < R ? r0 + GEMM_MC : R;
            for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
                const int64_t kk = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                const int last = k0 + kk == K;
                for (int64_t r = r0; r < r1; r += GEMM_ROWS) {
                    const int64_t rr = r1 - r < GEMM_ROWS ? r1 - r : GEMM_ROWS;
                    for (int64_t p = n0 / PANEL; p < p1; p++) {
                        float *tile = y + r * N + p * PANEL;
                        gemm_block(x + r * K + k0, K, kk, panels + (p * K + k0) * PANEL, tile, N,
                                   bias && last ? bias + p * PANEL : NULL, k0 > 0, rr);
                        if (gelu && last) /* the tile's GELU while it is in L1, in whole vectors */
                            for (int64_t i = 0; i < rr; i++)
                                for (int j = 0; j < PANEL; j += VW) store_v(tile + i * N + j, gelu_v(load_v(tile + i * N + j)));
                    }
                }
            }
        }
    }
}

/* ----------------------------------------------------------------------- attention, fused
 * Steps 2-5 for a few heads, with every intermediate in cache: for a block of QROWS queries, the
 * scores against a chunk of up to KCHUNK keys (Q·Kᵀ), their exponentials, and the weighted sum of
 * V, then the next chunk, with the online softmax of FlashAttention (Dao et al. 2022) carrying
 * each row's running maximum m and sum l across chunks and rescaling the partial sums when m
 * grows; one division at the end. The unfused path writes [heads, nq, nk] scores to memory and
 * reads them back twice; here a block's scores (QROWS × KCHUNK floats, 16 kB) stay in L1. Both
 * products are register-blocked like the panel product above: 8 rows × 32 keys, then 8 rows × dv.
 *   q [heads][nq][d], k [heads][nk][d], v [heads][nk][dv], out [heads][nq][dv]: any head and row
 *   strides (in floats), adjacent columns.   dv must be 16 or a multiple of 32.
 *   work: at least attention_work(nk, d, dv) floats (Kᵀ and V of one head, one block's scores and sums).
 * Extra memory is therefore O((d + dv)·nk), one head's K and V, whatever nq. */
#define QROWS 8
#define KEYS 32
#define KCHUNK 512
/* Rows of a block whose sums sit in registers at once: all 8 with AVX-512 (32 zmm registers);
 * 2 in an AVX2 build, where a 16-float vector is two of its 16 ymm registers and 8 rows' sums
 * would spill on every step (as the panel product did: see GEMM_ROWS). Each sum is the same chain
 * of operations either way. */
#if defined(__AVX512F__)
#define QSUB QROWS
#else
#define QSUB 2
#endif

static inline int64_t round_keys(int64_t n) { return (n + KEYS - 1) / KEYS * KEYS; }

/* Floats of scratch qkv_attention_heads needs (qkv.kernels asks here): one head's Kᵀ and V, one block's
 * scores, one block's sums. */
int64_t qkv_attention_work(int64_t nk, int64_t d, int64_t dv)
{
    return d * round_keys(nk) + QROWS * KCHUNK + QROWS * dv + round_keys(nk) * dv;
}

#if defined(__AVX512F__)
/* kt[c][j] = k[j][c] for c < 16, j < 16 of a 16 × 16 tile: rows of k ldk floats apart (rows ≥ n
 * read as zeros, never loaded), rows of kt ldt apart. The usual three stages of shuffles
 * (within pairs, within 128-bit lanes, across lanes). */
static inline void transpose16(const float *k, int64_t ldk, int n, float *kt, int64_t ldt)
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = i < n ? _mm512_loadu_ps(k + i * ldk) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);     /* r_i0 r_{i+1}0 r_i1 r_{i+1}1 | per lane */
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    /* r[4q + s] lane L now holds column 4L + s of rows 4q..4q+3 */
    for (int s = 0; s < 4; s++) {
        const __m512 a = _mm512_shuffle_f32x4(r[s], r[4 + s], 0x88), b = _mm512_shuffle_f32x4(r[s], r[4 + s], 0xdd);
        const __m512 c = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], 0x88), d = _mm512_shuffle_f32x4(r[8 + s], r[12 + s], 0xdd);
        t[s] = _mm512_shuffle_f32x4(a, c, 0x88);      /* column s */
        t[8 + s] = _mm512_shuffle_f32x4(a, c, 0xdd);  /* column 8 + s */
        t[4 + s] = _mm512_shuffle_f32x4(b, d, 0x88);  /* column 4 + s */
        t[12 + s] = _mm512_shuffle_f32x4(b, d, 0xdd); /* column 12 + s */
    }
    for (int c = 0; c < 16; c++) _mm512_storeu_ps(kt + c * ldt, t[c]);
}
#endif

/* s[r, 0:nkeys) = q_r·kᵀ over keys [j0, j0 + nkeys) of kt [d][ldk]; rows ≥ rows repeat the last. */
static inline void scores_block(const float *q, int64_t ld, int rows, const float *kt, int64_t ldk,
                                int64_t j0, int64_t nkeys, int64_t d, float *s)
{
    const float *qr[QROWS];
    for (int r = 0; r < QROWS; r++) qr[r] = q + (r < rows ? r : rows - 1) * ld;
    for (int64_t jb = 0; jb < nkeys; jb += KEYS)
        for (int r0 = 0; r0 < QROWS; r0 += QSUB) {
            vf acc[QSUB][KEYS / VW];
            for (int r = 0; r < QSUB; r++)
                for (int t = 0; t < KEYS / VW; t++) acc[r][t] = (vf){0};
            for (int64_t c = 0; c < d; c++) {
                const float *kc = kt + c * ldk + j0 + jb;
                vf kv[KEYS / VW];
                for (int t = 0; t < KEYS / VW; t++) kv[t] = load_v(kc + t * VW);
                for (int r = 0; r < QSUB; r++)
                    for (int t = 0; t < KEYS / VW; t++) acc[r][t] += qr[r0 + r][c] * kv[t];
            }
            for (int r = 0; r < QSUB; r++)
                for (int t = 0; t < KEYS / VW; t++) store_v(s + (r0 + r) * KCHUNK + jb + t * VW, acc[r][t]);
        }
}

/* o[r, c0:c0+16·DV] += Σ_j p[r, j]·v[j, c0:...] over j < nkeys */
#define WEIGHTED_SUM(DV)                                                                          \
    static void weighted_sum_##DV(const float *p, int64_t nkeys, const float *v, int64_t ld,     \
                                  float *o, int64_t ldo)                                          \
    {                                                                                             \
        for (int r0 = 0; r0 < QROWS; r0 += QSUB) {                                                \
            vf acc[QSUB][DV * NV];                                                                \
            for (int r = 0; r < QSUB; r++)                                                        \
                for (int c = 0; c < DV * NV; c++) acc[r][c] = load_v(o + (r0 + r) * ldo + VW * c); \
            for (int64_t j = 0; j < nkeys; j++) {                                                 \
                vf vj[DV * NV];                                                                   \
                for (int c = 0; c < DV * NV; c++) vj[c] = load_v(v + j * ld + VW * c);            \
                for (int r = 0; r < QSUB; r++) {                                                  \
                    const float pr = p[(r0 + r) * KCHUNK + j];                                    \
                    for (int c = 0; c < DV * NV; c++) acc[r][c] += pr * vj[c];                    \
                }                                                                                 \
            }                                                                                     \
            for (int r = 0; r < QSUB; r++)                                                        \
                for (int c = 0; c < DV * NV; c++) store_v(o + (r0 + r) * ldo + VW * c, acc[r][c]); \
        }                                                                                         \
    }
WEIGHTED_SUM(1)
WEIGHTED_SUM(2)

void qkv_attention_heads(const float *q, const float *k, const float *v, int64_t heads,
                         int64_t hq, int64_t hk, int64_t hv, int64_t ho,
                         int64_t ldq, int64_t ldk, int64_t ldv, int64_t ldo,
                         int64_t nq, int64_t nk, int64_t d, int64_t dv, float scale,
                         float *out, float *work)
{
    const int64_t npad = round_keys(nk);
    float *kt = work, *s = work + d * npad, *o = s + QROWS * KCHUNK, *vt = o + QROWS * dv;
    float m[QROWS], l[QROWS];
#if defined(__AVX512F__)
    float lanes[QROWS][16] __attribute__((aligned(64))); /* each row's 16 partial sums of exp */
#endif
    for (int64_t h = 0; h < heads; h++) {
        const float *qh = q + h * hq, *kh = k + h * hk, *vh = v + h * hv;
        float *oh = out + h * ho;
        if (nk == 0) {
            for (int64_t i = 0; i < nq; i++) memset(oh + i * ldo, 0, (size_t)dv * sizeof(float));
            continue;
        }
        /* Kᵀ [d][npad], keys past nk set to 0 (their scores are never read); and the largest
         * |q|², |k|² for the Cauchy–Schwarz bound |scale·q·k| ≤ scale·max|q|·max|k|. When that is
         * at most 80, exp of the unshifted scores can neither overflow nor reach 0 (e^-80 is a
         * normal float), and softmax is the same for any shift: no running maximum is needed. */
        float q2 = 0.0f, k2 = 0.0f;
#if defined(__AVX512F__)
        if (d % 16 == 0) /* 16 × 16 tiles in registers: a fifth of the time of the element loop below,
                          * which took ~1/6 of e5 titles' attention (perf); the same values */
            for (int64_t j0 = 0; j0 < npad; j0 += 16)
                for (int64_t c0 = 0; c0 < d; c0 += 16)
                    transpose16(kh + j0 * ldk + c0, ldk, nk - j0 < 16 ? (int)(nk - j0) : 16, kt + c0 * npad + j0, npad);
        else
#endif
        for (int64_t c = 0; c < d; c++) {
            float *row = kt + c * npad;
            for (int64_t j = 0; j < nk; j++) row[j] = kh[j * ldk + c];
            for (int64_t j = nk; j < npad; j++) row[j] = 0.0f;
        }
        for (int64_t j = 0; j < nk; j++) {
            float b = 0.0f;
#pragma omp simd reduction(+ : b)
            for (int64_t c = 0; c < d; c++) b += kh[j * ldk + c] * kh[j * ldk + c];
            k2 = b > k2 ? b : k2;
        }
        for (int64_t i = 0; i < nq; i++) {
            float a = 0.0f;
#pragma omp simd reduction(+ : a)
            for (int64_t c = 0; c < d; c++) a += qh[i * ldq + c] * qh[i * ldq + c];
            q2 = a > q2 ? a : q2;
        }
        const int shift = scale * sqrtf(q2) * sqrtf(k2) > 80.0f;
        /* V's rows side by side: the weighted sum then reads one sequential stream, where the
         * rows of Q | K | V are 3·H floats apart and each step lands on another page (where the
         * hardware prefetcher stops). Reviews' attention, 8 texts × 12 heads × 256 × 32: 8–10%
         * faster in a paired A/B, the same bits. */
        for (int64_t j = 0; j < nk; j++) memcpy(vt + j * dv, vh + j * ldv, (size_t)dv * sizeof(float));
        for (int64_t i0 = 0; i0 < nq; i0 += QROWS) {
            const int rows = nq - i0 < QROWS ? (int)(nq - i0) : QROWS;
            for (int r = 0; r < QROWS; r++) {
                m[r] = shift ? -INFINITY : 0.0f;
                l[r] = 0.0f;
                memset(o + r * dv, 0, (size_t)dv * sizeof(float));
            }
            for (int64_t j0 = 0; j0 < nk; j0 += KCHUNK) {
                const int64_t nkeys = nk - j0 < KCHUNK ? nk - j0 : KCHUNK;
                scores_block(qh + i0 * ldq, ldq, rows, kt, npad, j0, round_keys(nkeys), d, s);
                /* the exponentials in whole vectors of 16 (GCC left a short text's 13 keys to a
                 * scalar loop): the lanes past nkeys take exp(0) and are not summed
                 * (their scores exist, scores_block rounds keys to 32; P·V never reads them). Rows
                 * past `rows` (repeats of the last one) are skipped: their sums are never used. */
                const int64_t n16 = (nkeys + 15) / 16 * 16;
                for (int r = 0; r < rows; r++) {
                    float *row = s + r * KCHUNK;
                    float mx = m[r];
                    if (shift) {
#pragma omp simd reduction(max : mx)
                        for (int64_t j = 0; j < nkeys; j++) mx = row[j] > mx ? row[j] : mx;
                        if (mx > m[r]) { /* rescale what the earlier chunks summed */
                            const float corr = exp_f32((m[r] - mx) * scale); /* 0 on the first */
                            l[r] *= corr;
                            for (int64_t c = 0; c < dv; c++) o[r * dv + c] *= corr;
                            m[r] = mx;
                        }
                    }
                    vf acc[NV];
                    const vf mxv = (vf){0} + mx;
                    vf lane;
                    for (int t = 0; t < VW; t++) lane[t] = (float)t;
                    for (int t = 0; t < NV; t++) acc[t] = (vf){0};
                    /* whole vectors of keys without a mask, and no shift to subtract when there
                     * is none (x − 0 is x): a third fewer instructions per exponential, the same
                     * bits; reviews' attention 1.04–1.09× in a paired A/B (v3 build 1.09×) */
                    const int64_t whole = nkeys / 16 * 16;
                    for (int64_t j = 0; j < whole; j += 16)
                        for (int t = 0; t < NV; t++) {
                            const vf sj = load_v(row + j + t * VW);
                            const vf e = exp_v((shift ? sj - mxv : sj) * scale);
                            store_v(row + j + t * VW, e);
                            acc[t] += e;
                        }
                    for (int64_t j = whole; j < n16; j += 16)
                        for (int t = 0; t < NV; t++) { /* lanes j + t·VW … */
                            const vi real = lane + (float)(j + t * VW) < (vf){0} + (float)nkeys;
                            const vf sj = (vf)(((vi)load_v(row + j + t * VW) & real) | ((vi)mxv & ~real));
                            const vf e = exp_v((sj - mxv) * scale);
                            store_v(row + j + t * VW, e);
                            acc[t] += (vf)((vi)e & real);
                        }
#if defined(__AVX512F__)
                    store_v(lanes[r], acc[0]); /* summed below, every row's lanes at once */
#else
                    float sum = 0.0f; /* lane 0 to 15 in order, whatever VW */
                    for (int t = 0; t < NV; t++)
                        for (int k = 0; k < VW; k++) sum += acc[t][k];
                    l[r] += sum;
#endif
                }
#if defined(__AVX512F__)
                { /* each row's 16 lanes summed in the same order (0 + lane 0, + lane 1, …, + lane 15: the
                   * same bits), for all rows at once on the transposed lanes: 15 vector additions
                   * instead of a chain of 16 dependent scalar ones a row */
                    float cols[16][16] __attribute__((aligned(64)));
                    transpose16(lanes[0], 16, rows, cols[0], 16);
                    vf sum = (vf){0} + load_v(cols[0]);
                    for (int k = 1; k < 16; k++) sum += load_v(cols[k]);
                    for (int r = 0; r < rows; r++) l[r] += sum[r];
                }
#endif
                const float *vc = vt + j0 * dv;
                if (dv == 16) weighted_sum_1(s, nkeys, vc, dv, o, dv);
                else for (int64_t c = 0; c < dv; c += 32) weighted_sum_2(s, nkeys, vc + c, dv, o + c, dv);
            }
            for (int r = 0; r < rows; r++) {
                const float inv = 1.0f / l[r];
                float *dst = oh + (i0 + r) * ldo;
                for (int64_t c = 0; c < dv; c++) dst[c] = o[r * dv + c] * inv;
            }
        }
    }
}

/* qkv_attention_heads for each of `texts` texts without padding in one call: text t is rows
 * starts[t] … starts[t] + lens[t] − 1 of qkv (Q | K | V of every head side by side, H = heads·d
 * floats each, rows ld floats apart) and writes the same rows of ctx (rows ldo apart). Every text
 * runs exactly the call qkv.kernels.float32.attention_text makes for it alone (the same bits);
 * one call instead of one a text saves the Python around each (a batch of 32 titles through
 * multilingual-e5-small's 12 layers made 384 such calls: ~12 ms of a ~100 ms batch, measured).
 * work: qkv_attention_work(longest text, d, d) floats. */
void qkv_attention_texts(const float *qkv, int64_t ld, const int64_t *starts, const int64_t *lens, int64_t texts,
                         int64_t heads, int64_t d, float scale, float *ctx, int64_t ldo, float *work)
{
    const int64_t H = heads * d;
    for (int64_t t = 0; t < texts; t++) {
        const float *q = qkv + starts[t] * ld;
        if (lens[t] > 0)
            qkv_attention_heads(q, q + H, q + 2 * H, heads, d, d, d, d, ld, ld, ld, ldo, lens[t], lens[t], d, d,
                                scale, ctx + starts[t] * ldo, work);
    }
}
