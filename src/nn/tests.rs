use super::*;
use crate::features::{FeatureSet, PLANES};

/// A batch of planes where point 0 is occupied and the rest empty, with
/// other planes random-ish.
fn planes(batch: usize) -> Tensor {
    let mut data = vec![0f32; batch * PLANES * POINTS];
    for (i, v) in data.iter_mut().enumerate() {
        let (plane, point) = ((i / POINTS) % PLANES, i % POINTS);
        *v = match plane {
            EMPTY_PLANE => (point != 0) as u8 as f32,
            _ => ((i * 7919) % 10 < 3) as u8 as f32,
        };
    }
    Tensor::from_vec(data, (batch, PLANES, BOARD, BOARD), &Device::Cpu).unwrap()
}

fn names(model: &Model) -> Vec<String> {
    model.tensors().into_iter().map(|(n, _)| n).collect()
}

#[test]
fn seed_nets_use_pytorch_names_and_shapes() {
    let policy = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
    let mut expected = vec!["head.bias".to_string(), "head.weight".into(), "pass_logit".into()];
    for layer in ["bn0".to_string()].into_iter().chain((0..4).map(|i| format!("bns.{i}"))) {
        for t in ["bias", "running_mean", "running_var", "weight"] {
            expected.push(format!("{layer}.{t}"));
        }
    }
    for i in 0..4 {
        expected.push(format!("convs.{i}.bias"));
        expected.push(format!("convs.{i}.weight"));
    }
    expected.sort();
    assert_eq!(names(&policy), expected);
    assert_eq!(policy.parameters().len(), expected.len() - 10, "running statistics are not trained");

    let value = Model::new(Arch::Value, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
    let shape = |m: &Model, n: &str| m.tensors().into_iter().find(|(k, _)| k == n).unwrap().1.dims().to_vec();
    assert_eq!(shape(&value, "c.0.weight"), [16, 15, 3, 3]);
    assert_eq!(shape(&value, "head.weight"), [2, 16, 3, 3]);
    assert_eq!(shape(&value, "fc.weight"), [1, 722]);
    let playout = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
    assert_eq!(names(&playout).len(), 3 * 2 + 2 + 2);
    assert_eq!(shape(&playout, "fc.weight"), [362, 361]);
}

#[test]
fn move_nets_give_distributions_without_occupied_points() {
    let x = planes(2);
    for arch in [Arch::Policy, Arch::Playout, "resnet-policy:1x8".parse().unwrap()] {
        let model = Model::new(arch, FeatureSet::Seed, &Device::Cpu, 7).unwrap();
        assert_eq!(model.output(), Output::MoveLogProbs);
        for train in [true, false] {
            let p = model.forward(&x, train).unwrap().exp().unwrap();
            assert_eq!(p.dims(), [2, MOVES]);
            let rows = p.to_vec2::<f32>().unwrap();
            for row in rows {
                assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{arch:?}: probabilities sum to 1");
                assert_eq!(row[0], 0.0, "{arch:?}: the occupied point has probability 0");
                assert!(row[PASS] > 0.0 && row[1] > 0.0);
            }
        }
    }
}

#[test]
fn value_nets_give_probabilities() {
    for arch in [Arch::Value, "resnet-value:2x8".parse().unwrap()] {
        let model = Model::new(arch, FeatureSet::Seed, &Device::Cpu, 7).unwrap();
        assert_eq!(model.output(), Output::WinProb);
        let v = model.forward(&planes(3), true).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(v.len(), 3);
        assert!(v.iter().all(|p| (0.0..=1.0).contains(p)));
    }
}

#[test]
fn the_seed_fixes_the_initial_weights() {
    let w = |seed| {
        Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, seed).unwrap().tensors()[0]
            .1
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };
    assert_eq!(w(3), w(3));
    assert_ne!(w(3), w(4));
}

#[test]
fn masking_leaves_legal_logits_and_pass_alone() {
    let logits =
        Tensor::from_vec((0..2 * MOVES).map(|i| i as f32 * 0.01).collect::<Vec<_>>(), (2, MOVES), &Device::Cpu)
            .unwrap();
    let masked = mask_occupied(&logits, &planes(2)).unwrap().to_vec2::<f32>().unwrap();
    let orig = logits.to_vec2::<f32>().unwrap();
    assert_eq!(masked[1][0], MASKED_LOGIT as f32);
    assert_eq!(masked[1][1..], orig[1][1..]);
}

