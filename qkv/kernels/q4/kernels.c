/* Matrix products on 4-bit weights (Q4_0 blocks) expanded on the fly; the activations stay float32.
 *
 * The blocks are llama.cpp / ggml's Q4_0 (ggml-quants.c): 32 weights share a scale d, each weight
 * is a 4-bit q and means (q − 8)·d, exact in float32 (4 bits times an 11-bit float16 scale). The
 * file stores a linear layer's weights [out, in] blocked along `in`; qkv.kernels.q4.pack_q4 rearranges
 * them once, at load, into the column panels of the float32 products (PANEL = 32 outputs), so a
 * product walks the weights in the order it reads them:
 *
 *   Q4 panels: [N / 32 panels][K / 32 blocks] of 640 bytes each:
 *     bytes   0..127  float32 d[32]       the scale of each of the panel's 32 outputs in this block
 *     bytes 128..639  uint8 q[32 k][16]   for input k of the block, byte j holds output j in its low
 *                                         nibble and output j + 16 in its high nibble
 *   (0.625 bytes a weight; float32 panels take 4.) The product expands 16 bytes into the 32 weights
 *   of one input row of the panel, (q·d) + (−8·d), which is exactly (q − 8)·d (both products exact).
 *
 * Two ways through, chosen by the caller (qkv.kernels.q4.q4_matmul) by row count:
 *  - qkv_q4_matmul: a few rows (a search query): up to Q4_ROWS rows, each panel row is expanded
 *    into registers and used at once; up to EXPAND_FROM, each 32 × 32 block is expanded once into
 *    an L1 buffer that every row tile reads. The product streams 0.625 bytes a weight, where a
 *    lone query is bound by reading weights.
 *  - qkv_q4_expand + qkv_gemm (in float32/kernels.c): many rows: the whole matrix is expanded once into
 *    float32 panels in a scratch buffer and multiplied by the blocked product; the expansion costs
 *    one pass over K·N weights against R·K·N multiply-adds.
 * Sums run over k in order, in float32, bias added last, as the float32 products do; so a product
 * on these blocks equals, to float32 rounding, x times the dequantized matrix.
 */
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define PANEL 32
#define QBLOCK 32
#define QBLOCK_BYTES (PANEL * 4 + QBLOCK * PANEL / 2) /* 640 */
/* Vectors of VW floats, as the float32 kernels (float32/kernels.c, VW): 16 with AVX-512; 8 in an
 * AVX2 build, whose 16 ymm registers hold a 16-float vector only in two halves that GCC spills at
 * every step. The tile: Q4_ROWS × 32 outputs, 24 of AVX-512's 32 zmm registers for 12 rows; 12 of
 * AVX2's 16 ymm for 3 rows (W's four vectors made one at a time). Each output is the same chain of
 * operations in either build (w = q·d + (−8·d), then one FMA a k), so both give the same bits. */
#if defined(__AVX512F__)
#define VW 16
#define Q4_ROWS 12
#else
#define VW 8
#define Q4_ROWS 3
#endif
#define NP (PANEL / VW) /* vectors in a panel row */

typedef float vf __attribute__((vector_size(VW * 4)));

void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width);                 /* float32/kernels.c */
void qkv_gemm(const float *x, int64_t R, int64_t K, const float *panels, int64_t N,
              const float *bias, int gelu, float *y);                                    /* float32/kernels.c */

int64_t qkv_q4_block_bytes(void) { return QBLOCK_BYTES; } /* read by qkv.kernels.q4: one owner of the layout */

static inline vf ld(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void st(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* A block's scales d (NP vectors, outputs 0..31) and −8·d. */
static inline __attribute__((always_inline)) void block_scales(const uint8_t *blk, vf *d, vf *m)
{
    for (int j = 0; j < NP; j++) {
        d[j] = ld((const float *)blk + j * VW);
        m[j] = d[j] * -8.0f;
    }
}

/* The 32 weights of input row k of a panel block: w[j] = outputs j·VW … j·VW + VW − 1. */
static inline __attribute__((always_inline)) void expand_row(const uint8_t *q, const vf *d, const vf *m, vf *w)
{
    vf v[NP];
#if defined(__AVX512F__) /* zero-extend 16 bytes to 16 int32 lanes, convert: two instructions a half */
    const __m128i b = _mm_loadu_si128((const __m128i *)q), mask = _mm_set1_epi8(15);
    __m512 l = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(b, mask)));
    __m512 h = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), mask)));
    memcpy(&v[0], &l, sizeof l);
    memcpy(&v[1], &h, sizeof h);
#elif defined(__AVX2__) /* the same, eight bytes at a time */
    const __m128i b = _mm_loadu_si128((const __m128i *)q), mask = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(b, mask), hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
    const __m256 e[4] = {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)),
                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))),
                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)),
                         _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)))};
    memcpy(v, e, sizeof v);
#else /* portable: output o < 16 is byte o's low nibble, o ≥ 16 byte o − 16's high nibble */
    for (int j = 0; j < NP; j++)
        for (int t = 0; t < VW; t++) {
            const int o = j * VW + t;
            v[j][t] = (float)(o < 16 ? q[o] & 15 : q[o - 16] >> 4);
        }
