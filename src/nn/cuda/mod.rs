//! The GPU path's own pieces, where candle's generic ops were the
//! bottleneck (docs/cuda.md, *Where the time goes*):
//!
//! - [`norm`]: batch norm with its ReLU in kernels of our own;
//! - [`residual`]: a residual block's sum and ReLU in one kernel;
//! - [`bias`]: a convolution's bias, its gradient a per-channel sum;
//! - [`loss`]: the training losses' last steps, forward and backward;
//! - [`update`]: the optimizers' updates, in place;
//! - [`upload`]: a step's inputs through pinned memory, planes as bits;
//! - [`cudnn_conv`] (`--features cudnn`): convolutions through cuDNN,
//!   planned once per shape.
//!
//! The kernels live in `kernels.cu`, compiled at first use by NVRTC (which
//! candle already links) for whatever GPU runs them; `tests/cuda_emulated`
//! checks their arithmetic on the CPU and `scripts/check-cuda-build.sh`
//! compiles them with nvcc. `GO_TRAIN_CUDA_KERNELS=0` leaves batch norm, the
//! residual sum and the bias to candle's ops, for timing one path against
//! the other on a GPU (`scripts/gpu-run.sh bench-ab`).

use std::sync::OnceLock;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice, WrapErr};
use candle_core::{CpuStorage, CudaStorage, CustomOp1, DType, Layout, Result, Shape, Storage, Tensor};
use half::bf16;

pub mod bias;
#[cfg(feature = "cudnn")]
pub mod cudnn_conv;
pub mod loss;
pub mod norm;
pub mod residual;
pub mod update;
pub mod upload;

/// The kernels' source. NCHW, f32 or bf16 activations; a block of
/// [`THREADS`] threads.
const SOURCE: &str = include_str!("kernels.cu");
/// The name candle keeps the loaded module under.
const MODULE: &str = "go_train_kernels";
/// Threads a block, as `THREADS` in `kernels.cu` (whose reductions rely on
/// it).
const THREADS: u32 = 256;

/// Whether `x` takes go-train's own kernels: f32 or bf16 on a CUDA device,
/// and `GO_TRAIN_CUDA_KERNELS` not set to 0.
pub fn applies(x: &Tensor) -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    let enabled = *ENABLED.get_or_init(|| std::env::var_os("GO_TRAIN_CUDA_KERNELS").is_none_or(|v| v != "0"));
    enabled && x.device().is_cuda() && matches!(x.dtype(), DType::F32 | DType::BF16)
}

/// The type of the activations a kernel reads and writes: f32, or bf16
/// (`precision = bf16`), each launching its own version of the kernel
/// (`kernels.cu`'s templates). Weights, statistics and sums stay f32.
pub(super) trait Activation: CudaDType + DeviceRepr + ValidAsZeroBits + Copy {
    /// Whether this is bf16.
    const BF16: bool;
}

impl Activation for f32 {
    const BF16: bool = false;
}

impl Activation for bf16 {
    const BF16: bool = true;
}

/// The kernel for activations of type `T`: `f32_name` or its `_bf16`
/// version `bf16_name`.
fn kernel<T: Activation>(f32_name: &'static str, bf16_name: &'static str) -> &'static str {
    if T::BF16 {
        bf16_name
    } else {
        f32_name
    }
}

/// Runs `f32` or `bf16` by the activations' dtype `dtype`; `op` names the
/// op in the error for any other.
pub(super) fn by_dtype<R>(
    dtype: DType,
    op: &str,
    f32: impl FnOnce() -> Result<R>,
    bf16: impl FnOnce() -> Result<R>,
) -> Result<R> {
    match dtype {
        DType::F32 => f32(),
        DType::BF16 => bf16(),
        other => candle_core::bail!("{op}: {other:?} activations (f32 or bf16)"),
    }
}

/// The kernels' `divide` argument: 0, each thread steps from value to
/// value of its grid-stride loop keeping its channel and point up to date
/// (`ChannelWalk` in kernels.cu), and batch norm computes its per-channel
/// values once a block; 1 with `GO_TRAIN_CHANNEL_WALK=0`, a division a
/// value as before, to A/B the two on a GPU.
fn divide_each_value() -> i32 {
    static DIVIDE: OnceLock<bool> = OnceLock::new();
    *DIVIDE.get_or_init(|| std::env::var_os("GO_TRAIN_CHANNEL_WALK").is_some_and(|v| v == "0")) as i32
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
    view_of(s, layout, what)
}

