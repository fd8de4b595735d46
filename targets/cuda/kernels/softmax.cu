// Softmax, LogSoftmax and Hardmax along one axis of [outer, len, inner]: one lane per thread.

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
