//! Convolutions on a GPU through cuDNN, planned once per shape.
//!
//! candle's own `cudnn` path builds every descriptor, asks cuDNN for an
//! algorithm and allocates a zeroed workspace on each call, and has no
//! backward pass of its own: `nn::conv_grad` runs the kernel gradient
//! as a convolution whose "kernel" is the 19×19 board, the worst case for
//! cuDNN. docs/cuda.md measured that as slower than candle's im2col at batch
//! 100. Here a [`Plan`] per shape holds the descriptors and the three
//! algorithms (forward, data gradient, filter gradient: cuDNN's own
//! backward kernels), each chosen on its first use, and one workspace per device
//! grows to the largest any plan needs, as PyTorch's cuDNN bindings do.
//!
//! Same padding, stride 1, odd k, f32 or bf16 (`precision = bf16`:
//! bf16 operands on the tensor cores, f32 sums): the only convolutions
//! the nets have. NCHW, or NHWC with the kernel (c_out, k, k, c_in)
//! ([`crate::nn::layout`]): cuDNN's own order, which it then need not
//! change to and from. cuDNN handles are not `Send`, so plans and workspaces live per
//! thread, as candle keeps its own handles.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::cudnn::safe::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, CudnnDataType, CudnnError,
    FilterDescriptor, TensorDescriptor,
};
use candle_core::cuda_backend::cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionFwdAlgo_t, cudnnConvolutionMode_t,
    cudnnMathType_t, cudnnTensorFormat_t,
};
use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use candle_core::cuda_backend::{CudaDevice, DeviceId};
use candle_core::{CpuStorage, CudaStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};
use half::bf16;

use super::{by_dtype, cpu_refused, view_of, Activation};
use crate::nn::layout::Channels;

mod engines;

/// Whether `x` and `w` can take this path: both f32 or both bf16 on a
/// CUDA device, and [`enabled`].
pub fn applies(x: &Tensor, w: &Tensor) -> bool {
    enabled() && x.device().is_cuda() && matches!(x.dtype(), DType::F32 | DType::BF16) && w.dtype() == x.dtype()
}

/// Unless `GO_TRAIN_CUDNN_PLANS` is 0, which leaves convolutions to
/// `nn::conv_grad`, for comparing the two on a GPU.
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| crate::nn::switches::env_switch("GO_TRAIN_CUDNN_PLANS", true))
}

/// An activation type as cuDNN convolves it, each with its own plans.
trait Element: Activation + CudnnDataType {
    /// (1, 0): a pass's (alpha, beta), its result written, not added.
    const SCALE: (Self, Self);
    /// The plans for this type among a device's.
    fn plans(plans: &mut Plans) -> &mut HashMap<Geometry, Plan<Self>>;
}

impl Element for f32 {
    const SCALE: (f32, f32) = (1.0, 0.0);
    fn plans(plans: &mut Plans) -> &mut HashMap<Geometry, Plan<f32>> {
        &mut plans.f32
    }
}

impl Element for bf16 {
    const SCALE: (bf16, bf16) = (bf16::ONE, bf16::ZERO);
    fn plans(plans: &mut Plans) -> &mut HashMap<Geometry, Plan<bf16>> {
        &mut plans.bf16
    }
}

/// `conv2d(x, w)` with same padding and stride 1 (k odd), its gradients by
/// cuDNN's backward kernels.
pub fn conv2d_same(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    conv2d_same_in(x, w, Channels::First)
}

/// The same in the layout `channels`: for [`Channels::Last`], `x` (batch,
/// h, w, c_in) and `w` (c_out, k, k, c_in), the result (batch, h, w,
/// c_out).
pub fn conv2d_same_in(x: &Tensor, w: &Tensor, channels: Channels) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&w.contiguous()?, ConvOp { pass: Pass::Forward, channels })
}

/// A pass as a candle op on tensors in the layout `channels`.
#[derive(Clone, Copy, Debug)]
struct ConvOp {
    pass: Pass,
    channels: Channels,
}