#[test]
fn arch_names_parse() {
    assert_eq!("value".parse::<Arch>().unwrap(), Arch::Value);
    assert_eq!("policy-value".parse::<Arch>().unwrap(), Arch::PolicyValue);
    assert_eq!(Arch::PolicyValue.to_string(), "policy-value");
    assert_eq!(
        "resnet-policy:6x64".parse::<Arch>().unwrap(),
        Arch::ResNet(ResNetConfig { blocks: 6, filters: 64, head: Head::Policy })
    );
    for bad in ["resnet", "resnet-policy:6", "resnet-value:ax3", "resnet-value:2x0", "big"] {
        assert!(bad.parse::<Arch>().is_err(), "{bad}");
    }
    // Sizes whose weights alone once failed to allocate and aborted the
    // process, 360 GB for 2×100,000, are refused by name.
    assert_eq!("resnet-policy:40x256".parse::<Arch>().unwrap().to_string(), "resnet-policy:40x256");
    for (bad, says) in [
        ("resnet-policy:2x100000", "100000 filters, at most 1024"),
        ("resnet-value:99999999x64", "99999999 blocks, at most 100"),
        ("policy-value-tower:100000", "100000 blocks, at most 100"),
    ] {
        let err = bad.parse::<Arch>().unwrap_err().to_string();
        assert!(err.contains(bad) && err.contains(says), "{err}");
    }
}

#[test]
fn devices_parse() {
    assert!(device("cpu").unwrap().is_cpu());
    assert!(device("tpu").is_err());
    assert!(device("cuda:x").is_err());
    #[cfg(not(feature = "cuda"))]
    assert!(device("cuda").unwrap_err().to_string().contains("--features cuda"));
}

/// The loss of `model` on `x` against `target`, and the gradient of every
/// trained tensor by name, copied to the CPU.
fn loss_and_grads(model: &Model, x: &Tensor, target: &Tensor) -> (f32, Vec<(String, Vec<f32>)>) {
    let loss = model.output().loss(&model.forward(x, true).unwrap(), target).unwrap();
    let grads = loss.backward().unwrap();
    let by_name = model
        .parameters()
        .into_iter()
        .map(|(name, var)| {
            let g = grads.get(var.as_tensor()).unwrap_or_else(|| panic!("{name}: no gradient"));
            (name, g.flatten_all().unwrap().to_device(&Device::Cpu).unwrap().to_vec1::<f32>().unwrap())
        })
        .collect();
    (loss.to_device(&Device::Cpu).unwrap().to_scalar::<f32>().unwrap(), by_name)
}

/// ‖a − b‖ / ‖a‖, with ‖a‖ taken as at least 1e-2: a gradient that is
/// zero in exact arithmetic (the bias of a convolution before a batch
/// norm) is float noise on both sides.
fn relative_distance(a: &[f32], b: &[f32]) -> f64 {
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    let diff = norm(&mut a.iter().zip(b).map(|(x, y)| (*x - *y) as f64));
    diff / norm(&mut a.iter().map(|&x| x as f64)).max(1e-2)
}

