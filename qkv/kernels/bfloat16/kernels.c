/* Matrix products with bfloat16 inputs and float32 sums: on AMX tiles, or on AVX-512 BF16 dot
 * products, chosen at run time by what the CPU reports (qkv/kernels/float32/__init__.py dispatches; see
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
 *
 * Why one file of ~700 lines: the products, attention on tiles and the bfloat16 LayerNorm share the
 * panel layout, the tile configuration and the per-function target attributes above; split apart,
 * each part would repeat them and could drift from the layout qkv.kernels.bfloat16 packs.
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
void qkv_add_layernorm(float *x, const float *res, const float *bias, const float *g, const float *beta,
                       int64_t rows, int64_t width, float eps); /* float32/kernels.c */

#define CPU_AVX512BF16 1 /* AVX-512 F/BW/BF16, and the OS saves the zmm and mask registers */
#define CPU_AMX_BF16 2   /* AMX-TILE and AMX-BF16 */
#define OS_AMX 4         /* XCR0 enables the tile config and tile data state (bits 17, 18) */


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

/* Where the time goes, for bench/bf16.py (off unless asked; one thread): TSC ticks spent in each
 * phase, read and reset by qkv_bf16_profile. A tick count is taken a few times per 16-row block of
 * attention and once per product call: under 1% of their time. */
enum { PROF_ROUND, PROF_TILES, PROF_PACK, PROF_SCORES, PROF_SOFTMAX, PROF_PV, PROF_N };
static int prof_on;
static uint64_t prof[PROF_N];
#define PROF_T() (prof_on ? __rdtsc() : 0)
#define PROF_ADD(i, t0) do { if (prof_on) { const uint64_t t1_ = __rdtsc(); prof[i] += t1_ - (t0); (t0) = t1_; } } while (0)

/* out[0 … PROF_N - 1] = ticks per phase since the last call (round x, product tiles and epilogue,
 * attention: pack Q/K/V, scores, softmax, P·V and output), then counting on (on ≠ 0) or off. */
void qkv_bf16_profile(int64_t on, int64_t *out)
{
    for (int i = 0; i < PROF_N; i++) {
        if (out) out[i] = (int64_t)prof[i];
        prof[i] = 0;
    }
    prof_on = on != 0;
}

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

/* 2^t for t ≤ 0: the softmax weights (t = log2(e)·scale·(s - max)), which are rounded to
 * bfloat16 (u_b = 2^-8) right after, and e^(-x²/2) in GELU, whose output the layer rounds to
 * bfloat16 too (the products' inputs are rounded to 8 bits already, 2u_b against the float64
 * product): t = n + f with n = round(t), f in [-1/2, 1/2], 2^f by a degree-3
 * polynomial fitted to 2^f's relative error on that interval (Lawson's iteration; the coefficients
 * rounded to float32), then scaled by 2^n (VSCALEFPS, which gives 0 below float32's range, so no
 * clamp). Relative error ≤ EXP2_ERR = 7.5e-5 = 2^-13.7 (Horner in float32 included; measured on
 * 20,001 points and stated in tests/kernels/test_bfloat16.py), 4 % of the bfloat16 rounding that
 * follows. Seven operations a vector against fifteen (softmax: Cody–Waite, a degree-5 polynomial,
 * clamp, mask) or seventeen (GELU: degree 7) before. The error of t itself (in the softmax one
 * rounding of a fused multiply-subtract, ≤ 2^-24·|t|, as before) moves a weight by
 * ≤ ln2·2^-24·|t|: 4e-6 at |t| = 100, where the weight is 2^-100. */
T_BF16 static inline __attribute__((always_inline)) __m512 exp2_soft(__m512 t)
{
    const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.05517167970538139f), f, _mm512_set1_ps(0.24261116981506348f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6932609677314758f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.9999280571937561f));
    return _mm512_scalef_ps(p, n);
}

/* BERT's exact GELU x·Φ(x) on 16 lanes: the formula of float32/kernels.c's gelu_f32 (erf after
 * Abramowitz & Stegun 7.1.26, absolute error ≤ 1.5e-7), with 1/(1 + p·|z|) from VRCP14PS and one
 * Newton step (relative error ~2^-28, against a division's ~10 cycles a vector) and e^(-x²/2) as
 * 2^(-x²·log2(e)/2) from exp2_soft: its relative error ε (7.5e-5, plus ≤ 1.1e-5 from the two
 * roundings of t while e^(-x²/2) is above float32's range) moves Φ by (1 - Φ(|x|))·ε, so GELU by at
 * most ε·|GELU(x)| on either side of 0 (tests/kernels/test_bfloat16.py adds it to the bound). For x < 0,
 * Φ(x) = ½·erfc(|x|/√2) is formed directly (A&S's coefficients halved), not as ½ - (½ - ½·erfc),
 * whose float32 cancellation cost up to 2^-25·|x| absolute in the tail; two operations fewer. */