/// Which of a convolution's three products an op computes. Each is a
/// candle op of two tensors:
/// - `Forward`: (x, w) → y;
/// - `DataGrad`: (dy, w) → dx;
/// - `FilterGrad`: (x, dy) → dw, k×k (k is in neither argument's shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pass {
    Forward,
    DataGrad,
    FilterGrad { k: usize },
}

impl Pass {
    /// 0, 1, 2: where a plan keeps its engine.
    fn index(self) -> usize {
        match self {
            Pass::Forward => 0,
            Pass::DataGrad => 1,
            Pass::FilterGrad { .. } => 2,
        }
    }
}

/// The shape of one convolution: batch, channels in and out, kernel side,
/// board, whether TF32 is allowed (a plan's math mode), whether the
/// tensors are channels-last and whether cuDNN's graph API may run it
/// ([`engines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Geometry {
    batch: usize,
    c_in: usize,
    c_out: usize,
    k: usize,
    h: usize,
    w: usize,
    tf32: bool,
    channels_last: bool,
    engines: bool,
}

impl Geometry {
    /// The geometry of `pass` from its two arguments' shapes in the layout
    /// `channels`.
    fn of(pass: Pass, a: &Shape, b: &Shape, channels: Channels) -> Result<Geometry> {
        let tf32 = candle_core::cuda::gemm_reduced_precision_f32();
        let channels_last = channels == Channels::Last;
        let engines = engines::enabled();
        let (da, db) = (channels.nchw(a)?, channels.nchw(b)?);
        let (g, kernel_fits) = match pass {
            Pass::Forward => {
                let ((batch, c_in, h, w), (c_out, wc_in, k, k2)) = (da, db);
                (Geometry { batch, c_in, c_out, k, h, w, tf32, channels_last, engines }, wc_in == c_in && k == k2)
            }
            Pass::DataGrad => {
                let ((batch, dc_out, h, w), (c_out, c_in, k, k2)) = (da, db);
                (Geometry { batch, c_in, c_out, k, h, w, tf32, channels_last, engines }, dc_out == c_out && k == k2)
            }
            Pass::FilterGrad { k } => {
                let ((batch, c_in, h, w), (db, c_out, dh, dw)) = (da, db);
                (
                    Geometry { batch, c_in, c_out, k, h, w, tf32, channels_last, engines },
                    db == batch && dh == h && dw == w,
                )
            }
        };
        if !kernel_fits {
            candle_core::bail!("cuDNN convolution ({pass:?}): shapes {a:?} and {b:?} do not fit");
        }
        Ok(g)
    }

    fn x_dims(&self) -> [i32; 4] {
        [self.batch, self.c_in, self.h, self.w].map(|d| d as i32)
    }

    fn y_dims(&self) -> [i32; 4] {
        [self.batch, self.c_out, self.h, self.w].map(|d| d as i32)
    }

    fn w_dims(&self) -> [i32; 4] {
        [self.c_out, self.c_in, self.k, self.k].map(|d| d as i32)
    }
}

/// Descriptors and algorithms for one geometry of data of type `T`, with
/// the workspace each algorithm needs. Each pass's algorithm is chosen on
/// its first use: a net that only plays never times (or holds workspace
/// for) the backward passes. The convolution computes in f32 whatever `T`
/// (cuDNN's "pseudo" bf16 configuration: bf16 in and out, f32 sums).
struct Plan<T> {
    conv: ConvDescriptor<f32>,
    x: TensorDescriptor<T>,
    w: FilterDescriptor<T>,
    y: TensorDescriptor<T>,
    forward: Option<(cudnnConvolutionFwdAlgo_t, usize)>,
    data_grad: Option<(cudnnConvolutionBwdDataAlgo_t, usize)>,
    filter_grad: Option<(cudnnConvolutionBwdFilterAlgo_t, usize)>,
    /// Each pass's engine of cuDNN's graph API, by [`Pass::index`], when
    /// the geometry allows them: `None` until tried, then the fastest, if
    /// any builds and runs.
    engines: [Option<Option<engines::Engine>>; 3],
}

