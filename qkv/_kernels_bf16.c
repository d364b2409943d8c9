/* Matrix products with bfloat16 inputs and float32 sums: on AMX tiles, or on AVX-512 BF16 dot
 * products, chosen at run time by what the CPU reports (qkv/kernels.py dispatches; see
 * docs/engine.md).
 *
 * y = x·W (+ bias, then GELU) where W is packed once (qkv.kernels.pack_bf16) as bfloat16 panels of
 * BP = 32 columns in the "VNNI pairs" layout both units read: [N / BP][Kp / 2][BP][2], i.e. for
 * each pair of rows (k, k+1) of W, 32 columns × the two values side by side (128 bytes). K is
 * padded with zeros to Kp, a multiple of BK = 32 (one AMX tile's depth). x is rounded to
 * bfloat16 (round to nearest even) as each call starts, into a scratch copy [Rp][Kp].
 * The layout follows what Intel documents for TDPBF16PS / VDPBF16PS and what oneDNN and libxsmm
 * do for their bf16 weights (pack once, pairs of K adjacent, accumulate in float32); nothing of
 * theirs is copied.
 *
 * Everything here is compiled with per-function target attributes, so the file builds and the
 * library loads on a CPU (and with a -march) that has neither unit: qkv calls a kernel only when
 * CPUID says the CPU has it, XGETBV says the OS saves its state, and, for AMX, Linux granted the
 * process the tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)).
 *
 * Rounding (what the tests hold the kernels to): a bfloat16 has 8 significant bits, unit
 * roundoff u_b = 2^-8, so each rounded input is within a factor (1 ± 2^-8) of its value; the
 * products of two bfloat16 values are exact in float32 (16 bits), and both units add them into
 * float32 sums (unit roundoff 2^-24), so against the float64 product of the ROUNDED inputs
 * |y - ŷ| ≤ γ_(K+1)·Σ|x̂||ŵ| with γ_n = n·2^-24/(1 - n·2^-24) (Higham, Accuracy and Stability,
 * §3.1, for any order of summation), and against the exact product of the unrounded ones an
 * extra (2u_b + u_b²)·Σ|x||w|.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BP 32 /* columns per panel */
#define BK 32 /* K is padded to a multiple of this */
int64_t qkv_bf16_panel_width(void) { return BP; }
int64_t qkv_bf16_depth(void) { return BK; }

/* Bits of qkv_bf16_cpu() */
#define CPU_AVX512BF16 1 /* AVX-512 F/BW/BF16, and the OS saves the zmm and mask registers */
#define CPU_AMX_BF16 2   /* AMX-TILE and AMX-BF16 */
#define OS_AMX 4         /* XCR0 enables the tile config and tile data state (bits 17, 18) */

void qkv_bias_gelu(float *h, const float *b, int64_t rows, int64_t width); /* _kernels.c */

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

int64_t qkv_bf16_cpu(void)
{
    unsigned a, b, c, d;
    int64_t bits = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* no OSXSAVE: no xgetbv */
    const uint64_t x = xcr0();
    const int zmm = (x & 0xe6) == 0xe6; /* SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM */
    if (__get_cpuid_max(0, NULL) < 7) return 0;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx512fbw = (b & (1u << 16)) && (b & (1u << 30));
    const int amx = (d & (1u << 24)) && (d & (1u << 22)); /* AMX-TILE, AMX-BF16 */
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    if (zmm && avx512fbw && (a1 & (1u << 5))) bits |= CPU_AVX512BF16;
    if (amx) bits |= CPU_AMX_BF16;
    if ((x & (3u << 17)) == (3u << 17)) bits |= OS_AMX;
    return bits;
}

/* Ask Linux for the AMX tile data state (a process must, since Linux 5.16, before its first tile
 * instruction, or it is killed with SIGILL). 1: granted (now or before); 0: refused. */
int64_t qkv_amx_request(void)
{
    enum { GET_PERM = 0x1022, REQ_PERM = 0x1023, XTILEDATA = 18 };
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, GET_PERM, &perm) == 0 && (perm & (1ul << XTILEDATA))) return 1;
    if (syscall(SYS_arch_prctl, REQ_PERM, XTILEDATA) != 0) return 0;
    perm = 0;
    return syscall(SYS_arch_prctl, GET_PERM, &perm) == 0 && (perm & (1ul << XTILEDATA));
}

#define T_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define T_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

