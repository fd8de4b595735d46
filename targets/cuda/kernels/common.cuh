// Shared by every kernel module: hal's activation encoding and the rank limit.
#pragma once

#define FERRITE_MAX_RANK 8

// The side of the square tiles the shared-memory kernels (matmul, conv_gemm) stage.
#define FERRITE_TILE 16

// An activation in hal's encoding: code, then two f32 parameters.
struct Activation {
    unsigned int code;
    float a;
    float b;
};

// The fusable activations (codes 0–7); the others run as standalone unary steps.
__device__ __forceinline__ float activate_fused(Activation act, float x) {
    switch (act.code) {
        case 1: return fmaxf(x, 0.0f);
        case 2: return x < 0.0f ? act.a * x : x;
        case 3: return fminf(fmaxf(x, act.a), act.b);
        case 4: return 1.0f / (1.0f + expf(-x));
        case 5: return tanhf(x);
        case 6: return fminf(fmaxf(act.a * x + act.b, 0.0f), 1.0f);
        case 7: return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
        default: return x;
    }
}

// A 2-D window (convolution, pooling): 1-D ops use height 1.
struct Window {
    unsigned int kernel[2], stride[2], dilation[2];
    unsigned int pads[4]; // top, left, bottom, right
};
