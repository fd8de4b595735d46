// The host emulator of Ferrite's CUDA kernels: every module in ../kernels compiled as C++ into
// one translation unit, and one entry point that launches a kernel by name over a grid, with
// the same argument array cuLaunchKernel takes. It checks each argument's size against the
// kernel's parameter, so a lowering that disagrees with a kernel's signature fails in CI.

#include "cuda_shim.h"

#include <mutex>
#include <thread>
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

// 0 when `sizes` match the kernel's parameters, else 1 + the first mismatching parameter.
template <typename... A>
int check(void (*)(A...), const std::size_t* sizes, std::size_t count) {
    const std::size_t expected[] = {sizeof(A)...};
    if (count != sizeof...(A)) return int(sizeof...(A) + 1);
    for (std::size_t i = 0; i < count; i++) {
        if (sizes[i] != expected[i]) return int(i + 1);
    }
    return 0;
}

struct Entry {
    const char* name;
    int (*check)(const std::size_t*, std::size_t);
    void (*run)(void**);
};

#define ENTRY(f)                                                                   \
    Entry {                                                                        \
        #f, [](const std::size_t* s, std::size_t n) { return check(f, s, n); },    \
            [](void** a) { call(f, a, std::make_index_sequence<sizeof_params(f)>{}); } \
    }

template <typename... A>
constexpr std::size_t sizeof_params(void (*)(A...)) {
    return sizeof...(A);
}

const Entry ENTRIES[] = {
    ENTRY(unary),       ENTRY(binary),         ENTRY(batch_norm), ENTRY(softmax),
    ENTRY(arg_extreme), ENTRY(copy_strided),   ENTRY(gather),     ENTRY(pad),
    ENTRY(resample),    ENTRY(reduce),         ENTRY(matmul),     ENTRY(conv),
    ENTRY(conv_gemm),   ENTRY(conv_transpose), ENTRY(pool),       ENTRY(global_avg_pool),
    ENTRY(cumsum),      ENTRY(recurrent_gates), ENTRY(recurrent_cell), ENTRY(compare),
    ENTRY(logical),     ENTRY(choose),         ENTRY(trilu),
};

// __shared__ arrays are statics: cooperative launches run one at a time.
std::mutex cooperative_lock;

void run_blocks(const Entry& e, void** args, dim3 grid, dim3 block, unsigned int thread) {
    blockDim = block;
    gridDim = grid;
    threadIdx = {thread % block.x, (thread / block.x) % block.y, thread / (block.x * block.y)};
    for (unsigned int z = 0; z < grid.z; z++)
        for (unsigned int y = 0; y < grid.y; y++)
            for (unsigned int x = 0; x < grid.x; x++) {
                blockIdx = {x, y, z};
                e.run(args);
                if (block_barrier != nullptr) block_barrier->arrive_and_wait();
            }
}

}  // namespace

// Launches kernel `name`. Returns 0, -1 for an unknown kernel, or 1 + the index of the first
// argument whose size differs from the kernel's parameter (count + 1: wrong argument count).
extern "C" int ferrite_emulate(const char* name, const unsigned int* grid3,
                               const unsigned int* block3, void** args,
                               const std::size_t* sizes, std::size_t count, int cooperative) {
    for (const Entry& e : ENTRIES) {
        if (std::strcmp(e.name, name) != 0) continue;
        if (int bad = e.check(sizes, count)) return bad;
        dim3 grid{grid3[0], grid3[1], grid3[2]}, block{block3[0], block3[1], block3[2]};
        unsigned int threads = block.x * block.y * block.z;
        if (!cooperative) {
            // Independent threads: run them one after another on the caller's thread.
            blockDim = block;
            gridDim = grid;
            block_barrier = nullptr;
            for (unsigned int z = 0; z < grid.z; z++)
                for (unsigned int y = 0; y < grid.y; y++)
                    for (unsigned int x = 0; x < grid.x; x++) {
                        blockIdx = {x, y, z};
                        for (unsigned int t = 0; t < threads; t++) {
                            threadIdx = {t % block.x, (t / block.x) % block.y,
                                         t / (block.x * block.y)};
                            e.run(args);
                        }
                    }
            return 0;
        }
        // Threads that meet at __syncthreads: one OS thread each, walking the blocks in step.
        std::lock_guard<std::mutex> guard(cooperative_lock);
        std::barrier<> barrier(threads);
        std::vector<std::thread> workers;
        for (unsigned int t = 0; t < threads; t++) {
            workers.emplace_back([&, t] {
                block_barrier = &barrier;
                run_blocks(e, args, grid, block, t);
            });
        }
        for (auto& w : workers) w.join();
        return 0;
    }
    return -1;
}

// The kernels the emulator knows, for a test that every CUDA entry is emulated.
extern "C" std::size_t ferrite_emulated_count() { return sizeof ENTRIES / sizeof ENTRIES[0]; }
extern "C" const char* ferrite_emulated_name(std::size_t i) {
    return i < ferrite_emulated_count() ? ENTRIES[i].name : nullptr;
}
