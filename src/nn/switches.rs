//! Switches of training's fused paths, on the CPU and on a CUDA GPU. Each
//! is on unless its environment variable is `0` (or `false`, `off`, `no`): a run with one off A/Bs
//! that piece (`go-train bench train`, a training run), and finds whether
//! a problem lies in it. Read once, at first use.

use std::sync::OnceLock;

/// A fused path of training that can be turned off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fused {
    /// The optimizers' in-place updates (`GO_TRAIN_FUSED_OPTIM`).
    Optimizer,
    /// Masked log-softmax, NLL and MSE as single ops (`GO_TRAIN_FUSED_LOSS`).
    Loss,
    /// Batch norm's running averages updated in place
    /// (`GO_TRAIN_FUSED_BN_STATS`).
    RunningStats,
    /// The backward pass storing each first gradient as it is, not added
    /// to a zero-filled slot (`GO_TRAIN_FUSED_GRADS`; vendor/README.md).
    FirstGradients,
    /// On a GPU, a step's inputs copied through pinned memory, the planes
    /// as bits unpacked there (`GO_TRAIN_FUSED_INPUTS`; [`super::inputs`]).
    Inputs,
    /// On a GPU with cuDNN, a residual tower's activations kept
    /// channels-last (NHWC) between its layers, and in bf16 the seed
    /// policy's (`GO_TRAIN_CHANNELS_LAST`; [`super::layers::tower_channels`],
    /// [`super::layers::trunk_channels`]).
    ChannelsLast,
    /// On a GPU, batch norm's per-channel sums finished by the last block
    /// of the kernel that sums their runs: one launch, not two
    /// (`GO_TRAIN_FUSED_SUMS`).
    Sums,
}

impl Fused {
    /// Every switch.
    const ALL: [Fused; 7] = [
        Fused::Optimizer,
        Fused::Loss,
        Fused::RunningStats,
        Fused::FirstGradients,
        Fused::Inputs,
        Fused::ChannelsLast,
        Fused::Sums,
    ];

    /// The environment variable that turns it off with `0`.
    pub const fn variable(self) -> &'static str {
        match self {
            Fused::Optimizer => "GO_TRAIN_FUSED_OPTIM",
            Fused::Loss => "GO_TRAIN_FUSED_LOSS",
            Fused::RunningStats => "GO_TRAIN_FUSED_BN_STATS",
            Fused::FirstGradients => "GO_TRAIN_FUSED_GRADS",
            Fused::Inputs => "GO_TRAIN_FUSED_INPUTS",
            Fused::ChannelsLast => "GO_TRAIN_CHANNELS_LAST",
            Fused::Sums => "GO_TRAIN_FUSED_SUMS",
        }
    }

    /// Whether it is on.
    pub fn enabled(self) -> bool {
        static SWITCHES: [OnceLock<bool>; Fused::ALL.len()] = [const { OnceLock::new() }; Fused::ALL.len()];
        *SWITCHES[self as usize].get_or_init(|| env_switch(self.variable(), true))
    }

    /// Every switch that is off, as `VARIABLE=0` words (empty when all are
    /// on): for reports of what ran.
    pub fn disabled() -> Vec<String> {
        Fused::ALL.into_iter().filter(|f| !f.enabled()).map(|f| format!("{}=0", f.variable())).collect()
    }
}

/// Runs `f` with the test override in `cell` set to `value`, cleared
/// after: how a test forces a path that a setting read once would fix.
#[cfg(test)]
pub(crate) fn with_override<T: Copy + 'static, R>(
    cell: &'static std::thread::LocalKey<std::cell::Cell<Option<T>>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    cell.with(|c| c.set(Some(value)));
    let out = f();
    cell.with(|c| c.set(None));
    out
}

/// The on/off switch in environment variable `variable`: `1` or `0` (also
/// `true`/`false`, `on`/`off`, `yes`/`no`), `default` when unset. Anything
/// else is named on stderr and leaves the default: `=false` once left a
/// path on without a word, and an A/B measured it twice.
pub(crate) fn env_switch(variable: &str, default: bool) -> bool {
    let Some(value) = std::env::var_os(variable) else { return default };
    let text = value.to_string_lossy();
    parse_switch(&text).unwrap_or_else(|| {
        crate::say!("warning: {variable}={text}: not 0 or 1; left {}", if default { "on" } else { "off" });
        default
    })
}

fn parse_switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_the_usual_words_and_refuse_the_rest() {
        for (text, on) in [("0", false), ("1", true), ("false", false), (" OFF ", false), ("yes", true)] {
            assert_eq!(parse_switch(text), Some(on), "{text:?}");
        }
        for text in ["", "2", "disable", "0x0"] {
            assert_eq!(parse_switch(text), None, "{text:?}");
        }
    }
}