/// Every net gives the same loss and gradients on the test device
/// (`GO_TRAIN_TEST_DEVICE=cuda` on a GPU machine) as with the fused CPU
/// kernels, from the same weights and batch, in full float32; and again
/// after one optimizer step on each. Without a GPU the device path runs
/// on the CPU (candle's ops and the convolution gradients of `conv_grad`).
#[test]
fn the_device_path_gives_the_cpu_losses_and_gradients() {
    allow_tf32(false);
    let dev = test_device();
    let x = planes(6);
    let moves = Tensor::new(&[40u32, 100, 7, PASS as u32, 200, 360], &Device::Cpu).unwrap();
    let results = Tensor::new(&[1f32, 0.0, 1.0, 1.0, 0.0, 0.0], &Device::Cpu).unwrap();
    let archs = [Arch::Policy, Arch::Playout, Arch::Value, "resnet-policy:2x16".parse().unwrap()];
    for arch in archs.into_iter().chain(["resnet-value:1x8".parse().unwrap()]) {
        let cpu = Model::new(arch, FeatureSet::Seed, &Device::Cpu, 5).unwrap();
        let other = Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
        let target = if cpu.output() == Output::WinProb { &results } else { &moves };
        let (xd, td) = (x.to_device(&dev).unwrap(), target.to_device(&dev).unwrap());
        let config = crate::train::optim::OptimizerConfig::sgd(0.05, 0.9);
        let (mut opt_cpu, mut opt_dev) = (config.build(cpu.parameters()), config.build(other.parameters()));
        for step in 0..2 {
            let (loss_c, grads_c) = loss_and_grads(&cpu, &x, target);
            let (loss_d, grads_d) = layers::with_generic_ops(|| loss_and_grads(&other, &xd, &td));
            assert!(
                (loss_c - loss_d).abs() <= 1e-4 * loss_c.abs().max(1.0),
                "{arch:?} step {step}: loss {loss_c} on the CPU, {loss_d} on {dev:?}"
            );
            for ((name, gc), (_, gd)) in grads_c.iter().zip(&grads_d) {
                let d = relative_distance(gc, gd);
                assert!(d < 1e-3, "{arch:?} step {step}: gradient of {name} differs by {d:.2e} (relative)");
            }
            let step_of = |model: &Model, opt: &mut Box<dyn crate::train::optim::Optimizer>, x: &Tensor, t: &Tensor| {
                let loss = model.output().loss(&model.forward(x, true).unwrap(), t).unwrap();
                opt.step(&loss.backward().unwrap()).unwrap();
            };
            step_of(&cpu, &mut opt_cpu, &x, target);
            layers::with_generic_ops(|| step_of(&other, &mut opt_dev, &xd, &td));
        }
    }
}

/// A residual tower, or the seed policy's trunk, channels-last gives the
/// NCHW net's losses, gradients and running averages, in f32 and bf16,
/// from the same weights and batch: to the bit on the CPU, where each
/// layer changes the layout around its NCHW kernels (so this checks the
/// plumbing: the tower's two ends, the head's order, the gradients through
/// both), and within float error on a GPU (cuDNN's NHWC convolutions, the
/// channels-last batch-norm and bias kernels; TF32 off).
#[test]
fn channels_last_towers_give_the_nchw_losses_and_gradients() {
    use super::layout::{with_channels, Channels};
    allow_tf32(false);
    let dev = test_device();
    let x = planes(6).to_device(&dev).unwrap();
    assert_eq!(with_channels(Channels::Last, || layers::tower_channels(&x)), Channels::Last);
    assert_eq!(with_channels(Channels::Last, || layers::trunk_channels(&x)), Channels::Last);
    assert_eq!(layers::trunk_channels(&x), Channels::First, "f32 seed nets stay NCHW");
    let moves = Tensor::new(&[40u32, 100, 7, PASS as u32, 200, 360], &dev).unwrap();
    let results = Tensor::new(&[1f32, 0.0, 1.0, 1.0, 0.0, 0.0], &dev).unwrap();
    let exact = dev.is_cpu();
    for arch in ["resnet-policy:2x16", "resnet-value:1x8", "policy"] {
        let arch: Arch = arch.parse().unwrap();
        for precision in [Precision::F32, Precision::Bf16] {
            let run = |channels| {
                let mut model = Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
                model.set_precision(precision);
                let target = if model.output() == Output::WinProb { &results } else { &moves };
                let (loss, grads) = with_channels(channels, || loss_and_grads(&model, &x, target));
                let eval = with_channels(channels, || model.forward(&x, false).unwrap());
                let eval = eval.flatten_all().unwrap().to_device(&Device::Cpu).unwrap().to_vec1::<f32>().unwrap();
                let running: Vec<f32> = model
                    .tensors()
                    .into_iter()
                    .filter(|(name, _)| name.contains("running"))
                    .flat_map(|(_, t)| {
                        t.as_tensor().flatten_all().unwrap().to_device(&Device::Cpu).unwrap().to_vec1::<f32>().unwrap()
                    })
                    .collect();
                (loss, grads, eval, running)
            };
            let (first, last) = (run(Channels::First), run(Channels::Last));
            let case = format!("{arch} {precision:?}");
            let whole = |g: &[(String, Vec<f32>)]| g.iter().flat_map(|(_, v)| v.iter().copied()).collect::<Vec<f32>>();
            if exact {
                assert_eq!(first.0.to_bits(), last.0.to_bits(), "{case}: loss");
                assert!(first.1 == last.1, "{case}: gradients differ");
                assert!(first.2 == last.2, "{case}: evaluation outputs differ");
                assert!(first.3 == last.3, "{case}: running averages differ");
                continue;
            }
            let (loss_tol, grad_tol) = if precision == Precision::F32 { (1e-4, 1e-3) } else { (2e-2, 0.3) };
            assert!(
                (first.0 - last.0).abs() <= loss_tol * first.0.abs().max(1.0),
                "{case}: loss {} / {}",
                first.0,
                last.0
            );
            let d = relative_distance(&whole(&first.1), &whole(&last.1));
            assert!(d < grad_tol, "{case}: gradients differ by {d:.2e} (relative)");
            assert!(relative_distance(&first.2, &last.2) < grad_tol, "{case}: evaluation outputs differ");
            assert!(relative_distance(&first.3, &last.3) < 1e-3, "{case}: running averages differ");
        }
    }
}

