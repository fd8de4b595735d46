// Elementwise kernels: activations (hal's codes), broadcasting binary arithmetic.
// Every kernel loops with a grid stride, so the host may clamp its grid to the device's limits.

#include "common.cuh"

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

// y[i] = act(x[i]).
extern "C" __global__ void unary(const float* x, float* y, unsigned int count, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        y[i] = activate(act, x[i]);
    }
}

// The shapes of a broadcasting binary op: the output's dims and each operand's element strides
// per output axis (0 on broadcast axes).
struct Broadcast {
    unsigned int rank;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int a_strides[FERRITE_MAX_RANK];
    unsigned int b_strides[FERRITE_MAX_RANK];
};

__device__ float combine(unsigned int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return powf(a, b);
        case 5: return (isnan(a) || a > b) ? a : b;                  // Max, NaN-propagating
        case 6: return (isnan(a) || a < b) ? a : b;                  // Min, NaN-propagating
        case 7: return a < 0.0f ? a * b : a;                          // PRelu
        case 8: return fmodf(a, b);                                   // Fmod
        case 9: {                                                     // Mod: the divisor's sign
            float m = fmodf(a, b);
            return (m != 0.0f && ((m < 0.0f) != (b < 0.0f))) ? m + b : m;
        }
        default: return 0.0f;
    }
}

// y = act(a op b) with numpy broadcasting.
extern "C" __global__ void binary(const float* a, const float* b, float* y, unsigned int count,
                                  unsigned int op, Broadcast shape, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int rest = i, ia = 0, ib = 0;
        for (unsigned int d = shape.rank; d > 0; d--) {
            unsigned int c = rest % shape.dims[d - 1];
            rest /= shape.dims[d - 1];
            ia += c * shape.a_strides[d - 1];
            ib += c * shape.b_strides[d - 1];
        }
        y[i] = activate(act, combine(op, a[ia], b[ib]));
    }
}

// y = act((x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c]), c the axis-1 index.
extern "C" __global__ void batch_norm(const float* x, const float* scale, const float* bias,
                                      const float* mean, const float* var, float* y,
                                      unsigned int count, unsigned int channels,
                                      unsigned int inner, float epsilon, Activation act) {
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += blockDim.x * gridDim.x) {
        unsigned int c = (i / inner) % channels;
        float k = scale[c] / sqrtf(var[c] + epsilon);
        y[i] = activate(act, x[i] * k + (bias[c] - mean[c] * k));
    }
}