/* xb [Rp][Kp] = x [R][K] rounded to bfloat16 (nearest even), zero beyond K and R. */
T_BF16 static void to_bf16(const float *x, int64_t R, int64_t K, uint16_t *xb, int64_t Rp, int64_t Kp)
{
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * K;
        uint16_t *out = xb + r * Kp;
        for (int64_t k = 0; k < Kp; k += 32) {
            const int64_t lo = K - k, hi = K - k - 16;
            const __mmask16 mlo = lo >= 16 ? 0xffff : lo > 0 ? (__mmask16)((1u << lo) - 1) : 0;
            const __mmask16 mhi = hi >= 16 ? 0xffff : hi > 0 ? (__mmask16)((1u << hi) - 1) : 0;
            const __m512 a = _mm512_maskz_loadu_ps(mlo, xr + k);
            const __m512 b = _mm512_maskz_loadu_ps(mhi, xr + k + 16);
            _mm512_storeu_si512((void *)(out + k), (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
    }
    if (Rp > R) memset(xb + R * Kp, 0, (size_t)((Rp - R) * Kp) * sizeof(uint16_t));
}

static const float ZEROS[BP] = {0};

/* y[r, 0:BP] = c[r, 0:BP] + bias (then GELU) for r < rows: the float32 epilogue of one tile, in L1. */
T_BF16 static void finish(float *c, int rows, float *y, int64_t ldy, const float *bias, int gelu)
{
    const __m512 b0 = bias && !gelu ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias && !gelu ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    if (gelu) qkv_bias_gelu(c, bias ? bias : ZEROS, rows, BP); /* _kernels.c's exact GELU, bias inside */
    for (int r = 0; r < rows; r++) {
        float *yr = y + r * ldy;
        _mm512_storeu_ps(yr, _mm512_add_ps(_mm512_loadu_ps(c + r * BP), b0));
        _mm512_storeu_ps(yr + 16, _mm512_add_ps(_mm512_loadu_ps(c + r * BP + 16), b1));
    }
}

/* --------------------------------------------------------------------------------- AMX tiles
 * Eight tiles: C0..C3 a 32 × 32 block of y in float32 (2 × 2 tiles of 16 × 16), A0, A1 two
 * 16-row × 32-k slices of x, B0, B1 the two 16-column halves of a panel's 16 pair rows. Each step
 * of 32 along K: four loads and four TDPBF16PS (16·16·32 multiply-adds each). As in oneDNN's
 * brgemm kernels the tiles of C stay in the unit for the whole of K and leave once, through a
 * 4 kB buffer, to the float32 epilogue (bias, GELU). Columns in blocks of AMX_NC (a block of W,
 * Kp × AMX_NC bf16, stays in L2 while every 32-row block of x walks it, the block of x in L1).
 * Tried: prefetching the next panel into L1 (slower), panels outside the row blocks (slower). */
#define AMX_NC 768 /* 256-1024 measured within noise for K = 1536; 768 ~10% ahead of 256 for K = 384 */

struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* Every kernel here uses the same eight tiles of 16 rows × 64 bytes (palette 1). The barrier
 * keeps GCC from dropping the stores to the config as dead: it does not see that LDTILECFG reads
 * them (seen with GCC 12 in a small function: the unit then faults). */
T_AMX static void config_tiles(void)
{
    struct tile_config cfg __attribute__((aligned(64)));
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

T_AMX static void gemm_amx(const uint16_t *xb, int64_t R, int64_t Kp, const uint16_t *panels,
                           int64_t N, const float *bias, int gelu, float *y)
{
    config_tiles();
    float c[32 * BP] __attribute__((aligned(64)));
    const int64_t lda = Kp * 2; /* bytes between rows of xb */
    for (int64_t n0 = 0; n0 < N; n0 += AMX_NC) {
        const int64_t p1 = (n0 + AMX_NC < N ? n0 + AMX_NC : N) / BP;
        for (int64_t r0 = 0; r0 < R; r0 += 32) {
            const uint16_t *a = xb + r0 * Kp;
            for (int64_t p = n0 / BP; p < p1; p++) {
                const uint16_t *b = panels + p * Kp * BP;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                for (int64_t k = 0; k < Kp; k += BK) {
                    _tile_loadd(4, a + k, lda);
                    _tile_loadd(5, a + 16 * Kp + k, lda);
                    _tile_loadd(6, b + k * BP, 2 * BP * 2);      /* pair rows k/2 … k/2 + 15 */
                    _tile_loadd(7, b + k * BP + 32, 2 * BP * 2); /* their columns 16 … 31 */
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
                _tile_stored(0, c, BP * 4);
                _tile_stored(1, c + 16, BP * 4);
                _tile_stored(2, c + 16 * BP, BP * 4);
                _tile_stored(3, c + 16 * BP + 16, BP * 4);
                finish(c, R - r0 < 32 ? (int)(R - r0) : 32, y + r0 * N + p * BP, N,
                       bias ? bias + p * BP : NULL, gelu);
            }
        }
    }
    _tile_release();
}

/* ------------------------------------------------------------------------ AVX-512 BF16
 * The register tile of qkv_gemm (12 rows × 32 columns in 24 zmm accumulators), one VDPBF16PS per
 * accumulator and pair of K: per pair row, two loads of W, 12 broadcasts of a pair of x. */
#define DP_ROWS 12
#define DP_NC 384

T_BF16 static inline __attribute__((always_inline)) void dp_tile(const uint16_t *xb, int64_t Kp,
                                                                  const uint16_t *panel, float *c)
{
    __m512 acc[DP_ROWS][2];
    for (int r = 0; r < DP_ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < Kp / 2; i++) {
        _mm_prefetch((const char *)(panel + (i + 8) * 2 * BP), _MM_HINT_T0);
        _mm_prefetch((const char *)(panel + (i + 8) * 2 * BP + 32), _MM_HINT_T0);
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)(panel + i * 2 * BP));
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512((const void *)(panel + i * 2 * BP + 32));
        for (int r = 0; r < DP_ROWS; r++) {
            int32_t pair;
            memcpy(&pair, xb + r * Kp + 2 * i, sizeof pair);
            const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], xv, w0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], xv, w1);
        }
    }
    for (int r = 0; r < DP_ROWS; r++) {
        _mm512_store_ps(c + r * BP, acc[r][0]);
        _mm512_store_ps(c + r * BP + 16, acc[r][1]);
    }
}