T_BF16 static inline __attribute__((always_inline)) __m512 gelu_v(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f * 0.70710678118654752f), ax, one);
    __m512 t = _mm512_rcp14_ps(d);
    t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
    /* A&S's coefficients halved: s = ½·erfc(|x|/√2) = Φ(-|x|) directly */
    __m512 poly = _mm512_fmadd_ps(t, _mm512_set1_ps(0.5f * 1.061405429f), _mm512_set1_ps(0.5f * -1.453152027f));
    poly = _mm512_fmadd_ps(t, poly, _mm512_set1_ps(0.5f * 1.421413741f));
    poly = _mm512_fmadd_ps(t, poly, _mm512_set1_ps(0.5f * -0.284496736f));
    poly = _mm512_fmadd_ps(t, poly, _mm512_set1_ps(0.5f * 0.254829592f));
    poly = _mm512_mul_ps(t, poly);
    /* t ≥ -150 (2^t is 0 in float32 there): x² may overflow to inf, and 2^-inf would be NaN */
    const __m512 e = exp2_soft(_mm512_max_ps(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.72134752044448170f)),
                                             _mm512_set1_ps(-150.0f)));
    const __m512 sneg = _mm512_mul_ps(poly, e); /* Φ(-|x|) */
    /* Φ(x) = Φ(-|x|) for x < 0 (no cancellation in the tail), 1 - Φ(-|x|) otherwise */
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mul_ps(x, _mm512_mask_sub_ps(sneg, pos, one, sneg));
}

/* Rows r0 … r1 - 1 of c [·][BP] (sums with the bias in) → y: GELU if gelu; float32 into y (row
 * stride ldy) or, when yb, rounded to bfloat16 into yb (row stride ldy). The epilogue of a block,
 * in L1. */
T_BF16 static inline __attribute__((always_inline)) void finish_rows(const float *c, int r0, int r1, float *y,
                                                                     uint16_t *yb, int64_t ldy, int gelu)
{
    for (int r = r0; r < r1; r++) {
        __m512 a = _mm512_load_ps(c + r * BP), b = _mm512_load_ps(c + r * BP + 16);
        if (gelu) a = gelu_v(a), b = gelu_v(b);
        if (yb)
            _mm512_storeu_si512((void *)(yb + r * ldy), (__m512i)_mm512_cvtne2ps_pbh(b, a));
        else
            _mm512_storeu_ps(y + r * ldy, a), _mm512_storeu_ps(y + r * ldy + 16, b);
    }
}

T_BF16 static void finish(const float *c, int rows, float *y, uint16_t *yb, int64_t ldy, int gelu)
{
    finish_rows(c, 0, rows, y, yb, ldy, gelu);
}

/* c [rows][BP] += bias (the dot-product kernel's sums; the tile kernel starts its sums at the bias). */
T_BF16 static void add_bias(float *c, int rows, const float *bias)
{
    if (!bias) return;
    const __m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_loadu_ps(bias + 16);
    for (int r = 0; r < rows; r++) {
        _mm512_store_ps(c + r * BP, _mm512_add_ps(_mm512_load_ps(c + r * BP), b0));
        _mm512_store_ps(c + r * BP + 16, _mm512_add_ps(_mm512_load_ps(c + r * BP + 16), b1));
    }
}

/* --------------------------------------------------------------------------------- AMX tiles
 * Eight tiles: C0..C3 a 32 × 32 block of y in float32 (2 × 2 tiles of 16 × 16), A0, A1 two
 * 16-row × 32-k slices of x, B0, B1 the two 16-column halves of a panel's 16 pair rows. Each step
 * of 32 along K: four loads and four TDPBF16PS (16·16·32 multiply-adds each). As in oneDNN's
 * brgemm kernels the tiles of C stay in the unit for the whole of K. They start at the bias (a
 * tile load with row stride 0 repeats the bias row), and a whole block without GELU leaves the
 * unit straight into y; others go through a 4 kB buffer to the vector epilogue (GELU, bfloat16
 * output, the last rows). Columns in blocks of AMX_NC (a block of W, Kp × AMX_NC bf16, stays in
 * L2 while every 32-row block of x walks it, the block of x in L1).
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

static const float ZEROS[BP] = {0};

/* A block whose epilogue is still to run: its sums in c, where its rows go. */
struct pending {
    const float *c;
    int rows, done;
    float *y;
    uint16_t *yb;
};

/* y (or yb) [R, N] = xb [R rows of lda elements, whole 32-row tiles readable] · panels + bias.
 * A block that needs the vector epilogue (GELU, bfloat16 output, the last rows) has it run a few
 * rows at a time inside the next block's K loop, so the vector units work while the tile unit
 * multiplies (two buffers for the sums, the one being finished and the one being filled). */