impl<T: Element> Plan<T> {
    /// The descriptors for `g`, no algorithm chosen yet.
    fn new(cudnn: &Arc<Cudnn>, g: &Geometry) -> Result<Plan<T>> {
        let pad = (g.k / 2) as i32;
        let mut conv =
            cudnn.create_conv2d::<f32>([pad, pad], [1, 1], [1, 1], cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION)?;
        // DEFAULT lets cuDNN use TF32 tensor cores for f32, as PyTorch does
        // by default; FMA keeps full f32 (`--tf32 false`); bf16 data is
        // what the tensor cores are for.
        let math = match (T::BF16, g.tf32) {
            (true, _) => cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
            (false, true) => cudnnMathType_t::CUDNN_DEFAULT_MATH,
            (false, false) => cudnnMathType_t::CUDNN_FMA_MATH,
        };
        conv.set_math_type(math)?;
        // The dimensions are given in NCHW order whatever the format.
        let format = if g.channels_last {
            cudnnTensorFormat_t::CUDNN_TENSOR_NHWC
        } else {
            cudnnTensorFormat_t::CUDNN_TENSOR_NCHW
        };
        let x = cudnn.create_4d_tensor::<T>(format, g.x_dims())?;
        let y = cudnn.create_4d_tensor::<T>(format, g.y_dims())?;
        let w = cudnn.create_4d_filter::<T>(format, g.w_dims())?;
        Ok(Plan { conv, x, w, y, forward: None, data_grad: None, filter_grad: None, engines: [None, None, None] })
    }

    /// Chooses `pass`'s engine of cuDNN's graph API if `handle` is given
    /// and it has tried none yet, then, if it has none, its legacy
    /// algorithm if it has none yet ([`chosen`]).
    fn choose(&mut self, dev: &CudaDevice, g: &Geometry, pass: Pass, handle: Option<&engines::Handle>) -> Result<()> {
        if let Some(handle) = handle {
            if self.engines[pass.index()].is_none() {
                self.engines[pass.index()] = Some(choose_engine::<T>(dev, g, pass, handle));
            }
            if self.engine(pass).is_some() {
                return Ok(());
            }
        }
        let scratch = || scratch::<T>(dev, g);
        let scale = T::SCALE;
        // SAFETY (each launch below): the scratch buffers have the sizes
        // the descriptors give.
        match pass {
            Pass::Forward if self.forward.is_none() => {
                let op = ConvForward { conv: &self.conv, x: &self.x, w: &self.w, y: &self.y };
                let timed = || {
                    let (xs, ws, mut ys) = scratch()?;
                    let launch =
                        |a, space: Option<&mut CudaSlice<u8>>| unsafe { op.launch(a, space, scale, &xs, &ws, &mut ys) };
                    Ok(fastest(dev, &FWD_ALGOS, |a| op.get_workspace_size(a), launch))
                };
                let chosen = chosen(timed, || op.pick_algorithm(), |a| op.get_workspace_size(a))?;
                self.forward = Some(chosen);
            }
            Pass::DataGrad if self.data_grad.is_none() => {
                let op = ConvBackwardData { conv: &self.conv, dx: &self.x, w: &self.w, dy: &self.y };
                let timed = || {
                    let (mut xs, ws, ys) = scratch()?;
                    let launch =
                        |a, space: Option<&mut CudaSlice<u8>>| unsafe { op.launch(a, space, scale, &mut xs, &ws, &ys) };
                    Ok(fastest(dev, &BWD_DATA_ALGOS, |a| op.get_workspace_size(a), launch))
                };
                let chosen = chosen(timed, || op.pick_algorithm(), |a| op.get_workspace_size(a))?;
                self.data_grad = Some(chosen);
            }
            Pass::FilterGrad { .. } if self.filter_grad.is_none() => {
                let op = ConvBackwardFilter { conv: &self.conv, x: &self.x, dw: &self.w, dy: &self.y };
                let timed = || {
                    let (xs, mut ws, ys) = scratch()?;
                    let launch =
                        |a, space: Option<&mut CudaSlice<u8>>| unsafe { op.launch(a, space, scale, &xs, &mut ws, &ys) };
                    Ok(fastest(dev, &BWD_FILTER_ALGOS, |a| op.get_workspace_size(a), launch))
                };
                let chosen = chosen(timed, || op.pick_algorithm(), |a| op.get_workspace_size(a))?;
                self.filter_grad = Some(chosen);
            }
            _ => {}
        }
        Ok(())
    }

