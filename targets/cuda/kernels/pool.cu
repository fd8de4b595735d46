// Max and average pooling over 2-D windows, one output per thread; global average pooling one
// channel per thread.

#include "common.cuh"

struct PoolShape {
    unsigned int planes;      // N · C
    unsigned int h, w, oh, ow;
    unsigned int is_max;
    unsigned int count_include_pad;
};

extern "C" __global__ void pool(const float* x, float* y, PoolShape s, Window win) {
    unsigned int count = s.planes * s.oh * s.ow;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int ox = i % s.ow, oy = (i / s.ow) % s.oh, plane = i / (s.ow * s.oh);
        const float* xp = x + (size_t)plane * s.h * s.w;
        // A window wholly in the padding gives the lowest float, as onnxruntime does.
        float acc = s.is_max ? __int_as_float(0xff7fffff) : 0.0f;
        unsigned int inside = 0, padded = 0;
        for (unsigned int ky = 0; ky < win.kernel[0]; ky++) {
            int iy = (int)(oy * win.stride[0] + ky * win.dilation[0]) - (int)win.pads[0];
            for (unsigned int kx = 0; kx < win.kernel[1]; kx++) {
                int ix = (int)(ox * win.stride[1] + kx * win.dilation[1]) - (int)win.pads[1];
                // Padding counts up to the padded edge (never past it, even in ceil mode).
                if (iy < (int)(s.h + win.pads[2]) && ix < (int)(s.w + win.pads[3])) padded++;
                if (iy < 0 || iy >= (int)s.h || ix < 0 || ix >= (int)s.w) continue;
                float v = xp[iy * s.w + ix];
                acc = s.is_max ? ((isnan(v) || v > acc) ? v : acc) : acc + v;
                inside++;
            }
        }
        if (!s.is_max) acc /= (float)(s.count_include_pad ? padded : (inside > 0 ? inside : 1));
        y[i] = acc;
    }
}

extern "C" __global__ void global_avg_pool(const float* x, float* y, unsigned int planes,
                                           unsigned int plane) {
    for (unsigned int p = blockIdx.x * blockDim.x + threadIdx.x; p < planes;
         p += blockDim.x * gridDim.x) {
        float acc = 0.0f;
        for (unsigned int j = 0; j < plane; j++) acc += x[(size_t)p * plane + j];
        y[p] = acc / (float)plane;
    }
}
