/* Products on 4-bit weights (the Q4 panels of q4/kernels.c) on AMX tiles, with EXACT products:
 * the activations are split into three bfloat16 parts, no activation is quantised.
 *
 * Why it is exact (Henry, Tang & Heinecke, "Leveraging the bfloat16 Artificial Intelligence
 * Datatype For Higher-Precision Computations", ARITH 2019): a normal float32 x (24 significant
 * bits) is x1 + x2 + x3 with x1 = bf16(x), x2 = bf16(x − x1), x3 = bf16(x − x1 − x2), each
 * rounded to nearest (8 bits each; the two differences are exact in float32, and the last part
 * needs at most 8 bits, so x3 = x − x1 − x2 exactly). A Q4_0 weight is (q − 8)·d; the integer
 * q − 8 ∈ [−8, 7] is exact in bfloat16, and x_s·(q − 8) (8 × 4 bits) is exact in float32. A Q4
 * block is 32 inputs: exactly one tile's depth (16 pair rows × 2). So per block of 32 inputs and
 * 16 outputs, C = x1·Q + x2·Q + x3·Q are three TDPBF16PS on the same B tile (exact products,
 * float32 sums), then acc += C ⊙ d (the block's per-output scale, a vector FMA after a tile
 * store), bias last (then GELU).
 *
 * Error bound (what tests/kernels/test_q4.py holds the kernel to): every product is exact; C
 * sums 96 of them (3 parts × 32 inputs) in float32, C·d + acc is one rounded FMA per block, so
 * for any order the unit takes inside a tile (Higham, Accuracy and Stability, §3.1)
 *     |ŷ − y| ≤ γ_(96 + K/32 + 1) · (1 + 2^-7) · Σ_k |x_k|·|w_k|   (+ γ_1·|b| for the bias),
 * γ_n = n·2^-24 / (1 − n·2^-24), against the float64 product of x and the dequantized W; the
 * (1 + 2^-7) covers |x1| + |x2| + |x3| ≤ (1 + 2^-7)|x|. One caveat: the tile unit and the
 * conversion treat subnormal inputs as zero and flush subnormal outputs, so parts below 2^-126
 * are lost (an absolute error < 2^-120 per product: nothing for the activations of an encoder).
 * The float32 kernel of q4/kernels.c obeys γ_(K)·Σ|x||w|: the same order of error.
 *
 * The tiles: C0..C3 a 32 × 32 block of the block's sums (2 × 2 tiles of 16 × 16 float32), A0,
 * A1 two 16-row slices of one part of x, B0, B1 the block's 16 pair rows for outputs 0-15 and
 * 16-31. B tiles are made from the nibbles: 32 bytes (inputs k, k + 1) zero-extended to words and
 * interleaved into (k, k + 1) pairs (one VPERMB where the CPU has VBMI, else a zero-extension and a
 * VPERMW), masked or shifted to the low / high nibble, and looked up in a 16-entry table of
 * bf16(q − 8) (VPERMW). Up to 16 rows (a lone query) run few_rows, which makes each block's B
 * tiles one block ahead into an L1 ring and orders the tiles for that size; up to ONE_PASS rows
 * make a panel's B tiles once for both row tiles; more rows make the whole matrix once per
 * call (K·N bf16 in a per-thread scratch, 2 bytes a weight, dropped with the thread) and walk it
 * in column blocks, rows in blocks of 32 as bfloat16/kernels.c's gemm_amx does (its tile config
 * helper, with the compiler barrier, is repeated here: that file is static and not ours).
 *
 * The caller (qkv.kernels.q4) runs this only where qkv.kernels.bfloat16 chose the "amx" unit (CPUID,
 * XCR0 and the arch_prctl tile permission); otherwise the float32 kernel of q4/kernels.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PANEL 32
#define QBLOCK 32
#define QBLOCK_BYTES (PANEL * 4 + QBLOCK * PANEL / 2) /* 640: q4/kernels.c's layout */
#define ONE_PASS 32                                    /* up to this many rows, B tiles made per block */
#define ROW_CHUNK 256                                  /* rows split into parts at a time (bounds the scratch) */
#define COL_BLOCK 256                                  /* outputs per column block (many rows) */