T_AMX static void gemm_amx(const uint16_t *xb, int64_t R, int64_t lda, int64_t Kp, const uint16_t *panels,
                           int64_t N, const float *bias, int gelu, float *y, uint16_t *yb)
{
    config_tiles();
    float cbuf[2][32 * BP] __attribute__((aligned(64)));
    struct pending pend = {NULL, 0, 0, NULL, NULL};
    const int64_t sa = lda * 2;               /* bytes between rows of xb */
    const int per_step = (int)((32 * BK + Kp - 1) / Kp); /* epilogue rows per K step: 32 over the K loop */
    int cur = 0;
    for (int64_t n0 = 0; n0 < N; n0 += AMX_NC) {
        const int64_t p1 = (n0 + AMX_NC < N ? n0 + AMX_NC : N) / BP;
        for (int64_t r0 = 0; r0 < R; r0 += 32) {
            const uint16_t *a = xb + r0 * lda;
            const int rows = R - r0 < 32 ? (int)(R - r0) : 32;
            const int direct = rows == 32 && !gelu && !yb;
            for (int64_t p = n0 / BP; p < p1; p++) {
                const uint16_t *b = panels + p * Kp * BP;
                const float *bp = bias ? bias + p * BP : ZEROS;
                _tile_loadd(0, bp, 0); /* row stride 0: every row of C starts at the bias */
                _tile_loadd(1, bp + 16, 0);
                _tile_loadd(2, bp, 0);
                _tile_loadd(3, bp + 16, 0);
                for (int64_t k = 0; k < Kp; k += BK) {
                    _tile_loadd(4, a + k, sa);
                    _tile_loadd(6, b + k * BP, 2 * BP * 2);      /* pair rows k/2 … k/2 + 15 */
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_loadd(7, b + k * BP + 32, 2 * BP * 2); /* their columns 16 … 31 */
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_loadd(5, a + 16 * lda + k, sa);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                    if (pend.done < pend.rows) {
                        const int to = pend.done + per_step < pend.rows ? pend.done + per_step : pend.rows;
                        finish_rows(pend.c, pend.done, to, pend.y, pend.yb, N, gelu);
                        pend.done = to;
                    }
                }
                if (pend.done < pend.rows) finish_rows(pend.c, pend.done, pend.rows, pend.y, pend.yb, N, gelu);
                pend.rows = 0;
                if (direct) {
                    float *yp = y + r0 * N + p * BP;
                    _tile_stored(0, yp, N * 4);
                    _tile_stored(1, yp + 16, N * 4);
                    _tile_stored(2, yp + 16 * N, N * 4);
                    _tile_stored(3, yp + 16 * N + 16, N * 4);
                } else {
                    float *c = cbuf[cur];
                    cur ^= 1;
                    _tile_stored(0, c, BP * 4);
                    _tile_stored(1, c + 16, BP * 4);
                    _tile_stored(2, c + 16 * BP, BP * 4);
                    _tile_stored(3, c + 16 * BP + 16, BP * 4);
                    pend = (struct pending){c, rows, 0, yb ? NULL : y + r0 * N + p * BP,
                                            yb ? yb + r0 * N + p * BP : NULL};
                }
            }
        }
    }
    if (pend.done < pend.rows) finish_rows(pend.c, pend.done, pend.rows, pend.y, pend.yb, N, gelu);
    _tile_release();
}

/* ------------------------------------------------------------------------ AVX-512 BF16
 * The register tile of qkv_gemm (12 rows × 32 columns in 24 zmm accumulators), one VDPBF16PS per
 * accumulator and pair of K: per pair row, two loads of W, 12 broadcasts of a pair of x. */
#define DP_ROWS 12
#define DP_NC 384

/* out [rows][ldo] (two vectors a row) = Σ_t pair t of row r of a (rows lda apart, pairs adjacent),
 * broadcast to every lane, times b's two vectors of step t (b + t·ldb and 32 further), rows ≤
 * DP_ROWS a constant where it is inlined: 2·rows accumulators, b loaded once for all rows; with
 * prefetch, b 8 steps ahead. The products' tile (12 rows of x × a panel of W, steps over pairs of
 * K) and both of attention's (8 rows; pairs of dimensions for the scores, pairs of keys for P·V). */
T_BF16 static inline __attribute__((always_inline)) void dp_rows(const uint16_t *a, int64_t lda, const uint16_t *b,
                                                                 int64_t ldb, int64_t steps, float *out, int64_t ldo,
                                                                 const int rows, const int prefetch)
{
    __m512 acc[DP_ROWS][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t t = 0; t < steps; t++) {
        if (prefetch) {
            _mm_prefetch((const char *)(b + (t + 8) * ldb), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + (t + 8) * ldb + 32), _MM_HINT_T0);
        }
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void *)(b + t * ldb));
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512((const void *)(b + t * ldb + 32));
        for (int r = 0; r < rows; r++) {
            int32_t pair;
            memcpy(&pair, a + r * lda + 2 * t, sizeof pair);
            const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
    for (int r = 0; r < rows; r++) {
        _mm512_store_ps(out + r * ldo, acc[r][0]);
        _mm512_store_ps(out + r * ldo + 16, acc[r][1]);
    }
}

T_BF16 static void gemm_dp(const uint16_t *xb, int64_t R, int64_t lda, int64_t Kp, const uint16_t *panels,
                           int64_t N, const float *bias, int gelu, float *y, uint16_t *yb)
{
    float c[DP_ROWS * BP] __attribute__((aligned(64)));
    for (int64_t n0 = 0; n0 < N; n0 += DP_NC) {
        const int64_t p1 = (n0 + DP_NC < N ? n0 + DP_NC : N) / BP;
        for (int64_t r0 = 0; r0 < R; r0 += DP_ROWS) /* rows past R are readable: whole tiles */
            for (int64_t p = n0 / BP; p < p1; p++) {
                const int rows = R - r0 < DP_ROWS ? (int)(R - r0) : DP_ROWS;
                dp_rows(xb + r0 * lda, lda, panels + p * Kp * BP, 2 * BP, Kp / 2, c, BP, DP_ROWS, 1);
                add_bias(c, rows, bias ? bias + p * BP : NULL);
                finish(c, rows, yb ? NULL : y + r0 * N + p * BP, yb ? yb + r0 * N + p * BP : NULL, N, gelu);
            }
    }
}

/* Rows a bfloat16 x handed in (or a bfloat16 y that the next product reads) must have readable:
 * R rounded up to whole tiles of either kernel. */
int64_t qkv_bf16_rows_padded(int64_t R) { return (R + 31) / 32 * 32 + DP_ROWS; }

