//! Counters of what a training step costs besides arithmetic: heap
//! allocations, candle tensors created, reads of device data to the host.
//! `go-train bench train` prints them per step, and a test holds the seed
//! policy net's step to a recorded budget, so that savings cannot silently
//! come back.
//!
//! - Allocations are counted by [`CountingAlloc`], a wrapper around the
//!   program's global allocator (the `go-train` binary wraps mimalloc; a
//!   test binary may wrap the system allocator). Without it they read 0.
//! - Candle tensors: candle numbers every tensor it creates (each op's
//!   result, views such as reshapes and narrows included) from one global
//!   counter; [`candle_tensors`] reads it. On a GPU each op that is not a
//!   view is at least one kernel launch.
//! - Host reads: go-train's training code reads device data through
//!   [`read_scalar`] and [`counted_host_read`], which count them. On a GPU
//!   each one waits for the device to finish its queue.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use candle_core::{DType, Device, Result, Tensor};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Whether a [`CountingAlloc`] is the global allocator.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Whether it counts now ([`count_allocations`]).
static COUNTING: AtomicBool = AtomicBool::new(false);
static HOST_READS: AtomicU64 = AtomicU64::new(0);

/// A global allocator that counts the allocations (and reallocations) it
/// passes on to `A`, and their bytes, while [`count_allocations`] is on:
/// `#[global_allocator] static A: CountingAlloc<mimalloc::MiMalloc> =
/// CountingAlloc(mimalloc::MiMalloc);`. Off, it costs one load of a flag
/// that is never written, so that programs that do not measure (SGF
/// reading makes millions of small allocations) pay nothing measurable.
pub struct CountingAlloc<A>(pub A);

impl<A> CountingAlloc<A> {
    fn count(&self, bytes: usize) {
        if COUNTING.load(Relaxed) {
            ALLOCATIONS.fetch_add(1, Relaxed);
            ALLOCATED_BYTES.fetch_add(bytes as u64, Relaxed);
        } else if !INSTALLED.load(Relaxed) {
            INSTALLED.store(true, Relaxed);
        }
    }
}

/// Turns the counting of allocations on or off (see [`CountingAlloc`]).
pub fn count_allocations(on: bool) {
    COUNTING.store(on, Relaxed);
}

// SAFETY: every call is passed on unchanged to `A`, itself a GlobalAlloc.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAlloc<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        self.0.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.count(layout.size());
        self.0.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.0.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.count(new_size);
        self.0.realloc(ptr, layout, new_size)
    }
}

/// Counts one read of device data to the host, for reads that go-train
/// makes other than through [`read_scalar`].
pub fn counted_host_read() {
    HOST_READS.fetch_add(1, Relaxed);
}

/// The value of a one-element tensor, read to the host and counted.
pub fn read_scalar(t: &Tensor) -> Result<f32> {
    counted_host_read();
    t.to_dtype(DType::F32)?.to_scalar::<f32>()
}

/// The number candle gives the next tensor it creates: how many it has
/// created so far, plus one. Creates (and counts) one tensor itself.
fn candle_tensors() -> u64 {
    // TensorId's only public view of its number is Debug: "TensorId(n)".
    let probe = Tensor::zeros((), DType::U8, &Device::Cpu).map(|t| format!("{:?}", t.id()));
    let digits = probe.unwrap_or_default().chars().filter(char::is_ascii_digit).collect::<String>();
    digits.parse().unwrap_or(0)
}

/// The counters at one moment; [`Counts::since`] gives what happened
/// between two.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Heap allocations while [`count_allocations`] was on (0 without
    /// [`CountingAlloc`]).
    pub allocations: u64,
    /// Bytes they asked for.
    pub allocated_bytes: u64,
    /// Candle tensors created: ops and views.
    pub tensors: u64,
    /// Reads of device data to the host through the counted paths.
    pub host_reads: u64,
}

impl Counts {
    /// The counters now. Taking them creates one tensor, which
    /// [`Counts::since`] leaves out, and allocates a little before
    /// reading the allocation counters.
    pub fn now() -> Counts {
        let tensors = candle_tensors();
        Counts {
            allocations: ALLOCATIONS.load(Relaxed),
            allocated_bytes: ALLOCATED_BYTES.load(Relaxed),
            tensors,
            host_reads: HOST_READS.load(Relaxed),
        }
    }

    /// What was counted from `earlier` to `self`.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            allocations: self.allocations - earlier.allocations,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            // The probe that read `self` is not the measured code's.
            tensors: (self.tensors - earlier.tensors).saturating_sub(1),
            host_reads: self.host_reads - earlier.host_reads,
        }
    }

    /// Whether allocations can be counted: a [`CountingAlloc`] is the
    /// global allocator (and has seen an allocation).
    pub fn allocations_counted() -> bool {
        INSTALLED.load(Relaxed)
    }
}

/// The GPU's time over a stretch of queued work, by CUDA events: set
/// against the host's time to queue the same work, it shows whether the
/// GPU or the host (launch overhead) limits a step. The stretch is also
/// the span a profiler records when started with collection off (`ncu
/// --profile-from-start off`: `scripts/gpu-run.sh profile`).
#[cfg(feature = "cuda")]
pub struct GpuTimer {
    stream: std::sync::Arc<candle_core::cuda_backend::cudarc::driver::CudaStream>,
    start: candle_core::cuda_backend::cudarc::driver::CudaEvent,
}

#[cfg(feature = "cuda")]
impl GpuTimer {
    const TIMED: Option<candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags> =
        Some(candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);

    /// Starts timing the work queued from now on, on a GPU (`None`
    /// elsewhere).
    pub fn start(device: &Device) -> Result<Option<GpuTimer>> {
        use candle_core::cuda_backend::WrapErr;
        let Ok(cuda) = device.as_cuda_device() else { return Ok(None) };
        let stream = cuda.cuda_stream();
        let start = stream.record_event(Self::TIMED).w()?;
        // Without a profiler attached this does nothing; its result tells
        // nothing either way.
        let _ = candle_core::cuda_backend::cudarc::driver::profiler_start();
        Ok(Some(GpuTimer { stream, start }))
    }

    /// Milliseconds the GPU took over the work queued since
    /// [`GpuTimer::start`]; waits for it to finish.
    pub fn stop(self) -> Result<f64> {
        use candle_core::cuda_backend::WrapErr;
        let end = self.stream.record_event(Self::TIMED).w()?;
        let _ = candle_core::cuda_backend::cudarc::driver::profiler_stop();
        Ok(crate::nn::cuda::elapsed_ms(&self.start, &end).w()? as f64)
    }
}

/// Without CUDA there is no GPU to time.
#[cfg(not(feature = "cuda"))]
pub struct GpuTimer;

#[cfg(not(feature = "cuda"))]
impl GpuTimer {
    /// Always `None`: this build has no GPU.
    pub fn start(_device: &Device) -> Result<Option<GpuTimer>> {
        Ok(None)
    }

    /// Never called: there is no timer to stop.
    pub fn stop(self) -> Result<f64> {
        Ok(0.0)
    }
}