void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width); /* float32/kernels.c */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define T_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

/* xs[s][r][k] (s = 0, 1, 2: the three parts), rows R..Rp zero. K is a multiple of 32. */
T_BF16 static void split3(const float *x, int64_t R, int64_t K, uint16_t *xs, int64_t Rp)
{
    const int64_t plane = Rp * K;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t k = 0; k < K; k += 32) {
            __m512 a = _mm512_loadu_ps(x + r * K + k), b = _mm512_loadu_ps(x + r * K + k + 16);
            for (int s = 0; s < 3; s++) {
                const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* RNE; a in the low half */
                _mm512_storeu_si512((void *)(xs + s * plane + r * K + k), h);
                if (s == 2) break;
                /* back to float32 (exact: bfloat16 is the top half of a float32), the rest exact */
                const __m512 ha = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
                const __m512 hb = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
                a = _mm512_sub_ps(a, ha);
                b = _mm512_sub_ps(b, hb);
            }
        }
    }
    for (int s = 0; s < 3; s++)
        if (Rp > R) memset(xs + s * plane + R * K, 0, (size_t)((Rp - R) * K) * sizeof(uint16_t));
}

/* bf16 bits of q − 8 for q = 0..15 (−8 … −1: 0xc100 …, 0, 1 … 7), a word table for VPERMW. */
#define Q4_BF16_TABLE                                                                                  \
    _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40e0, 0x40c0, 0x40a0, 0x4080,    \
                     0x4040, 0x4000, 0x3f80, 0x0000, (short)0xbf80, (short)0xc000, (short)0xc040,       \
                     (short)0xc080, (short)0xc0a0, (short)0xc0c0, (short)0xc0e0, (short)0xc100)

/* The two B tiles (outputs 0-15, then 16-31; 16 pair rows × 32 bf16 each, 2 kB) of one Q4 block. */
T_BF16 static inline void make_b_perm(const uint8_t *blk, uint16_t *b)
{
    /* word i of the zero-extended 32 bytes: byte i of input k (i < 16) or of input k + 1 */
    const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                           23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i table = Q4_BF16_TABLE;
    const __m512i low = _mm512_set1_epi16(15);
    const uint8_t *q = blk + PANEL * 4;
    for (int i = 0; i < 16; i++) {
        const __m512i w = _mm512_permutexvar_epi16(
            pairs, _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(q + 32 * i))));
        _mm512_store_si512((void *)(b + 32 * i), _mm512_permutexvar_epi16(_mm512_and_si512(w, low), table));
        _mm512_store_si512((void *)(b + 512 + 32 * i), _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table));
    }
}

/* The same tiles with one permute fewer a row: VPERMB (AVX-512 VBMI) takes the 32 bytes of inputs k,
 * k + 1 straight to the interleaved, zero-extended words (odd bytes zeroed by the mask), where
 * make_b_perm zero-extends and then permutes the words. Same bits out (tests/kernels/test_q4.py). */
__attribute__((target("avx512f,avx512bw,avx512bf16,avx512vbmi"))) static inline void make_b_vbmi(const uint8_t *blk,
                                                                                                 uint16_t *b)
{
    static const uint8_t pairs[64] __attribute__((aligned(64))) = {
        0, 0, 16, 0, 1, 0, 17, 0, 2, 0, 18, 0, 3, 0, 19, 0, 4, 0, 20, 0, 5, 0, 21, 0, 6, 0, 22, 0, 7, 0, 23, 0,
        8, 0, 24, 0, 9, 0, 25, 0, 10, 0, 26, 0, 11, 0, 27, 0, 12, 0, 28, 0, 13, 0, 29, 0, 14, 0, 30, 0, 15, 0, 31, 0};
    const __m512i idx = _mm512_load_si512((const void *)pairs);
    const __m512i table = Q4_BF16_TABLE;
    const __m512i low = _mm512_set1_epi16(15);
    const uint8_t *q = blk + PANEL * 4;
    for (int i = 0; i < 16; i++) {
        const __m512i w = _mm512_maskz_permutexvar_epi8(
            0x5555555555555555ull, idx, _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(q + 32 * i))));
        _mm512_store_si512((void *)(b + 32 * i), _mm512_permutexvar_epi16(_mm512_and_si512(w, low), table));
        _mm512_store_si512((void *)(b + 512 + 32 * i), _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table));
    }
}

