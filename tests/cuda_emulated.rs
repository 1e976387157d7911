//! go-train's own CUDA kernels, checked without a GPU: each is compiled
//! with the host's C++ compiler under a small emulation of CUDA's blocks,
//! threads, shared memory and `__syncthreads` (`tests/cuda_emulated/`), and
//! run against the same arithmetic done plainly in double. What a GPU adds
//! (memory coalescing, real concurrency between blocks) is left to the
//! device tests (`GO_TRAIN_TEST_DEVICE=cuda`, docs/guide/gpu.md).

mod common;

use std::path::Path;
use std::process::Command;

/// Builds `tests/cuda_emulated/NAME.cpp` with `c++` (C++20, for
/// `std::barrier`) and runs it; skips, saying so, when there is no `c++`.
fn run_emulated(name: &str) {
    let Some(cxx) = common::cxx_compiler() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cuda_emulated");
    let out = tempfile::tempdir().expect("temporary folder");
    let exe = out.path().join(name);
    let source = dir.join(format!("{name}.cpp"));
    let build = Command::new(cxx).args(["-std=c++20", "-O1", "-pthread", "-o"]).arg(&exe).arg(&source).output();
    let build = build.unwrap_or_else(|e| panic!("{cxx} did not run: {e}"));
    assert!(
        build.status.success(),
        "{} does not compile:\n{}",
        source.display(),
        String::from_utf8_lossy(&build.stderr)
    );
    let run = Command::new(&exe).output().expect("running the emulated kernels");
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{name}: the kernels disagree with the plain arithmetic:\n{report}");
    assert!(report.contains(" 0 mismatches"), "{name}: unexpected report:\n{report}");
}

/// src/nn/cuda/kernels.cu: the convolution bias and the residual end, with
/// their gradients, against plain float arithmetic; for batch norm, the per-channel moments, the
/// normalisation with and without ReLU, and the gradients (β, γ, input;
/// batch statistics and running ones) against plain double arithmetic and
/// finite differences; the optimizers' in-place updates and batch norm's
/// running averages against the CPU's f32 arithmetic, bit for bit; the
/// training losses, forward and backward, against double arithmetic.
#[test]
fn gpu_kernels_match_plain_arithmetic() {
    run_emulated("kernels");
}
