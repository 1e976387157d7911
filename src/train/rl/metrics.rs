//! Per-iteration metrics of `train-rl`: one JSON line per iteration in
//! `metrics.jsonl`, and a plot of the win rates, the loss and the games'
//! length in `metrics.svg` and `metrics.png`.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::train::metrics::{chart, plot_error, read_lines, write_lines_and_plot, Scale, Series};

/// What one iteration did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IterationMetrics {
    /// From 1.
    pub iteration: u64,
    /// The pool member played.
    pub opponent: String,
    pub games: usize,
    /// The learner's wins (draws count half).
    pub wins: f64,
    pub win_rate: f64,
    pub mean_moves: f64,
    /// The learner's moves trained on.
    pub positions: usize,
    /// −Σ (z − b)·log p(a|s) / games: what the step descends.
    pub loss: f64,
    /// The mean log p(a|s) of the learner's moves: rises as the policy
    /// grows surer of its choices.
    #[serde(default)]
    pub mean_log_p: Option<f64>,
    pub lr: f64,
    /// Members of the pool after the iteration.
    pub pool: usize,
    /// Seconds playing and training.
    pub seconds: f64,
    /// Of which playing the minibatch's games, and computing the gradient.
    #[serde(default)]
    pub play_seconds: Option<f64>,
    #[serde(default)]
    pub train_seconds: Option<f64>,
    /// The match against the start policy, when one was played.
    pub against_start: Option<Match>,
}

/// A match of the learner against a fixed opponent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Match {
    pub games: usize,
    /// Draws count half.
    pub wins: f64,
    pub win_rate: f64,
    /// The Wilson 95% interval of the win rate.
    pub interval: (f64, f64),
}

/// The metrics of iterations up to `done` (a resumed run redoes any after).
pub fn read(path: &Path, done: u64) -> Result<Vec<IterationMetrics>> {
    read_lines(path, "iteration", |m: &IterationMetrics| m.iteration, |m| m.iteration <= done)
}

/// Rewrites `metrics.jsonl` and the plot.
pub fn write(dir: &Path, all: &[IterationMetrics]) -> Result<()> {
    write_lines_and_plot(dir, all, plot_svg, plot_png)
}

const SIZE: (u32, u32) = (1260, 400);

pub fn plot_svg(all: &[IterationMetrics]) -> Result<String> {
    let mut svg = String::new();
    draw(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), all)?;
    Ok(svg)
}

pub fn plot_png(all: &[IterationMetrics], path: &Path) -> Result<()> {
    crate::plot::write_png(path, SIZE, |area| draw(area, all))
}

/// Three charts against the iteration: the win rates (against the pool
/// and, where measured, against the start policy), the loss, and the mean
/// length of the games.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, all: &[IterationMetrics]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    crate::plot::register_font();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((1, 3));
    let each = |f: &dyn Fn(&IterationMetrics) -> Option<f64>| all.iter().map(|m| f(m).unwrap_or(f64::NAN)).collect();
    let (blue, orange) = (RGBColor(31, 119, 180), RGBColor(255, 127, 14));
    let rates: Vec<Series> = vec![
        ("against the pool", blue, each(&|m| Some(m.win_rate))),
        ("against the start policy", orange, each(&|m| m.against_start.map(|a| a.win_rate))),
    ];
    chart(&panels[0], "learner's win rate", "iteration", &rates, Scale::Percent)?;
    chart(&panels[1], "loss", "iteration", &[("-(z - b) log p", blue, each(&|m| Some(m.loss)))], Scale::Linear)?;
    chart(&panels[2], "moves a game", "iteration", &[("mean", blue, each(&|m| Some(m.mean_moves)))], Scale::Linear)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_shows_each_iteration_and_the_matches_against_the_start() {
        let all: Vec<IterationMetrics> = (1..=4)
            .map(|i| IterationMetrics {
                iteration: i,
                opponent: "the start policy".into(),
                games: 8,
                wins: 4.0 + i as f64 / 2.0,
                win_rate: 0.5 + i as f64 / 16.0,
                mean_moves: 300.0,
                positions: 1200,
                loss: 0.1,
                mean_log_p: Some(-2.0),
                lr: 0.001,
                pool: 1,
                seconds: 10.0,
                play_seconds: Some(6.0),
                train_seconds: Some(3.0),
                against_start: (i % 2 == 0).then_some(Match {
                    games: 10,
                    wins: 6.0,
                    win_rate: 0.6,
                    interval: (0.3, 0.8),
                }),
            })
            .collect();
        let svg = plot_svg(&all).unwrap();
        assert_eq!(svg.matches("<circle").count(), 4 + 2 + 4 + 4);
        assert!(svg.contains("iteration") && svg.contains("against the start policy"));
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &all).unwrap();
        assert_eq!(read(&dir.path().join("metrics.jsonl"), 3).unwrap(), all[..3]);
    }
}
