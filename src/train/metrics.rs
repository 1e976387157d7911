//! Per-epoch metrics: one JSON line per epoch in `metrics.jsonl`, and a
//! plot of loss, accuracy and learning rate per epoch in `metrics.svg` and
//! `metrics.png` (drawn with `plotters`).

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;
use crate::eval::positions::Scores;

/// The metrics file of a run's folder: one JSON line per epoch.
pub const FILE: &str = "metrics.jsonl";

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
    read_lines(path, "epoch", |m: &EpochMetrics| m.epoch, |m| m.epoch < before)
}

/// The lines of a metrics file that `keep` keeps (none when there is no
/// file). Lines whose `count` (named `what`: epoch, iteration) does not
/// grow are refused, naming them: a run writes each once, in order, so the
/// file was edited or joined to another, and which line a resumed run
/// should keep is not for it to guess.
pub(super) fn read_lines<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    count: impl Fn(&T) -> u64,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>> {
    // Only a missing file is an empty history: one that cannot be read
    // would be written over without its earlier lines.
    let Some(text) = crate::atomic::read_if_present(path, "the run's metrics")? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut last = None;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let m: T =
            serde_json::from_str(line).with_context(|| format!("{}:{}: not a metrics line", path.display(), i + 1))?;
        let n = count(&m);
        if let Some(before) = last.filter(|&before| n <= before) {
            bail!(
                "{}:{}: {what} {n} is recorded after {what} {before}, where a run writes each {what} once, in \
                 order: was the file edited or joined to another? Keep one line for each {what}, in order",
                path.display(),
                i + 1
            );
        }
        last = Some(n);
        if keep(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// Rewrites `metrics.jsonl` with `all` (atomically) and draws the plot,
/// as `metrics.svg` and `metrics.png` (a plot that fails is a warning).
pub fn write(dir: &Path, all: &[EpochMetrics]) -> Result<()> {
    write_lines_and_plot(dir, all, plot_svg, plot_png)
}

/// [`write`] for any kind of metrics line and plot.
pub(super) fn write_lines_and_plot<T: Serialize>(
    dir: &Path,
    all: &[T],
    svg: impl Fn(&[T]) -> Result<String>,
    png: impl Fn(&[T], &Path) -> Result<()>,
) -> Result<()> {
    let mut text = Vec::new();
    for m in all {
        writeln!(text, "{}", serde_json::to_string(m)?)?;
    }
    write_atomic(&dir.join(FILE), &text)?;
    // A plot that cannot be drawn (a full disk, a broken font) must not
    // stop the run: the metrics are saved, and the next epoch draws again.
    let drawn = svg(all)
        .and_then(|svg| write_atomic(&dir.join("metrics.svg"), svg.as_bytes()))
        .and_then(|()| png(all, &dir.join("metrics.png")));
    if let Err(e) = drawn {
        crate::say!("warning: {}: the metrics plot was not drawn: {e:#}", dir.display());
    }
    Ok(())
}

/// Size of the plot in pixels: three charts side by side.
const SIZE: (u32, u32) = (1260, 400);

/// The plot as SVG text.
pub fn plot_svg(all: &[EpochMetrics]) -> Result<String> {
    let mut svg = String::new();
    draw(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), all)?;
    Ok(svg)
}

/// Draws the plot as a PNG file at `path`, atomically: drawn to a
/// temporary name beside it, then renamed.
pub fn plot_png(all: &[EpochMetrics], path: &Path) -> Result<()> {
    crate::plot::write_png(path, SIZE, |area| draw(area, all))
}

/// One curve: its name, colour and a value per epoch (NaN where none).
pub(super) type Series = (&'static str, RGBColor, Vec<f64>);

/// Three charts: loss (train and validation), validation accuracy (top-1
/// and top-5 for move nets, accuracy for value nets) and the learning rate
/// (log scale), each against the epoch, with a point at every epoch so a
/// single epoch shows.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, plotters::coord::Shift>, all: &[EpochMetrics]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    crate::plot::register_font();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((1, 3));
    let per_epoch = |f: &dyn Fn(&EpochMetrics) -> Option<f64>| all.iter().map(|m| f(m).unwrap_or(f64::NAN)).collect();
    let (blue, orange, green, purple) =
        (RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189));
    let loss = vec![
        ("train", blue, per_epoch(&|m| Some(m.train.loss))),
        ("validation", orange, per_epoch(&|m| Some(m.validation.loss))),
    ];
    let mut accuracy =
        vec![("validation top-1 / accuracy", green, per_epoch(&|m| Some(EpochMetrics::key_accuracy(&m.validation))))];
    if all.iter().any(|m| m.validation.top5.is_some()) {
        accuracy.push(("validation top-5", purple, per_epoch(&|m| m.validation.top5)));
    }
    let lr = vec![("learning rate", blue, per_epoch(&|m| Some(m.lr)))];
    chart(&panels[0], "loss", "epoch", &loss, Scale::Linear)?;
    chart(&panels[1], "validation accuracy", "epoch", &accuracy, Scale::Percent)?;
    chart(&panels[2], "learning rate", "epoch", &lr, Scale::Log)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

pub(super) fn plot_error<E: std::error::Error + Send + Sync + 'static>(
    e: plotters::drawing::DrawingAreaErrorKind<E>,
) -> anyhow::Error {
    crate::plot::plot_error("the metrics plot")(e)
}

