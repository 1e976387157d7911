//! The convolution passes through cuDNN's graph (backend) API, whose
//! engines PyTorch reaches and the legacy API does not. On 2026-11-28's
//! profile (docs/results/gpu.md) the legacy API's best forward kernel
//! for the 10×128 net at batch 100 took 1.2 ms a step where PyTorch's,
//! another tile of the same family, took 0.7, and its data gradients
//! 1.6 ms against 1.0: the convolutions were the whole of the gap to
//! 1.5× PyTorch. Here each pass's operation graph is handed to cuDNN's
//! heuristics, every engine configuration they offer is made into an
//! execution plan, and the fastest is kept, as PyTorch's `cudnn.benchmark`
//! does. Off unless `GO_TRAIN_CUDNN_ENGINES=1`: it has not yet run on a GPU.
//!
//! cudarc wraps only the legacy API and keeps its cuDNN handle private,
//! so the descriptors and a handle of this module's own are built here.

use std::ffi::c_void;
use std::rc::Rc;

use candle_core::cuda_backend::cudarc::cudnn::result::CudnnError;
use candle_core::cuda_backend::cudarc::cudnn::sys as ffi;
use candle_core::cuda_backend::cudarc::driver::CudaStream;
use candle_core::Result;

use ffi::cudnnBackendAttributeName_t as Attr;
use ffi::cudnnBackendAttributeType_t as Ty;
use ffi::cudnnBackendDescriptorType_t as Kind;

use super::{Geometry, Pass};

/// Whether convolutions go through cuDNN's engines (`GO_TRAIN_CUDNN_ENGINES=1`).
pub(super) fn enabled() -> bool {
    #[cfg(test)]
    if let Some(on) = FORCED.with(|f| f.get()) {
        return on;
    }
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| crate::nn::switches::env_switch("GO_TRAIN_CUDNN_ENGINES", false))
}

#[cfg(test)]
thread_local! {
    static FORCED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the engines on or off: how a GPU test compares them with
/// the legacy API.
#[cfg(test)]
pub(super) fn with_engines<R>(on: bool, f: impl FnOnce() -> R) -> R {
    crate::nn::switches::with_override(&FORCED, on, f)
}

/// The bytes every buffer handed to an engine is aligned to: candle's
/// allocations are, and the tensor cores' kernels load 16 bytes at a time.
pub(super) const ALIGNMENT: u64 = 16;

/// The unique ids of a pass's three tensors in its variant pack: the
/// input, the kernel and the output of the forward pass, whatever the
/// pass computes from them.
const X: i64 = 1;
const W: i64 = 2;
const Y: i64 = 3;

fn check(status: ffi::cudnnStatus_t) -> std::result::Result<(), CudnnError> {
    match status {
        ffi::cudnnStatus_t::CUDNN_STATUS_SUCCESS => Ok(()),
        e => Err(CudnnError(e)),
    }
}

/// The error of building `what`, naming it.
fn building(what: &str, e: CudnnError) -> candle_core::Error {
    candle_core::Error::Msg(format!("cuDNN's graph API: {what}: {e:?}"))
}

/// A backend descriptor, destroyed with it.
struct Desc(ffi::cudnnBackendDescriptor_t);

impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by `cudnnBackendCreateDescriptor`, destroyed once.
        unsafe { ffi::cudnnBackendDestroyDescriptor(self.0) };
    }
}

impl Desc {
    fn new(kind: Kind) -> std::result::Result<Desc, CudnnError> {
        let mut d: ffi::cudnnBackendDescriptor_t = std::ptr::null_mut();
        // SAFETY: writes one descriptor into `d`.
        check(unsafe { ffi::cudnnBackendCreateDescriptor(kind, &mut d) })?;
        Ok(Desc(d))
    }

    /// Sets attribute `name` to `values`, of cuDNN's type `ty`.
    fn set<T>(&self, name: Attr, ty: Ty, values: &[T]) -> std::result::Result<(), CudnnError> {
        // SAFETY: `values` holds `len` elements of the type `ty` names
        // (each caller pairs them), read during the call only.
        check(unsafe {
            ffi::cudnnBackendSetAttribute(self.0, name, ty, values.len() as i64, values.as_ptr() as *const c_void)
        })
    }