#endif
    for (int j = 0; j < NP; j++) w[j] = v[j] * d[j] + m[j];
}

/* y[r, 0:32] = acc[r] (+ bias) for r < rr: the end of both row tiles below. */
static inline __attribute__((always_inline)) void store_rows(vf acc[][NP], const int rr, const float *bias,
                                                             float *y, int64_t ldy)
{
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < NP; j++) {
            if (bias) acc[r][j] += ld(bias + j * VW);
            st(y + r * ldy + j * VW, acc[r][j]);
        }
}

/* y[r, 0:32] = Σ_k x[r, k]·W[k, 0:32] (+ bias) for r < rr, W one Q4 panel of K / 32 blocks. */
static inline __attribute__((always_inline)) void q4_tile(const float *x, int64_t ldx, int64_t K,
                                                          const uint8_t *panel, const float *bias,
                                                          float *y, int64_t ldy, const int rr)
{
    vf acc[Q4_ROWS][NP];
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < NP; j++) acc[r][j] = (vf){0};
    for (int64_t b = 0; b < K / QBLOCK; b++) {
        const uint8_t *blk = panel + b * QBLOCK_BYTES;
        vf d[NP], m[NP];
        block_scales(blk, d, m);
        const uint8_t *q = blk + PANEL * 4;
        __builtin_prefetch(blk + 2 * QBLOCK_BYTES, 0, 3);
        __builtin_prefetch(blk + 2 * QBLOCK_BYTES + 320, 0, 3);
        const float *xb = x + b * QBLOCK;
        for (int k = 0; k < QBLOCK; k++) {
            vf w[NP];
            expand_row(q + k * (PANEL / 2), d, m, w);
            for (int r = 0; r < rr; r++) {
                const float xr = xb[r * ldx + k];
                for (int j = 0; j < NP; j++) acc[r][j] += xr * w[j];
            }
        }
    }
    store_rows(acc, rr, bias, y, ldy);
}

static void q4_block(const float *x, int64_t ldx, int64_t K, const uint8_t *panel, const float *bias,
                     float *y, int64_t ldy, int64_t rr)
{
    switch (rr) { /* a constant row count per case: the accumulators stay in registers */
    case 1: q4_tile(x, ldx, K, panel, bias, y, ldy, 1); break;
    case 2: q4_tile(x, ldx, K, panel, bias, y, ldy, 2); break;
#if Q4_ROWS > 3
    case 3: q4_tile(x, ldx, K, panel, bias, y, ldy, 3); break;
    case 4: q4_tile(x, ldx, K, panel, bias, y, ldy, 4); break;
    case 5: q4_tile(x, ldx, K, panel, bias, y, ldy, 5); break;
    case 6: q4_tile(x, ldx, K, panel, bias, y, ldy, 6); break;
    case 7: q4_tile(x, ldx, K, panel, bias, y, ldy, 7); break;
    case 8: q4_tile(x, ldx, K, panel, bias, y, ldy, 8); break;
    case 9: q4_tile(x, ldx, K, panel, bias, y, ldy, 9); break;
    case 10: q4_tile(x, ldx, K, panel, bias, y, ldy, 10); break;
    case 11: q4_tile(x, ldx, K, panel, bias, y, ldy, 11); break;
#endif
    default: q4_tile(x, ldx, K, panel, bias, y, ldy, Q4_ROWS); break;
    }
}

/* More rows than one tile (a query with its prefix is often 13-20 tokens): each 32 × 32 block of
 * a panel is expanded once into buf (4 kB, in L1) and every row tile runs over it, continuing the
 * running sums it left in y (same order over k, so the same floats as one tile). */
static inline __attribute__((always_inline)) void buf_tile(const float *x, int64_t ldx, const float *buf,
                                                           float *y, int64_t ldy, const float *bias,
                                                           int first, const int rr)
{
    vf acc[Q4_ROWS][NP];
    for (int r = 0; r < rr; r++)
        for (int j = 0; j < NP; j++) acc[r][j] = first ? (vf){0} : ld(y + r * ldy + j * VW);
    for (int k = 0; k < QBLOCK; k++) {
        vf w[NP];
        for (int j = 0; j < NP; j++) w[j] = ld(buf + k * PANEL + j * VW);
        for (int r = 0; r < rr; r++) {
            const float xr = x[r * ldx + k];
            for (int j = 0; j < NP; j++) acc[r][j] += xr * w[j];
        }
    }
    store_rows(acc, rr, bias, y, ldy);
}