/* y [R, N] = x [R, K] · W + bias (bias may be NULL), then GELU if gelu; W packed as above with
 * Kp = K rounded up to BK. x is float32 (rounded to bfloat16 here, into a per-thread buffer), or,
 * when xb is given, already bfloat16: [R][Kp] with K = Kp and rows up to qkv_bf16_rows_padded(R)
 * readable (their values do not matter: row i of y reads row i of x only). y is float32, or, when
 * yb is given, rounded to bfloat16 into yb [R][N] (what the next product reads as its xb).
 * isa: 2 = AMX tiles, 1 = AVX-512 BF16 (the caller has checked the CPU). Returns 0, or -1 when
 * it could not run (bad isa or shapes, no memory): the caller then runs float32. */
int64_t qkv_gemm_bf16_io(const float *x, const uint16_t *xb_in, int64_t R, int64_t K, const uint16_t *panels,
                         int64_t Kp, int64_t N, const float *bias, int gelu, float *y, uint16_t *yb, int64_t isa)
{
    if ((isa != 1 && isa != 2) || Kp % BK || Kp < K || N % BP || (xb_in && K != Kp)) return -1;
    if (R <= 0) return 0;
    const uint16_t *xb = xb_in;
    if (!xb) {
        const int64_t Rp = qkv_bf16_rows_padded(R);
        /* a per-thread buffer kept between calls: a fresh one of a few MB costs a page fault per
         * 4 kB on every call (measured: as long as the product itself for K = 1536). */
        static __thread uint16_t *buf = NULL;
        static __thread size_t have = 0;
        const size_t need = (size_t)(Rp * Kp) * sizeof(uint16_t);
        if (need > have) {
            free(buf);
            have = (need + 4095) / 4096 * 4096;
            buf = aligned_alloc(64, have);
            if (!buf) { have = 0; return -1; }
        }
        uint64_t t0 = PROF_T();
        to_bf16(x, R, K, buf, Rp, Kp);
        PROF_ADD(PROF_ROUND, t0);
        xb = buf;
    }
    uint64_t t0 = PROF_T();
    if (isa == 2) gemm_amx(xb, R, Kp, Kp, panels, N, bias, gelu, y, yb);
    else gemm_dp(xb, R, Kp, Kp, panels, N, bias, gelu, y, yb);
    PROF_ADD(PROF_TILES, t0);
    return 0;
}

int64_t qkv_gemm_bf16(const float *x, int64_t R, int64_t K, const uint16_t *panels, int64_t Kp,
                      int64_t N, const float *bias, int gelu, float *y, int64_t isa)
{
    return qkv_gemm_bf16_io(x, NULL, R, K, panels, Kp, N, bias, gelu, y, NULL, isa);
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
 * d = 32), the softmax of each block of 32 query rows in float32 (scale, row maximum, exp, sum),
 * its weights rounded to bfloat16, O = P·V on tiles, then the division by the row sums. K goes in
 * as B tiles of pairs of dimensions ([d/2][keys][2]), V as pairs of keys ([keys/2][d][2]): the
 * same VNNI-pairs layout as the weights. Memory: one head's K and V in bfloat16 and a block of 32
 * rows of scores, whatever the length up to the model's limit (ATT_MAX keys). */
#define ATT_D 32
#define ATT_MAX 4096


/* VPERMT2W indices that interleave two rows of 32 bfloat16 (a, b): a0 b0 a1 b1 … (lo: 0-15, hi: 16-31) */
static const uint16_t VIDX[64] __attribute__((aligned(64))) = {
    0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47,
    16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
#define VIDX_LO _mm512_load_si512((const void *)VIDX)
#define VIDX_HI _mm512_load_si512((const void *)(VIDX + 32))

/* 16 × 16 32-bit transpose in registers (unpack 32, unpack 64, then 128-bit lanes twice). */
T_BF16 static inline __attribute__((always_inline)) void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4b + q] now holds, in each 128-bit lane L, element q of rows 4L' … (of the 4-row group b) */
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* The work buffer in bytes qkv_attention_bf16 needs for n tokens. */
int64_t qkv_attention_bf16_work(int64_t n)
{
    const int64_t kp = (n + 31) / 32 * 32;
    return kp * ATT_D * 2 /* Q */ + kp * ATT_D * 2 /* Kᵀ pairs */ + kp * ATT_D * 2 /* V pairs */
           + 64 * kp * 4 /* scores, two blocks */ + 32 * kp * 2 /* weights */ + 32 * ATT_D * 4 /* O */ + 4 * 64;
}

/* The steps of qkv_attention_bf16_io, one function each (inlined: the same code as one body).
 * Tile numbers: 0-3 sums (C), 4-5 Q or P rows (A), 6-7 Kᵀ or V (B). */

/* Step 1: Q, Kᵀ, V of head h in bfloat16, zero past n up to kp, 16 keys at a time: qb [kp][32],
 * kb [16 pairs of d][kp keys][2] (K's 16 keys × 16 pairs of dimensions transposed in registers),
 * vb [kp/2 pairs of keys][32][2] (V's keys interleaved in pairs). From float32 qkv (rounded here)
 * or, when qkvb is not NULL, from bfloat16 qkvb. */
