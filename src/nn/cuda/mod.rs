//! The GPU path's own pieces, where candle's generic ops were the
//! bottleneck (docs/cuda.md, *Where the time goes*):
//!
//! - [`norm`]: batch norm with its ReLU in kernels of our own;
//! - [`residual`]: a residual block's sum and ReLU in one kernel;
//! - [`cudnn_conv`] (`--features cudnn`): convolutions through cuDNN,
//!   planned once per shape.
//!
//! The kernels live in `kernels.cu`, compiled at first use by NVRTC (which
//! candle already links) for whatever GPU runs them; `tests/cuda_emulated`
//! checks their arithmetic on the CPU and `scripts/check-cuda-build.sh`
//! compiles them with nvcc. `GO_TRAIN_CUDA_KERNELS=0` leaves batch norm and
//! the residual sum to candle's ops, for timing one path against the other
//! on a GPU (`scripts/gpu-run.sh bench-ab`).

use std::sync::OnceLock;

use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchConfig};
use candle_core::{CudaStorage, DType, Layout, Result, Storage, Tensor};

#[cfg(feature = "cudnn")]
pub mod cudnn_conv;
pub mod norm;
pub mod residual;

/// The kernels' source. NCHW f32; a block of [`THREADS`] threads.
const SOURCE: &str = include_str!("kernels.cu");
/// The name candle keeps the loaded module under.
const MODULE: &str = "go_train_kernels";
/// Threads a block, as `THREADS` in `kernels.cu` (whose reductions rely on
/// it).
const THREADS: u32 = 256;

/// Whether `x` takes go-train's own kernels: f32 on a CUDA device, and
/// `GO_TRAIN_CUDA_KERNELS` not set to 0.
pub fn applies(x: &Tensor) -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    let enabled = *ENABLED.get_or_init(|| std::env::var_os("GO_TRAIN_CUDA_KERNELS").is_none_or(|v| v != "0"));
    enabled && x.device().is_cuda() && x.dtype() == DType::F32
}

/// The kernels' PTX, compiled on first use (candle then loads the module
/// once per device: `get_or_load_custom_func`).
fn ptx() -> Result<&'static str> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    let ptx = PTX.get_or_init(|| {
        candle_core::cuda_backend::cudarc::nvrtc::compile_ptx(SOURCE).map(|p| p.to_src()).map_err(|e| format!("{e:?}"))
    });
    match ptx {
        Ok(ptx) => Ok(ptx),
        Err(e) => candle_core::bail!("compiling go-train's GPU kernels (src/nn/cuda/kernels.cu): {e}"),
    }
}

/// The contiguous f32 data of a storage seen through `layout`; `what`
/// names it in the error.
fn view<'a>(s: &'a CudaStorage, layout: &Layout, what: &str) -> Result<CudaView<'a, f32>> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(s.as_cuda_slice::<f32>()?.slice(start..end)),
        None => candle_core::bail!("GPU kernel: the {what} is not contiguous"),
    }
}

/// Runs `f` with the contiguous f32 data of `t` on the GPU (held under its
/// storage's read lock meanwhile).
fn with_view<T>(t: &Tensor, what: &str, f: impl FnOnce(CudaView<'_, f32>) -> Result<T>) -> Result<T> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        Storage::Cuda(s) => f(view(s, layout, what)?),
        _ => candle_core::bail!("GPU kernel: the {what} is not on the GPU"),
    }
}

/// A grid-stride launch over `total` elements.
fn elementwise(total: usize) -> LaunchConfig {
    let blocks = total.div_ceil(THREADS as usize).clamp(1, 65_535) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// The error of a GPU op given CPU tensors (candle asks every custom op for
/// a CPU version; these ops are only ever built for GPU tensors).
fn cpu_refused<T>(op: &str) -> Result<T> {
    candle_core::bail!("{op}: a GPU op, given CPU tensors")
}
