/* One encoder layer for one short text on 4-bit weights, in a single call (qkv.model.layer_q4).
 *
 * A lone search query is ~14 tokens: each of its layer's steps is a few microseconds of work, and
 * calling them one by one from Python (four products, attention, two add-and-norms, the scratch
 * arrays) cost about as much as the products themselves (measured: ~0.2 ms of a ~0.6 ms layer).
 * This runs the fast layer's steps in the same order with the same kernels:
 *
 *   qkv = x·Wqkv + b                    qkv_q4_amx (tiles), qkv_q4_int (int8 blocks: VNNI or AVX2)
 *                                       or qkv_q4_matmul (float32), as `unit` says
 *   ctx = softmax(scale·Q·Kᵀ)·V         qkv_attention_heads (float32/kernels.c), every head, no padding
 *   a   = LayerNorm(ctx·Wo + bo + x)    product, then qkv_add_layernorm
 *   h   = GELU(a·Win + bin)             BERT's exact GELU, fused in the product
 *   out = LayerNorm(h·Wout + bout + a)  on the int8-block units both feed-forward products in one
 *                                       call (qkv_q4_int_ffn: h kept as int8 blocks, the same bits)
 *
 * so its result is the fast layer's (tests/model/test_layer_q4.py holds it to the reference
 * layer). work: qkv_q4_layer_work(n, H, heads, I) floats.
 *
 * qkv_q4_stack runs a whole stack of such layers in one call: between layers, Python (its checks,
 * the 22 arguments converted by ctypes, the scratch arrays) cost ~40 µs a layer, ~10% of a lone
 * e5 query's 12 layers (measured against the same C calls made back to back).
 */
#include <stddef.h>
#include <stdint.h>

int64_t qkv_q4_amx(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                   const float *bias, int gelu, float *y);                               /* q4/amx.c */
void qkv_q4_matmul(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                   const float *bias, int gelu, float *y);                               /* q4/kernels.c */
int64_t qkv_q4_int(const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N, const float *bias,
                   int gelu, float *y, int64_t unit);                                    /* q4/int8.c */
int64_t qkv_q4_int_ffn(const float *x, int64_t R, int64_t K, const uint8_t *w_in, int64_t I, const float *b_in,
                       const uint8_t *w_out, int64_t N, const float *b_out, float *y, int64_t unit);
int64_t qkv_attention_work(int64_t nk, int64_t d, int64_t dv);                           /* float32/kernels.c */
void qkv_attention_heads(const float *q, const float *k, const float *v, int64_t heads, int64_t hq,
                         int64_t hk, int64_t hv, int64_t ho, int64_t ldq, int64_t ldk, int64_t ldv,
                         int64_t ldo, int64_t nq, int64_t nk, int64_t d, int64_t dv, float scale,
                         float *out, float *work);
void qkv_add_layernorm(float *x, const float *res, const float *bias, const float *g, const float *b,
                       int64_t rows, int64_t width, float eps);

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; } /* 64-byte steps between the parts */

int64_t qkv_q4_layer_work(int64_t n, int64_t H, int64_t heads, int64_t I)
{
    return up16(n * 3 * H) + up16(n * H) + up16(n * H) + up16(n * I) + up16(qkv_attention_work(n, H / heads, H / heads));
}

/* unit: 0 the float32 kernel, 1 AMX tiles, 2 AVX-512 VNNI, 3 AVX2 (qkv.kernels.q4.UNIT_CODE); a unit
 * that cannot run falls to the float32 kernel, as qkv.kernels.q4.q4_matmul does. */
static void product(int unit, const float *x, int64_t R, int64_t K, const uint8_t *panels, int64_t N,
                    const float *bias, int gelu, float *y)
{
    if (unit == 1 && qkv_q4_amx(x, R, K, panels, N, bias, gelu, y) == 0) return;
    if ((unit == 2 || unit == 3) && qkv_q4_int(x, R, K, panels, N, bias, gelu, y, unit - 1) == 0) return;
    qkv_q4_matmul(x, R, K, panels, N, bias, gelu, y);
}