/* -1 unknown, 0 / 1: whether make_b uses VBMI (every CPU with AMX so far has it; checked all the
 * same). qkv_q4_amx_vbmi(set): set ≥ 0 forces it (tests run both ways), -1 asks the CPU; returns it. */
static int vbmi = -1;

int64_t qkv_q4_amx_vbmi(int64_t set)
{
    if (set >= 0) vbmi = (int)set;
    if (vbmi < 0) {
        __builtin_cpu_init();
        vbmi = __builtin_cpu_supports("avx512vbmi") ? 1 : 0;
    }
    return vbmi;
}

T_BF16 static inline void make_b(const uint8_t *blk, uint16_t *b)
{
    if (vbmi > 0) make_b_vbmi(blk, b);
    else make_b_perm(blk, b);
}

struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* Tiles 0-3 (C) and 4-5 (A) of m rows, 6-7 (B) of 16; 64 bytes a row. The barrier keeps GCC from
 * dropping the stores to the config (it does not see that LDTILECFG reads them). */
T_AMX static void config_tiles(int m)
{
    struct tile_config cfg __attribute__((aligned(64)));
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = t >= 6 ? 16 : (uint8_t)m, cfg.colsb[t] = 64;
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

/* acc[r] (+)= c[r] ⊙ d for r < rows, 32 outputs. */
T_BF16 static inline void scale_add(float *acc, const float *c, const float *d, int rows, int first)
{
    const __m512 d0 = _mm512_loadu_ps(d), d1 = _mm512_loadu_ps(d + 16);
    for (int r = 0; r < rows; r++) {
        const __m512 c0 = _mm512_load_ps(c + r * PANEL), c1 = _mm512_load_ps(c + r * PANEL + 16);
        if (first) {
            _mm512_store_ps(acc + r * PANEL, _mm512_mul_ps(c0, d0));
            _mm512_store_ps(acc + r * PANEL + 16, _mm512_mul_ps(c1, d1));
        } else {
            _mm512_store_ps(acc + r * PANEL, _mm512_fmadd_ps(c0, d0, _mm512_load_ps(acc + r * PANEL)));
            _mm512_store_ps(acc + r * PANEL + 16, _mm512_fmadd_ps(c1, d1, _mm512_load_ps(acc + r * PANEL + 16)));
        }
    }
}

static const float ZEROS[PANEL] = {0};

/* y[r, 0:32] = acc[r] + bias (or GELU(acc[r] + bias)) for r < rows. */
T_BF16 static void finish(float *acc, int rows, float *y, int64_t ldy, const float *bias, int gelu)
{
    if (gelu) {
        qkv_bias_gelu(acc, bias ? bias : ZEROS, rows, PANEL);
        bias = NULL;
    }
    const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
        _mm512_storeu_ps(y + r * ldy, _mm512_add_ps(_mm512_load_ps(acc + r * PANEL), b0));
        _mm512_storeu_ps(y + r * ldy + 16, _mm512_add_ps(_mm512_load_ps(acc + r * PANEL + 16), b1));
    }
}

/* acc[r, 0:32] = Σ_kb C_kb ⊙ d_kb for one panel and m ≤ 16 rows of the parts (xs: part s at
 * xs + s·plane, rows K apart). The C tiles alternate between (0, 1) and (2, 3) block by block,
 * and a block's C is stored only after the next block's products are issued: a tile store waits
 * for its products to finish, so storing at once would leave the unit idle for their latency.
 * B tiles: from bt (kb·1024 on). */
