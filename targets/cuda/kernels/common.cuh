// Shared by every kernel module: hal's activation encoding and the rank limit.
#pragma once

#define FERRITE_MAX_RANK 8

// The side of the square tiles the shared-memory kernels (matmul, conv_gemm) stage.
#define FERRITE_TILE 16
// Columns per block of the row kernel (matmul_rows): 8 floats, one 32-byte memory sector.
#define FERRITE_ROW_COLUMNS 8

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

// Every activation in hal's encoding (codes 0–28): standalone unary steps and recurrent gates.
__device__ float activate(Activation act, float x) {
    switch (act.code) {
        case 0: return x;                                             // none
        case 1: return fmaxf(x, 0.0f);                                // Relu
        case 2: return x < 0.0f ? act.a * x : x;                      // LeakyRelu
        case 3: return fminf(fmaxf(x, act.a), act.b);                 // Clip
        case 4: return 1.0f / (1.0f + expf(-x));                      // Sigmoid
        case 5: return tanhf(x);                                      // Tanh
        case 6: return fminf(fmaxf(act.a * x + act.b, 0.0f), 1.0f);   // HardSigmoid
        case 7: return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f); // HardSwish
        case 8: return expf(x);
        case 9: return logf(x);
        case 10: return sqrtf(x);
        case 11: return 1.0f / x;
        case 12: return -x;
        case 13: return fabsf(x);
        case 14: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);     // Sign (NaN stays NaN)
        case 15: return floorf(x);
        case 16: return ceilf(x);
        case 17: return rintf(x);                                     // Round: ties to even
        case 18: return sinf(x);
        case 19: return cosf(x);
        case 20: return erff(x);
        case 21:                                                      // Gelu
            if (act.a != 0.0f) {
                const float k = 0.7978845608f; // sqrt(2 / pi)
                return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
            }
            return 0.5f * x * (1.0f + erff(x * 0.7071067812f));
        case 22: return x > 0.0f ? x : act.a * expm1f(x);             // Elu
        case 23: return act.b * (x > 0.0f ? x : act.a * expm1f(x));   // Selu
        case 24: return fmaxf(x, 0.0f) + fminf(0.0f, act.a * expm1f(x / act.a)); // Celu
        case 25: return x > 20.0f ? x : log1pf(expf(x));              // Softplus
        case 26: return x / (1.0f + fabsf(x));                        // Softsign
        case 27: return x * tanhf(x > 20.0f ? x : log1pf(expf(x)));   // Mish
        case 28: return x > act.a ? x : 0.0f;                         // ThresholdedRelu
        default: return x;
    }
}

// x clamped to [-clip, clip]; clip 0 leaves it as is (recurrent layers).
__device__ __forceinline__ float clipped(float x, float clip) {
    return clip > 0.0f ? fminf(fmaxf(x, -clip), clip) : x;
}

// A 2-D window (convolution, pooling): 1-D ops use height 1.
struct Window {
    unsigned int kernel[2], stride[2], dilation[2];
    unsigned int pads[4]; // top, left, bottom, right
};