/// In bf16 every net gives f32's loss and gradients within bf16's
/// precision, on the test device (candle's generic bf16 ops on the CPU;
/// cuDNN's bf16 convolutions on a GPU), with f32 gradients for its f32
/// weights; and 20 Adam steps from the same weights bring the loss as far
/// down in both precisions (within 3%; 0.3% here).
#[test]
fn bf16_activations_give_f32_losses_and_gradients_within_its_precision() {
    let dev = test_device();
    let x = planes(6).to_device(&dev).unwrap();
    let moves = Tensor::new(&[40u32, 100, 7, PASS as u32, 200, 360], &dev).unwrap();
    let results = Tensor::new(&[1f32, 0.0, 1.0, 1.0, 0.0, 0.0], &dev).unwrap();
    let archs = [Arch::Policy, Arch::Playout, Arch::Value, Arch::PolicyValueMargin];
    for arch in archs.into_iter().chain(["resnet-policy:2x16".parse().unwrap()]) {
        let f32_model = Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
        let mut bf16_model = Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
        bf16_model.set_precision(Precision::Bf16);
        let target = if f32_model.output() == Output::WinProb { &results } else { &moves };
        let (loss_f, grads_f) = loss_and_grads(&f32_model, &x, target);
        let (loss_b, grads_b) = loss_and_grads(&bf16_model, &x, target);
        assert!(loss_f != loss_b, "{arch}: the same loss to the bit: bf16 did not run");
        assert!(
            (loss_f - loss_b).abs() <= 2e-2 * loss_f.abs().max(0.1),
            "{arch}: loss {loss_f} in f32, {loss_b} in bf16"
        );
        // The whole gradient: a tensor's alone can be zero in exact
        // arithmetic (a bias before a batch norm), bf16's rounding on both.
        let whole = |g: &[(String, Vec<f32>)]| g.iter().flat_map(|(_, v)| v.iter().copied()).collect::<Vec<f32>>();
        let d = relative_distance(&whole(&grads_f), &whole(&grads_b));
        // 0.02-0.17 here: through a batch norm's backward a gradient is a
        // small difference of large terms. A gradient lost or scaled
        // wrongly anywhere is 0.5 or more.
        assert!(d < 0.3, "{arch}: the gradient differs by {d:.2e} (relative)");
        let config = crate::train::optim::OptimizerConfig::adam(0.001);
        let trained = |model: &Model| {
            let mut opt = config.build(model.parameters());
            let mut last = 0.0;
            for _ in 0..20 {
                let loss = model.output().loss(&model.forward(&x, true).unwrap(), target).unwrap();
                last = loss.to_device(&Device::Cpu).unwrap().to_scalar::<f32>().unwrap();
                opt.step(&loss.backward().unwrap()).unwrap();
            }
            last
        };
        let (after_f, after_b) = (trained(&f32_model), trained(&bf16_model));
        assert!(after_f < 0.95 * loss_f, "{arch}: f32 loss {loss_f} → {after_f}: the check needs a net that learns");
        let (drop_f, drop_b) = (loss_f - after_f, loss_b - after_b);
        assert!(
            (drop_f - drop_b).abs() <= 0.03 * drop_f,
            "{arch}: 20 steps took the loss down by {drop_f} in f32, {drop_b} in bf16"
        );
    }
}