T_BF16 static void gemm_dp(const uint16_t *xb, int64_t R, int64_t Kp, const uint16_t *panels,
                           int64_t N, const float *bias, int gelu, float *y)
{
    float c[DP_ROWS * BP] __attribute__((aligned(64)));
    for (int64_t n0 = 0; n0 < N; n0 += DP_NC) {
        const int64_t p1 = (n0 + DP_NC < N ? n0 + DP_NC : N) / BP;
        for (int64_t r0 = 0; r0 < R; r0 += DP_ROWS) /* xb has zero rows past R: whole tiles */
            for (int64_t p = n0 / BP; p < p1; p++) {
                dp_tile(xb + r0 * Kp, Kp, panels + p * Kp * BP, c);
                finish(c, R - r0 < DP_ROWS ? (int)(R - r0) : DP_ROWS, y + r0 * N + p * BP, N,
                       bias ? bias + p * BP : NULL, gelu);
            }
    }
}

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), then GELU if gelu; W packed as above with
 * Kp = K rounded up to BK. isa: 2 = AMX tiles, 1 = AVX-512 BF16 (the caller has checked the CPU).
 * Returns 0, or -1 when it could not run (bad isa, no memory): the caller then runs float32. */
int64_t qkv_gemm_bf16(const float *x, int64_t R, int64_t K, const uint16_t *panels, int64_t Kp,
                      int64_t N, const float *bias, int gelu, float *y, int64_t isa)
{
    if ((isa != 1 && isa != 2) || Kp % BK || Kp < K || N % BP) return -1;
    if (R <= 0) return 0;
    const int64_t Rp = (R + 31) / 32 * 32 + DP_ROWS; /* whole tiles for either kernel */
    /* x in bfloat16, in a per-thread buffer kept between calls: a fresh one of a few MB costs a
     * page fault per 4 kB on every call (measured: as long as the product itself for K = 1536). */
    static __thread uint16_t *xb = NULL;
    static __thread size_t have = 0;
    const size_t need = (size_t)(Rp * Kp) * sizeof(uint16_t);
    if (need > have) {
        free(xb);
        have = (need + 4095) / 4096 * 4096;
        xb = aligned_alloc(64, have);
        if (!xb) { have = 0; return -1; }
    }
    to_bf16(x, R, K, xb, Rp, Kp);
    if (isa == 2) gemm_amx(xb, R, Kp, panels, N, bias, gelu, y);
    else gemm_dp(xb, R, Kp, panels, N, bias, gelu, y);
    return 0;
}

/* The tile unit's own peak, for benchmarks: reps × 4 TDPBF16PS on tiles loaded once (no memory
 * traffic in the loop), each 16·16·32 multiply-adds. Returns the FLOPs done (0 if reps ≤ 0). */