T_AMX static void tile_rows(const uint16_t *xs, int64_t plane, int64_t K, const uint16_t *bt,
                            const uint8_t *panel, int m, float *acc, float *c)
{
    const int64_t lda = K * 2, nb = K / QBLOCK;
#define BLOCK(kb, C0, C1)                                                                                    \
    do {                                                                                                     \
        const uint16_t *b_ = bt + (kb) * 1024, *a_ = xs + (kb) * QBLOCK;                                   \
        _tile_loadd(6, b_, 64);                                                                              \
        _tile_loadd(7, b_ + 512, 64);                                                                        \
        _tile_zero(C0);                                                                                      \
        _tile_zero(C1);                                                                                      \
        _tile_loadd(4, a_, lda);                                                                             \
        _tile_dpbf16ps(C0, 4, 6);                                                                            \
        _tile_dpbf16ps(C1, 4, 7);                                                                            \
        _tile_loadd(5, a_ + plane, lda);                                                                     \
        _tile_dpbf16ps(C0, 5, 6);                                                                            \
        _tile_dpbf16ps(C1, 5, 7);                                                                            \
        _tile_loadd(4, a_ + 2 * plane, lda);                                                                 \
        _tile_dpbf16ps(C0, 4, 6);                                                                            \
        _tile_dpbf16ps(C1, 4, 7);                                                                            \
    } while (0)
#define DRAIN(kb, C0, C1)                                                                                    \
    do {                                                                                                     \
        _tile_stored(C0, c, PANEL * 4);                                                                      \
        _tile_stored(C1, c + 16, PANEL * 4);                                                                 \
        scale_add(acc, c, (const float *)(panel + (kb) * QBLOCK_BYTES), m, (kb) == 0);                      \
    } while (0)
    BLOCK(0, 0, 1);
    for (int64_t kb = 1; kb < nb; kb++) {
        if (kb & 1) {
            BLOCK(kb, 2, 3);
            DRAIN(kb - 1, 0, 1);
        } else {
            BLOCK(kb, 0, 1);
            DRAIN(kb - 1, 2, 3);
        }
    }
    if ((nb - 1) & 1) DRAIN(nb - 1, 2, 3);
    else DRAIN(nb - 1, 0, 1);
#undef BLOCK
#undef DRAIN
}

/* y = x·W (+ bias, GELU) for m ≤ 16 rows, every panel: the same sums as tile_rows (each C a zeroed
 * tile plus the three parts' products, in that order; acc the first block's C ⊙ d, then one
 * fused multiply-add a block; finish: the same bits), scheduled for a lone query, where the tile
 * unit would otherwise wait on the vector work around it (measured: ~20% less time for a 13-row
 * query's products):
 *  - the products go by halves (16 outputs: one C tile, A in tile 5, B in tile 6), the C tiles
 *    turning over 0..3, so a half's C is stored three halves after its products were issued
 *    (tile_rows' pairs of tiles leave it one block: the store waited on the products);
 *  - each block's B tiles are made two blocks ahead into a ring of four (a tile load of rows just
 *    stored waits until the stores have left the core);
 *  - the panels run as one stream of halves (panel p's block kb is block p·nb + kb of the
 *    panels' memory): the next panel's first B and products start before this one is finished. */