/// A value net must be able to learn the simplest signal there is: the
/// winner given by one input plane (extended feature 15, Black to move),
/// the rest of the planes noise.
#[test]
fn value_nets_learn_a_one_plane_signal() {
    use crate::train::optim::OptimizerConfig;
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
    let planes = FeatureSet::Extended.planes();
    for arch in [Arch::Value, Arch::PolicyValue, "resnet-value:1x8".parse().unwrap()] {
        let model = Model::new(arch, FeatureSet::Extended, &Device::Cpu, 2).unwrap();
        let mut opt = OptimizerConfig::adam(0.001).build(model.parameters());
        let mut last = 1.0;
        for step in 0..300 {
            let batch = 32;
            let mut data = vec![0f32; batch * planes * POINTS];
            let mut labels = vec![0f32; batch];
            for (b, label) in labels.iter_mut().enumerate() {
                let black = rng.random_bool(0.5);
                *label = black as u8 as f32;
                for p in 0..planes {
                    for i in 0..POINTS {
                        let on = if p == 15 { black } else { p == 3 || rng.random_bool(0.2) };
                        data[(b * planes + p) * POINTS + i] = on as u8 as f32;
                    }
                }
            }
            let x = Tensor::from_vec(data, (batch, planes, BOARD, BOARD), &Device::Cpu).unwrap();
            let y = Tensor::from_vec(labels, batch, &Device::Cpu).unwrap();
            last = crate::train::train_step(&model, opt.as_mut(), &x, &y, None).unwrap().to_scalar::<f32>().unwrap();
            if step % 50 == 0 {
                crate::say!("{arch}: step {step} loss {last}");
            }
        }
        assert!(last < 0.1, "{arch}: loss {last} after 300 steps");
    }
}

/// A value net on the policy's trunk starts from a trained policy: every
/// trunk tensor is taken, the head is left as initialised, and a file of
/// other features is refused.
#[test]
fn a_policy_value_net_starts_from_a_policy() {
    let dir = tempfile::tempdir().unwrap();
    let policy = Model::new(Arch::Policy, FeatureSet::Extended, &Device::Cpu, 7).unwrap();
    let path = dir.path().join("policy.safetensors");
    super::weights::save(&path, &policy, None).unwrap();
    let value = Model::new(Arch::PolicyValue, FeatureSet::Extended, &Device::Cpu, 8).unwrap();
    let head_before =
        value.tensors().into_iter().find(|(n, _)| n == "value.fc1.weight").unwrap().1.to_vec2::<f32>().unwrap();
    let set = super::weights::load_matching(&path, &value).unwrap();
    let trunk: Vec<_> =
        policy.tensors().into_iter().filter(|(n, _)| n.starts_with("bn") || n.starts_with("conv")).collect();
    assert_eq!(set, trunk.len());
    let value_tensors: std::collections::HashMap<_, _> = value.tensors().into_iter().collect();
    for (name, var) in &trunk {
        assert_eq!(
            value_tensors[name].flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            var.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            "{name}"
        );
    }
    assert_eq!(value_tensors["value.fc1.weight"].to_vec2::<f32>().unwrap(), head_before);
    let seed = Model::new(Arch::PolicyValue, FeatureSet::Seed, &Device::Cpu, 8).unwrap();
    let err = super::weights::load_matching(&path, &seed).unwrap_err().to_string();
    assert!(err.contains("extended features"), "{err}");
}