    /// `pass`'s engine of cuDNN's graph API, if it has one.
    fn engine(&self, pass: Pass) -> Option<&engines::Engine> {
        self.engines[pass.index()].as_ref().and_then(|e| e.as_ref())
    }

    /// The workspace bytes `pass`'s engine or algorithm needs (none before
    /// it is chosen).
    fn workspace(&self, pass: Pass) -> usize {
        if let Some(e) = self.engine(pass) {
            return e.workspace();
        }
        match pass {
            Pass::Forward => self.forward.map_or(0, |a| a.1),
            Pass::DataGrad => self.data_grad.map_or(0, |a| a.1),
            Pass::FilterGrad { .. } => self.filter_grad.map_or(0, |a| a.1),
        }
    }
}

/// One pass's algorithm and its workspace bytes: the fastest as `timed`
/// finds it, or with `GO_TRAIN_CUDNN_BENCHMARK=0` (or when none runs)
/// cuDNN's heuristic choice, `pick`.
fn chosen<A: Copy>(
    timed: impl FnOnce() -> Result<Option<A>>,
    pick: impl FnOnce() -> std::result::Result<A, CudnnError>,
    workspace: impl Fn(A) -> std::result::Result<usize, CudnnError>,
) -> Result<(A, usize)> {
    let fastest = if benchmark() { timed()? } else { None };
    let algo = match fastest {
        Some(a) => a,
        None => pick()?,
    };
    Ok((algo, workspace(algo)?))
}

/// The error of a plan used before its pass's algorithm was chosen (which
/// [`with_plan`] always does first).
fn unchosen(pass: Pass) -> candle_core::Error {
    candle_core::Error::Msg(format!("cuDNN convolution ({pass:?}): no algorithm chosen"))
}

/// Whether plans time every algorithm and keep the fastest, as PyTorch's
/// `cudnn.benchmark` does, rather than take cuDNN's heuristic choice
/// unseen; `GO_TRAIN_CUDNN_BENCHMARK=0` takes the heuristic's. On by
/// default: on an H100 it trained the seed nets 1.05-2.2x as fast, the
/// residual nets alike within the noise, and ran every net's forward pass
/// at batch 1 1.5-2.1x as fast (docs/results/gpu.md).
fn benchmark() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| crate::nn::switches::env_switch("GO_TRAIN_CUDNN_BENCHMARK", true))
}

/// Workspace an algorithm may ask for when timed: PyTorch's limit is the
/// free memory; a fixed bound keeps a timing from crowding out training.
const BENCHMARK_WORKSPACE_LIMIT: usize = 1 << 30;

use cudnnConvolutionBwdDataAlgo_t as BwdData;
use cudnnConvolutionBwdFilterAlgo_t as BwdFilter;
use cudnnConvolutionFwdAlgo_t as Fwd;

const FWD_ALGOS: [Fwd; 8] = [
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_FFT,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
    Fwd::CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
];
const BWD_DATA_ALGOS: [BwdData; 6] = [
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
    BwdData::CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
];
const BWD_FILTER_ALGOS: [BwdFilter; 7] = [
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
    BwdFilter::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
];

