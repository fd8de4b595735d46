// The host emulator of Ferrite's CUDA kernels: every module in ../kernels compiled as C++ into
// one translation unit, and one entry point that launches a kernel by name over a grid, with
// the same argument array cuLaunchKernel takes. It checks each argument's size against the
// kernel's parameter, so a lowering that disagrees with a kernel's signature fails in CI.

#include "cuda_shim.h"

#include <ucontext.h>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "../kernels/elementwise.cu"
#include "../kernels/lanes.cu"
#include "../kernels/movement.cu"
#include "../kernels/reduce.cu"
#include "../kernels/matmul.cu"
#include "../kernels/conv.cu"
#include "../kernels/pool.cu"
#include "../kernels/recurrent.cu"
#include "../kernels/logic.cu"
#include "../kernels/indexing.cu"

namespace {

template <typename T>
T read_arg(void* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename... A, std::size_t... I>
void call(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(read_arg<A>(args[I])...);
}

template <typename... A>
constexpr std::size_t param_count(void (*)(A...)) {
    return sizeof...(A);
}

// The byte size of each parameter of a kernel, in order.
template <typename... A>
const std::size_t* param_sizes(void (*)(A...)) {
    static const std::size_t sizes[] = {sizeof(A)..., 0};
    return sizes;
}

}  // namespace

// One kernel the emulator can launch.
struct FerriteKernel {
    const char* name;
    std::size_t params;
    const std::size_t* sizes;
    // Its threads meet at __syncthreads (shared-memory tiles): a block's threads run concurrently.
    bool cooperative;
    void (*run)(void**);
};

#define ENTRY(f, coop)                                                                    \
    FerriteKernel {                                                                       \
        #f, param_count(f), param_sizes(f), coop,                                         \
            [](void** a) { call(f, a, std::make_index_sequence<param_count(f)>{}); }     \
    }

static const FerriteKernel KERNELS[] = {
    ENTRY(unary, false),           ENTRY(binary, false),          ENTRY(batch_norm, false),
    ENTRY(softmax, false),         ENTRY(arg_extreme, false),     ENTRY(copy_strided, false),
    ENTRY(gather, false),          ENTRY(pad, false),             ENTRY(resample, false),
    ENTRY(reduce, false),          ENTRY(matmul, true),           ENTRY(conv, false),
    ENTRY(conv_gemm, true),        ENTRY(conv_transpose, false),  ENTRY(pool, false),
    ENTRY(global_avg_pool, false), ENTRY(cumsum, false),          ENTRY(recurrent_gates, false),
    ENTRY(recurrent_cell, false),  ENTRY(compare, false),         ENTRY(logical, false),
    ENTRY(choose, false),          ENTRY(trilu, false),           ENTRY(convert, false),
    ENTRY(classify, false),        ENTRY(gather_elements, false), ENTRY(top_k, false),
    ENTRY(scatter_elements, false), ENTRY(gather_nd, false),      ENTRY(scatter_nd, false),
    ENTRY(det, false),             ENTRY(binary_integer, false),  ENTRY(matmul_rows, true),
};

// The kernel named `name`, or null.
static const FerriteKernel* ferrite_find_kernel(const char* name) {
    for (const FerriteKernel& k : KERNELS) {
        if (std::strcmp(k.name, name) == 0) return &k;
    }
    return nullptr;
}

// __shared__ arrays are statics: cooperative launches run one at a time.
static std::mutex cooperative_lock;

// One launch: the kernel, its geometry and its arguments.
struct Launch {
    const FerriteKernel* kernel;
    dim3 grid, block;
    void** args;