/// The ownership head of `policy-value-ownership` learns who owns each
/// point when the targets follow the input (here: +1 under one plane's
/// stones, -1 under another's), while `policy-value` has no such head.
#[test]
fn the_ownership_head_learns_ownership_from_the_planes() {
    use crate::train::optim::OptimizerConfig;
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
    let planes = FeatureSet::Extended.planes();
    let model = Model::new(Arch::PolicyValueOwnership, FeatureSet::Extended, &Device::Cpu, 2).unwrap();
    let mut opt = OptimizerConfig::adam(0.003).build(model.parameters());
    let batch = 16;
    let mut sample = || {
        let mut data = vec![0f32; batch * planes * POINTS];
        let mut owned = vec![0f32; batch * POINTS];
        for b in 0..batch {
            for i in 0..POINTS {
                let (mine, theirs) = match rng.random_range(0..3) {
                    0 => (true, false),
                    1 => (false, true),
                    _ => (false, false),
                };
                data[(b * planes + 1) * POINTS + i] = mine as u8 as f32;
                data[(b * planes + 2) * POINTS + i] = theirs as u8 as f32;
                owned[b * POINTS + i] = mine as u8 as f32 - theirs as u8 as f32;
            }
        }
        let x = Tensor::from_vec(data, (batch, planes, BOARD, BOARD), &Device::Cpu).unwrap();
        let owned = Tensor::from_vec(owned, (batch, POINTS), &Device::Cpu).unwrap();
        (x, owned)
    };
    let values = Tensor::ones(batch, candle_core::DType::F32, &Device::Cpu).unwrap();
    let ownership_error = |model: &Model, x: &Tensor, owned: &Tensor| -> f32 {
        let (_, predicted) = model.forward_with_ownership(x, false).unwrap();
        candle_nn::loss::mse(&predicted.unwrap(), owned).unwrap().to_scalar().unwrap()
    };
    let (x, owned) = sample();
    let before = ownership_error(&model, &x, &owned);
    for _ in 0..150 {
        let (x, owned) = sample();
        crate::train::train_step(&model, opt.as_mut(), &x, &values, Some((&owned, 1.0))).unwrap();
    }
    let after = ownership_error(&model, &x, &owned);
    assert!(after < 0.2 * before && after < 0.1, "ownership error {before} before, {after} after");
    let plain = Model::new(Arch::PolicyValue, FeatureSet::Extended, &Device::Cpu, 2).unwrap();
    assert!(plain.forward_with_ownership(&x, false).unwrap().1.is_none());
    assert!(plain.tensors().iter().all(|(name, _)| !name.starts_with("ownership")));
    assert!(model.tensors().iter().any(|(name, _)| name == "ownership.conv.weight"));
}

/// `policy-value-margin` started from a `policy-value-ownership` file is
/// that net (its margin weight starts at 0), and where the result follows
/// the margin of the stones it learns to read the margin its ownership
/// head predicts: the weight grows positive and the value error falls.
#[test]
fn a_margin_net_starts_as_its_ownership_net_and_learns_to_read_the_margin() {
    use crate::train::optim::OptimizerConfig;
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let owner = Model::new(Arch::PolicyValueOwnership, FeatureSet::Extended, &Device::Cpu, 4).unwrap();
    let path = dir.path().join("value.safetensors");
    super::weights::save(&path, &owner, None).unwrap();
    let model = Model::new(Arch::PolicyValueMargin, FeatureSet::Extended, &Device::Cpu, 5).unwrap();
    let set = super::weights::load_matching(&path, &model).unwrap();
    assert_eq!(set, owner.tensors().len());
    assert_eq!(model.tensors().len(), set + 1);
    assert!(Arch::PolicyValueMargin.learns_ownership() && !Arch::PolicyValue.learns_ownership());

    let planes = FeatureSet::Extended.planes();
    let batch = 32;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(6);
    let mut sample = || {
        let mut data = vec![0f32; batch * planes * POINTS];
        let mut owned = vec![0f32; batch * POINTS];
        let mut won = vec![0f32; batch];
        for b in 0..batch {
            // Each board leans one way, so that margins spread widely.
            let lean = rng.random_range(0.2..0.5);
            let mut margin = 0.0;
            for i in 0..POINTS {
                let r: f64 = rng.random();
                let (mine, theirs) = (r < lean, r >= lean && r < 0.7);
                data[(b * planes + 1) * POINTS + i] = mine as u8 as f32;
                data[(b * planes + 2) * POINTS + i] = theirs as u8 as f32;
                owned[b * POINTS + i] = mine as u8 as f32 - theirs as u8 as f32;
                margin += owned[b * POINTS + i];
            }
            won[b] = (margin > 0.0) as u8 as f32;
        }
        let x = Tensor::from_vec(data, (batch, planes, BOARD, BOARD), &Device::Cpu).unwrap();
        let owned = Tensor::from_vec(owned, (batch, POINTS), &Device::Cpu).unwrap();
        (x, owned, Tensor::from_vec(won, batch, &Device::Cpu).unwrap())
    };
    let (x, _, won) = sample();
    let (before, _) = owner.forward_with_ownership(&x, false).unwrap();
    let (same, _) = model.forward_with_ownership(&x, false).unwrap();
    assert_eq!(before.to_vec1::<f32>().unwrap(), same.to_vec1::<f32>().unwrap());
    let value_error = |model: &Model| -> f32 {
        candle_nn::loss::mse(&model.forward(&x, false).unwrap(), &won).unwrap().to_scalar().unwrap()
    };
    let error_before = value_error(&model);
    let mut opt = OptimizerConfig::adam(0.003).build(model.parameters());
    for _ in 0..100 {
        let (x, owned, won) = sample();
        crate::train::train_step(&model, opt.as_mut(), &x, &won, Some((&owned, 1.0))).unwrap();
    }
    let weight = model.tensors().into_iter().find(|(n, _)| n == "value.margin.weight").unwrap().1;
    let weight = weight.flatten_all().unwrap().to_vec1::<f32>().unwrap()[0];
    let error_after = value_error(&model);
    assert!(weight > 0.0, "margin weight {weight}");
    assert!(error_after < 0.5 * error_before, "value error {error_before} before, {error_after} after");
}