/// The algorithm of `algos` that runs `launch` fastest on `dev`: each
/// that this geometry supports (its workspace size is given, within
/// [`BENCHMARK_WORKSPACE_LIMIT`], and a first run succeeds) is run once to
/// warm up, then three times back to back between two CUDA events, which
/// time the GPU's work alone: a wall clock around a synchronisation adds
/// the launch and the wait, tens of microseconds, as much as a whole
/// convolution of a small batch in play. `None` when none runs. cudarc's
/// safe API has no `cudnnFind…Ex` (its descriptors are private to it), so
/// the timing is done here with the launches it does offer.
fn fastest<A: Copy>(
    dev: &CudaDevice,
    algos: &[A],
    workspace: impl Fn(A) -> std::result::Result<usize, CudnnError>,
    mut launch: impl FnMut(A, Option<&mut CudaSlice<u8>>) -> std::result::Result<(), CudnnError>,
) -> Option<A> {
    const RUNS: u32 = 3;
    let stream = dev.cuda_stream();
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let mut best: Option<(A, f32)> = None;
    for &algo in algos {
        let Ok(bytes) = workspace(algo) else { continue };
        if bytes > BENCHMARK_WORKSPACE_LIMIT {
            continue;
        }
        let Ok(mut space) = stream.alloc_zeros::<u8>(bytes.max(1)) else { continue };
        let mut run = || launch(algo, (bytes > 0).then_some(&mut space)).is_ok();
        if !run() || stream.synchronize().is_err() {
            continue;
        }
        let Ok(start) = stream.record_event(timing) else { continue };
        if !(0..RUNS).all(|_| run()) {
            // A failed launch may leave work queued: let it finish first.
            let _ = stream.synchronize();
            continue;
        }
        let Ok(took) = stream.record_event(timing).and_then(|end| super::elapsed_ms(&start, &end)) else { continue };
        if best.is_none_or(|(_, t)| took < t) {
            best = Some((algo, took));
        }
    }
    best.map(|(algo, _)| algo)
}

/// `pass`'s fastest engine of cuDNN's graph API on `g` (with
/// `GO_TRAIN_CUDNN_BENCHMARK=0`, the heuristics' first), timed as
/// [`fastest`] times the legacy algorithms; `None` when none builds or
/// runs, said once on stderr when the graph API itself fails.
fn choose_engine<T: Element>(
    dev: &CudaDevice,
    g: &Geometry,
    pass: Pass,
    handle: &engines::Handle,
) -> Option<engines::Engine> {
    let mut candidates = match engines::candidates(handle, g, pass, T::DATA_TYPE, T::BF16) {
        Ok(c) => c,
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| crate::say!("warning: {e}; convolutions take the legacy API"));
            return None;
        }
    };
    if !benchmark() {
        return (!candidates.is_empty()).then(|| candidates.swap_remove(0));
    }
    let (xs, ws, ys) = scratch::<T>(dev, g).ok()?;
    let stream = dev.cuda_stream();
    let indices: Vec<usize> = (0..candidates.len()).collect();
    let best = fastest(
        dev,
        &indices,
        |i| Ok(candidates[i].workspace()),
        |i, space| {
            let (x, _x) = xs.device_ptr(&stream);
            let (w, _w) = ws.device_ptr(&stream);
            let (y, _y) = ys.device_ptr(&stream);
            let (space, _s) = match space {
                Some(s) => {
                    let (p, r) = s.device_ptr_mut(&stream);
                    (p, Some(r))
                }
                None => (0, None),
            };
            // SAFETY: the scratch buffers have the geometry's sizes and
            // are fresh allocations (aligned); the workspace has the
            // engine's bytes; all outlive the synchronisation `fastest`
            // waits for.
            unsafe { candidates[i].run(handle, [x, w, y], space) }
        },
    )?;
    Some(candidates.swap_remove(best))
}

/// Scratch buffers of `g`'s shapes (x, w, y) to time a pass on, filled
/// with values like a net's.
fn scratch<T: Element>(dev: &CudaDevice, g: &Geometry) -> Result<(CudaSlice<T>, CudaSlice<T>, CudaSlice<T>)> {
    let count = |dims: [i32; 4]| dims.iter().product::<i32>() as usize;
    Ok((
        super::scratch::<T>(dev, count(g.x_dims()), 1)?,
        super::scratch::<T>(dev, count(g.w_dims()), 2)?,
        super::scratch::<T>(dev, count(g.y_dims()), 3)?,
    ))
}

