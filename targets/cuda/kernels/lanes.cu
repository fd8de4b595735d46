// Kernels along one axis of a tensor viewed as [outer, len, inner], one lane (o, ·, r) per
// thread: Softmax, LogSoftmax and Hardmax; ArgMax and ArgMin; CumSum.

extern "C" __global__ void softmax(const float* x, float* y, unsigned int outer, unsigned int len,
                                   unsigned int inner, unsigned int mode) {
    unsigned int lanes = outer * inner;
    for (unsigned int lane = blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += blockDim.x * gridDim.x) {
        unsigned int o = lane / inner, r = lane % inner;
        const float* xs = x + o * len * inner + r;
        float* ys = y + o * len * inner + r;
        float m = __int_as_float(0xff800000); // -infinity
        unsigned int arg = 0;
        for (unsigned int j = 0; j < len; j++) {
            if (xs[j * inner] > m) {
                m = xs[j * inner];
                arg = j;
            }
        }
        if (mode == 2) { // Hardmax: 1 at the first maximum.
            for (unsigned int j = 0; j < len; j++) ys[j * inner] = j == arg ? 1.0f : 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (unsigned int j = 0; j < len; j++) sum += expf(xs[j * inner] - m);
        for (unsigned int j = 0; j < len; j++) {
            float d = xs[j * inner] - m;
            ys[j * inner] = mode == 1 ? d - logf(sum) : expf(d) / sum;
        }
    }
}

// ArgMax (is_max 1) / ArgMin along the same lanes, into int64 indices: the first extreme, or the
// last when `last`; a NaN wins (as in numpy).
extern "C" __global__ void arg_extreme(const float* x, long long* y, unsigned int outer,
                                       unsigned int len, unsigned int inner, unsigned int is_max,
                                       unsigned int last) {
    unsigned int lanes = outer * inner;
    for (unsigned int lane = blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += blockDim.x * gridDim.x) {
        const float* xs = x + (size_t)(lane / inner) * len * inner + lane % inner;
        unsigned int best = 0;
        float b = xs[0];
        for (unsigned int j = 1; j < len; j++) {
            float v = xs[j * inner];
            bool better;
            if (isnan(b)) better = false;
            else if (isnan(v)) better = true;
            else if (is_max) better = v > b || (last && v == b);
            else better = v < b || (last && v == b);
            if (better) {
                best = j;
                b = v;
            }
        }
        y[lane] = best;
    }
}

// Running sums along the lanes of f32 (kind 0), int32 (1) or int64 (2) elements; `exclusive`
// leaves each element out of its own sum, `reverse` runs from the end.
template <typename T>
__device__ void running_sums(const T* x, T* y, unsigned int lane, unsigned int len,
                             unsigned int inner, unsigned int exclusive, unsigned int reverse) {
    size_t base = (size_t)(lane / inner) * len * inner + lane % inner;
    T acc = 0;
    for (unsigned int step = 0; step < len; step++) {
        unsigned int j = reverse ? len - 1 - step : step;
        T v = x[base + (size_t)j * inner];
        if (exclusive) {
            y[base + (size_t)j * inner] = acc;
            acc += v;
        } else {
            acc += v;
            y[base + (size_t)j * inner] = acc;
        }
    }
}

extern "C" __global__ void cumsum(const void* x, void* y, unsigned int outer, unsigned int len,
                                  unsigned int inner, unsigned int kind, unsigned int exclusive,
                                  unsigned int reverse) {
    unsigned int lanes = outer * inner;
    for (unsigned int lane = blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += blockDim.x * gridDim.x) {
        if (kind == 0) {
            running_sums((const float*)x, (float*)y, lane, len, inner, exclusive, reverse);
        } else if (kind == 1) {
            running_sums((const int*)x, (int*)y, lane, len, inner, exclusive, reverse);
        } else {
            running_sums((const long long*)x, (long long*)y, lane, len, inner, exclusive, reverse);
        }
    }
}
