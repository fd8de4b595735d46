// Direct 2-D convolution, NCHW, grouped (depthwise when a group has one input channel): one
// output per thread over its group's input channels and window. 1-D convolutions have height 1.

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
