//! The GPU path's own pieces, where candle's generic ops were the
//! bottleneck (docs/cuda.md, *Where the time goes*):
//!
//! - [`norm`]: batch norm with its ReLU in kernels of our own;
//! - [`residual`]: a residual block's sum and ReLU in one kernel;
//! - [`bias`]: a convolution's bias, its gradient a per-channel sum;
//! - [`loss`]: the training losses' last steps, forward and backward;
//! - [`update`]: the optimizers' updates, in place;
//! - [`upload`]: a step's inputs through pinned memory, planes as bits;
//! - [`graph`]: a whole training step captured once and replayed;
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
    sys, CudaEvent, CudaSlice, CudaView, DevicePtr, DeviceRepr, DriverError, LaunchArgs, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice, DeviceId, WrapErr};
use candle_core::{CpuStorage, CudaStorage, CustomOp1, DType, Layout, Result, Shape, Storage, Tensor};
use half::bf16;

use crate::nn::layout::Channels;
use crate::nn::switches::Fused;

pub mod bias;
#[cfg(feature = "cudnn")]
pub mod cudnn_conv;
pub mod graph;
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

/// Milliseconds between two events recorded without flags on one stream,
/// once both have completed (as cudarc's `CudaEvent::elapsed_ms`).
///
/// cudarc's `CudaEvent::elapsed_ms` calls `cuEventElapsedTime_v2`, which only
/// drivers of CUDA 12.8 and later export: a binary using it does not link
/// against the older driver stub the CUDA build links with
/// (scripts/setup-cuda-build.sh), though it would run on the GPU machines'.
/// The first version, which every driver keeps, does the same for such
/// events.
pub(crate) fn elapsed_ms(start: &CudaEvent, end: &CudaEvent) -> std::result::Result<f32, DriverError> {
    unsafe extern "C" {
        fn cuEventElapsedTime(ms: *mut f32, start: sys::CUevent, end: sys::CUevent) -> sys::CUresult;
    }
    // Each binds its context to this thread and waits for its event.
    start.synchronize()?;
    end.synchronize()?;
    let mut ms = 0f32;
    // SAFETY: both events are live and complete; an event of another
    // context comes back as an error status.
    unsafe { cuEventElapsedTime(&mut ms, start.cu_event(), end.cu_event()) }.result()?;
    Ok(ms)
}

/// Whether `x` takes go-train's own kernels: f32 or bf16 on a CUDA device,
/// and `GO_TRAIN_CUDA_KERNELS` not set to 0.
pub fn applies(x: &Tensor) -> bool {
    kernels_enabled() && x.device().is_cuda() && matches!(x.dtype(), DType::F32 | DType::BF16)
}

/// Whether `GO_TRAIN_CUDA_KERNELS` leaves go-train's own kernels on.
pub fn kernels_enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| crate::nn::switches::env_switch("GO_TRAIN_CUDA_KERNELS", true))
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
    *DIVIDE.get_or_init(|| !crate::nn::switches::env_switch("GO_TRAIN_CHANNEL_WALK", true)) as i32
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

/// `n` values of type `T` on `dev` spread over [-1, 1) by `fill_scratch`
/// from `seed`: data to time kernels on.
#[cfg(feature = "cudnn")]
fn scratch<T: Activation>(dev: &CudaDevice, n: usize, seed: u32) -> Result<CudaSlice<T>> {
    // SAFETY: uninitialised, but `fill_scratch` writes all `n` values (a
    // grid-stride loop) before anything reads them.
    let out = unsafe { dev.alloc::<T>(n)? };
    let func = dev.get_or_load_custom_func(kernel::<T>("fill_scratch", "fill_scratch_bf16"), MODULE, ptx()?)?;
    let n64 = n as i64;
    let mut b = func.builder();
    b.arg(&out).arg(&n64).arg(&seed);
    // SAFETY: `out` holds n values.
    unsafe { b.launch(elementwise(n)) }.w()?;
    Ok(out)
}

/// The error of a GPU op given CPU tensors (candle asks every custom op for
/// a CPU version; these ops are only ever built for GPU tensors).
fn cpu_refused<T>(op: &str) -> Result<T> {
    candle_core::bail!("{op}: a GPU op, given CPU tensors")
}

