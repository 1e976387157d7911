//! Learning-rate schedules.

use serde::{Deserialize, Serialize};

/// Step decay, as PyTorch's `StepLR`: the rate is multiplied by `gamma`
/// every `step_size` epochs. AlphaGo's policy net halved its rate every
/// 80 million positions; this counts in epochs (passes over the data).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepLr {
    /// Rate during the first `step_size` epochs.
    pub base_lr: f64,
    /// Epochs between decays; 0 means never decay.
    pub step_size: u64,
    /// Factor applied at each decay.
    pub gamma: f64,
}

impl StepLr {
    /// The rate for epoch `epoch` (counted from 0): `base_lr · gamma^⌊epoch / step_size⌋`.
    pub fn lr(&self, epoch: u64) -> f64 {
        if self.step_size == 0 {
            return self.base_lr;
        }
        let decays = (epoch / self.step_size).min(i32::MAX as u64) as i32;
        self.base_lr * self.gamma.powi(decays)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_drops_by_gamma_every_step_size_epochs() {
        let s = StepLr { base_lr: 0.1, step_size: 3, gamma: 0.5 };
        let rates: Vec<f64> = (0..8).map(|e| s.lr(e)).collect();
        assert_eq!(rates, [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]);
        assert_eq!(StepLr { step_size: 0, ..s }.lr(100), 0.1);
    }
}
