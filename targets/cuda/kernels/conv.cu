// 2-D convolutions, NCHW (1-D ones have height 1), grouped, bias and fused activation:
// - conv: direct, one output per thread over its group's input channels and window; used for
//   depthwise and other thin groups, where a product has too few rows to tile.
// - conv_gemm: implicit GEMM, per group Y[o, col] = W[o, r] * X[r, col] with r = (ic, ky, kx)
//   and col = (batch, oy, ox); X is read from the input on the fly (no im2col buffer) into
//   shared-memory tiles, as the tiled matmul stages its operands.
// - conv_transpose: one output per thread, gathering the inputs that scatter into it.

#include "common.cuh"

struct ConvShape {
    unsigned int n, c, h, w;    // input
    unsigned int oc, oh, ow;    // output
    unsigned int group;
};

extern "C" __global__ void conv(const float* x, const float* weight, const float* bias, float* y,
                                ConvShape s, Window win, Activation act) {
    unsigned int count = s.n * s.oc * s.oh * s.ow;
    unsigned int icg = s.c / s.group, ocg = s.oc / s.group;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int ox = i % s.ow, oy = (i / s.ow) % s.oh;
        unsigned int o = (i / (s.ow * s.oh)) % s.oc, b = i / (s.ow * s.oh * s.oc);
        unsigned int g = o / ocg;
        float acc = bias != nullptr ? bias[o] : 0.0f;
        for (unsigned int ic = 0; ic < icg; ic++) {
            const float* xc = x + ((size_t)b * s.c + g * icg + ic) * s.h * s.w;
            const float* wc = weight + ((size_t)o * icg + ic) * win.kernel[0] * win.kernel[1];
            for (unsigned int ky = 0; ky < win.kernel[0]; ky++) {
                int iy = (int)(oy * win.stride[0] + ky * win.dilation[0]) - (int)win.pads[0];
                if (iy < 0 || iy >= (int)s.h) continue;
                for (unsigned int kx = 0; kx < win.kernel[1]; kx++) {
                    int ix = (int)(ox * win.stride[1] + kx * win.dilation[1]) - (int)win.pads[1];
                    if (ix < 0 || ix >= (int)s.w) continue;
                    acc += xc[iy * s.w + ix] * wc[ky * win.kernel[1] + kx];
                }
            }
        }
        y[i] = activate_fused(act, acc);
    }
}

// Grid: (ceil(n·oh·ow / TILE), ceil(oc/group / TILE), group); block: TILE × TILE. Every thread
// reaches both barriers (no early return), as __syncthreads requires.
extern "C" __global__ void conv_gemm(const float* x, const float* weight, const float* bias,
                                     float* y, ConvShape s, Window win, Activation act) {
    __shared__ float ws[FERRITE_TILE][FERRITE_TILE + 1];
    __shared__ float xs[FERRITE_TILE][FERRITE_TILE + 1];
    unsigned int g = blockIdx.z;
    unsigned int icg = s.c / s.group, ocg = s.oc / s.group;
    unsigned int kw = win.kernel[1], window = win.kernel[0] * kw;
    unsigned int depth = icg * window, cols = s.n * s.oh * s.ow;
    unsigned int row = blockIdx.y * FERRITE_TILE + threadIdx.y; // output channel in the group
    unsigned int col = blockIdx.x * FERRITE_TILE + threadIdx.x; // (batch, oy, ox)
    unsigned int ox = col % s.ow, oy = (col / s.ow) % s.oh, b = col / (s.ow * s.oh);
    unsigned int o = g * ocg + row;
    float acc = 0.0f;
    for (unsigned int t = 0; t < depth; t += FERRITE_TILE) {
        unsigned int wr = t + threadIdx.x;
        ws[threadIdx.y][threadIdx.x] =
            (row < ocg && wr < depth) ? weight[(size_t)o * depth + wr] : 0.0f;
        unsigned int xr = t + threadIdx.y;
        float v = 0.0f;
        if (xr < depth && col < cols) {
            unsigned int ic = xr / window, ky = (xr % window) / kw, kx = xr % kw;
            int iy = (int)(oy * win.stride[0] + ky * win.dilation[0]) - (int)win.pads[0];
            int ix = (int)(ox * win.stride[1] + kx * win.dilation[1]) - (int)win.pads[1];
            if (iy >= 0 && iy < (int)s.h && ix >= 0 && ix < (int)s.w) {
                v = x[(((size_t)b * s.c + g * icg + ic) * s.h + iy) * s.w + ix];
            }
        }
        xs[threadIdx.y][threadIdx.x] = v;
        __syncthreads();
        #pragma unroll
        for (unsigned int i = 0; i < FERRITE_TILE; i++) {
            acc += ws[threadIdx.y][i] * xs[i][threadIdx.x];
        }
        __syncthreads();
    }
    if (row < ocg && col < cols) {
        float v = acc + (bias != nullptr ? bias[o] : 0.0f);
        y[(((size_t)b * s.oc + o) * s.oh + oy) * s.ow + ox] = activate_fused(act, v);
    }
}

// Weights [c, oc/group, kh, kw]; the output window (oy, ox) receives input (iy, ix) through
// tap (ky, kx) when oy + pad_top - ky·dilation = iy·stride.
extern "C" __global__ void conv_transpose(const float* x, const float* weight, const float* bias,
                                          float* y, ConvShape s, Window win, Activation act) {
    unsigned int count = s.n * s.oc * s.oh * s.ow;
    unsigned int icg = s.c / s.group, ocg = s.oc / s.group;
    unsigned int kh = win.kernel[0], kw = win.kernel[1];
    int sh = (int)win.stride[0], sw = (int)win.stride[1];
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int ox = i % s.ow, oy = (i / s.ow) % s.oh;
        unsigned int o = (i / (s.ow * s.oh)) % s.oc, b = i / (s.ow * s.oh * s.oc);
        unsigned int g = o / ocg, ol = o % ocg;
        float acc = bias != nullptr ? bias[o] : 0.0f;
        for (unsigned int ic = 0; ic < icg; ic++) {
            unsigned int ci = g * icg + ic;
            const float* xc = x + ((size_t)b * s.c + ci) * s.h * s.w;
            const float* wc = weight + ((size_t)ci * ocg + ol) * kh * kw;
            for (unsigned int ky = 0; ky < kh; ky++) {
                int ny = (int)oy + (int)win.pads[0] - (int)(ky * win.dilation[0]);
                if (ny < 0 || ny % sh != 0 || ny / sh >= (int)s.h) continue;
                for (unsigned int kx = 0; kx < kw; kx++) {
                    int nx = (int)ox + (int)win.pads[1] - (int)(kx * win.dilation[1]);
                    if (nx < 0 || nx % sw != 0 || nx / sw >= (int)s.w) continue;
                    acc += xc[(ny / sh) * s.w + nx / sw] * wc[ky * kw + kx];
                }
            }
        }
        y[i] = activate_fused(act, acc);
    }
}