    /// Sets attribute `name` to the descriptors `ds`.
    fn set_descs(&self, name: Attr, ds: &[&Desc]) -> std::result::Result<(), CudnnError> {
        let raw: Vec<ffi::cudnnBackendDescriptor_t> = ds.iter().map(|d| d.0).collect();
        self.set(name, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw)
    }

    fn finalize(self) -> std::result::Result<Desc, CudnnError> {
        // SAFETY: a descriptor of this module, its attributes set.
        check(unsafe { ffi::cudnnBackendFinalize(self.0) })?;
        Ok(self)
    }

    /// Up to `out.len()` values of attribute `name` into `out`; how many
    /// it held.
    fn get<T>(&self, name: Attr, ty: Ty, out: &mut [T]) -> std::result::Result<usize, CudnnError> {
        let mut n = 0i64;
        // SAFETY: `out` has room for the `len` elements of type `ty` asked for.
        check(unsafe {
            ffi::cudnnBackendGetAttribute(self.0, name, ty, out.len() as i64, &mut n, out.as_mut_ptr() as *mut c_void)
        })?;
        Ok(n as usize)
    }
}

/// A cuDNN handle of this module's own, on the device's stream.
pub(super) struct Handle(ffi::cudnnHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by `cudnnCreate`, destroyed once.
        unsafe { ffi::cudnnDestroy(self.0) };
    }
}

impl Handle {
    pub(super) fn new(stream: &CudaStream) -> Result<Handle> {
        let mut h: ffi::cudnnHandle_t = std::ptr::null_mut();
        // SAFETY: writes one handle into `h`.
        check(unsafe { ffi::cudnnCreate(&mut h) }).map_err(|e| building("a handle", e))?;
        let handle = Handle(h);
        // SAFETY: the stream outlives the handle: both live as long as the
        // device's state on this thread.
        check(unsafe { ffi::cudnnSetStream(h, stream.cu_stream() as ffi::cudaStream_t) })
            .map_err(|e| building("the stream", e))?;
        Ok(handle)
    }
}

/// One execution plan for one pass of one geometry, ready to run, with
/// the descriptors it was built from (kept alive beside it, as cuDNN's
/// own frontend keeps them).
pub(super) struct Engine {
    plan: Desc,
    workspace: usize,
    _graph: Rc<Vec<Desc>>,
    _config: Desc,
}

impl Engine {
    /// The workspace bytes it needs.
    pub(super) fn workspace(&self) -> usize {
        self.workspace
    }

    /// Runs the pass on `handle`'s stream: `ptrs` are the device addresses
    /// of the forward pass's input, kernel and output (the pass reads two
    /// and writes the third), `workspace` of at least
    /// [`Engine::workspace`] bytes (0 when it needs none).
    ///
    /// # Safety
    /// The buffers hold the geometry's sizes, of the plan's data type, and
    /// are [`ALIGNMENT`]-aligned; they stay alive until the stream has run
    /// the pass.
    pub(super) unsafe fn run(
        &self,
        handle: &Handle,
        ptrs: [u64; 3],
        workspace: u64,
    ) -> std::result::Result<(), CudnnError> {
        let pack = Desc::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, Ty::CUDNN_TYPE_INT64, &[X, W, Y])?;
        let data: [*mut c_void; 3] = ptrs.map(|p| p as *mut c_void);
        pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, Ty::CUDNN_TYPE_VOID_PTR, &data)?;
        let space: [*mut c_void; 1] = [workspace as *mut c_void];
        pack.set(Attr::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, Ty::CUDNN_TYPE_VOID_PTR, &space)?;
        let pack = pack.finalize()?;
        check(ffi::cudnnBackendExecute(handle.0, self.plan.0, pack.0))
    }
}

