//! A whole training step captured once as a CUDA graph and replayed: one
//! launch a step where the host otherwise queues several hundred kernels
//! (at batch 100 both go-train and PyTorch wait on that queueing).
//!
//! What a step must be for its replay to be the step again:
//! - every kernel argument the same each step: the weights, the
//!   optimizer's state and batch norm's running averages are updated in
//!   place ([`super::update`], [`super::norm`]), SGD's table of addresses
//!   is the same once every parameter has its momentum buffer, and Adam's
//!   step sizes, which change every step, are read from a table the host
//!   writes before each launch ([`super::update::KeptTable`]);
//! - every tensor made during the step is made by the graph: the driver
//!   gives allocations inside a capture addresses fixed for the graph's
//!   life (graph memory nodes), and what the step frees it frees;
//! - nothing read back to the host and nothing copied from host memory
//!   that changes: candle's shape-and-stride uploads come from its cache
//!   of them ([`HtodCache`]), filled by the eager steps before the
//!   capture, and go-train's own uploads ([`super::upload::to_device`])
//!   copy, while capturing, from pinned buffers that the graph keeps;
//! - everything that happens once (cuDNN's algorithms, NVRTC's modules,
//!   workspaces) done by the eager steps before.
//!
//! A step that breaks one of these fails its capture with the driver's or
//! candle's error, and the caller goes on step by step.
//! On by default since a training run with it kept its losses to the last
//! printed digit and trained 5% faster (docs/results/gpu.md, 2026-11-30);
//! `GO_TRAIN_CUDA_GRAPH=0` turns it off.

use std::cell::RefCell;
use std::sync::OnceLock;

use candle_core::cuda_backend::cudarc::driver::{sys, CudaGraph, PinnedHostSlice};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::Result;

/// Whether whole steps are captured (unless `GO_TRAIN_CUDA_GRAPH=0`).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::nn::switches::env_switch("GO_TRAIN_CUDA_GRAPH", true))
}

/// Why a net's training step cannot be replayed, whatever the optimizer:
/// with either switch off, batch norm's running averages become new
/// tensors every step, which a replay would read from memory it freed.
pub fn not_replayable() -> Option<&'static str> {
    if !crate::nn::switches::Fused::RunningStats.enabled() {
        return Some("GO_TRAIN_FUSED_BN_STATS=0 makes batch norm's running averages anew every step");
    }
    if !super::kernels_enabled() {
        return Some("GO_TRAIN_CUDA_KERNELS=0 makes batch norm's running averages anew every step");
    }
    None
}

thread_local! {
    /// While a capture runs on this thread: the pinned buffers its copies
    /// read from, which must outlive every replay.
    static KEPT: RefCell<Option<Vec<PinnedHostSlice<u8>>>> = const { RefCell::new(None) };
}

/// Whether a capture runs on this thread.
pub(crate) fn capturing() -> bool {
    KEPT.with(|kept| kept.borrow().is_some())
}

/// Keeps `buffer`, which a copy of the capture running on this thread
/// reads, for as long as the graph.
pub(crate) fn keep(buffer: PinnedHostSlice<u8>) {
    KEPT.with(|kept| match kept.borrow_mut().as_mut() {
        Some(list) => list.push(buffer),
        None => drop(buffer),
    })
}

/// candle's cache of small host-to-device copies (shapes and strides of
/// strided ops), on for this thread while it lives: every step before a
/// capture must run with it, so that the capture finds each copy there.
pub struct HtodCache(#[allow(dead_code)] Box<dyn std::any::Any>);

impl HtodCache {
    pub fn on(dev: &CudaDevice) -> HtodCache {
        HtodCache(Box::new(dev.enable_cuda_graph_htod_cache()))
    }
}

/// A captured step, replayed by [`StepGraph::launch`].
pub struct StepGraph {
    // Dropped first: the pinned buffers outlive the graph that reads them.
    graph: CudaGraph,
    _kept: Vec<PinnedHostSlice<u8>>,
}

impl StepGraph {
    /// Captures what `step` queues on `dev`'s stream (nothing runs), and
    /// returns the graph with what `step` returned: tensors made inside
    /// hold, after each [`StepGraph::launch`], that launch's values.
    pub fn capture<R, E: From<candle_core::Error>>(
        dev: &CudaDevice,
        step: impl FnOnce() -> std::result::Result<R, E>,
    ) -> std::result::Result<(StepGraph, R), E> {
        let stream = dev.cuda_stream();
        // Relaxed: pinned memory is allocated while capturing, which the
        // default mode refuses as a call that may synchronise.
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).w()?;
        KEPT.with(|kept| *kept.borrow_mut() = Some(Vec::new()));
        let stepped = step();
        let kept = KEPT.with(|kept| kept.borrow_mut().take()).unwrap_or_default();
        // The capture ends whatever the step did, so that the stream works
        // on; tensors the step made and kept still hold graph memory.
        // Auto-free: memory the step leaves allocated (its outputs) is
        // freed and given again at the same address by the next launch.
        let flags = sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        let ended = stream.end_capture(flags);
        let out = stepped?;
        let Some(graph) = ended.w()? else {
            Err(candle_core::Error::Msg("CUDA graph: the step queued nothing".into()))?
        };
        graph.upload().w()?;
        Ok((StepGraph { graph, _kept: kept }, out))
    }

    /// Runs the captured step once more, queued on its stream.
    pub fn launch(&self) -> Result<()> {
        self.graph.launch().w()
    }

    /// The graph's nodes: its kernels, copies, allocations and frees.
    pub fn nodes(&self) -> Result<usize> {
        let mut count = 0usize;
        // SAFETY: the graph is live; with no array the driver only counts.
        unsafe { sys::cuGraphGetNodes(self.graph.cu_graph(), std::ptr::null_mut(), &mut count) }.result().w()?;
        Ok(count)
    }
}