/// A tick label: at most four decimals, no trailing zeros (`2.75`, not
/// `2.7500000000004`); very small values as `1e-5`.
fn short(y: f64) -> String {
    if y != 0.0 && y.abs() < 1e-3 {
        return format!("{y:.0e}");
    }
    let text = format!("{y:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How a chart's y axis reads.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Scale {
    Linear,
    /// Fractions shown as percentages.
    Percent,
    Log,
}

/// One chart: epochs (or iterations, `x_desc`) 1..n on x (whole numbers),
/// the series' range on y with a band left free at the top for the
/// legend, lines with a point per epoch.
pub(super) fn chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    series: &[Series],
    scale: Scale,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let log_y = scale == Scale::Log;
    let epochs = series.iter().map(|s| s.2.len()).max().unwrap_or(0).max(1) as f64;
    let finite = || series.iter().flat_map(|s| s.2.iter().copied()).filter(|v| v.is_finite() && (!log_y || *v > 0.0));
    let (lo, hi) = finite().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let x_range = 0.5..epochs + 0.5;
    let mut builder = ChartBuilder::on(area);
    builder.caption(title, ("sans-serif", 18)).margin(12).x_label_area_size(40).y_label_area_size(64);
    let x_ticks = (epochs as usize).min(12);
    let style = |c: &RGBColor| ShapeStyle::from(c).stroke_width(2);
    macro_rules! plot_on {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .x_labels(x_ticks)
                .x_label_formatter(&|x| format!("{}", x.round() as i64))
                .y_label_formatter(&|y| match scale {
                    Scale::Percent => format!("{:.1}%", 100.0 * y),
                    _ => short(*y),
                })
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(plot_error)?;
            for (name, color, ys) in series {
                let points: Vec<(f64, f64)> = ys
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite() && (!log_y || **v > 0.0))
                    .map(|(i, &v)| (i as f64 + 1.0, v))
                    .collect();
                let color = *color;
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), style(&color)))
                    .map_err(plot_error)?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style(&color)));
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(plot_error)?;
            }
            crate::plot::draw_legend(&mut chart).map_err(plot_error)?;
        }};
    }
    if log_y {
        let (lo, hi) = (lo / 2.0, hi * 20.0);
        plot_on!(builder.build_cartesian_2d(x_range, (lo..hi).log_scale()).map_err(plot_error)?);
    } else {
        let span = (hi - lo).max(1e-3);
        plot_on!(builder.build_cartesian_2d(x_range, lo - 0.1 * span..hi + 0.45 * span).map_err(plot_error)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed run reads its metrics back and writes them again: each
    /// number must come back to the bit, or the lines of a resumed run
    /// differ from a run that never stopped in the last digit (serde_json
    /// parsed some to a neighbouring f64 before its `float_roundtrip`).
    #[test]
    fn metrics_lines_read_back_to_the_bit() {
        let dir = tempfile::tempdir().unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let all: Vec<EpochMetrics> = (0..2000)
            .map(|n| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                let mut m = epoch(n, false);
                m.train.loss = (x >> 11) as f64 / (1u64 << 53) as f64 * 7.0;
                m.seconds = f64::from_bits(x >> 2);
                m
            })
            .collect();
        write_lines_and_plot(dir.path(), &all, |_| Ok(String::new()), |_, _| Ok(())).unwrap();
        let back = read(&dir.path().join(FILE), u64::MAX).unwrap();
        for (a, b) in all.iter().zip(&back) {
            assert_eq!(a.train.loss.to_bits(), b.train.loss.to_bits(), "{}", a.train.loss);
            assert_eq!(a.seconds.to_bits(), b.seconds.to_bits(), "{}", a.seconds);
        }
    }

    #[test]
    fn epochs_out_of_order_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        for (epochs, said) in [
            (vec![1, 2, 3, 2], ":4: epoch 2 is recorded after epoch 3"),
            (vec![1, 1], ":2: epoch 1 is recorded after epoch 1"),
        ] {
            let all: Vec<EpochMetrics> = epochs.into_iter().map(|n| epoch(n, false)).collect();
            write_lines_and_plot(dir.path(), &all, |_| Ok(String::new()), |_, _| Ok(())).unwrap();
            let err = format!("{:#}", read(&path, u64::MAX).unwrap_err());
            assert!(err.contains(said) && err.contains(&path.display().to_string()), "{err}");
        }
        let all: Vec<EpochMetrics> = [1, 2, 4].into_iter().map(|n| epoch(n, false)).collect();
        write_lines_and_plot(dir.path(), &all, |_| Ok(String::new()), |_, _| Ok(())).unwrap();
        assert_eq!(read(&path, 4).unwrap().len(), 2, "in order, a gap aside, it reads");
    }

    fn epoch(n: u64, value_net: bool) -> EpochMetrics {
        let scores = |loss: f64| Scores {
            positions: 1000,
            loss,
            top1: (!value_net).then_some(0.3 + 0.01 * n as f64),
            top5: (!value_net).then_some(0.6 + 0.01 * n as f64),
            accuracy: value_net.then_some(0.55),
            ..Scores::default()
        };
        EpochMetrics {
            epoch: n,
            step: 100 * n,
            lr: 0.01 * 0.1f64.powi((n / 3) as i32),
            samples_per_second: 100.0,
            seconds: 10.0,
            train: scores(3.0 - 0.1 * n as f64),
            validation: scores(2.9 - 0.1 * n as f64),
        }
    }

    /// Every epoch gets a point on every curve (one epoch shows too), the
    /// axis says "epoch", tick labels are short, and both pictures are
    /// written.
    #[test]
    fn the_plot_shows_every_epoch_of_every_curve() {
        for (epochs, value_net, curves) in [(1, false, 5), (7, false, 5), (4, true, 4)] {
            let all: Vec<_> = (1..=epochs).map(|n| epoch(n, value_net)).collect();
            let svg = plot_svg(&all).unwrap();
            assert_eq!(svg.matches("<circle").count(), curves * epochs as usize, "{epochs} epochs, value {value_net}");
            assert!(svg.contains("epoch") && svg.contains("learning rate"));
            assert!(!svg.contains("00000000"), "long tick labels");
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &all).unwrap();
            let png = std::fs::read(dir.path().join("metrics.png")).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
            let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names.len(), 3, "no temporary file left: {names:?}");
        }
    }

    /// A plot that cannot be written (here: a folder stands where the PNG
    /// goes) leaves the metrics saved and the call successful.
    #[test]
    fn a_plot_that_fails_loses_no_metrics() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("metrics.png")).unwrap();
        let all = vec![epoch(1, false), epoch(2, false)];
        write(dir.path(), &all).unwrap();
        assert_eq!(read(&dir.path().join("metrics.jsonl"), u64::MAX).unwrap(), all);
    }
}