T_AMX static void few_rows(const uint16_t *xs, int64_t plane, int64_t K, const uint8_t *panels, int64_t N,
                           int m, const float *bias, int gelu, float *y, float *acc, float *c, uint16_t *ring)
{
    const int64_t lda = K * 2, nb = K / QBLOCK, blocks = N / PANEL * nb, halves = 2 * blocks;
    int64_t dkb = 0, dp = 0; /* the block within its panel, and the panel, of the next half drained */
#define MAKE(g) \
    do { if ((g) < blocks) make_b(panels + (g) * QBLOCK_BYTES, ring + ((g) & 3) * 1024); } while (0)
#define HALF(h, kb, C)                                                                                       \
    do {                                                                                                     \
        const uint16_t *b_ = ring + (((h) >> 1) & 3) * 1024 + ((h) & 1) * 512, *a_ = xs + (kb) * QBLOCK;   \
        _tile_loadd(6, b_, 64);                                                                              \
        _tile_zero(C);                                                                                       \
        _tile_loadd(5, a_, lda);                                                                             \
        _tile_dpbf16ps(C, 5, 6);                                                                             \
        _tile_loadd(5, a_ + plane, lda);                                                                     \
        _tile_dpbf16ps(C, 5, 6);                                                                             \
        _tile_loadd(5, a_ + 2 * plane, lda);                                                                 \
        _tile_dpbf16ps(C, 5, 6);                                                                             \
    } while (0)
#define DRAIN(h, C)                                                                                          \
    do {                                                                                                     \
        float *c_ = c + ((h) & 3) * 256, *acc_ = acc + ((h) & 1) * 16;                                       \
        _tile_stored(C, c_, 64);                                                                             \
        const __m512 d_ = _mm512_loadu_ps((const float *)(panels + ((h) >> 1) * QBLOCK_BYTES) + ((h) & 1) * 16); \
        if (dkb == 0)                                                                                        \
            for (int r = 0; r < m; r++) _mm512_store_ps(acc_ + r * PANEL, _mm512_mul_ps(_mm512_load_ps(c_ + r * 16), d_)); \
        else                                                                                                 \
            for (int r = 0; r < m; r++)                                                                      \
                _mm512_store_ps(acc_ + r * PANEL, _mm512_fmadd_ps(_mm512_load_ps(c_ + r * 16), d_,           \
                                                                  _mm512_load_ps(acc_ + r * PANEL)));        \
    } while (0)
#define DRAIN_ANY(h)                                                                                         \
    do {                                                                                                     \
        switch ((h) & 3) {                                                                                   \
        case 0: DRAIN(h, 0); break;                                                                          \
        case 1: DRAIN(h, 1); break;                                                                          \
        case 2: DRAIN(h, 2); break;                                                                          \
        default: DRAIN(h, 3);                                                                                \
        }                                                                                                    \
        if ((h) & 1 && ++dkb == nb) { /* the panel's last half: its outputs are complete */                 \
            finish(acc, m, y + dp * PANEL, N, bias ? bias + dp * PANEL : NULL, gelu);                        \
            dkb = 0, dp++;                                                                                   \
        }                                                                                                    \
    } while (0)
    MAKE(0);
    MAKE(1);
    for (int64_t h = 0, kb = 0; h < halves; h++) {
        if (!(h & 1)) MAKE((h >> 1) + 2);
        switch (h & 3) { /* tile numbers are immediates: one case per C tile */
        case 0: HALF(h, kb, 0); break;
        case 1: HALF(h, kb, 1); break;
        case 2: HALF(h, kb, 2); break;
        default: HALF(h, kb, 3);
        }
        if (h & 1 && ++kb == nb) kb = 0;
        if (h >= 3) DRAIN_ANY(h - 3);
    }
    for (int64_t h = halves > 3 ? halves - 3 : 0; h < halves; h++) DRAIN_ANY(h);
#undef MAKE
#undef HALF
#undef DRAIN
#undef DRAIN_ANY
}

/* Per-thread scratch kept between calls (a fresh one costs a page fault per 4 kB each call). */
static __thread void *xs_buf = NULL, *w_buf = NULL;
static __thread size_t xs_have = 0, w_have = 0;

void *qkv_q4_grow(void **buf, size_t *have, size_t need) /* also q4/int8.c's */
{
    if (need > *have) {
        free(*buf);
        *have = (need + 4095) / 4096 * 4096;
        *buf = aligned_alloc(64, *have);
        if (!*buf) *have = 0;
    }
    return *buf;
}

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), then GELU if gelu; W as Q4 panels (K, N
 * multiples of 32). Returns 0, or -1 when it could not run (no memory): the caller then runs the
 * float32 kernel. The caller has checked that this process may use the tiles.
 * Up to 16 rows (a lone query), few_rows, each block's B tiles made just ahead of use; up to
 * ONE_PASS rows, a panel's once for both row tiles; more, the whole matrix once, walked in column
 * blocks. */
