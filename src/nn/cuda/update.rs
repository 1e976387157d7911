//! The optimizers' updates on a GPU: every parameter of a net in one
//! launch (`sgd_tensors`, `adam_tensors` of `kernels.cu`), in place, where
//! candle's ops take 5 to 14 launches a parameter, each allocating its
//! result. The kernel finds each tensor through a table of addresses,
//! copied to the GPU without waiting ([`super::upload`]). The arithmetic is
//! the CPU's f32 arithmetic, to the bit.

use candle_core::cuda_backend::cudarc::driver::{CudaSlice, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{Result, Tensor};

use super::{address, elementwise, ptx, MODULE};

/// 64-bit words a tensor in the table (`TABLE_COLUMNS` in `kernels.cu`):
/// parameter, gradient, two state buffers, offset of its first value, two
/// numbers of its own, one spare.
const COLUMNS: usize = 8;

/// One parameter's buffers for a step: the parameter, its gradient and its
/// state (none for plain SGD, the momentum buffer, or Adam's two moments),
/// each contiguous f32 on the same GPU; and two numbers of its own as the
/// kernel takes them.
pub struct Row<'a> {
    pub w: &'a Tensor,
    pub g: &'a Tensor,
    pub state: [Option<&'a Tensor>; 2],
    pub own: [u32; 2],
}

/// The device of the rows, the table the kernels read, and the values in
/// all (each buffer of a row checked to hold as many as its parameter).
fn table(rows: &[Row]) -> Result<(CudaDevice, Vec<u64>, usize)> {
    let Some(first) = rows.first() else { candle_core::bail!("optimizer: a table of no parameter") };
    let dev = first.w.device().as_cuda_device()?.clone();
    let mut table = Vec::with_capacity(rows.len() * COLUMNS);
    let mut total = 0usize;
    for row in rows {
        let (w, n) = address(row.w, &dev)?;
        let mut line = [w, 0, 0, 0, total as u64, row.own[0] as u64, row.own[1] as u64, 0];
        for (k, t) in [Some(row.g), row.state[0], row.state[1]].into_iter().enumerate() {
            let Some(t) = t else { continue };
            let (address, m) = address(t, &dev)?;
            if m != n {
                candle_core::bail!("optimizer: a parameter, its gradient and its state differ in size");
            }
            line[1 + k] = address;
        }
        table.extend(line);
        total += n;
    }
    Ok((dev, table, total))
}

/// The rows' table on the GPU, with the number of rows and of values.
struct OnGpu {
    dev: CudaDevice,
    table: CudaSlice<u64>,
    count: i32,
    total: usize,
}

/// The rows as a kernel takes them; `None` when they hold no value (a
/// step where no parameter had a gradient).
fn on_gpu(rows: &[Row]) -> Result<Option<OnGpu>> {
    let Some((dev, table, total)) = nonempty_table(rows)? else { return Ok(None) };
    let table = super::upload::to_device(&dev, &table)?;
    Ok(Some(OnGpu { dev, table, count: rows.len() as i32, total }))
}

/// [`table`], or `None` when the rows hold no value.
fn nonempty_table(rows: &[Row]) -> Result<Option<(CudaDevice, Vec<u64>, usize)>> {
    if rows.is_empty() {
        return Ok(None);
    }
    let (dev, table, total) = table(rows)?;
    Ok((total > 0).then_some((dev, table, total)))
}

/// A weight decay as the kernels take it: (wd, has_wd).
fn decay_args(weight_decay: Option<f32>) -> (f32, i32) {
    (weight_decay.unwrap_or(0.0), weight_decay.is_some() as i32)
}

/// SGD over all `rows`: with `momentum`, `v ← μ·v + g'` (`v ← g'` where a
/// row's first number is 1: its first step), then `w ← w − lr·v`; without,
/// `w ← w − lr·g'`.
pub fn sgd(rows: &[Row], lr: f32, momentum: Option<f32>, weight_decay: Option<f32>) -> Result<()> {
    let Some(t) = on_gpu(rows)? else { return Ok(()) };
    let ((wd, has_wd), has_momentum, momentum) =
        (decay_args(weight_decay), momentum.is_some() as i32, momentum.unwrap_or(0.0));
    let func = t.dev.get_or_load_custom_func("sgd_tensors", MODULE, ptx()?)?;
    let total = t.total as i64;
    let mut b = func.builder();
    b.arg(&t.table).arg(&t.count).arg(&total).arg(&momentum).arg(&has_momentum).arg(&wd).arg(&has_wd).arg(&lr);
    // SAFETY: each row of the table holds the addresses of buffers of the
    // row's number of values (checked in `table`), which the caller keeps
    // alive: a GPU frees them in stream order, after the kernel.
    unsafe { b.launch(elementwise(t.total)) }.w()?;
    Ok(())
}

/// Adam's table in a buffer of its own, written before each step's kernel
/// reads it, so that the kernel of a step captured as a CUDA graph
/// (`super::graph`) reads the same address at every replay, where the
/// host writes each replay's step sizes first ([`KeptTable::replay`]).
#[derive(Default)]
pub struct KeptTable {
    device: Option<(CudaDevice, CudaSlice<u64>)>,
    /// The table of the step being captured: its addresses are those of
    /// every replay.
    captured: Option<Vec<u64>>,
}

impl KeptTable {
    /// Before a replay of the captured step: the captured table with each
    /// row's own numbers as `own` gives them (row by row), copied to the
    /// device behind the work already queued.
    pub fn replay(&mut self, mut own: impl FnMut(usize) -> [u32; 2]) -> Result<()> {
        let (Some(host), Some((dev, device))) = (self.captured.as_mut(), self.device.as_mut()) else {
            candle_core::bail!("optimizer: a replay with no captured step")
        };
        for (i, line) in host.chunks_exact_mut(COLUMNS).enumerate() {
            let [a, b] = own(i);
            (line[5], line[6]) = (a as u64, b as u64);
        }
        super::upload::copy_into(dev, host, device)
    }

    /// Forgets a captured step (its capture failed).
    pub fn forget_capture(&mut self) {
        self.captured = None;
    }
}

/// Adam over all `rows` (numbers of a row: its step size and
/// `1/√(1−β₂ᵗ)`, as f32 bits), its table in `kept`.
pub fn adam(
    rows: &[Row],
    (beta1, beta2): (f32, f32),
    (one_minus_beta1, one_minus_beta2): (f32, f32),
    eps: f32,
    weight_decay: Option<f32>,
    kept: &mut KeptTable,
) -> Result<()> {
    let Some((dev, table, total)) = nonempty_table(rows)? else { return Ok(()) };
    let capturing = super::graph::capturing();
    if kept.device.as_ref().is_none_or(|(_, d)| d.len() != table.len()) {
        if capturing {
            candle_core::bail!("Adam's table would be first made while a step is captured");
        }
        // SAFETY: uninitialised, but written below before the kernel.
        kept.device = Some((dev.clone(), unsafe { dev.alloc::<u64>(table.len())? }));
    }
    let (_, device) = kept.device.as_mut().expect("made above");
    let count = (table.len() / COLUMNS) as i32;
    if capturing {
        // Written before each launch instead (`KeptTable::replay`).
        kept.captured = Some(table);
    } else {
        super::upload::copy_into(&dev, &table, device)?;
    }
    let (wd, has_wd) = decay_args(weight_decay);
    let func = dev.get_or_load_custom_func("adam_tensors", MODULE, ptx()?)?;
    let total = total as i64;
    let mut b = func.builder();
    b.arg(&*device).arg(&count).arg(&total).arg(&beta1).arg(&one_minus_beta1).arg(&beta2).arg(&one_minus_beta2);
    b.arg(&wd).arg(&has_wd).arg(&eps);
    // SAFETY: as in `sgd`.
    unsafe { b.launch(elementwise(total as usize)) }.w()?;
    Ok(())
}