T_AMX int64_t qkv_amx_peak(int64_t reps)
{
    static uint16_t a[1024] __attribute__((aligned(64)));
    config_tiles();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, a, 64);
    _tile_loadd(7, a, 64);
    for (int64_t i = 0; i < reps; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_release();
    return reps > 0 ? reps * 4 * 16 * 16 * 32 * 2 : 0;
}

/* ------------------------------------------------------------------- attention on AMX tiles
 * Steps 2-5 of attention for one text's heads, head size 32: S = Q·Kᵀ on tiles (one tile depth:
 * d = 32), the softmax of each block of 16 query rows in float32 (scale, row maximum, exp, sum),
 * its weights rounded to bfloat16, O = P·V on tiles, then the division by the row sums. K goes in
 * as B tiles of pairs of dimensions ([d/2][keys][2]), V as pairs of keys ([keys/2][d][2]): the
 * same VNNI-pairs layout as the weights. Memory: one head's K and V in bfloat16 and a block of 16
 * rows of scores, whatever the length up to the model's limit (ATT_MAX keys). */
#define ATT_D 32
#define ATT_MAX 4096

/* e^x for x ≤ 0 (scores minus their row maximum): x = n·ln2 + r (Cody & Waite), e^r by its
 * Taylor polynomial to degree 5 (|r| ≤ ln2/2: truncation < 2.4e-6, far below the bfloat16
 * rounding of the weights that follows, 2^-8), then scaled by 2^n (VSCALEFPS); below -87.3, 0. */
T_BF16 static inline __m512 exp_neg(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(x, lo);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 120.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(~under, _mm512_scalef_ps(p, n));
}

/* The work buffer in bytes qkv_attention_bf16 needs for n tokens. */
int64_t qkv_attention_bf16_work(int64_t n)
{
    const int64_t kp = (n + 31) / 32 * 32;
    return kp * ATT_D * 2 /* Q */ + kp * ATT_D * 2 /* Kᵀ pairs */ + kp * ATT_D * 2 /* V pairs */
           + 16 * kp * 4 /* scores */ + 16 * kp * 2 /* weights */ + 16 * ATT_D * 4 /* O */ + 4 * 64;
}

/* ctx[i, h·32:(h+1)·32] = softmax(scale·q_i·Kᵀ)·V for each head h of one text: qkv [n][ld] holds
 * Q | K | V (heads side by side in each, H = heads·32), ctx [n][ldc]. work: at least
 * qkv_attention_bf16_work(n) bytes. Returns 0, or -1 when it cannot run (n too long). */
