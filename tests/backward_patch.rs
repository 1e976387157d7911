//! The patched `Tensor::backward` (vendor/README.md) stores the first
//! gradient that reaches a tensor as it is. What the optimizers rely on
//! must still hold: every gradient contiguous (the in-place updates read
//! it as a plain slice) and equal to the sum of what reached the tensor,
//! whether it arrived once, as a strided view, or several times.

use candle_core::{Device, Tensor, Var};

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn gradients_are_contiguous_sums_whatever_reached_them() {
    let dev = Device::Cpu;
    let x = Var::from_vec(vec![1f32, -2.0, 3.0, 0.5, 4.0, -1.0], (2, 3), &dev).unwrap();
    let p = Var::from_vec(vec![0.25f32], 1, &dev).unwrap();
    let w = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], (2, 4), &dev).unwrap();
    let c = Tensor::from_vec(vec![0.5f32, -1.5, 2.5, 1.0, -2.0, 3.0], (3, 2), &dev).unwrap();

    // x reaches the loss three ways: as a narrow view of a concatenation
    // (with p broadcast beside it), transposed, and squared.
    let joined =
        Tensor::cat(&[x.as_tensor(), &p.as_tensor().unsqueeze(0).unwrap().broadcast_as((2, 1)).unwrap()], 1).unwrap();
    let loss = ((joined * &w).unwrap().sum_all().unwrap()
        + (x.as_tensor().t().unwrap() * &c).unwrap().sum_all().unwrap()
        + x.as_tensor().sqr().unwrap().sum_all().unwrap())
    .unwrap();
    let grads = loss.backward().unwrap();

    let gx = grads.get(x.as_tensor()).expect("x has a gradient");
    let gp = grads.get(p.as_tensor()).expect("p has a gradient");
    assert!(gx.is_contiguous() && gp.is_contiguous(), "a gradient is a strided view");
    let xv = values(x.as_tensor());
    let (wv, cv) = (values(&w), values(&c));
    let expected: Vec<f32> = (0..6)
        .map(|i| {
            let (r, col) = (i / 3, i % 3);
            wv[r * 4 + col] + cv[col * 2 + r] + 2.0 * xv[i]
        })
        .collect();
    assert_eq!(values(gx), expected);
    assert_eq!(values(gp), vec![wv[3] + wv[7]]);

    // Used once, directly: the gradient is exactly what reached it.
    let single = (x.as_tensor() * 3.0).unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(values(single.get(x.as_tensor()).unwrap()), vec![3.0; 6]);
}
