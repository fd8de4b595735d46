// Elementwise kernels: activations (hal's codes, `activate` in common.cuh), broadcasting binary
// arithmetic, batch normalisation.
// Every kernel loops with a grid stride, so the host may clamp its grid to the device's limits.

#include "common.cuh"

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