/// What a thread keeps per device: its cuDNN handles (cudarc's, and the
/// graph API's own once a plan asks for it), the plans made so far and the
/// workspace they share (all on the device's one stream, so one workspace
/// serves every call in turn).
struct DeviceState {
    // Fields drop in this order: the plans' descriptors before the
    // handles they were made with.
    plans: Plans,
    engines: Option<engines::Handle>,
    cudnn: Arc<Cudnn>,
    workspace: Option<CudaSlice<u8>>,
}

/// A device's plans made so far, by data type.
#[derive(Default)]
struct Plans {
    f32: HashMap<Geometry, Plan<f32>>,
    bf16: HashMap<Geometry, Plan<bf16>>,
}

thread_local! {
    static STATE: RefCell<HashMap<DeviceId, DeviceState>> = RefCell::new(HashMap::new());
}

/// Runs `f` with the plan for `g` on `dev`, the graph API's handle when
/// `g` allows its engines and the buffers are `aligned` to
/// [`engines::ALIGNMENT`], and a workspace of at least the bytes `pass`
/// needs, making each on first use.
fn with_plan<T: Element, R>(
    dev: &CudaDevice,
    g: &Geometry,
    pass: Pass,
    aligned: bool,
    f: impl FnOnce(&Plan<T>, Option<&engines::Handle>, Option<&mut CudaSlice<u8>>) -> Result<R>,
) -> Result<R> {
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        let s = match state.entry(dev.id()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let cudnn = Cudnn::new(dev.cuda_stream())?;
                e.insert(DeviceState { plans: Plans::default(), engines: None, cudnn, workspace: None })
            }
        };
        if g.engines && aligned && s.engines.is_none() {
            s.engines = Some(engines::Handle::new(&dev.cuda_stream())?);
        }
        let handle = if g.engines && aligned { s.engines.as_ref() } else { None };
        let plan = match T::plans(&mut s.plans).entry(*g) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Plan::new(&s.cudnn, g)?),
        };
        plan.choose(dev, g, pass, handle)?;
        let plan = &*plan;
        let bytes = plan.workspace(pass);
        if bytes > s.workspace.as_ref().map_or(0, |w| w.len()) {
            // The old workspace is freed in stream order, after the calls
            // already queued on it.
            s.workspace = Some(dev.cuda_stream().alloc_zeros::<u8>(bytes)?);
        }
        let workspace = if bytes > 0 { s.workspace.as_mut() } else { None };
        f(plan, handle, workspace)
    })
}

/// A shape from cuDNN's dimensions (NCHW order), in the layout `channels`.
fn dims_shape(dims: [i32; 4], channels: Channels) -> Shape {
    let [a, b, c, d] = dims.map(|d| d as usize);
    channels.shape((a, b, c, d))
}

impl CustomOp2 for ConvOp {
    fn name(&self) -> &'static str {
        match self.pass {
            Pass::Forward => "go-train-cudnn-conv",
            Pass::DataGrad => "go-train-cudnn-conv-data-grad",
            Pass::FilterGrad { .. } => "go-train-cudnn-conv-filter-grad",
        }
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, a: &CudaStorage, al: &Layout, b: &CudaStorage, bl: &Layout) -> Result<(CudaStorage, Shape)> {
        if a.dtype() != b.dtype() {
            candle_core::bail!("{}: {:?} and {:?} data, not one type", self.name(), a.dtype(), b.dtype());
        }
        let (a, b) = ((a, al), (b, bl));
        by_dtype(a.0.dtype(), self.name(), || self.run::<f32>(a, b), || self.run::<bf16>(a, b))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        if self.pass != Pass::Forward {
            candle_core::bail!("{}: no second derivative", self.name());
        }
        // Detached, as in conv_grad: a gradient that kept its graph would
        // chain every step's tensors to the next through the optimizer.
        let (x_in, w_in) = (x, w);
        let (x, w, dy) = (x.detach(), w.detach(), dy.detach().contiguous()?);
        let op = |pass| ConvOp { pass, channels: self.channels };
        let dx = if x_in.track_op() { Some(dy.apply_op2(&w, op(Pass::DataGrad))?) } else { None };
        let k = self.channels.nchw(w.shape())?.2;
        let dw = if w_in.track_op() { Some(x.apply_op2(&dy, op(Pass::FilterGrad { k }))?) } else { None };
        Ok((dx, dw))
    }
}