/* out [n, H] = the layer of x [n, H] (out may not be x). n ≤ 47 (qkv_q4_matmul's few-rows ways);
 * head size H / heads must be 16 or a multiple of 32 (qkv_attention_heads). Returns 0, or -1 when
 * it cannot run that (the caller then runs the layer step by step). */
int64_t qkv_q4_layer(const float *x, int64_t n, int64_t H, int64_t heads, int64_t I, float scale, float eps,
                     const uint8_t *w_qkv, const float *b_qkv, const uint8_t *w_o, const float *b_o,
                     const float *ln1_g, const float *ln1_b, const uint8_t *w_in, const float *b_in,
                     const uint8_t *w_out, const float *b_out, const float *ln2_g, const float *ln2_b,
                     float *out, float *work, int64_t unit)
{
    const int64_t d = heads > 0 ? H / heads : 0;
    if (n <= 0 || n > 47 || d * heads != H || !(d == 16 || (d > 0 && d % 32 == 0)) || H % 32 || I % 32) return -1;
    float *qkv = work, *ctx = qkv + up16(n * 3 * H), *a = ctx + up16(n * H), *h = a + up16(n * H),
          *att = h + up16(n * I);
    product((int)unit, x, n, H, w_qkv, 3 * H, b_qkv, 0, qkv);
    qkv_attention_heads(qkv, qkv + H, qkv + 2 * H, heads, d, d, d, d, 3 * H, 3 * H, 3 * H, H, n, n, d, d, scale,
                        ctx, att);
    product((int)unit, ctx, n, H, w_o, H, NULL, 0, a);
    qkv_add_layernorm(a, x, b_o, ln1_g, ln1_b, n, H, eps);
    /* the int8-block units: both feed-forward products in one call (the same bits, h never float32) */
    if (!((unit == 2 || unit == 3) && qkv_q4_int_ffn(a, n, H, w_in, I, b_in, w_out, H, NULL, out, unit - 1) == 0)) {
        product((int)unit, a, n, H, w_in, I, b_in, 1, h);
        product((int)unit, h, n, I, w_out, H, NULL, 0, out);
    }
    qkv_add_layernorm(out, a, b_out, ln2_g, ln2_b, n, H, eps);
    return 0;
}

/* out [n, H] = layers 0 … L − 1 of x [n, H], one after the other: layer i's twelve addresses at
 * ptrs[12·i …] in qkv_q4_layer's order (w_qkv, b_qkv, w_o, b_o, ln1_g, ln1_b, w_in, b_in, w_out,
 * b_out, ln2_g, ln2_b). work: qkv_q4_layer_work(n, H, heads, I) + n·H floats (the layers alternate
 * between out and the last n·H). Returns 0, or -1 when qkv_q4_layer cannot run the shape (then
 * nothing was written and the caller runs the layers one by one). */
int64_t qkv_q4_stack(const float *x, int64_t n, int64_t L, const int64_t *ptrs, int64_t H, int64_t heads,
                     int64_t I, float scale, float eps, float *out, float *work, int64_t unit)
{
    if (L <= 0) return -1;
    float *spare = work + qkv_q4_layer_work(n, H, heads, I);
    const float *in = x;
    for (int64_t i = 0; i < L; i++) {
        const int64_t *p = ptrs + 12 * i;
        float *dst = ((L - 1 - i) & 1) ? spare : out; /* the last layer writes out */
#define P8(j) ((const uint8_t *)(intptr_t)p[j])
#define PF(j) ((const float *)(intptr_t)p[j])
        if (qkv_q4_layer(in, n, H, heads, I, scale, eps, P8(0), PF(1), P8(2), PF(3), PF(4), PF(5), P8(6), PF(7),
                         P8(8), PF(9), PF(10), PF(11), dst, work, unit) != 0)
            return -1; /* only layer 0 can refuse: every layer has the same shape */
#undef P8
#undef PF
        in = dst;
    }
    return 0;
}