/// `policy-value-tower:2` started from a `policy-value-ownership` file is
/// that net (its blocks start as the identity: same value, same
/// ownership), and its blocks then learn: training moves their zero scales
/// and so the net's answers.
#[test]
fn a_tower_net_starts_as_its_ownership_net_and_its_blocks_learn() {
    use crate::train::optim::OptimizerConfig;
    use rand::{RngExt, SeedableRng};
    assert_eq!("policy-value-tower:2".parse::<Arch>().unwrap(), Arch::PolicyValueTower(2));
    assert_eq!(Arch::PolicyValueTower(3).to_string(), "policy-value-tower:3");
    assert!("policy-value-tower:x".parse::<Arch>().is_err());
    assert!(Arch::PolicyValueTower(2).learns_ownership());

    let dir = tempfile::tempdir().unwrap();
    let owner = Model::new(Arch::PolicyValueOwnership, FeatureSet::Extended, &Device::Cpu, 4).unwrap();
    let path = dir.path().join("value.safetensors");
    super::weights::save(&path, &owner, None).unwrap();
    let model = Model::new(Arch::PolicyValueTower(2), FeatureSet::Extended, &Device::Cpu, 5).unwrap();
    let set = super::weights::load_matching(&path, &model).unwrap();
    assert_eq!(set, owner.tensors().len());
    // Two blocks of two convolutions (weights only) and two batch norms (4 tensors each).
    assert_eq!(model.tensors().len(), set + 2 * (2 + 2 * 4));

    let planes = FeatureSet::Extended.planes();
    let batch = 16;
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
    let mut sample = || {
        let mut data = vec![0f32; batch * planes * POINTS];
        let mut owned = vec![0f32; batch * POINTS];
        for b in 0..batch {
            for i in 0..POINTS {
                let stone = rng.random_range(0..3);
                if stone < 2 {
                    data[(b * planes + 1 + stone) * POINTS + i] = 1.0;
                }
                owned[b * POINTS + i] = if stone == 0 { 1.0 } else { -1.0 };
            }
        }
        let x = Tensor::from_vec(data, (batch, planes, BOARD, BOARD), &Device::Cpu).unwrap();
        (x, Tensor::from_vec(owned, (batch, POINTS), &Device::Cpu).unwrap())
    };
    let (x, _) = sample();
    let answers = |model: &Model| {
        let (value, ownership) = model.forward_with_ownership(&x, false).unwrap();
        (value.to_vec1::<f32>().unwrap(), ownership.unwrap().to_vec2::<f32>().unwrap())
    };
    let before = answers(&owner);
    assert_eq!(answers(&model), before);

    let values = Tensor::ones(batch, candle_core::DType::F32, &Device::Cpu).unwrap();
    let mut opt = OptimizerConfig::adam(0.003).build(model.parameters());
    for _ in 0..10 {
        let (x, owned) = sample();
        crate::train::train_step(&model, opt.as_mut(), &x, &values, Some((&owned, 1.0))).unwrap();
    }
    let scale = model.tensors().into_iter().find(|(n, _)| n == "tower.1.bn2.weight").unwrap().1;
    let scale = scale.as_tensor().abs().unwrap().sum_all().unwrap().to_scalar::<f32>().unwrap();
    assert!(scale > 0.0, "the last block's scales stayed at 0");
    assert_ne!(answers(&model).1, before.1);
}

