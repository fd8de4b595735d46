//! The CUDA C kernels, compiled by NVRTC at session creation for the GPU at hand (one `.frt`
//! serves every GPU generation, and no CUDA toolkit is needed to build Ferrite); CI compiles
//! them for Jetson Orin (`compute_87`) and Hopper (`compute_90`) and assembles the PTX with
//! `ptxas`, so a kernel that does not compile fails there rather than on a device.

use crate::CudaError;
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};

/// A kernel module: its name and CUDA C source.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// File stem under `targets/cuda/kernels/`.
    pub name: &'static str,
    /// Source.
    pub source: &'static str,
    /// Entry points (`extern "C"`).
    pub entries: &'static [&'static str],
}

/// The header every module includes (hal's activation encoding).
pub const COMMON_HEADER: (&str, &str) = ("common.cuh", include_str!("../kernels/common.cuh"));

/// Every kernel module.
pub const MODULES: [Module; 10] = [
    Module {
        name: "elementwise",
        source: include_str!("../kernels/elementwise.cu"),
        entries: &["unary", "binary", "batch_norm", "binary_integer"],
    },
    Module {
        name: "lanes",
        source: include_str!("../kernels/lanes.cu"),
        entries: &["softmax", "arg_extreme", "cumsum"],
    },
    Module {
        name: "movement",
        source: include_str!("../kernels/movement.cu"),
        entries: &["copy_strided", "gather", "pad", "resample"],
    },
    Module {
        name: "reduce",
        source: include_str!("../kernels/reduce.cu"),
        entries: &["reduce"],
    },
    Module {
        name: "matmul",
        source: include_str!("../kernels/matmul.cu"),
        entries: &["matmul", "matmul_rows"],
    },
    Module {
        name: "conv",
        source: include_str!("../kernels/conv.cu"),
        entries: &["conv", "conv_gemm", "conv_transpose"],
    },
    Module {
        name: "pool",
        source: include_str!("../kernels/pool.cu"),
        entries: &["pool", "global_avg_pool"],
    },
    Module {
        name: "recurrent",
        source: include_str!("../kernels/recurrent.cu"),
        entries: &["recurrent_gates", "recurrent_cell"],
    },
    Module {
        name: "logic",
        source: include_str!("../kernels/logic.cu"),
        entries: &[
            "compare",
            "logical",
            "choose",
            "trilu",
            "convert",
            "classify",
            "gather_elements",
        ],
    },
    Module {
        name: "indexing",
        source: include_str!("../kernels/indexing.cu"),
        entries: &[
            "top_k",
            "scatter_elements",
            "gather_nd",
            "scatter_nd",
            "det",
        ],
    },
];

/// Whether `libnvrtc` can be opened.
pub fn compiler_present() -> bool {
    // SAFETY: only tries to open the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles `module` to PTX for virtual architecture `arch` (`compute_87`, say).
pub fn compile(module: &Module, arch: &str) -> Result<String, CudaError> {
    if !compiler_present() {
        return Err(CudaError::NoCompiler);
    }
    let options = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some(format!("{}.cu", module.name)),
        ..CompileOptions::default()
    };
    // NVRTC gets one source: the shared header is spliced in where it is included.
    let include = format!("#include \"{}\"", COMMON_HEADER.0);
    let source = module.source.replace(&include, COMMON_HEADER.1);
    compile_ptx_with_opts(source, options)
        .map(|ptx| ptx.to_src())
        .map_err(|e| CudaError::Compile {
            module: module.name,
            arch: arch.to_string(),
            log: format!("{e:?}"),
        })
}