static void buf_block(const float *x, int64_t ldx, const float *buf, float *y, int64_t ldy,
                      const float *bias, int first, int64_t rr)
{
    switch (rr) {
    case 1: buf_tile(x, ldx, buf, y, ldy, bias, first, 1); break;
    case 2: buf_tile(x, ldx, buf, y, ldy, bias, first, 2); break;
#if Q4_ROWS > 3
    case 3: buf_tile(x, ldx, buf, y, ldy, bias, first, 3); break;
    case 4: buf_tile(x, ldx, buf, y, ldy, bias, first, 4); break;
    case 5: buf_tile(x, ldx, buf, y, ldy, bias, first, 5); break;
    case 6: buf_tile(x, ldx, buf, y, ldy, bias, first, 6); break;
    case 7: buf_tile(x, ldx, buf, y, ldy, bias, first, 7); break;
    case 8: buf_tile(x, ldx, buf, y, ldy, bias, first, 8); break;
    case 9: buf_tile(x, ldx, buf, y, ldy, bias, first, 9); break;
    case 10: buf_tile(x, ldx, buf, y, ldy, bias, first, 10); break;
    case 11: buf_tile(x, ldx, buf, y, ldy, bias, first, 11); break;
#endif
    default: buf_tile(x, ldx, buf, y, ldy, bias, first, Q4_ROWS); break;
    }
}

static void expand_block(const uint8_t *blk, float *o)
{
    vf d[NP], m[NP];
    block_scales(blk, d, m);
    for (int k = 0; k < QBLOCK; k++) {
        vf w[NP];
        expand_row(blk + PANEL * 4 + k * (PANEL / 2), d, m, w);
        for (int j = 0; j < NP; j++) st(o + k * PANEL + j * VW, w[j]);
    }
}

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), W as Q4 panels; gelu != 0: y = gelu(y) after
 * (BERT's exact GELU; then bias must not be NULL). Panels outermost, so a panel (K / 32 · 640
 * bytes) stays in L1 while every row of x passes over it. Up to Q4_ROWS rows, the panel rows are
 * expanded into registers as they are used; more, block by block into an L1 buffer (above). */
void qkv_q4_matmul(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                   const float *bias, int gelu, float *y)
{
    const int64_t per_panel = K / QBLOCK * QBLOCK_BYTES;
    float buf[QBLOCK * PANEL] __attribute__((aligned(64)));
    for (int64_t p = 0; p < N / PANEL; p++) {
        const uint8_t *panel = panels + p * per_panel;
        const float *b = bias && !gelu ? bias + p * PANEL : NULL;
        if (R <= Q4_ROWS) {
            q4_block(x, K, K, panel, b, y + p * PANEL, N, R);
            continue;
        }
        for (int64_t kb = 0; kb < K / QBLOCK; kb++) {
            expand_block(panel + kb * QBLOCK_BYTES, buf);
            const int last = kb == K / QBLOCK - 1;
            for (int64_t r = 0; r < R; r += Q4_ROWS)
                buf_block(x + r * K + kb * QBLOCK, K, buf, y + r * N + p * PANEL, N, last ? b : NULL, kb == 0,
                          R - r < Q4_ROWS ? R - r : Q4_ROWS);
        }
    }
    if (gelu && bias) qkv_bias_gelu(y, bias, R, N); /* gelu(sum + bias): the order qkv_gemm keeps */
}

/* out: float32 panels [N / 32][K][32], the layout qkv_gemm reads, from Q4 panels. */
void qkv_q4_expand(const uint8_t *panels, int64_t K, int64_t N, float *out)
{
    for (int64_t p = 0; p < N / PANEL; p++) {
        for (int64_t b = 0; b < K / QBLOCK; b++) {
            expand_block(panels + (p * (K / QBLOCK) + b) * QBLOCK_BYTES, out + (p * K + b * QBLOCK) * PANEL);
        }
    }
}

/* The many-rows way: expand into work (K·N floats, 64-byte aligned), then the blocked product. */
void qkv_q4_gemm(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                 const float *bias, int gelu, float *y, float *work)
{
    qkv_q4_expand(panels, K, N, work);
    qkv_gemm(x, R, K, work, N, bias, gelu, y);
}

/* Rows of a Q4_0 matrix in the file's own blocks (18 bytes: float16 d, 16 bytes of nibbles,
 * byte j = weight j low, weight j + 16 high), expanded to float32: out[i] = row ids[i] of W
 * [rows, nblocks·32]. For the word embeddings, of which only the looked-up rows are expanded. */
static inline float half_bits_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (e == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (e) bits = sign | ((e + 112) << 23) | (man << 13);
    else if (man) {
        int shift = 0;
        while (!(man & 0x400)) { man <<= 1; shift++; }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((man & 0x3ff) << 13);
    } else bits = sign;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void qkv_q4_rows(const uint8_t *blocks, int64_t nblocks, const int64_t *ids, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *row = blocks + ids[i] * nblocks * 18;
        float *o = out + i * nblocks * QBLOCK;
        for (int64_t b = 0; b < nblocks; b++) {
            const uint8_t *blk = row + b * 18;
            uint16_t hb;
            memcpy(&hb, blk, 2);
            const float d = half_bits_to_float(hb);
            for (int j = 0; j < 16; j++) {
                o[b * QBLOCK + j] = (float)((blk[2 + j] & 15) - 8) * d;
                o[b * QBLOCK + j + 16] = (float)((blk[2 + j] >> 4) - 8) * d;
            }
        }
    }
}