/// Settled batch norms hold the plain mean of the batches' own
/// statistics (for the first batch norm, which reads the raw planes: each
/// plane's mean, and its unbiased variance, averaged over the batches),
/// where training's running averages would weigh the last batch most.
#[test]
fn settled_batch_norms_hold_the_mean_of_the_batches_statistics() {
    use rand::{RngExt, SeedableRng};
    let model = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
    let planes = FeatureSet::Seed.planes();
    let (batch, n) = (4, 4 * POINTS);
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(9);
    // Batches that differ: plane 3 is filled with a density that grows.
    let inputs: Vec<Vec<f32>> = [0.1, 0.4, 0.8]
        .iter()
        .map(|&density| {
            let mut data = vec![0f32; batch * planes * POINTS];
            for b in 0..batch {
                for i in 0..POINTS {
                    data[(b * planes + 3) * POINTS + i] = (rng.random::<f64>() < density) as u8 as f32;
                }
            }
            data
        })
        .collect();
    let plane = |data: &[f32]| -> Vec<f64> {
        (0..batch)
            .flat_map(|b| data[(b * planes + 3) * POINTS..(b * planes + 4) * POINTS].iter().map(|&v| v as f64))
            .collect()
    };
    let means: Vec<f64> = inputs.iter().map(|d| plane(d).iter().sum::<f64>() / n as f64).collect();
    let vars: Vec<f64> = inputs
        .iter()
        .zip(&means)
        .map(|(d, m)| plane(d).iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64)
        .collect();
    let tensors = inputs.iter().map(|d| Ok(Tensor::from_vec(d.clone(), (batch, planes, BOARD, BOARD), &Device::Cpu)?));
    assert_eq!(model.settle_batch_norms(tensors).unwrap(), 3);
    let stat = |name: &str| -> f64 {
        let var = model.tensors().into_iter().find(|(n, _)| n == name).unwrap().1;
        var.as_tensor().to_vec1::<f32>().unwrap()[3] as f64
    };
    let (mean, var) = (means.iter().sum::<f64>() / 3.0, vars.iter().sum::<f64>() / 3.0);
    assert!((stat("bn0.running_mean") - mean).abs() < 1e-5, "{} against {mean}", stat("bn0.running_mean"));
    assert!((stat("bn0.running_var") - var).abs() < 1e-5, "{} against {var}", stat("bn0.running_var"));
    // The seed's value net has no batch norm: nothing to run.
    let plain = Model::new(Arch::Value, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
    let inputs = inputs.iter().map(|d| Ok(Tensor::from_vec(d.clone(), (batch, planes, BOARD, BOARD), &Device::Cpu)?));
    assert_eq!(plain.settle_batch_norms(inputs).unwrap(), 0);
}

/// A batch's inputs on the test device (`GO_TRAIN_TEST_DEVICE=cuda`: the
/// pinned copies and the unpacking kernel) are the values on the host:
/// planes from bits as the bits say, for boards whose planes fill their
/// last word partly (19×19) and wholly (8×8), and more copies, of growing
/// sizes, than the GPU's pinned buffers number.
#[test]
fn inputs_on_the_test_device_are_the_values_on_the_host() {
    use rand::{RngExt, SeedableRng};
    let dev = test_device();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
    let mut next = move || rng.random::<u64>();
    for (n, planes, size) in [(3, PLANES, BOARD), (2, 4, 8), (5, 1, BOARD)] {
        let points = size * size;
        let words: Vec<u64> = (0..n * planes * points.div_ceil(64)).map(|_| next()).collect();
        let got = inputs::planes_from_bits(&words, (n, planes, size), &dev).unwrap();
        assert_eq!(got.dims(), [n, planes, size, size]);
        let got: Vec<f32> = got.flatten_all().unwrap().to_vec1().unwrap();
        let wpp = points.div_ceil(64);
        let want: Vec<f32> = (0..n * planes * points)
            .map(|i| (words[i / points * wpp + i % points / 64] >> (i % points % 64) & 1) as f32)
            .collect();
        assert!(got == want, "{n} records of {planes} planes of {size}×{size}");
    }
    assert!(inputs::planes_from_bits(&[0; 5], (1, 1, BOARD), &dev).is_err(), "5 words for a plane of 6");
    for k in 1..=20usize {
        let values: Vec<u32> = (0..k * 50_000).map(|_| next() as u32).collect();
        let got: Vec<u32> = inputs::tensor(&values, values.len(), &dev).unwrap().to_vec1().unwrap();
        assert!(got == values, "copy {k}");
    }
}