/// Batch, channels and points of an NCHW layout.
fn dims(l: &Layout) -> Result<(usize, usize, usize)> {
    Channels::First.dims(l.shape())
}

/// Whether a kernel may move 16-byte packs of `T` over rows of `c` values
/// (the channels of a channels-last tensor; all the values for an
/// elementwise kernel): when `c` is a multiple of a pack's values. The
/// kernels check their buffers' alignment themselves (`aligned16` in
/// kernels.cu) and go a value at a time where a pack would straddle it.
fn packs<T>(c: usize) -> bool {
    c.is_multiple_of(16 / std::mem::size_of::<T>())
}

/// Values a thread of a channels-last kernel takes at a time.
fn pack_width<T>(packed: bool) -> usize {
    if packed {
        16 / std::mem::size_of::<T>()
    } else {
        1
    }
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

/// Blocks of `channel_partial_sums_nhwc` over `rows` rows of `c` channels
/// taken `width` at a time: at most [`REDUCE_BLOCKS`], each thread at least
/// 8 rows (a block takes THREADS / (c / width) rows a pass).
fn channels_last_blocks(rows: usize, c: usize, width: usize) -> usize {
    let groups = (c / width).max(1);
    let per_pass = if groups < THREADS as usize { THREADS as usize / groups } else { 1 };
    rows.div_ceil(per_pass * 8).clamp(1, REDUCE_BLOCKS)
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

/// How `channel_sums` reads its tensors: their layout, and for
/// channels-last whether in 16-byte packs ([`packs`]).
#[derive(Clone, Copy, Debug)]
struct Reading {
    channels: Channels,
    packed: bool,
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
    reading: Reading,
) -> Result<CudaSlice<f32>> {
    if reading.channels == Channels::Last {
        return channel_sums_last(dev, (x, dy, y), stats, eps, (n * p, c), what, relu, blend, reading.packed);
    }
    let splits = reduce_splits(n, c);
    // SAFETY: uninitialised, but `channel_partial_sums` runs one block for
    // each of the c·splits (channel, run) pairs, and thread 0 of each writes
    // that pair's two sums: all 2c·splits values.
    let partial = unsafe { dev.alloc::<f64>(2 * c * splits)? };
    // SAFETY: uninitialised, but `channel_finish` runs a thread a channel,
    // each writing that channel's two values: all 2c.
    let out = unsafe { dev.alloc::<f32>(2 * c)? };
    let fin = finishing(dev, &out, (n, p), blend)?;
    let (n, c32, p, what, relu, splits32) = (n as i32, c as i32, p as i32, what as i32, relu as i32, splits as i32);
    let func =
        dev.get_or_load_custom_func(kernel::<T>("channel_partial_sums", "channel_partial_sums_bf16"), MODULE, ptx()?)?;
    let mut b = func.builder();
    let null = 0u64;
    push_sums_inputs(&mut b, (x, dy, y), stats, &null, &eps, &partial);
    b.arg(&n).arg(&c32).arg(&p).arg(&what).arg(&relu);
    let divide = divide_each_value();
    b.arg(&splits32).arg(&divide).arg(&fin);
    // `splits` blocks of THREADS a channel, as the kernel's reduction expects.
    let cfg = LaunchConfig { grid_dim: ((c * splits) as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: the buffers hold n·c·p (x, dy, y), 2c (stats, read only for
    // the gradient sums, which pass it) and 2c·splits (partial) values.
    unsafe { b.launch(cfg) }.w()?;
    if fin.done == 0 {
        finish_channel_sums(dev, &partial, &fin, c32, what, splits32)?;
    }
    Ok(out)
}

/// The arguments the partial-sums kernels begin with: x, dy, y, the
/// statistics (`null`, a null pointer, where the kernel reads none), eps
/// and the partial sums.
fn push_sums_inputs<'a, T: Activation>(
    b: &mut LaunchArgs<'a>,
    (x, dy, y): (&'a CudaView<T>, &'a CudaView<T>, &'a CudaView<T>),
    stats: Option<&'a CudaView<f32>>,
    null: &'a u64,
    eps: &'a f32,
    partial: &'a CudaSlice<f64>,
) {
    b.arg(x).arg(dy).arg(y);
    match stats {
        Some(stats) => b.arg(stats),
        None => b.arg(null),
    };
    b.arg(eps).arg(partial);
}

/// `Finish` of `kernels.cu`: where a channel's partial sums end up, `out`
/// (2c) and, for the moments, `blend`'s running averages; the count of
/// values a channel has (n·p); and `done`, the address of the device's
/// ticket counter when the partial-sums kernel's last block finishes the
/// sums itself ([`Fused::Sums`]), else 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Finish {
    out: u64,
    avg_mean: u64,
    avg_var: u64,
    done: u64,
    n: i32,
    p: i32,
    keep: f32,
    take_mean: f32,
    take_var: f32,
    blend: i32,
}

// SAFETY: plain data laid out as `Finish` in kernels.cu (four pointers, six
// 32-bit values), passed by value.
unsafe impl DeviceRepr for Finish {}

/// How sums of (n, p) values a channel finish into `out`, folded into
/// `blend`'s running averages (for the moments).
fn finishing(
    dev: &CudaDevice,
    out: &CudaSlice<f32>,
    (n, p): (usize, usize),
    blend: Option<RunningBlend>,
) -> Result<Finish> {
    let too_many = || candle_core::Error::Msg(format!("batch norm: {n}·{p} values a channel"));
    let r = blend.unwrap_or(RunningBlend { mean: 0, var: 0, keep: 0.0, take_mean: 0.0, take_var: 0.0 });
    let stream = dev.cuda_stream();
    let (out, _record) = out.device_ptr(&stream);
    let done = if Fused::Sums.enabled() { ticket_counter(dev)? } else { 0 };
    Ok(Finish {
        out,
        avg_mean: r.mean,
        avg_var: r.var,
        done,
        n: i32::try_from(n).map_err(|_| too_many())?,
        p: i32::try_from(p).map_err(|_| too_many())?,
        keep: r.keep,
        take_mean: r.take_mean,
        take_var: r.take_var,
        blend: blend.is_some() as i32,
    })
}

thread_local! {
    /// Each device's ticket counter for the last block of a partial-sums
    /// kernel: zeroed once, and set back to 0 by the block that finishes.
    /// Kernels on a device's one stream never overlap, so one serves all.
    static TICKETS: std::cell::RefCell<std::collections::HashMap<DeviceId, CudaSlice<u32>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The address of `dev`'s ticket counter (made on first use).
fn ticket_counter(dev: &CudaDevice) -> Result<u64> {
    TICKETS.with(|t| {
        let mut t = t.borrow_mut();
        let counter = match t.entry(dev.id()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(dev.cuda_stream().alloc_zeros::<u32>(1)?),
        };
        let stream = dev.cuda_stream();
        let (address, _record) = counter.device_ptr(&stream);
        Ok(address)
    })
}

/// `channel_finish`: `fin.out` (2c) from the partial sums of `splits` runs
/// a channel, folded into `fin`'s running averages.
fn finish_channel_sums(
    dev: &CudaDevice,
    partial: &CudaSlice<f64>,
    fin: &Finish,
    c: i32,
    what: i32,
    splits: i32,
) -> Result<()> {
    let func = dev.get_or_load_custom_func("channel_finish", MODULE, ptx()?)?;
    let blending = (fin.blend != 0 && what == Reduce::Moments as i32) as i32;
    let mut b = func.builder();
    b.arg(partial).arg(&fin.out).arg(&fin.n).arg(&c).arg(&fin.p).arg(&what).arg(&splits);
    b.arg(&fin.avg_mean).arg(&fin.avg_var).arg(&fin.keep).arg(&fin.take_mean).arg(&fin.take_var).arg(&blending);
    // SAFETY: one thread a channel reads its 2·splits partial sums and
    // writes its 2 values of out (2c) and, blending, of the running
    // averages (whose c values each the caller checked).
    unsafe { b.launch(elementwise(c as usize)) }.w()?;
    Ok(())
}

/// [`channel_sums`] over channels-last tensors of `rows` rows of `c`
/// channels (`channel_partial_sums_nhwc`, its last block finishing the sums
/// or `channel_finish` after it, as [`finishing`] says).
#[allow(clippy::too_many_arguments)]
fn channel_sums_last<T: Activation>(
    dev: &CudaDevice,
    (x, dy, y): (&CudaView<T>, &CudaView<T>, &CudaView<T>),
    stats: Option<&CudaView<f32>>,
    eps: f32,
    (rows, c): (usize, usize),
    what: Reduce,
    relu: bool,
    blend: Option<RunningBlend>,
    packed: bool,
) -> Result<CudaSlice<f32>> {
    let blocks = channels_last_blocks(rows, c, pack_width::<T>(packed));
    // SAFETY: uninitialised, but every block writes both sums of every
    // channel for its run of rows: all 2c·blocks values.
    let partial = unsafe { dev.alloc::<f64>(2 * c * blocks)? };
    // SAFETY: uninitialised, but `channel_finish` runs a thread a channel,
    // each writing that channel's two values: all 2c.
    let out = unsafe { dev.alloc::<f32>(2 * c)? };
    let fin = finishing(dev, &out, (rows, 1), blend)?;
    let name = kernel::<T>("channel_partial_sums_nhwc", "channel_partial_sums_nhwc_bf16");
    let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
    let (rows64, c32, what32, relu32, packed32) = (rows as i64, c as i32, what as i32, relu as i32, packed as i32);
    let mut b = func.builder();
    let null = 0u64;
    push_sums_inputs(&mut b, (x, dy, y), stats, &null, &eps, &partial);
    b.arg(&rows64).arg(&c32).arg(&what32).arg(&relu32).arg(&packed32).arg(&fin);
    let cfg = LaunchConfig { grid_dim: (blocks as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: x, dy and y hold rows·c values (c a multiple of a pack's when
    // packed), stats 2c (read only for the gradient
    // sums, which pass it), partial 2c·blocks.
    unsafe { b.launch(cfg) }.w()?;
    if fin.done == 0 {
        finish_channel_sums(dev, &partial, &fin, c32, what32, blocks as i32)?;
    }
    Ok(out)
}

/// [`Reduce::Sums`] or [`Reduce::Moments`] per channel of `x` in the
/// layout `channels`, as a (2, c) tensor, folded as well into `blend`'s
/// running averages when given (moments only); not differentiated.
fn channel_reduce(x: &Tensor, what: Reduce, blend: Option<RunningBlend>, channels: Channels) -> Result<Tensor> {
    x.detach().contiguous()?.apply_op1(ChannelReduce { what, blend, channels })
}

/// The op of [`channel_reduce`].
struct ChannelReduce {
    what: Reduce,
    blend: Option<RunningBlend>,
    channels: Channels,
}

impl CustomOp1 for ChannelReduce {
    fn name(&self) -> &'static str {
        "go-train-cuda-channel-sums"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, s: &CudaStorage, l: &Layout) -> Result<(CudaStorage, Shape)> {
        if self.what == Reduce::Gradient {
            candle_core::bail!("{}: the gradient sums need the batch norm's statistics", self.name());
        }
        let ChannelReduce { what, blend, channels } = *self;
        by_dtype(
            s.dtype(),
            self.name(),
            || what.run::<f32>(s, l, blend, channels),
            || what.run::<bf16>(s, l, blend, channels),
        )
    }
}

impl Reduce {
    /// The sums or moments of activations of type `T` in the layout
    /// `channels` (folded into `blend`'s running averages when given).
    fn run<T: Activation>(
        self,
        s: &CudaStorage,
        l: &Layout,
        blend: Option<RunningBlend>,
        channels: Channels,
    ) -> Result<(CudaStorage, Shape)> {
        let dev = s.device();
        let x = view_of::<T>(s, l, "input")?;
        let (n, c, p) = channels.dims(l.shape())?;
        let reading = Reading { channels, packed: channels == Channels::Last && packs::<T>(c) };
        let out = channel_sums(dev, (&x, &x, &x), None, 0.0, (n, c, p), self, false, blend, reading)?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), Shape::from((2, c))))
    }
}