/// The same for data of type `T` (the targets' u32).
fn view_of<'a, T: CudaDType>(s: &'a CudaStorage, layout: &Layout, what: &str) -> Result<CudaView<'a, T>> {
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(s.as_cuda_slice::<T>()?.slice(start..end)),
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

/// A grid-stride launch over `total` elements: at most 4,096 blocks, a
/// million threads (an H100 holds 270,000 at once), so that what a thread
/// does once before its loop (a walk's divisions, batch norm's per-channel
/// values in shared memory) is spread over dozens of elements; 65,535 with
/// `GO_TRAIN_CHANNEL_WALK=0`, as before.
fn elementwise(total: usize) -> LaunchConfig {
    let most = if divide_each_value() == 1 { 65_535 } else { 4_096 };
    let blocks = total.div_ceil(THREADS as usize).clamp(1, most) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// The error of a GPU op given CPU tensors (candle asks every custom op for
/// a CPU version; these ops are only ever built for GPU tensors).
fn cpu_refused<T>(op: &str) -> Result<T> {
    candle_core::bail!("{op}: a GPU op, given CPU tensors")
}

/// Batch, channels and points of an NCHW layout.
fn dims(l: &Layout) -> Result<(usize, usize, usize)> {
    let (n, c, h, w) = l.shape().dims4()?;
    Ok((n, c, h * w))
}

/// What `channel_sums` computes per channel (`what` in `kernels.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduce {
    /// Σ x, Σ x².
    Sums = 0,
    /// The mean and biased variance of x.
    Moments = 1,
    /// Batch norm's gradient sums, Σ g and Σ g·x̂ (g = dy, masked by the
    /// ReLU's output when `relu`).
    Gradient = 2,
}

/// Blocks a reduction over channels aims for: a few per streaming
/// multiprocessor of the largest GPUs (an H100 has 132), so that few
/// channels still fill the device.
const REDUCE_BLOCKS: usize = 528;

/// Runs a channel is cut into for `channel_sums`: enough for
/// [`REDUCE_BLOCKS`] blocks in all, at most one a plane.
fn reduce_splits(n: usize, c: usize) -> usize {
    REDUCE_BLOCKS.div_ceil(c.max(1)).clamp(1, n.max(1))
}

/// Batch norm's running averages (their addresses on the GPU, c values
/// each), for `channel_finish` to fold a batch's moments into in place:
/// `avg ← keep·avg + take·moment`.
#[derive(Clone, Copy, Debug)]
struct RunningBlend {
    mean: u64,
    var: u64,
    keep: f32,
    take_mean: f32,
    take_var: f32,
}

/// The address of `t`'s first value on the GPU, with its number of values
/// (for kernels that take many buffers, or write one beside their output).
fn address(t: &Tensor, dev: &CudaDevice) -> Result<(u64, usize)> {
    let (storage, layout) = t.storage_and_layout();
    let (Storage::Cuda(s), Some((start, end))) = (&*storage, layout.contiguous_offsets()) else {
        candle_core::bail!("GPU kernel: a tensor is not contiguous data on the GPU");
    };
    let stream = dev.cuda_stream();
    let (base, _record) = s.as_cuda_slice::<f32>()?.device_ptr(&stream);
    Ok((base + (start * std::mem::size_of::<f32>()) as u64, end - start))
}