impl ConvOp {
    /// The pass on data of type `T`: `a` and `b` its arguments (see
    /// [`Pass`]).
    fn run<T: Element>(
        self,
        (a, al): (&CudaStorage, &Layout),
        (b, bl): (&CudaStorage, &Layout),
    ) -> Result<(CudaStorage, Shape)> {
        let ConvOp { pass, channels } = self;
        let g = Geometry::of(pass, al.shape(), bl.shape(), channels)?;
        let dev = a.device();
        let (names, out_dims) = match pass {
            Pass::Forward => (["input", "kernel"], g.y_dims()),
            Pass::DataGrad => (["output gradient", "kernel"], g.x_dims()),
            Pass::FilterGrad { .. } => (["input", "output gradient"], g.w_dims()),
        };
        let (a, b) = (view_of::<T>(a, al, names[0])?, view_of::<T>(b, bl, names[1])?);
        // SAFETY: uninitialised, but every pass below runs with beta = 0
        // (`T::SCALE`), so cuDNN writes the whole output without reading it.
        let mut out = unsafe { dev.alloc::<T>(out_dims.iter().product::<i32>() as usize)? };
        let stream = dev.cuda_stream();
        // The addresses alone, and only where the graph API may run: all
        // three buffers are used on this one stream, and the legacy path
        // takes them itself.
        let (pa, pb, pout) = if g.engines {
            (a.device_ptr(&stream).0, b.device_ptr(&stream).0, out.device_ptr(&stream).0)
        } else {
            (0, 0, 0)
        };
        let aligned = g.engines && [pa, pb, pout].iter().all(|p| p % engines::ALIGNMENT == 0);
        with_plan::<T, _>(dev, &g, pass, aligned, |p, handle, mut ws| {
            if let (Some(engine), Some(handle)) = (p.engine(pass), handle) {
                // The forward pass's (input, kernel, output) from the pass's
                // arguments and result.
                let ptrs = match pass {
                    Pass::Forward => [pa, pb, pout],
                    Pass::DataGrad => [pout, pb, pa],
                    Pass::FilterGrad { .. } => [pa, pout, pb],
                };
                let space = ws.as_mut().map_or(0, |w| w.device_ptr_mut(&stream).0);
                // SAFETY: the plan's geometry is the one the buffers'
                // shapes gave, they are aligned (checked above) and live
                // until the op's result is dropped, after the stream has
                // run it.
                return unsafe { engine.run(handle, ptrs, space) }
                    .map_err(|e| candle_core::Error::Msg(format!("cuDNN convolution ({pass:?}): {e:?}")));
            }
            let scale = T::SCALE;
            // SAFETY: the plan's descriptors describe these buffers: its
            // geometry is the one their shapes gave.
            unsafe {
                match pass {
                    Pass::Forward => {
                        let op = ConvForward { conv: &p.conv, x: &p.x, w: &p.w, y: &p.y };
                        op.launch(p.forward.ok_or_else(|| unchosen(pass))?.0, ws, scale, &a, &b, &mut out)
                    }
                    Pass::DataGrad => {
                        let op = ConvBackwardData { conv: &p.conv, dx: &p.x, w: &p.w, dy: &p.y };
                        op.launch(p.data_grad.ok_or_else(|| unchosen(pass))?.0, ws, scale, &mut out, &b, &a)
                    }
                    Pass::FilterGrad { .. } => {
                        let op = ConvBackwardFilter { conv: &p.conv, x: &p.x, dw: &p.w, dy: &p.y };
                        op.launch(p.filter_grad.ok_or_else(|| unchosen(pass))?.0, ws, scale, &a, &mut out, &b)
                    }
                }
            }?;
            Ok(())
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), dims_shape(out_dims, channels)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Var;

    /// The largest difference between `a` and `b` over the largest value.
    fn relative(a: &Tensor, b: &Tensor) -> f32 {
        let f = |t: &Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
        let (a, b) = (f(a), f(b));
        let diff = (&a - &b).unwrap().abs().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
        diff / a.abs().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap().max(1e-6)
    }

    /// On a GPU (`GO_TRAIN_TEST_DEVICE=cuda`), cuDNN's graph API gives the
    /// legacy API's output and both gradients, in f32 (TF32 off) and bf16,
    /// NCHW and channels-last; and every pass did run on an engine of its
    /// own, not on the legacy algorithm it falls back to.
    #[test]
    fn engines_give_the_legacy_apis_results() {
        let dev = crate::nn::test_device();
        if !dev.is_cuda() {
            crate::say!("skipped: cuDNN's engines need a GPU (GO_TRAIN_TEST_DEVICE=cuda)");
            return;
        }
        crate::nn::allow_tf32(false);
        let (n, c_in, c_out, k) = (4, 16, 32, 3);
        for dtype in [DType::F32, DType::BF16] {
            for channels in [Channels::First, Channels::Last] {
                let x = Tensor::randn(0f32, 1.0, channels.shape((n, c_in, 19, 19)), &dev).unwrap();
                let w = Tensor::randn(0f32, 0.1, channels.shape((c_out, c_in, k, k)), &dev).unwrap();
                let r = Tensor::randn(0f32, 1.0, channels.shape((n, c_out, 19, 19)), &dev).unwrap();
                let (x, w, r) = (x.to_dtype(dtype).unwrap(), w.to_dtype(dtype).unwrap(), r.to_dtype(dtype).unwrap());
                let run = |on| {
                    engines::with_engines(on, || {
                        let (xv, wv) = (Var::from_tensor(&x).unwrap(), Var::from_tensor(&w).unwrap());
                        let y = conv2d_same_in(xv.as_tensor(), wv.as_tensor(), channels).unwrap();
                        let loss = (&y * &r).unwrap().to_dtype(DType::F32).unwrap().sum_all().unwrap();
                        let grads = loss.backward().unwrap();
                        let g = |v: &Var| grads.get(v.as_tensor()).unwrap().clone();
                        let geometry = Geometry::of(Pass::Forward, x.shape(), w.shape(), channels).unwrap();
                        (y, g(&xv), g(&wv), geometry)
                    })
                };
                let (legacy, graph) = (run(false), run(true));
                let case = format!("{dtype:?} {channels:?}");
                assert!(graph.3.engines && !legacy.3.engines, "{case}: the switch reaches the geometry");
                let used = STATE.with(|s| {
                    let s = s.borrow();
                    let plans = &s.get(&dev.as_cuda_device().unwrap().id()).unwrap().plans;
                    let has = |engine: &dyn Fn(Pass) -> bool| {
                        [Pass::Forward, Pass::DataGrad, Pass::FilterGrad { k }].into_iter().all(engine)
                    };
                    match dtype {
                        DType::BF16 => plans.bf16.get(&graph.3).is_some_and(|p| has(&|pass| p.engine(pass).is_some())),
                        _ => plans.f32.get(&graph.3).is_some_and(|p| has(&|pass| p.engine(pass).is_some())),
                    }
                });
                assert!(used, "{case}: a pass fell back to the legacy API");
                let tol = if dtype == DType::F32 { 1e-4 } else { 2e-2 };
                for (what, a, b) in [("output", &legacy.0, &graph.0), ("input gradient", &legacy.1, &graph.1)] {
                    assert!(relative(a, b) < tol, "{case}: {what} differs by {}", relative(a, b));
                }
                assert!(
                    relative(&legacy.2, &graph.2) < tol,
                    "{case}: kernel gradient differs by {}",
                    relative(&legacy.2, &graph.2)
                );
            }
        }
    }
}