T_AMX int64_t qkv_q4_amx(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                         const float *bias, int gelu, float *y)
{
    if (K % QBLOCK || N % PANEL || K <= 0) return -1;
    if (R <= 0) return 0;
    const int64_t nb = K / QBLOCK, per_panel = nb * QBLOCK_BYTES;
    const int64_t chunk = R < ROW_CHUNK ? (R + 15) / 16 * 16 : ROW_CHUNK;
    uint16_t *xs = qkv_q4_grow(&xs_buf, &xs_have, (size_t)(3 * chunk * K) * sizeof(uint16_t));
    if (!xs) return -1;
    const int many = R > ONE_PASS;
    uint16_t *w = NULL;
    if (R > 16 && !(w = qkv_q4_grow(&w_buf, &w_have, (size_t)(many ? K * N : K * PANEL) * sizeof(uint16_t)))) return -1;
    float c[16 * PANEL] __attribute__((aligned(64)));
    float acc[16 * PANEL] __attribute__((aligned(64)));
    if (vbmi < 0) qkv_q4_amx_vbmi(-1);
    config_tiles(R < 16 ? (int)R : 16);
    if (R <= 16) { /* a lone query: its own schedule (few_rows) */
        float cq[4 * 16 * 16] __attribute__((aligned(64)));
        uint16_t ring[4 * 1024] __attribute__((aligned(64)));
        split3(x, R, K, xs, chunk);
        few_rows(xs, chunk * K, K, panels, N, (int)R, bias, gelu, y, acc, cq, ring);
        _tile_release();
        return 0;
    }
    if (!many) { /* one pass over the panels */
        split3(x, R, K, xs, chunk);
        for (int64_t p = 0; p < N / PANEL; p++) {
            const uint8_t *panel = panels + p * per_panel;
            if (w)
                for (int64_t kb = 0; kb < nb; kb++) make_b(panel + kb * QBLOCK_BYTES, w + kb * 1024);
            for (int64_t r = 0; r < R; r += 16) {
                const int m = R - r < 16 ? (int)(R - r) : 16;
                tile_rows(xs + r * K, chunk * K, K, w, panel, m, acc, c);
                finish(acc, m, y + r * N + p * PANEL, N, bias ? bias + p * PANEL : NULL, gelu);
            }
        }
        _tile_release();
        return 0;
    }
    for (int64_t i = 0; i < N / PANEL * nb; i++) make_b(panels + i * QBLOCK_BYTES, w + i * 1024);
    for (int64_t r0 = 0; r0 < R; r0 += chunk) {
        const int64_t rows = R - r0 < chunk ? R - r0 : chunk;
        const int64_t rp = (rows + 15) / 16 * 16;
        split3(x + r0 * K, rows, K, xs, rp);
        for (int64_t n0 = 0; n0 < N; n0 += COL_BLOCK) {
            const int64_t p1 = (n0 + COL_BLOCK < N ? n0 + COL_BLOCK : N) / PANEL;
            for (int64_t r1 = 0; r1 < rows; r1 += 16) {
                const int m = rows - r1 < 16 ? (int)(rows - r1) : 16;
                for (int64_t p = n0 / PANEL; p < p1; p++) {
                    tile_rows(xs + r1 * K, rp * K, K, w + p * nb * 1024, panels + p * per_panel, m, acc, c);
                    finish(acc, m, y + (r0 + r1) * N + p * PANEL, N, bias ? bias + p * PANEL : NULL, gelu);
                }
            }
        }
    }
    _tile_release();
    return 0;
}

#else /* not x86-64 with GCC/Clang: no tiles; qkv runs the float32 kernel */
int64_t qkv_q4_amx(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                   const float *bias, int gelu, float *y)
{
    (void)x, (void)R, (void)K, (void)panels, (void)N, (void)bias, (void)gelu, (void)y;
    return -1;
}
#endif