    // Threads per block.
    unsigned int threads() const { return block.x * block.y * block.z; }
};

// Runs GPU thread `t` (of `step` walking in step) over every block of the grid; with a
// barrier, meets the block's other threads there at the end of each block (its shared arrays
// are reused by the next).
static void walk(const Launch& launch, unsigned int first, unsigned int step, void (*barrier)()) {
    blockDim = launch.block;
    gridDim = launch.grid;
    block_barrier = barrier;
    unsigned int threads = launch.threads();
    const dim3 &grid = launch.grid, &block = launch.block;
    for (unsigned int z = 0; z < grid.z; z++)
        for (unsigned int y = 0; y < grid.y; y++)
            for (unsigned int x = 0; x < grid.x; x++) {
                blockIdx = {x, y, z};
                for (unsigned int t = first; t < threads; t += step) {
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    launch.kernel->run(launch.args);
                }
                if (barrier != nullptr) barrier();
            }
}

// A cooperative launch's threads as fibers on the launching OS thread, each with its own
// stack: a barrier switches back to the scheduler, which resumes the block's threads in turn,
// so every thread reaches a barrier before any passes it. (One OS thread per GPU thread, 256
// of them waking at every barrier, had made the emulator's tiled products its slowest part.)
namespace fibers {

constexpr std::size_t STACK_BYTES = 64 * 1024;

ucontext_t scheduler;
std::vector<ucontext_t> contexts;
std::vector<std::unique_ptr<char[]>> stacks;
std::vector<bool> finished;
unsigned int current = 0;
const Launch* launch = nullptr;

// __syncthreads: back to the scheduler; this thread's indices restored when it resumes.
void barrier() {
    dim3 thread = threadIdx, blk = blockIdx;
    swapcontext(&contexts[current], &scheduler);
    threadIdx = thread;
    blockIdx = blk;
}

void thread_main(unsigned int t) {
    walk(*launch, t, launch->threads(), barrier);
    finished[t] = true;
}

void run(const Launch& l) {
    launch = &l;
    unsigned int threads = l.threads();
    contexts.resize(threads);
    finished.assign(threads, false);
    while (stacks.size() < threads) stacks.emplace_back(new char[STACK_BYTES]);
    for (unsigned int t = 0; t < threads; t++) {
        getcontext(&contexts[t]);
        contexts[t].uc_stack.ss_sp = stacks[t].get();
        contexts[t].uc_stack.ss_size = STACK_BYTES;
        contexts[t].uc_link = &scheduler;
        makecontext(&contexts[t], reinterpret_cast<void (*)()>(thread_main), 1, t);
    }
    // One pass of the loop is one barrier phase: each unfinished thread runs to its next
    // barrier or its end.
    for (bool pending = true; pending;) {
        pending = false;
        for (unsigned int t = 0; t < threads; t++) {
            if (finished[t]) continue;
            current = t;
            swapcontext(&scheduler, &contexts[t]);
            pending = pending || !finished[t];
        }
    }
    block_barrier = nullptr;
}

}  // namespace fibers

// Runs `kernel` over the grid with the argument array cuLaunchKernel takes.
static void ferrite_run_kernel(const FerriteKernel& kernel, const unsigned int* grid3,
                               const unsigned int* block3, void** args) {
    Launch launch{&kernel, {grid3[0], grid3[1], grid3[2]}, {block3[0], block3[1], block3[2]}, args};
    if (!kernel.cooperative) {
        // Independent threads: one after another on the caller's thread.
        walk(launch, 0, 1, nullptr);
        return;
    }
    std::lock_guard<std::mutex> guard(cooperative_lock);
    fibers::run(launch);
}

// Launches kernel `name`. Returns 0, -1 for an unknown kernel, or 1 + the index of the first
// argument whose size differs from the kernel's parameter (count + 1: wrong argument count).
extern "C" int ferrite_emulate(const char* name, const unsigned int* grid, const unsigned int* block,
                               void** args, const std::size_t* sizes, std::size_t count) {
    const FerriteKernel* kernel = ferrite_find_kernel(name);
    if (kernel == nullptr) return -1;
    if (count != kernel->params) return int(kernel->params + 1);
    for (std::size_t i = 0; i < count; i++) {
        if (sizes[i] != kernel->sizes[i]) return int(i + 1);
    }
    ferrite_run_kernel(*kernel, grid, block, args);
    return 0;
}

// The kernels the emulator knows, for a test that every CUDA entry is emulated.
extern "C" std::size_t ferrite_emulated_count() { return sizeof KERNELS / sizeof KERNELS[0]; }
extern "C" const char* ferrite_emulated_name(std::size_t i) {
    return i < ferrite_emulated_count() ? KERNELS[i].name : nullptr;
}