T_AMX int64_t qkv_attention_bf16(const float *qkv, int64_t n, int64_t ld, int64_t heads, float scale,
                                 float *ctx, int64_t ldc, void *work)
{
    if (n <= 0) return 0;
    if (n > ATT_MAX) return -1;
    const int64_t H = heads * ATT_D, kp = (n + 31) / 32 * 32;
    char *w = (char *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    uint16_t *qb = (uint16_t *)w;              /* [kp][32] */
    uint16_t *kb = qb + kp * ATT_D;            /* [16 pairs of d][kp keys][2] */
    uint16_t *vb = kb + kp * ATT_D;            /* [kp/2 pairs of keys][32][2] */
    float *s = (float *)(vb + kp * ATT_D);     /* [16][kp] */
    uint16_t *pb = (uint16_t *)(s + 16 * kp);  /* [16][kp] */
    float *o = (float *)(pb + 16 * kp);        /* [16][32] */
    config_tiles();
    const __m512 vscale = _mm512_set1_ps(scale);
    for (int64_t h = 0; h < heads; h++) {
        /* Q, Kᵀ, V of this head in bfloat16, zero past n */
        for (int64_t j = 0; j < kp; j++) {
            __m512 q0 = _mm512_setzero_ps(), q1 = q0, k0 = q0, k1 = q0, v0 = q0, v1 = q0;
            if (j < n) {
                const float *row = qkv + j * ld + h * ATT_D;
                q0 = _mm512_loadu_ps(row), q1 = _mm512_loadu_ps(row + 16);
                k0 = _mm512_loadu_ps(row + H), k1 = _mm512_loadu_ps(row + H + 16);
                v0 = _mm512_loadu_ps(row + 2 * H), v1 = _mm512_loadu_ps(row + 2 * H + 16);
            }
            _mm512_store_si512((void *)(qb + j * ATT_D), (__m512i)_mm512_cvtne2ps_pbh(q1, q0));
            /* K: dims (2c, 2c+1) of key j side by side, at kb[c][j] (one 32-bit pair) */
            const __m512i kk = (__m512i)_mm512_cvtne2ps_pbh(k1, k0);
            uint32_t kpairs[16];
            _mm512_storeu_si512((void *)kpairs, kk);
            for (int c = 0; c < 16; c++) memcpy(kb + (c * kp + j) * 2, &kpairs[c], 4);
            /* V: keys (j, j+1) of dim c side by side, at vb[j/2][c] */
            uint16_t vv[32];
            _mm512_storeu_si512((void *)vv, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
            for (int c = 0; c < ATT_D; c++) vb[((j >> 1) * ATT_D + c) * 2 + (j & 1)] = vv[c];
        }
        for (int64_t i0 = 0; i0 < n; i0 += 16) {
            /* scores of 16 query rows against every key */
            _tile_loadd(4, qb + i0 * ATT_D, ATT_D * 2);
            for (int64_t j0 = 0; j0 < kp; j0 += 16) {
                _tile_zero(0);
                _tile_loadd(6, kb + j0 * 2, kp * 4);
                _tile_dpbf16ps(0, 4, 6);
                _tile_stored(0, s + j0, kp * 4);
            }
            /* softmax of each row over its n keys, in float32; weights rounded to bfloat16 */
            float l[16];
            for (int r = 0; r < 16; r++) {
                float *sr = s + r * kp;
                uint16_t *pr = pb + r * kp;
                __m512 mx = _mm512_set1_ps(-INFINITY);
                for (int64_t j = 0; j < n; j += 16) {
                    const __mmask16 m = n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1);
                    mx = _mm512_mask_max_ps(mx, m, mx, _mm512_loadu_ps(sr + j));
                }
                const __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
                __m512 sum = _mm512_setzero_ps();
                for (int64_t j = 0; j < kp; j += 32) {
                    const __mmask16 m0 = n - j >= 16 ? 0xffff : n - j > 0 ? (__mmask16)((1u << (n - j)) - 1) : 0;
                    const __mmask16 m1 = n - j - 16 >= 16 ? 0xffff : n - j - 16 > 0 ? (__mmask16)((1u << (n - j - 16)) - 1) : 0;
                    const __m512 e0 = _mm512_maskz_mov_ps(m0, exp_neg(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(sr + j), vmx), vscale)));
                    const __m512 e1 = _mm512_maskz_mov_ps(m1, exp_neg(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(sr + j + 16), vmx), vscale)));
                    sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
                    _mm512_storeu_si512((void *)(pr + j), (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
                }
                l[r] = _mm512_reduce_add_ps(sum);
            }
            /* O = P·V over the keys, 32 at a time */
            _tile_zero(0);
            _tile_zero(1);
            for (int64_t j = 0; j < kp; j += 32) {
                _tile_loadd(4, pb + j, kp * 2);
                _tile_loadd(6, vb + (j / 2) * ATT_D * 2, ATT_D * 4);
                _tile_loadd(7, vb + (j / 2) * ATT_D * 2 + 32, ATT_D * 4);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
            }
            _tile_stored(0, o, ATT_D * 4);
            _tile_stored(1, o + 16, ATT_D * 4);
            const int rows = n - i0 < 16 ? (int)(n - i0) : 16;
            for (int r = 0; r < rows; r++) {
                const __m512 inv = _mm512_set1_ps(1.0f / l[r]);
                float *dst = ctx + (i0 + r) * ldc + h * ATT_D;
                _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_load_ps(o + r * ATT_D), inv));
                _mm512_storeu_ps(dst + 16, _mm512_mul_ps(_mm512_load_ps(o + r * ATT_D + 16), inv));
            }
        }
    }
    _tile_release();
    return 0;
}

#else /* not x86-64 with GCC/Clang: no unit, qkv runs float32 */
int64_t qkv_bf16_cpu(void) { return 0; }
int64_t qkv_amx_request(void) { return 0; }
int64_t qkv_attention_bf16_work(int64_t n) { (void)n; return 0; }
int64_t qkv_amx_peak(int64_t reps) { (void)reps; return 0; }
int64_t qkv_attention_bf16(const float *qkv, int64_t n, int64_t ld, int64_t heads, float scale,
                           float *ctx, int64_t ldc, void *work)
{
    (void)qkv, (void)n, (void)ld, (void)heads, (void)scale, (void)ctx, (void)ldc, (void)work;
    return -1;
}
int64_t qkv_gemm_bf16(const float *x, int64_t R, int64_t K, const uint16_t *panels, int64_t Kp,
                      int64_t N, const float *bias, int gelu, float *y, int64_t isa)
{
    (void)x, (void)R, (void)K, (void)panels, (void)Kp, (void)N, (void)bias, (void)gelu, (void)y, (void)isa;
    return -1;
}
#endif