T_BF16 static inline __attribute__((always_inline)) void att_pack_head(
    const float *qkv, const uint16_t *qkvb, int64_t n, int64_t ld, int64_t H, int64_t h, int64_t kp,
    uint16_t *qb, uint16_t *kb, uint16_t *vb)
{
    for (int64_t j0 = 0; j0 < kp; j0 += 16) {
        __m512i kt[16];
        for (int t = 0; t < 16; t += 2) {
            __m512i v2[2];
            for (int u = 0; u < 2; u++) {
                const int64_t j = j0 + t + u;
                __m512i qq = _mm512_setzero_si512(), kk = qq, vv = qq;
                if (j < n && qkvb) {
                    const uint16_t *row = qkvb + j * ld + h * ATT_D;
                    qq = _mm512_loadu_si512((const void *)row);
                    kk = _mm512_loadu_si512((const void *)(row + H));
                    vv = _mm512_loadu_si512((const void *)(row + 2 * H));
                } else if (j < n) {
                    const float *row = qkv + j * ld + h * ATT_D;
                    qq = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 16), _mm512_loadu_ps(row));
                    kk = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + H + 16), _mm512_loadu_ps(row + H));
                    vv = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 2 * H + 16), _mm512_loadu_ps(row + 2 * H));
                }
                _mm512_store_si512((void *)(qb + j * ATT_D), qq);
                kt[t + u] = kk;
                v2[u] = vv;
            }
            /* keys (j, j+1) of dimension c side by side: vb[j/2][c][0..1] */
            _mm512_store_si512((void *)(vb + ((j0 + t) >> 1) * ATT_D * 2), _mm512_permutex2var_epi16(v2[0], VIDX_LO, v2[1]));
            _mm512_store_si512((void *)(vb + ((j0 + t) >> 1) * ATT_D * 2 + 32), _mm512_permutex2var_epi16(v2[0], VIDX_HI, v2[1]));
        }
        transpose16(kt); /* kt[c] = pair c of keys j0 … j0 + 15 */
        for (int c = 0; c < 16; c++) _mm512_store_si512((void *)(kb + (c * kp + j0) * 2), kt[c]);
    }
}

/* Step 2: scores of the 32 query rows in A tiles 4 and 5 (rows i0 … i0+15, i0+16 … i0+31) against
 * keys t0·16 … t1·16 - 1 into sdst [32][kp], 16 keys (one B tile of Kᵀ, loaded once for both) at
 * a time, on two pairs of C tiles in turn (0/1 with B tile 6, 2/3 with 7): tiles are not renamed,
 * so one pair would wait on its own stores. t0 and t1 even. Returns t1. */
T_AMX static inline __attribute__((always_inline)) int64_t att_scores(const uint16_t *kb, int64_t kp, int64_t t0,
                                                                      int64_t t1, float *sdst)
{
#define S_PAIR(c0, c1, kt, j)                               \
    do {                                                    \
        _tile_zero(c0);                                     \
        _tile_zero(c1);                                     \
        _tile_loadd(kt, kb + (j) * 2, kp * 4);              \
        _tile_dpbf16ps(c0, 4, kt);                          \
        _tile_dpbf16ps(c1, 5, kt);                          \
        _tile_stored(c0, sdst + (j), kp * 4);               \
        _tile_stored(c1, sdst + 16 * kp + (j), kp * 4);     \
    } while (0)
    for (int64_t t = t0; t < t1; t += 2) {
        S_PAIR(0, 1, 6, t * 16);
        S_PAIR(2, 3, 7, t * 16 + 16);
    }
#undef S_PAIR
    return t1;
}

/* Step 3, one row: softmax of the scores sr [n] in float32, e^(scale·(s - max)) = 2^(c·s - c·max)
 * with c = cl2 = log2(e)·scale (one fused multiply-subtract), the weights rounded to bfloat16
 * into pr [kp] (zero past n); returns their float32 sum. */
