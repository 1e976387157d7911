//! Convolutions on a GPU through cuDNN, planned once per shape.
//!
//! candle's own `cudnn` path builds every descriptor, asks cuDNN for an
//! algorithm and allocates a zeroed workspace on each call, and has no
//! backward pass of its own: `nn::conv_grad` runs the kernel gradient
//! as a convolution whose "kernel" is the 19×19 board, the worst case for
//! cuDNN. docs/cuda.md measured that as slower than candle's im2col at batch
//! 100. Here a [`Plan`] per shape holds the descriptors and the three
//! algorithms (forward, data gradient, filter gradient: cuDNN's own
//! backward kernels), made on first use, and one workspace per device
//! grows to the largest any plan needs, as PyTorch's cuDNN bindings do.
//!
//! Same padding, stride 1, odd k, NCHW f32: the only convolutions the nets
//! have. cuDNN handles are not `Send`, so plans and workspaces live per
//! thread, as candle keeps its own handles.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::cudnn::safe::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, FilterDescriptor, TensorDescriptor,
};
use candle_core::cuda_backend::cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionFwdAlgo_t, cudnnConvolutionMode_t,
    cudnnMathType_t, cudnnTensorFormat_t,
};
use candle_core::cuda_backend::cudarc::driver::CudaSlice;
use candle_core::cuda_backend::{CudaDevice, DeviceId};
use candle_core::{CpuStorage, CudaStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};

use super::{cpu_refused, view};

/// Whether `x` and `w` can take this path: both f32 on a CUDA device, and
/// `GO_TRAIN_CUDNN_PLANS` not set to 0 (which leaves convolutions to
/// `nn::conv_grad`, for comparing the two on a GPU).
pub fn applies(x: &Tensor, w: &Tensor) -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let enabled = *ENABLED.get_or_init(|| std::env::var_os("GO_TRAIN_CUDNN_PLANS").is_none_or(|v| v != "0"));
    enabled && x.device().is_cuda() && x.dtype() == DType::F32 && w.dtype() == DType::F32
}

/// `conv2d(x, w)` with same padding and stride 1 (k odd), its gradients by
/// cuDNN's backward kernels.
pub fn conv2d_same(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&w.contiguous()?, Pass::Forward)
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

/// The shape of one convolution: batch, channels in and out, kernel side,
/// board, and whether TF32 is allowed (a plan's math mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Geometry {
    batch: usize,
    c_in: usize,
    c_out: usize,
    k: usize,
    h: usize,
    w: usize,
    tf32: bool,
}