/// `channel_sums` of `kernels.cu` over (`x`, `dy`, `y`) of `(n, c, p)`
/// values into a fresh (2, c) buffer; `dy`, `y` and `stats` are read for
/// [`Reduce::Gradient`] only (pass `x` for `dy` and `y`, and no `stats`,
/// otherwise), `blend` for [`Reduce::Moments`] only.
#[allow(clippy::too_many_arguments)]
fn channel_sums<T: Activation>(
    dev: &CudaDevice,
    (x, dy, y): (&CudaView<T>, &CudaView<T>, &CudaView<T>),
    stats: Option<&CudaView<f32>>,
    eps: f32,
    (n, c, p): (usize, usize, usize),
    what: Reduce,
    relu: bool,
    blend: Option<RunningBlend>,
) -> Result<CudaSlice<f32>> {
    let splits = reduce_splits(n, c);
    // SAFETY: uninitialised, but `channel_partial_sums` runs one block for
    // each of the c·splits (channel, run) pairs, and thread 0 of each writes
    // that pair's two sums: all 2c·splits values.
    let partial = unsafe { dev.alloc::<f64>(2 * c * splits)? };
    // SAFETY: uninitialised, but `channel_finish` runs a thread a channel,
    // each writing that channel's two values: all 2c.
    let out = unsafe { dev.alloc::<f32>(2 * c)? };
    let (n, c32, p, what, relu, splits32) = (n as i32, c as i32, p as i32, what as i32, relu as i32, splits as i32);
    let func =
        dev.get_or_load_custom_func(kernel::<T>("channel_partial_sums", "channel_partial_sums_bf16"), MODULE, ptx()?)?;
    let mut b = func.builder();
    b.arg(x).arg(dy).arg(y);
    // A null pointer where the kernel reads no statistics.
    let null = 0u64;
    match stats {
        Some(stats) => b.arg(stats),
        None => b.arg(&null),
    };
    b.arg(&eps).arg(&partial).arg(&n).arg(&c32).arg(&p).arg(&what).arg(&relu);
    let divide = divide_each_value();
    b.arg(&splits32).arg(&divide);
    // `splits` blocks of THREADS a channel, as the kernel's reduction expects.
    let cfg = LaunchConfig { grid_dim: ((c * splits) as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: the buffers hold n·c·p (x, dy, y), 2c (stats, read only for
    // the gradient sums, which pass it) and 2c·splits (partial) values.
    unsafe { b.launch(cfg) }.w()?;
    let func = dev.get_or_load_custom_func("channel_finish", MODULE, ptx()?)?;
    let r = blend.unwrap_or(RunningBlend { mean: 0, var: 0, keep: 0.0, take_mean: 0.0, take_var: 0.0 });
    let blending = (blend.is_some() && what == Reduce::Moments as i32) as i32;
    let mut b = func.builder();
    b.arg(&partial).arg(&out).arg(&n).arg(&c32).arg(&p).arg(&what).arg(&splits32);
    b.arg(&r.mean).arg(&r.var).arg(&r.keep).arg(&r.take_mean).arg(&r.take_var).arg(&blending);
    // SAFETY: one thread a channel reads its 2·splits partial sums and
    // writes its 2 values of out (2c) and, blending, of the running
    // averages (whose c values each the caller checked).
    unsafe { b.launch(elementwise(c)) }.w()?;
    Ok(out)
}

/// [`Reduce::Sums`] or [`Reduce::Moments`] of `x` (batch, c, h, w) per
/// channel, as a (2, c) tensor; not differentiable.
fn channel_reduce(x: &Tensor, what: Reduce) -> Result<Tensor> {
    x.contiguous()?.apply_op1(what)
}

impl CustomOp1 for Reduce {
    fn name(&self) -> &'static str {
        "go-train-cuda-channel-sums"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        if *self == Reduce::Gradient {
            candle_core::bail!("{}: the gradient sums need the batch norm's statistics", self.name());
        }
        by_dtype(s.dtype(), self.name(), || self.run::<f32>(s, l, None), || self.run::<bf16>(s, l, None))
    }
}

impl Reduce {
    /// The sums or moments of activations of type `T` (folded into
    /// `blend`'s running averages when given).
    fn run<T: Activation>(
        self,
        s: &CudaStorage,
        l: &Layout,
        blend: Option<RunningBlend>,
    ) -> Result<(CudaStorage, Shape)> {
        let dev = s.device();
        let x = view_of::<T>(s, l, "input")?;
        let (n, c, p) = dims(l)?;
        let out = channel_sums(dev, (&x, &x, &x), None, 0.0, (n, c, p), self, false, blend)?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), Shape::from((2, c))))
    }
}
