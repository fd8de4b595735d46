// Matrix products, y[b] = alpha · A[b] · B[b] + beta · C (broadcast), then the fused activation.
// The batch is walked per axis with each operand's strides (0 on its broadcast axes: numpy
// matmul). Two kernels: TILE × TILE output tiles with TILE-wide slices of A and B staged in shared
// memory, and, for products of fewer than TILE rows (a batch-1 dense layer), rows split over K.

#include "common.cuh"

#define TILE FERRITE_TILE

struct Product {
    unsigned int m, k, n;
    float alpha, beta;
    // C's element strides along the output's rows and columns (0 where C broadcasts); C absent: null.
    unsigned int c_row_stride, c_col_stride;
    // The batch: its dims and each operand's element strides per batch axis.
    unsigned int batch_rank;
    unsigned int batch_dims[FERRITE_MAX_RANK];
    unsigned int a_batch_strides[FERRITE_MAX_RANK];
    unsigned int b_batch_strides[FERRITE_MAX_RANK];
};

// The element offsets of product `batch`'s A and B.
__device__ __forceinline__ void batch_bases(const Product& p, unsigned int batch, size_t* a_base,
                                            size_t* b_base) {
    *a_base = 0;
    *b_base = 0;
    unsigned int rest = batch;
    for (unsigned int d = p.batch_rank; d > 0; d--) {
        unsigned int coord = rest % p.batch_dims[d - 1];
        rest /= p.batch_dims[d - 1];
        *a_base += (size_t)coord * p.a_batch_strides[d - 1];
        *b_base += (size_t)coord * p.b_batch_strides[d - 1];
    }
}

// alpha · acc + beta · C, activated, into y's (row, col) of product `batch`.
__device__ __forceinline__ void store_product(const float* c, float* y, const Product& p,
                                              Activation act, unsigned int batch,
                                              unsigned int row, unsigned int col, float acc) {
    float v = p.alpha * acc;
    if (c != nullptr) v += p.beta * c[row * p.c_row_stride + col * p.c_col_stride];
    y[((size_t)batch * p.m + row) * p.n + col] = activate_fused(act, v);
}

// Grid: (ceil(n / TILE), ceil(m / TILE), batches); block: TILE × TILE. No early return: every
// thread reaches both barriers.
extern "C" __global__ void matmul(const float* a, const float* b, const float* c, float* y,
                                  Product p, Activation act) {
    __shared__ float as[TILE][TILE + 1];
    __shared__ float bs[TILE][TILE + 1];
    unsigned int batch = blockIdx.z;
    unsigned int row = blockIdx.y * TILE + threadIdx.y;
    unsigned int col = blockIdx.x * TILE + threadIdx.x;
    size_t a_base, b_base;
    batch_bases(p, batch, &a_base, &b_base);
    const float* ab = a + a_base;
    const float* bb = b + b_base;
    float acc = 0.0f;
    for (unsigned int t = 0; t < p.k; t += TILE) {
        unsigned int ka = t + threadIdx.x, kb = t + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < p.m && ka < p.k) ? ab[(size_t)row * p.k + ka] : 0.0f;
        bs[threadIdx.y][threadIdx.x] = (kb < p.k && col < p.n) ? bb[(size_t)kb * p.n + col] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (unsigned int i = 0; i < TILE; i++) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < p.m && col < p.n) store_product(c, y, p, act, batch, row, col, acc);
}

// Products of fewer than TILE rows: the tiled kernel would leave most of its thread rows idle
// and walk K serially, one barrier-separated tile at a time (a 784-deep batch-1 layer took
// ~16 µs on an H200). Here a block computes ROW_COLUMNS columns of one row with its TILE × TILE
// threads as ROW_SLICES slices of K: each thread sums every ROW_SLICES-th term (a warp reads
// whole 32-byte sectors of B's rows), and a fixed-order tree adds the slices (the same result
// every run). Narrow blocks make many of them: latency-bound, a batch-1 layer needs loads in
// flight on many multiprocessors, not few.
// Grid: (ceil(n / ROW_COLUMNS), m, batches); block: TILE × TILE. No early return: every thread
// reaches every barrier.
#define ROW_COLUMNS FERRITE_ROW_COLUMNS
#define ROW_SLICES (TILE * TILE / ROW_COLUMNS)
extern "C" __global__ void matmul_rows(const float* a, const float* b, const float* c, float* y,
                                       Product p, Activation act) {
    __shared__ float partial[ROW_SLICES][ROW_COLUMNS + 1];
    unsigned int thread = threadIdx.y * TILE + threadIdx.x;
    unsigned int lane = thread % ROW_COLUMNS, slice = thread / ROW_COLUMNS;
    unsigned int batch = blockIdx.z;
    unsigned int row = blockIdx.y;
    unsigned int col = blockIdx.x * ROW_COLUMNS + lane;
    size_t a_base, b_base;
    batch_bases(p, batch, &a_base, &b_base);
    const float* arow = a + a_base + (size_t)row * p.k;
    const float* bb = b + b_base;
    // Four independent sums, so that four loads are in flight at once, added in a fixed order.
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (row < p.m && col < p.n) {
        unsigned int i = slice;
        for (; i + 3 * ROW_SLICES < p.k; i += 4 * ROW_SLICES) {
            #pragma unroll
            for (unsigned int j = 0; j < 4; j++)
                acc[j] += arow[i + j * ROW_SLICES] * bb[(size_t)(i + j * ROW_SLICES) * p.n + col];
        }
        for (unsigned int j = 0; i < p.k; i += ROW_SLICES, j++)
            acc[j] += arow[i] * bb[(size_t)i * p.n + col];
    }
    partial[slice][lane] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    __syncthreads();
    for (unsigned int half = ROW_SLICES / 2; half > 0; half /= 2) {
        if (slice < half) partial[slice][lane] += partial[slice + half][lane];
        __syncthreads();
    }
    if (slice == 0 && row < p.m && col < p.n)
        store_product(c, y, p, act, batch, row, col, partial[0][lane]);
}
