//! Whole-model latency on the CPU device, one inference per iteration (inputs rewritten each
//! time, as an application must).

use criterion::{criterion_group, criterion_main, Criterion};
use ferrite_benches::{model, packed_test_models};
use ferrite_core::Session;
use ferrite_cpu::CpuDevice;
use ferrite_tools::host::runner::{arena_for, synthetic_inputs};

fn models(c: &mut Criterion) {
    let packed = packed_test_models();
    for (name, bytes) in &packed {
        let model = model(bytes);
        let inputs = synthetic_inputs(&model);
        let mut arena = arena_for(&model);
        let mut session =
            Session::new(&model, CpuDevice::new(), arena.as_mut_bytes()).expect("session");
        c.bench_function(&format!("model/{name}"), |b| {
            b.iter(|| {
                for (i, x) in inputs.iter().enumerate() {
                    session.set_input(i, &x.bytes).expect("input");
                }
                session.run().expect("run");
            })
        });
    }
}

criterion_group!(benches, models);
criterion_main!(benches);
