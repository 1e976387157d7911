//! Per-epoch metrics: one JSON line per epoch in `metrics.jsonl`, and a
//! plot of loss and accuracy per epoch in `metrics.svg` (hand-written SVG:
//! two line charts need no plotting library or fonts).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::evaluate::Scores;
use crate::atomic::write_atomic;

/// What one epoch did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochMetrics {
    /// Epoch number, from 1.
    pub epoch: u64,
    /// Optimizer steps taken so far.
    pub step: u64,
    /// Learning rate during the epoch.
    pub lr: f64,
    /// Training positions per second.
    pub samples_per_second: f64,
    /// Seconds the epoch took (training and validation).
    pub seconds: f64,
    pub train: Scores,
    pub validation: Scores,
}

impl EpochMetrics {
    /// The accuracy that picks the best checkpoint: top-1 for move nets,
    /// accuracy for value nets.
    pub fn key_accuracy(scores: &Scores) -> f64 {
        scores.top1.or(scores.accuracy).unwrap_or(0.0)
    }
}

/// Reads `metrics.jsonl`, keeping epochs before `before` (a resumed run
/// redoes the epoch a crash interrupted).
pub fn read(path: &Path, before: u64) -> Result<Vec<EpochMetrics>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let m: EpochMetrics =
            serde_json::from_str(line).with_context(|| format!("{}:{}: not a metrics line", path.display(), i + 1))?;
        if m.epoch < before {
            out.push(m);
        }
    }
    Ok(out)
}

/// Rewrites `metrics.jsonl` with `all` (atomically) and draws the plot.
pub fn write(dir: &Path, all: &[EpochMetrics]) -> Result<()> {
    let mut text = Vec::new();
    for m in all {
        writeln!(text, "{}", serde_json::to_string(m)?)?;
    }
    write_atomic(&dir.join("metrics.jsonl"), &text)?;
    write_atomic(&dir.join("metrics.svg"), plot(all).as_bytes())
}

/// Two charts side by side: loss (train, validation) and accuracy
/// (validation top-1 or accuracy, and top-5 for move nets) per epoch.
pub fn plot(all: &[EpochMetrics]) -> String {
    let series_loss = [
        ("train loss", "#1f77b4", all.iter().map(|m| m.train.loss).collect::<Vec<_>>()),
        ("validation loss", "#ff7f0e", all.iter().map(|m| m.validation.loss).collect()),
    ];
    let mut series_acc = vec![(
        "validation top-1 / accuracy",
        "#2ca02c",
        all.iter().map(|m| EpochMetrics::key_accuracy(&m.validation)).collect::<Vec<_>>(),
    )];
    if all.iter().any(|m| m.validation.top5.is_some()) {
        series_acc.push((
            "validation top-5",
            "#9467bd",
            all.iter().map(|m| m.validation.top5.unwrap_or(0.0)).collect(),
        ));
    }
    let mut svg = String::from(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="960" height="360" font-family="sans-serif" font-size="12">"#,
    );
    svg.push_str(r#"<rect width="960" height="360" fill="white"/>"#);
    svg.push_str(&chart(20.0, "loss per epoch", &series_loss));
    svg.push_str(&chart(500.0, "accuracy per epoch", &series_acc));
    svg.push_str("</svg>\n");
    svg
}

/// One chart at horizontal offset `x0`: axes, ticks, lines, legend.
fn chart(x0: f64, title: &str, series: &[(&str, &str, Vec<f64>)]) -> String {
    let (w, h, top, left) = (420.0, 260.0, 40.0, 50.0);
    let values = series.iter().flat_map(|s| s.2.iter().copied()).filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo.min(0.0), if hi > lo { hi } else { lo + 1.0 }) } else { (0.0, 1.0) };
    let n = series.iter().map(|s| s.2.len()).max().unwrap_or(0).max(2);
    let px = |i: usize| x0 + left + w * i as f64 / (n - 1) as f64;
    let py = |v: f64| top + h * (1.0 - (v - lo) / (hi - lo));
    let mut out = format!(r#"<text x="{}" y="20" font-size="14">{title}</text>"#, x0 + left);
    out += &format!(
        r#"<path d="M{a},{t} V{b} H{c}" stroke="black" fill="none"/>"#,
        a = x0 + left,
        t = top,
        b = top + h,
        c = x0 + left + w
    );
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        out += &format!(r#"<text x="{}" y="{:.1}" text-anchor="end">{v:.3}</text>"#, x0 + left - 4.0, py(v) + 4.0);
    }
    out += &format!(r#"<text x="{}" y="{}" text-anchor="middle">epoch</text>"#, x0 + left + w / 2.0, top + h + 30.0);
    for (i, (name, color, ys)) in series.iter().enumerate() {
        let points: Vec<String> = ys
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(j, v)| format!("{:.1},{:.1}", px(j), py(*v)))
            .collect();
        out += &format!(r#"<polyline points="{}" stroke="{color}" fill="none" stroke-width="2"/>"#, points.join(" "));
        let ly = top + 14.0 * i as f64 + 6.0;
        out += &format!(r#"<text x="{}" y="{ly:.1}" fill="{color}">{name}</text>"#, x0 + left + 10.0);
    }
    out
}
