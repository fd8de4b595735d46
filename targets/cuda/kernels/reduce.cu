// Reductions over a set of axes (bit mask), one output per thread walking the reduced axes.

#include "common.cuh"

struct Reduction {
    unsigned int rank;
    unsigned int dims[FERRITE_MAX_RANK];
    unsigned int axes; // bit d set: axis d is reduced
    unsigned int op;   // 0 mean, 1 sum, 2 max, 3 min, 4 product, 5 L1, 6 L2, 7 log-sum, 8 sum of squares
};

extern "C" __global__ void reduce(const float* x, float* y, unsigned int count, Reduction r) {
    unsigned int strides[FERRITE_MAX_RANK];
    unsigned int stride = 1, reduced = 1;
    for (unsigned int d = r.rank; d > 0; d--) {
        strides[d - 1] = stride;
        stride *= r.dims[d - 1];
        if (r.axes & (1u << (d - 1))) reduced *= r.dims[d - 1];
    }
    for (unsigned int o = blockIdx.x * blockDim.x + threadIdx.x; o < count;
         o += blockDim.x * gridDim.x) {
        // The base offset of output o: its coordinates on the kept axes.
        unsigned int rest = o, base = 0;
        for (unsigned int d = r.rank; d > 0; d--) {
            if (r.axes & (1u << (d - 1))) continue;
            unsigned int c = rest % r.dims[d - 1];
            rest /= r.dims[d - 1];
            base += c * strides[d - 1];
        }
        float acc = r.op == 2 ? __int_as_float(0xff800000)
                  : r.op == 3 ? __int_as_float(0x7f800000)
                  : r.op == 4 ? 1.0f : 0.0f;
        for (unsigned int k = 0; k < reduced; k++) {
            unsigned int rest_k = k, at = base;
            for (unsigned int d = r.rank; d > 0; d--) {
                if (!(r.axes & (1u << (d - 1)))) continue;
                unsigned int c = rest_k % r.dims[d - 1];
                rest_k /= r.dims[d - 1];
                at += c * strides[d - 1];
            }
            float v = x[at];
            switch (r.op) {
                case 2: acc = (isnan(v) || v > acc) ? v : acc; break;
                case 3: acc = (isnan(v) || v < acc) ? v : acc; break;
                case 4: acc *= v; break;
                case 5: acc += fabsf(v); break;
                case 6: case 8: acc += v * v; break;
                default: acc += v; break;
            }
        }
        if (r.op == 0) acc /= (float)reduced;
        if (r.op == 6) acc = sqrtf(acc);
        if (r.op == 7) acc = logf(acc);
        y[o] = acc;
    }
}