T_BF16 static inline __attribute__((always_inline)) float att_softmax_row(const float *sr, uint16_t *pr, int64_t n,
                                                                          int64_t kp, float cl2)
{
    const __m512 vscale = _mm512_set1_ps(cl2);
    __m512 mx0 = _mm512_set1_ps(-INFINITY), mx1 = mx0;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32)
        mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(sr + j)), mx1 = _mm512_max_ps(mx1, _mm512_loadu_ps(sr + j + 16));
    for (; j < n; j += 16)
        mx0 = _mm512_mask_max_ps(mx0, n - j >= 16 ? 0xffff : (__mmask16)((1u << (n - j)) - 1), mx0,
                                 _mm512_loadu_ps(sr + j));
    const __m512 ms = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1)) * cl2);
    __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0;
    for (j = 0; j + 32 <= n; j += 32) {
        const __m512 e0 = exp2_soft(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j), vscale, ms));
        const __m512 e1 = exp2_soft(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j + 16), vscale, ms));
        sum0 = _mm512_add_ps(sum0, e0), sum1 = _mm512_add_ps(sum1, e1);
        _mm512_storeu_si512((void *)(pr + j), (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
    }
    for (; j < kp; j += 32) {
        const __mmask16 m0 = n - j >= 16 ? 0xffff : n - j > 0 ? (__mmask16)((1u << (n - j)) - 1) : 0;
        const __mmask16 m1 = n - j - 16 >= 16 ? 0xffff : n - j - 16 > 0 ? (__mmask16)((1u << (n - j - 16)) - 1) : 0;
        const __m512 e0 = _mm512_maskz_mov_ps(m0, exp2_soft(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j), vscale, ms)));
        const __m512 e1 = _mm512_maskz_mov_ps(m1, exp2_soft(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j + 16), vscale, ms)));
        sum0 = _mm512_add_ps(sum0, e0), sum1 = _mm512_add_ps(sum1, e1);
        _mm512_storeu_si512((void *)(pr + j), (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

/* Step 4: o [32][32] = P·V over the keys, 32 at a time: 2 × 2 tiles (rows 0-15 and 16-31 of the
 * block's weights pb [32][kp] against V's dimensions 0-15 and 16-31), four independent sums.
 * Rows of pb past n hold whatever was there: row r of O reads row r of P only, and is not
 * written out. */
T_AMX static inline __attribute__((always_inline)) void att_pv(const uint16_t *pb, const uint16_t *vb, int64_t kp,
                                                               float *o)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t j = 0; j < kp; j += 32) {
        _tile_loadd(4, pb + j, kp * 2);
        _tile_loadd(5, pb + 16 * kp + j, kp * 2);
        _tile_loadd(6, vb + (j / 2) * ATT_D * 2, ATT_D * 4);
        _tile_loadd(7, vb + (j / 2) * ATT_D * 2 + 32, ATT_D * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, o, ATT_D * 4);
    _tile_stored(1, o + 16, ATT_D * 4);
    _tile_stored(2, o + 16 * ATT_D, ATT_D * 4);
    _tile_stored(3, o + 16 * ATT_D + 16, ATT_D * 4);
}

/* Step 5: rows o[r] / l[r] of the block, r < rows, to ctx (float32) or ctxb (bfloat16), row stride
 * ldc, starting at dst_off elements. */
T_BF16 static inline __attribute__((always_inline)) void att_store(const float *o, const float *l, int rows,
                                                                   float *ctx, uint16_t *ctxb, int64_t ldc,
                                                                   int64_t dst_off)
{
    for (int r = 0; r < rows; r++) {
        const __m512 inv = _mm512_set1_ps(1.0f / l[r]);
        const __m512 a = _mm512_mul_ps(_mm512_load_ps(o + r * ATT_D), inv);
        const __m512 b = _mm512_mul_ps(_mm512_load_ps(o + r * ATT_D + 16), inv);
        if (ctxb) {
            _mm512_storeu_si512((void *)(ctxb + r * ldc + dst_off), (__m512i)_mm512_cvtne2ps_pbh(b, a));
        } else {
            float *dst = ctx + r * ldc + dst_off;
            _mm512_storeu_ps(dst, a);
            _mm512_storeu_ps(dst + 16, b);
        }
    }
}

/* One text's attention scratch (qkv_attention_bf16_work(n) bytes, 64-byte aligned here), either unit. */
struct att_work {
    uint16_t *qb; /* [kp][32] */
    uint16_t *kb; /* [16 pairs of d][kp keys][2] */
    uint16_t *vb; /* [kp/2 pairs of keys][32][2] */
    float *s;     /* [2][32][kp]: on tiles, this block's scores and the next's */
    uint16_t *pb; /* [32][kp] */
    float *o;     /* [32][32] */
};

static inline struct att_work att_work_split(void *work, int64_t kp)
{
    struct att_work a;
    a.qb = (uint16_t *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
    a.kb = a.qb + kp * ATT_D;
    a.vb = a.kb + kp * ATT_D;
    a.s = (float *)(a.vb + kp * ATT_D);
    a.pb = (uint16_t *)(a.s + 64 * kp);
    a.o = (float *)(a.pb + 32 * kp);
    return a;
}

/* ctx[i, h·32:(h+1)·32] = softmax(scale·q_i·Kᵀ)·V for each head h of one text: qkv [n][ld] holds
 * Q | K | V (heads side by side in each, H = heads·32), ctx [n][ldc]; or Q | K | V given in
 * bfloat16 (qkvb, row stride ld) when qkvb is not NULL, and the output written in bfloat16 (ctxb,
 * row stride ldc) when ctxb is not NULL: what the next product reads, no rounding pass between.
 * work: at least qkv_attention_bf16_work(n) bytes. Returns 0, or -1 when it cannot run (n too
 * long). Per head: pack (step 1), the first block's scores (2), then per block of 32 query rows
 * the softmax (3) with the next block's score tiles spread between its rows — the tile unit makes
 * them while the vector unit exponentiates, out-of-order execution overlapping the two, in the
 * other half of a double buffer of scores — then P·V (4) and the output (5). */
T_AMX int64_t qkv_attention_bf16_io(const float *qkv, const uint16_t *qkvb, int64_t n, int64_t ld, int64_t heads,
                                    float scale, float *ctx, uint16_t *ctxb, int64_t ldc, void *work)
{
    if (n <= 0) return 0;
    if (n > ATT_MAX) return -1;
    const int64_t H = heads * ATT_D, kp = (n + 31) / 32 * 32;
    const struct att_work aw = att_work_split(work, kp);
    uint16_t *qb = aw.qb, *kb = aw.kb, *vb = aw.vb, *pb = aw.pb;
    float *s = aw.s, *o = aw.o;
    config_tiles();
    const float cl2 = scale * 1.44269504088896341f; /* log2(e)·scale */
    const int64_t ntiles = kp / 16; /* tiles of 16 keys per row block: even (kp is a multiple of 32) */
    uint64_t t0 = PROF_T();
    for (int64_t h = 0; h < heads; h++) {
        att_pack_head(qkv, qkvb, n, ld, H, h, kp, qb, kb, vb);
        PROF_ADD(PROF_PACK, t0);
        _tile_loadd(4, qb, ATT_D * 2);
        _tile_loadd(5, qb + 16 * ATT_D, ATT_D * 2);
        att_scores(kb, kp, 0, ntiles, s);
        PROF_ADD(PROF_SCORES, t0);
        for (int64_t i0 = 0; i0 < n; i0 += 32) {
            float *scur = s + ((i0 >> 5) & 1) * 32 * kp, *snext = s + (((i0 >> 5) + 1) & 1) * 32 * kp;
            const int next = i0 + 32 < n;
            if (next) {
                _tile_loadd(4, qb + (i0 + 32) * ATT_D, ATT_D * 2);
                _tile_loadd(5, qb + (i0 + 48) * ATT_D, ATT_D * 2);
            }
            int64_t tdone = 0; /* tiles of the next block's scores issued so far */
            float l[32];
            const int rows = n - i0 < 32 ? (int)(n - i0) : 32; /* rows past n skipped: never stored */
            for (int r = 0; r < rows; r++) {
                if (next) /* this row's share of the next block's score tiles (all by row 31) */
                    tdone = att_scores(kb, kp, tdone, ((int64_t)(r + 1) * ntiles + 31) / 32 & ~(int64_t)1, snext);
                l[r] = att_softmax_row(scur + r * kp, pb + r * kp, n, kp, cl2);
            }
            if (next) att_scores(kb, kp, tdone, ntiles, snext);
            PROF_ADD(PROF_SOFTMAX, t0);
            att_pv(pb, vb, kp, o);
            att_store(o, l, rows, ctx, ctxb, ldc, i0 * ldc + h * ATT_D);
            PROF_ADD(PROF_PV, t0);
        }
    }
    _tile_release();
    return 0;
}

T_AMX int64_t qkv_attention_bf16(const float *qkv, int64_t n, int64_t ld, int64_t heads, float scale,
                                 float *ctx, int64_t ldc, void *work)
{
    return qkv_attention_bf16_io(qkv, NULL, n, ld, heads, scale, ctx, NULL, ldc, work);
}

/* ------------------------------------------------------------ attention on AVX-512 BF16
 * The same attention for CPUs with AVX-512 BF16 but no tiles (AMD Zen 4; QKV_ISA=avx512bf16 on an
 * AMX Xeon): the head's packing (step 1), the softmax of a row (3) and the store (5) are the tile
 * path's own functions above; the two products are VDPBF16PS dot products on zmm registers instead
 * of tiles, reading the same packed Kᵀ and V. Each lane adds two exact bfloat16 products into a
 * float32 sum, so the roundings are the tile path's (q, k, v and the weights rounded to bfloat16,
 * float32 sums of at most 32 terms for a score and n for an output) and so is the bound
 * (tests/kernels/test_bfloat16.py holds both units to it). Queries go by groups of ATT_DP_ROWS rows:
 * their scores [8][kp] (8 kB at kp = 256), weights and outputs stay in L1 between the steps.
 * The register blocking is the products' (dp_rows): 8 rows × 32 columns in 16 accumulators, a
 * pair of the row's values broadcast to every lane, the other operand loaded once for the 8 rows. */
#define ATT_DP_ROWS 8

/* Step 2: s [rows↑8][kp] = the scores of query rows qb [rows↑8][32] against the kp keys of kb
 * ([16 pairs of d][kp][2]: keys j … j + 31 of pair c at kb + (c·kp + j)·2); rows past the text
 * are qb's zero rows (kp ≥ the block's end). */
T_BF16 static inline __attribute__((always_inline)) void att_scores_dp(const uint16_t *qb, const uint16_t *kb,
                                                                       int64_t kp, int rows, float *s)
{
    for (int r0 = 0; r0 < rows; r0 += ATT_DP_ROWS)
        for (int64_t j = 0; j < kp; j += 32)
            dp_rows(qb + r0 * ATT_D, ATT_D, kb + j * 2, kp * 2, ATT_D / 2, s + r0 * kp + j, kp, ATT_DP_ROWS, 0);
}

/* Step 4: o [rows↑8][32] = P·V for the weights pb [rows↑8][kp] over the first n keys (the weights
 * and V are zero past n, so pairs of keys past n are skipped); vb [kp/2 pairs of keys][32][2].
 * Rows of pb past the text hold whatever was there: row r of o reads row r of pb only. */
T_BF16 static inline __attribute__((always_inline)) void att_pv_dp(const uint16_t *pb, const uint16_t *vb,
                                                                   int64_t kp, int64_t n, int rows, float *o)
{
    for (int r0 = 0; r0 < rows; r0 += ATT_DP_ROWS)
        dp_rows(pb + r0 * kp, kp, vb, ATT_D * 2, (n + 1) / 2, o + r0 * ATT_D, ATT_D, ATT_DP_ROWS, 0);
}

/* qkv_attention_bf16_io's contract (arguments, work buffer, results) on AVX-512 BF16: per head, pack
 * (step 1), then per group of 8 query rows their scores (2), softmax (3), P·V (4) and output (5). */
T_BF16 int64_t qkv_attention_bf16_dp_io(const float *qkv, const uint16_t *qkvb, int64_t n, int64_t ld,
                                        int64_t heads, float scale, float *ctx, uint16_t *ctxb, int64_t ldc,
                                        void *work)
{
    if (n <= 0) return 0;
    if (n > ATT_MAX) return -1;
    const int64_t H = heads * ATT_D, kp = (n + 31) / 32 * 32;
    const struct att_work aw = att_work_split(work, kp); /* s, pb, o: 8 rows of the tiles' 32 (or 2 × 32) */
    uint16_t *qb = aw.qb, *kb = aw.kb, *vb = aw.vb, *pb = aw.pb;
    float *s = aw.s, *o = aw.o;
    const float cl2 = scale * 1.44269504088896341f; /* log2(e)·scale */
    uint64_t t0 = PROF_T();
    for (int64_t h = 0; h < heads; h++) {
        att_pack_head(qkv, qkvb, n, ld, H, h, kp, qb, kb, vb);
        PROF_ADD(PROF_PACK, t0);
        for (int64_t i0 = 0; i0 < n; i0 += ATT_DP_ROWS) {
            const int rows = n - i0 < ATT_DP_ROWS ? (int)(n - i0) : ATT_DP_ROWS;
            att_scores_dp(qb + i0 * ATT_D, kb, kp, rows, s);
            PROF_ADD(PROF_SCORES, t0);
            float l[ATT_DP_ROWS];
            for (int r = 0; r < rows; r++) l[r] = att_softmax_row(s + r * kp, pb + r * kp, n, kp, cl2);
            PROF_ADD(PROF_SOFTMAX, t0);
            att_pv_dp(pb, vb, kp, n, rows, o);
            att_store(o, l, rows, ctx, ctxb, ldc, i0 * ldc + h * ATT_D);
            PROF_ADD(PROF_PV, t0);
        }
    }
    return 0;
}

/* x[i] = LayerNorm(x[i] + bias + res[i])·g + beta (float32/kernels.c's qkv_add_layernorm, float32, the
 * residual stream), and the result rounded to bfloat16 into xb [rows][width] for the products
 * that read it, 16 rows at a time while they are in L1. */
T_BF16 void qkv_add_layernorm_bf16(float *x, const float *res, const float *bias, const float *g,
                                   const float *beta, int64_t rows, int64_t width, float eps, uint16_t *xb)
{
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        const int64_t m = rows - r0 < 16 ? rows - r0 : 16;
        qkv_add_layernorm(x + r0 * width, res ? res + r0 * width : NULL, bias, g, beta, m, width, eps);
        to_bf16(x + r0 * width, m, width, xb + r0 * width, m, width);
    }
}

#else /* not x86-64 with GCC/Clang: no unit, qkv runs float32 */
int64_t qkv_bf16_cpu(void) { return 0; }
int64_t qkv_amx_request(void) { return 0; }
int64_t qkv_attention_bf16_work(int64_t n) { (void)n; return 0; }
int64_t qkv_amx_peak(int64_t reps) { (void)reps; return 0; }
int64_t qkv_attention_bf16_io(const float *qkv, const uint16_t *qkvb, int64_t n, int64_t ld, int64_t heads,
                              float scale, float *ctx, uint16_t *ctxb, int64_t ldc, void *work)
{
    (void)qkv, (void)qkvb, (void)n, (void)ld, (void)heads, (void)scale, (void)ctx, (void)ctxb, (void)ldc, (void)work;
    return -1;
}
int64_t qkv_attention_bf16_dp_io(const float *qkv, const uint16_t *qkvb, int64_t n, int64_t ld, int64_t heads,
                                 float scale, float *ctx, uint16_t *ctxb, int64_t ldc, void *work)
{
    return qkv_attention_bf16_io(qkv, qkvb, n, ld, heads, scale, ctx, ctxb, ldc, work);
}
void qkv_add_layernorm_bf16(float *x, const float *res, const float *bias, const float *g,
                            const float *beta, int64_t rows, int64_t width, float eps, uint16_t *xb)
{
    (void)x, (void)res, (void)bias, (void)g, (void)beta, (void)rows, (void)width, (void)eps, (void)xb;
}
int64_t qkv_attention_bf16(const float *qkv, int64_t n, int64_t ld, int64_t heads, float scale,
                           float *ctx, int64_t ldc, void *work)
{
    (void)qkv, (void)n, (void)ld, (void)heads, (void)scale, (void)ctx, (void)ldc, (void)work;
    return -1;
}
int64_t qkv_bf16_rows_padded(int64_t R) { return (R + 31) / 32 * 32 + 12; }
void qkv_bf16_profile(int64_t on, int64_t *out)
{
    (void)on;
    if (out) memset(out, 0, 6 * sizeof(int64_t));
}
int64_t qkv_gemm_bf16_io(const float *x, const uint16_t *xb, int64_t R, int64_t K, const uint16_t *panels,
                         int64_t Kp, int64_t N, const float *bias, int gelu, float *y, uint16_t *yb, int64_t isa)
{
    (void)x, (void)xb, (void)R, (void)K, (void)panels, (void)Kp, (void)N, (void)bias, (void)gelu, (void)y, (void)yb,
        (void)isa;
    return -1;
}
int64_t qkv_gemm_bf16(const float *x, int64_t R, int64_t K, const uint16_t *panels, int64_t Kp,
                      int64_t N, const float *bias, int gelu, float *y, int64_t isa)
{
    (void)x, (void)R, (void)K, (void)panels, (void)Kp, (void)N, (void)bias, (void)gelu, (void)y, (void)isa;
    return -1;
}
#endif