/// A tensor descriptor: `dims` in NCHW order (a kernel's as c_out, c_in,
/// k, k), strided for the layout, of data type `data`.
fn tensor(
    uid: i64,
    dims: [usize; 4],
    channels_last: bool,
    data: ffi::cudnnDataType_t,
) -> std::result::Result<Desc, CudnnError> {
    let [n, c, h, w] = dims.map(|d| d as i64);
    let strides = if channels_last { [h * w * c, 1, w * c, c] } else { [c * h * w, h * w, w, 1] };
    let t = Desc::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
    t.set(Attr::CUDNN_ATTR_TENSOR_DATA_TYPE, Ty::CUDNN_TYPE_DATA_TYPE, &[data])?;
    t.set(Attr::CUDNN_ATTR_TENSOR_DIMENSIONS, Ty::CUDNN_TYPE_INT64, &[n, c, h, w])?;
    t.set(Attr::CUDNN_ATTR_TENSOR_STRIDES, Ty::CUDNN_TYPE_INT64, &strides)?;
    t.set(Attr::CUDNN_ATTR_TENSOR_UNIQUE_ID, Ty::CUDNN_TYPE_INT64, &[uid])?;
    t.set(Attr::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, Ty::CUDNN_TYPE_INT64, &[ALIGNMENT as i64])?;
    t.finalize()
}

/// The operation graph of `pass` on `g` with data of type `data`: its
/// descriptors, the graph last.
fn operation_graph(
    handle: &Handle,
    g: &Geometry,
    pass: Pass,
    data: ffi::cudnnDataType_t,
) -> std::result::Result<Vec<Desc>, CudnnError> {
    let dims = |d: [i32; 4]| d.map(|v| v as usize);
    let x = tensor(X, dims(g.x_dims()), g.channels_last, data)?;
    let w = tensor(W, dims(g.w_dims()), g.channels_last, data)?;
    let y = tensor(Y, dims(g.y_dims()), g.channels_last, data)?;
    let pad = (g.k / 2) as i64;
    let conv = Desc::new(Kind::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
    conv.set(
        Attr::CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
        Ty::CUDNN_TYPE_DATA_TYPE,
        &[ffi::cudnnDataType_t::CUDNN_DATA_FLOAT],
    )?;
    conv.set(
        Attr::CUDNN_ATTR_CONVOLUTION_CONV_MODE,
        Ty::CUDNN_TYPE_CONVOLUTION_MODE,
        &[ffi::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION],
    )?;
    conv.set(Attr::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, Ty::CUDNN_TYPE_INT64, &[2i64])?;
    conv.set(Attr::CUDNN_ATTR_CONVOLUTION_DILATIONS, Ty::CUDNN_TYPE_INT64, &[1i64, 1])?;
    conv.set(Attr::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, Ty::CUDNN_TYPE_INT64, &[1i64, 1])?;
    conv.set(Attr::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, Ty::CUDNN_TYPE_INT64, &[pad, pad])?;
    conv.set(Attr::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, Ty::CUDNN_TYPE_INT64, &[pad, pad])?;
    let conv = conv.finalize()?;
    // The pass's attributes: (kind; x, w, y, the convolution, alpha, beta).
    let (kind, [ax, aw, ay, aconv, alpha, beta]) = match pass {
        Pass::Forward => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            [
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
            ],
        ),
        Pass::DataGrad => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            [
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
            ],
        ),
        Pass::FilterGrad { .. } => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
            [
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                Attr::CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
            ],
        ),
    };
    let op = Desc::new(kind)?;
    op.set_descs(ax, &[&x])?;
    op.set_descs(aw, &[&w])?;
    op.set_descs(ay, &[&y])?;
    op.set_descs(aconv, &[&conv])?;
    // beta 0: the output is written, not added to.
    op.set(alpha, Ty::CUDNN_TYPE_FLOAT, &[1f32])?;
    op.set(beta, Ty::CUDNN_TYPE_FLOAT, &[0f32])?;
    let op = op.finalize()?;
    let graph = Desc::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
    graph.set(Attr::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, Ty::CUDNN_TYPE_HANDLE, &[handle.0])?;
    graph.set_descs(Attr::CUDNN_ATTR_OPERATIONGRAPH_OPS, &[&op])?;
    let graph = graph.finalize()?;
    Ok(vec![x, w, y, conv, op, graph])
}

