//! A step's inputs onto the GPU without waiting for it. A copy from
//! pageable memory first waits for everything the stream was given (CUDA's
//! rule for such copies): in a training loop that reads nothing back, that
//! was the one wait left each step, and the GPU idled while the next
//! step's copy and first launches came. From page-locked (pinned) memory a
//! copy is queued like a kernel. The planes travel as bits, a 32nd of their
//! f32 bytes, and one kernel unpacks them.

use std::sync::{Mutex, PoisonError};

use candle_core::cuda_backend::cudarc::driver::{
    result, CudaContext, CudaEvent, CudaSlice, DevicePtrMut, DeviceRepr, PinnedHostSlice, PushKernelArg,
};
use candle_core::cuda_backend::{CudaDevice, DeviceId, WrapErr};
use candle_core::{CudaStorage, Result};

use super::{divide_each_value, elementwise, ptx, MODULE};

/// Page-locked buffers used in turn. One is written again only once the
/// copy out of it is done (its event says when): with 8 and two or three
/// copies a step, the host waits only when the GPU is steps behind.
const SLOTS: usize = 8;

/// Pinned buffers grow to what a copy needs in steps of this many bytes.
const GROWTH: usize = 1 << 20;

/// A pinned buffer and the event recorded after the last copy out of it.
struct Slot {
    buffer: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

/// The buffers of one device, and the next to use.
struct Staging {
    device: DeviceId,
    slots: Vec<Slot>,
    next: usize,
}

/// Every device's buffers (a training process has one, tests a few).
static STAGING: Mutex<Vec<Staging>> = Mutex::new(Vec::new());

impl Staging {
    /// The next slot, holding at least `bytes`, its last copy finished.
    fn slot(&mut self, context: &std::sync::Arc<CudaContext>, bytes: usize) -> Result<&mut Slot> {
        if self.slots.len() < SLOTS {
            self.slots.push(Slot { buffer: pinned(context, bytes)?, copied: context.new_event(None).w()? });
            return Ok(self.slots.last_mut().expect("just pushed"));
        }
        let slot = &mut self.slots[self.next];
        self.next = (self.next + 1) % SLOTS;
        slot.copied.synchronize().w()?;
        if slot.buffer.len() < bytes {
            slot.buffer = pinned(context, bytes)?;
        }
        Ok(slot)
    }
}

/// A pinned buffer for at least `bytes`.
fn pinned(context: &std::sync::Arc<CudaContext>, bytes: usize) -> Result<PinnedHostSlice<u8>> {
    // SAFETY: uninitialised, but only the bytes a copy wrote are copied on.
    unsafe { context.alloc_pinned::<u8>(bytes.div_ceil(GROWTH).max(1) * GROWTH) }.w()
}

/// `data` in a new buffer on `dev`, copied through pinned memory: queued
/// behind the stream's work, the host not waiting for it.
pub fn to_device<T: DeviceRepr>(dev: &CudaDevice, data: &[T]) -> Result<CudaSlice<T>> {
    // SAFETY: uninitialised, but the copy below writes all of it.
    let mut out = unsafe { dev.alloc::<T>(data.len())? };
    copy_into(dev, data, &mut out)?;
    Ok(out)
}

/// `data` copied into the first values of `out` as [`to_device`] copies
/// it: queued behind the stream's work, the host not waiting.
pub fn copy_into<T: DeviceRepr>(dev: &CudaDevice, data: &[T], out: &mut CudaSlice<T>) -> Result<()> {
    let bytes = std::mem::size_of_val(data);
    if bytes == 0 {
        return Ok(());
    }
    if out.len() < data.len() {
        candle_core::bail!("a copy of {} values into a buffer of {}", data.len(), out.len());
    }
    let stream = dev.cuda_stream();
    if super::graph::capturing() {
        return copy_for_graph(dev, data, out);
    }
    let mut all = STAGING.lock().unwrap_or_else(PoisonError::into_inner);
    let index = match all.iter().position(|s| s.device == dev.id()) {
        Some(i) => i,
        None => {
            all.push(Staging { device: dev.id(), slots: Vec::new(), next: 0 });
            all.len() - 1
        }
    };
    let slot = match all[index].slot(stream.context(), bytes) {
        Ok(slot) => slot,
        Err(e) => {
            // Page-locked memory can be refused (a limit on locked memory):
            // the copy from pageable memory is slower, not wrong.
            static TOLD: std::sync::Once = std::sync::Once::new();
            TOLD.call_once(|| {
                crate::say!("go-train: no pinned memory for GPU copies ({e}); copying from pageable memory")
            });
            drop(all);
            stream.memcpy_htod(data, out).w()?;
            return Ok(());
        }
    };
    let host = &mut slot.buffer.as_mut_slice().w()?[..bytes];
    // SAFETY: `T: DeviceRepr` is plain data, which the GPU reads as bytes
    // anyway; `bytes` is the size of `data`.
    host.copy_from_slice(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) });
    {
        let (dst, _record) = out.device_ptr_mut(&stream);
        // SAFETY: `dst` holds `bytes` bytes (data.len() values of T), and
        // the host buffer is not written again before `copied` says the
        // copy is done.
        unsafe { result::memcpy_htod_async(dst, host, stream.cu_stream()) }.w()?;
    }
    slot.copied.record(&stream).w()?;
    Ok(())
}