impl Geometry {
    /// The geometry of `pass` from its two arguments' shapes.
    fn of(pass: Pass, a: &Shape, b: &Shape) -> Result<Geometry> {
        let tf32 = candle_core::cuda::gemm_reduced_precision_f32();
        let (g, kernel_fits) = match pass {
            Pass::Forward => {
                let ((batch, c_in, h, w), (c_out, wc_in, k, k2)) = (a.dims4()?, b.dims4()?);
                (Geometry { batch, c_in, c_out, k, h, w, tf32 }, wc_in == c_in && k == k2)
            }
            Pass::DataGrad => {
                let ((batch, dc_out, h, w), (c_out, c_in, k, k2)) = (a.dims4()?, b.dims4()?);
                (Geometry { batch, c_in, c_out, k, h, w, tf32 }, dc_out == c_out && k == k2)
            }
            Pass::FilterGrad { k } => {
                let ((batch, c_in, h, w), (db, c_out, dh, dw)) = (a.dims4()?, b.dims4()?);
                (Geometry { batch, c_in, c_out, k, h, w, tf32 }, db == batch && dh == h && dw == w)
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

/// Descriptors and algorithms for one geometry, with the workspace each
/// algorithm needs.
struct Plan {
    conv: ConvDescriptor<f32>,
    x: TensorDescriptor<f32>,
    w: FilterDescriptor<f32>,
    y: TensorDescriptor<f32>,
    forward: (cudnnConvolutionFwdAlgo_t, usize),
    data_grad: (cudnnConvolutionBwdDataAlgo_t, usize),
    filter_grad: (cudnnConvolutionBwdFilterAlgo_t, usize),
}

impl Plan {
    fn new(cudnn: &Arc<Cudnn>, g: &Geometry) -> Result<Plan> {
        let pad = (g.k / 2) as i32;
        let mut conv =
            cudnn.create_conv2d::<f32>([pad, pad], [1, 1], [1, 1], cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION)?;
        // DEFAULT lets cuDNN use TF32 tensor cores for f32, as PyTorch does
        // by default; FMA keeps full f32 (`--tf32 false`).
        conv.set_math_type(if g.tf32 { cudnnMathType_t::CUDNN_DEFAULT_MATH } else { cudnnMathType_t::CUDNN_FMA_MATH })?;
        let nchw = cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        let x = cudnn.create_4d_tensor::<f32>(nchw, g.x_dims())?;
        let y = cudnn.create_4d_tensor::<f32>(nchw, g.y_dims())?;
        let w = cudnn.create_4d_filter::<f32>(nchw, g.w_dims())?;
        let fwd = ConvForward { conv: &conv, x: &x, w: &w, y: &y };
        let forward = fwd.pick_algorithm()?;
        let forward = (forward, fwd.get_workspace_size(forward)?);
        let bwd_data = ConvBackwardData { conv: &conv, dx: &x, w: &w, dy: &y };
        let data_grad = bwd_data.pick_algorithm()?;
        let data_grad = (data_grad, bwd_data.get_workspace_size(data_grad)?);
        let bwd_filter = ConvBackwardFilter { conv: &conv, x: &x, dw: &w, dy: &y };
        let filter_grad = bwd_filter.pick_algorithm()?;
        let filter_grad = (filter_grad, bwd_filter.get_workspace_size(filter_grad)?);
        Ok(Plan { conv, x, w, y, forward, data_grad, filter_grad })
    }

    /// The workspace bytes `pass`'s algorithm needs.
    fn workspace(&self, pass: Pass) -> usize {
        match pass {
            Pass::Forward => self.forward.1,
            Pass::DataGrad => self.data_grad.1,
            Pass::FilterGrad { .. } => self.filter_grad.1,
        }
    }
}

/// What a thread keeps per device: its cuDNN handle, the plans made so
/// far and the workspace they share (all on the device's one stream, so
/// one workspace serves every call in turn).
struct DeviceState {
    cudnn: Arc<Cudnn>,
    plans: HashMap<Geometry, Plan>,
    workspace: Option<CudaSlice<u8>>,
}

thread_local! {
    static STATE: RefCell<HashMap<DeviceId, DeviceState>> = RefCell::new(HashMap::new());
}

/// Runs `f` with the plan for `g` on `dev` and a workspace of at least the
/// bytes `pass` needs, making either on first use.
fn with_plan<T>(
    dev: &CudaDevice,
    g: &Geometry,
    pass: Pass,
    f: impl FnOnce(&Plan, Option<&mut CudaSlice<u8>>) -> Result<T>,
) -> Result<T> {
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        let s = match state.entry(dev.id()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let cudnn = Cudnn::new(dev.cuda_stream())?;
                e.insert(DeviceState { cudnn, plans: HashMap::new(), workspace: None })
            }
        };
        if !s.plans.contains_key(g) {
            let plan = Plan::new(&s.cudnn, g)?;
            s.plans.insert(*g, plan);
        }
        let plan = &s.plans[g];
        let bytes = plan.workspace(pass);
        if bytes > s.workspace.as_ref().map_or(0, |w| w.len()) {
            // The old workspace is freed in stream order, after the calls
            // already queued on it.
            s.workspace = Some(dev.cuda_stream().alloc_zeros::<u8>(bytes)?);
        }
        let workspace = if bytes > 0 { s.workspace.as_mut() } else { None };
        f(plan, workspace)
    })
}

/// A shape from cuDNN's dimensions.
fn dims_shape(dims: [i32; 4]) -> Shape {
    Shape::from(&dims.map(|d| d as usize)[..])
}

impl CustomOp2 for Pass {
    fn name(&self) -> &'static str {
        match self {
            Pass::Forward => "go-train-cudnn-conv",
            Pass::DataGrad => "go-train-cudnn-conv-data-grad",
            Pass::FilterGrad { .. } => "go-train-cudnn-conv-filter-grad",
        }
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, a: &CudaStorage, al: &Layout, b: &CudaStorage, bl: &Layout) -> Result<(CudaStorage, Shape)> {
        let g = Geometry::of(*self, al.shape(), bl.shape())?;
        let dev = a.device();
        let (names, out_dims) = match self {
            Pass::Forward => (["input", "kernel"], g.y_dims()),
            Pass::DataGrad => (["output gradient", "kernel"], g.x_dims()),
            Pass::FilterGrad { .. } => (["input", "output gradient"], g.w_dims()),
        };
        let (a, b) = (view(a, al, names[0])?, view(b, bl, names[1])?);
        let mut out = unsafe { dev.alloc::<f32>(out_dims.iter().product::<i32>() as usize)? };
        let pass = *self;
        with_plan(dev, &g, pass, |p, ws| {
            let scale = (1.0, 0.0);
            // SAFETY: the plan's descriptors describe these buffers: its
            // geometry is the one their shapes gave.
            unsafe {
                match pass {
                    Pass::Forward => {
                        let op = ConvForward { conv: &p.conv, x: &p.x, w: &p.w, y: &p.y };
                        op.launch(p.forward.0, ws, scale, &a, &b, &mut out)
                    }
                    Pass::DataGrad => {
                        let op = ConvBackwardData { conv: &p.conv, dx: &p.x, w: &p.w, dy: &p.y };
                        op.launch(p.data_grad.0, ws, scale, &mut out, &b, &a)
                    }
                    Pass::FilterGrad { .. } => {
                        let op = ConvBackwardFilter { conv: &p.conv, x: &p.x, dw: &p.w, dy: &p.y };
                        op.launch(p.filter_grad.0, ws, scale, &a, &mut out, &b)
                    }
                }
            }?;
            Ok(())
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), dims_shape(out_dims)))
    }

    fn bwd(&self, x: &Tensor, w: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        if *self != Pass::Forward {
            candle_core::bail!("{}: no second derivative", self.name());
        }
        // Detached, as in conv_grad: a gradient that kept its graph would
        // chain every step's tensors to the next through the optimizer.
        let (x_in, w_in) = (x, w);
        let (x, w, dy) = (x.detach(), w.detach(), dy.detach().contiguous()?);
        let dx = if x_in.track_op() { Some(dy.apply_op2(&w, Pass::DataGrad)?) } else { None };
        let dw = if w_in.track_op() { Some(x.apply_op2(&dy, Pass::FilterGrad { k: w.dim(2)? })?) } else { None };
        Ok((dx, dw))
    }
}
