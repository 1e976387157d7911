//! What a training step of the seed policy net costs besides arithmetic
//! (heap allocations, candle tensors, reads to the host), held to the
//! counts recorded here, so that savings cannot silently come back. The
//! counts are exact on the CPU (nothing in a step depends on timing); not
//! a timed test.
//!
//! The only test in its file: the allocation counter is global to the
//! process, and another test running beside it would be counted too.

use candle_core::{Device, Tensor};

use go_train::features::FeatureSet;
use go_train::nn::instruments::{self, CountingAlloc, Counts};
use go_train::nn::{Arch, Model, BOARD, MOVES};
use go_train::train::optim::OptimizerConfig;
use go_train::train::train_step;

#[global_allocator]
static ALLOCATOR: CountingAlloc<std::alloc::System> = CountingAlloc(std::alloc::System);

/// The recorded cost of one step (SGD with momentum, batch 100, 2
/// threads, the AVX-512 kernels), taking the counters included. When a
/// change lowers a count, lower it here to the new value (the test prints
/// the measured counts: `cargo test --test train_step_budget --
/// --nocapture`); raising one needs a reason in the commit that does it.
///
/// Before the in-place optimizer, the fused loss, the in-place running
/// averages and the masked batch-norm gradient: 1,742 allocations of 280.8
/// MB and 331 tensors; before the patched `Tensor::backward`
/// (vendor/README.md) stored first gradients without a zero-filled slot:
/// 823 allocations of 246.8 MB and 128 tensors. What is left is mostly the
/// activations and their gradients.
const BUDGET: Counts = Counts { allocations: 483, allocated_bytes: 129_878_265, tensors: 60, host_reads: 0 };

const BATCH: usize = 100;

#[test]
fn a_policy_training_step_stays_within_its_recorded_budget() {
    if std::env::var("GO_TRAIN_TEST_DEVICE").is_ok_and(|d| d != "cpu") {
        eprintln!("SKIPPED: the budget is the CPU's (GO_TRAIN_TEST_DEVICE is set)");
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("SKIPPED: the budget is that of the AVX-512 kernels, which this CPU lacks");
        return;
    }
    // Kernels split the batch into one share per thread; fix their number.
    go_train::nn::init_threads(Some(2)).expect("thread pool");
    let dev = Device::Cpu;
    let model = Model::new(Arch::Policy, FeatureSet::Seed, &dev, 1).unwrap();
    let mut opt = OptimizerConfig::sgd(0.01, 0.9).build(model.parameters());
    let planes = FeatureSet::Seed.planes();
    let data: Vec<f32> = (0..BATCH * planes * BOARD * BOARD).map(|i| ((i * 7919) % 10 < 3) as u8 as f32).collect();
    let x = Tensor::from_vec(data, (BATCH, planes, BOARD, BOARD), &dev).unwrap();
    let y =
        Tensor::from_vec((0..BATCH as u32).map(|i| i * 37 % MOVES as u32).collect::<Vec<_>>(), BATCH, &dev).unwrap();
    // The first steps allocate what later ones reuse (optimizer state,
    // per-thread scratch buffers).
    for _ in 0..3 {
        train_step(&model, opt.as_mut(), &x, &y, None).unwrap();
    }
    // The largest of 3 steps: each must fit the budget.
    let largest_step = |opt: &mut dyn go_train::train::optim::Optimizer| {
        let mut counts = Counts::default();
        for _ in 0..3 {
            instruments::count_allocations(true);
            let before = Counts::now();
            let loss = train_step(&model, opt, &x, &y, None).unwrap();
            let step = Counts::now().since(&before);
            instruments::count_allocations(false);
            assert!(loss.to_scalar::<f32>().unwrap().is_finite());
            counts = Counts {
                allocations: counts.allocations.max(step.allocations),
                allocated_bytes: counts.allocated_bytes.max(step.allocated_bytes),
                tensors: counts.tensors.max(step.tensors),
                host_reads: counts.host_reads.max(step.host_reads),
            };
        }
        counts
    };
    let counts = largest_step(opt.as_mut());
    assert!(Counts::allocations_counted(), "the counting allocator is not installed");
    eprintln!("one step: {counts:?}");
    let over = counts.allocations > BUDGET.allocations
        || counts.allocated_bytes > BUDGET.allocated_bytes
        || counts.tensors > BUDGET.tensors
        || counts.host_reads > BUDGET.host_reads;
    assert!(!over, "a training step costs more than its budget:\n  measured {counts:?}\n  budget   {BUDGET:?}");

    // The switch of the patched backward pass (`GO_TRAIN_FUSED_GRADS=0`)
    // brings candle's zero-filled gradient slots back: a slot and a sum
    // for every gradient, and the budget no longer holds.
    candle_core::backprop::set_first_gradient_stored(false);
    let zero_filled = largest_step(opt.as_mut());
    candle_core::backprop::set_first_gradient_stored(true);
    eprintln!("one step with zero-filled gradient slots: {zero_filled:?}");
    assert!(
        zero_filled.tensors > counts.tensors + 50 && zero_filled.allocated_bytes > counts.allocated_bytes + 100_000_000,
        "zero-filled slots: {zero_filled:?}, stored first gradients: {counts:?}"
    );
}