/// [`to_device`] while a step is captured as a CUDA graph: every replay
/// copies from the same host buffer again, so it gets a pinned buffer of
/// its own that the graph keeps ([`super::graph`]), never written again.
fn copy_for_graph<T: DeviceRepr>(dev: &CudaDevice, data: &[T], out: &mut CudaSlice<T>) -> Result<()> {
    let stream = dev.cuda_stream();
    let bytes = std::mem::size_of_val(data);
    // SAFETY: uninitialised, but written in full below before any copy.
    let mut buffer = unsafe { stream.context().alloc_pinned::<u8>(bytes) }.w()?;
    let host = &mut buffer.as_mut_slice().w()?[..bytes];
    // SAFETY: as in `to_device`.
    host.copy_from_slice(unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) });
    {
        let (dst, _record) = out.device_ptr_mut(&stream);
        // SAFETY: `dst` holds `bytes` bytes; the buffer lives as long as
        // the graph that replays the copy.
        unsafe { result::memcpy_htod_async(dst, host, stream.cu_stream()) }.w()?;
    }
    super::graph::keep(buffer);
    Ok(())
}

/// Planes given as bits (`n_planes` planes of `points` points, each
/// `⌈points / 64⌉` words, point i at bit i % 64 of word i / 64) as
/// `n_planes · points` floats of 0 or 1 on `dev`.
pub fn planes_from_bits(dev: &CudaDevice, words: &[u64], n_planes: usize, points: usize) -> Result<CudaStorage> {
    let words_per_plane = points.div_ceil(64);
    if words.len() != n_planes * words_per_plane {
        candle_core::bail!("planes as bits: {} words for {n_planes} planes of {points} points", words.len());
    }
    let bits = to_device(dev, words)?;
    let total = n_planes * points;
    // SAFETY: uninitialised, but `unpack_bits` writes every one of the
    // n_planes · points values.
    let out = unsafe { dev.alloc::<f32>(total)? };
    let func = dev.get_or_load_custom_func("unpack_bits", MODULE, ptx()?)?;
    let (points32, wpp, planes64, divide) =
        (points as i32, words_per_plane as i32, n_planes as i64, divide_each_value());
    let mut b = func.builder();
    b.arg(&bits).arg(&out).arg(&points32).arg(&wpp).arg(&planes64).arg(&divide);
    // SAFETY: `bits` holds n_planes · words_per_plane words, `out`
    // n_planes · points floats.
    unsafe { b.launch(elementwise(total)) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}