/// Whether an engine configuration's numerical notes suit the
/// precision: never one that rounds f32 inputs down to a 16-bit type
/// (PyTorch filters them out too), and in f32 none on the tensor cores
/// unless TF32 is allowed.
fn allowed(config: &Desc, g: &Geometry, bf16: bool) -> std::result::Result<bool, CudnnError> {
    let engine = Desc::new(Kind::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
    let mut raw = [engine.0];
    config.get(Attr::CUDNN_ATTR_ENGINECFG_ENGINE, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, &mut raw)?;
    use ffi::cudnnBackendNumericalNote_t as Note;
    // As many as there are kinds of note (as cuDNN's frontend asks), read
    // as integers: cuDNN may name notes newer than these bindings.
    let mut notes = vec![0u32; Note::CUDNN_NUMERICAL_NOTE_TYPE_COUNT as usize];
    let n = engine.get(Attr::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, Ty::CUDNN_TYPE_NUMERICAL_NOTE, &mut notes)?;
    let has = |note: Note| notes[..n.min(notes.len())].contains(&(note as u32));
    if has(Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) {
        return Ok(false);
    }
    Ok(bf16 || g.tf32 || !has(Note::CUDNN_NUMERICAL_NOTE_TENSOR_CORE))
}

/// Every execution plan cuDNN's heuristics (mode A) offer for `pass` on
/// `g`, in their order, that the precision allows and that builds.
pub(super) fn candidates(
    handle: &Handle,
    g: &Geometry,
    pass: Pass,
    data: ffi::cudnnDataType_t,
    bf16: bool,
) -> Result<Vec<Engine>> {
    let graph = Rc::new(operation_graph(handle, g, pass, data).map_err(|e| building("the operation graph", e))?);
    let heuristics = (|| {
        let heur = Desc::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
        heur.set_descs(Attr::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[graph.last().expect("the graph")])?;
        heur.set(
            Attr::CUDNN_ATTR_ENGINEHEUR_MODE,
            Ty::CUDNN_TYPE_HEUR_MODE,
            &[ffi::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A],
        )?;
        let heur = heur.finalize()?;
        let count = heur.get::<ffi::cudnnBackendDescriptor_t>(
            Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS,
            Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR,
            &mut [],
        )?;
        let configs: Vec<Desc> = (0..count)
            .map(|_| Desc::new(Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))
            .collect::<std::result::Result<_, _>>()?;
        let mut raw: Vec<ffi::cudnnBackendDescriptor_t> = configs.iter().map(|c| c.0).collect();
        let got = heur.get(Attr::CUDNN_ATTR_ENGINEHEUR_RESULTS, Ty::CUDNN_TYPE_BACKEND_DESCRIPTOR, &mut raw)?;
        Ok(configs.into_iter().take(got).collect::<Vec<_>>())
    })()
    .map_err(|e| building("the heuristics", e))?;
    let mut engines = Vec::new();
    for config in heuristics {
        if !allowed(&config, g, bf16).unwrap_or(false) {
            continue;
        }
        let built = (|| {
            let plan = Desc::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
            plan.set(Attr::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, Ty::CUDNN_TYPE_HANDLE, &[handle.0])?;
            plan.set_descs(Attr::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[&config])?;
            let plan = plan.finalize()?;
            let mut bytes = [0i64];
            plan.get(Attr::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, Ty::CUDNN_TYPE_INT64, &mut bytes)?;
            Ok::<_, CudnnError>((plan, bytes[0].max(0) as usize))
        })();
        // An engine the heuristics list may still refuse this geometry.
        if let Ok((plan, workspace)) = built {
            engines.push(Engine { plan, workspace, _graph: graph.clone(), _config: config });
        }
    }
    Ok(engines)
}
