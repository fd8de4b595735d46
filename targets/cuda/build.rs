//! With feature `emulator`: compiles the host emulator (`emulator/host.cpp`, which includes
//! every kernel in `kernels/`) with the system C++ compiler.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "emulator")]
    {
        println!("cargo:rerun-if-changed=emulator");
        println!("cargo:rerun-if-changed=kernels");
        cc::Build::new()
            .cpp(true)
            .std("c++20")
            .file("emulator/host.cpp")
            .flag_if_supported("-Wno-unknown-pragmas")
            .opt_level(2)
            .compile("ferrite_cuda_emulator");
        println!("cargo:rustc-link-lib=pthread");
    }
}
