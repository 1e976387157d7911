use super::*;
use crate::features::PLANES;

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
    let policy = Model::new(Arch::Policy, &Device::Cpu, 1).unwrap();
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

    let value = Model::new(Arch::Value, &Device::Cpu, 1).unwrap();
    let shape = |m: &Model, n: &str| m.tensors().into_iter().find(|(k, _)| k == n).unwrap().1.dims().to_vec();
    assert_eq!(shape(&value, "c.0.weight"), [16, 15, 3, 3]);
    assert_eq!(shape(&value, "head.weight"), [2, 16, 3, 3]);
    assert_eq!(shape(&value, "fc.weight"), [1, 722]);
    let playout = Model::new(Arch::Playout, &Device::Cpu, 1).unwrap();
    assert_eq!(names(&playout).len(), 3 * 2 + 2 + 2);
    assert_eq!(shape(&playout, "fc.weight"), [362, 361]);
}

#[test]
fn move_nets_give_distributions_without_occupied_points() {
    let x = planes(2);
    for arch in [Arch::Policy, Arch::Playout, "resnet-policy:1x8".parse().unwrap()] {
        let model = Model::new(arch, &Device::Cpu, 7).unwrap();
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
        let model = Model::new(arch, &Device::Cpu, 7).unwrap();
        assert_eq!(model.output(), Output::WinProb);
        let v = model.forward(&planes(3), true).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(v.len(), 3);
        assert!(v.iter().all(|p| (0.0..=1.0).contains(p)));
    }
}

#[test]
fn the_seed_fixes_the_initial_weights() {
    let w = |seed| {
        Model::new(Arch::Playout, &Device::Cpu, seed).unwrap().tensors()[0]
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
    assert_eq!(
        "resnet-policy:6x64".parse::<Arch>().unwrap(),
        Arch::ResNet(ResNetConfig { blocks: 6, filters: 64, head: Head::Policy })
    );
    for bad in ["resnet", "resnet-policy:6", "resnet-value:ax3", "resnet-value:2x0", "big"] {
        assert!(bad.parse::<Arch>().is_err(), "{bad}");
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
