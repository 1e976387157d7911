//! What every plot of go-train shares: the font, inside the binary, and
//! PNG files written atomically.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// The font plots are laid out (and PNGs drawn) with, inside the binary so
/// that a machine without fonts draws the same picture: DejaVu Sans cut to
/// ASCII (14 KB; its licence is `assets/fonts/LICENSE-DejaVu`). SVGs name
/// a sans-serif font and leave it to the viewer.
const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans-subset.ttf");

/// Registers [`FONT`] as `sans-serif` (once; both backends measure text
/// with it).
pub fn register_font() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // The font is valid: a failure here is a build that lost it.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Whether a plot at `path` is written as SVG (it ends in `.svg`, any
/// case); PNG otherwise.
pub fn is_svg(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"))
}

/// The plot file names a command takes: `.png` or `.svg`. Anything else
/// would be PNG bytes under another name, which nothing opens.
pub fn check_plot_path(flag: &str, path: &Path) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("png" | "svg") => Ok(()),
        _ => anyhow::bail!("{flag} {}: name a .png or a .svg file", path.display()),
    }
}

/// `text` as the PNG font draws it: each character outside ASCII as `?`,
/// so that a name the font lacks shows as missing rather than vanishing.
pub fn drawable(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii() { c } else { '?' }).collect()
}

/// Draws a `size` PNG at `path` with `draw`, atomically: drawn to a
/// temporary name beside it, then renamed.
pub fn write_png(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(DrawingArea<BitMapBackend, plotters::coord::Shift>) -> Result<()>,
) -> Result<()> {
    register_font();
    crate::atomic::refuse_special_file(path)?;
    // As `atomic::write_atomic` does for every other output: the folder
    // named is made.
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // The encoder picks the format from the extension: keep `.png` last.
    let tmp = crate::atomic::tmp_path(path).with_extension("tmp.png");
    // The file is made here first: plotters words one it cannot write as
    // a nest of its own error types ("ImageError(IoError(Os { code: 2, …").
    std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Err(e) = draw(BitMapBackend::new(&tmp, size).into_drawing_area()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
    crate::atomic::sync_dir(dir)
}

/// A plotters error as an error of go-train's, saying what was drawn.
pub fn plot_error<E: std::error::Error + Send + Sync + 'static>(
    what: &'static str,
) -> impl Fn(plotters::drawing::DrawingAreaErrorKind<E>) -> anyhow::Error {
    move |e| anyhow::anyhow!("drawing {what}: {e}")
}

/// The legend every go-train chart draws: top right, on a light box.
pub fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_names_and_text_the_png_font_draws() {
        assert!(is_svg(Path::new("a/b.SVG")) && !is_svg(Path::new("b.png")));
        assert!(check_plot_path("--plot", Path::new("x.png")).is_ok());
        let err = check_plot_path("--plot", Path::new("x.jpg")).unwrap_err().to_string();
        assert!(err.contains("--plot x.jpg") && err.contains(".svg"), "{err}");
        assert!(check_plot_path("--plot", Path::new("plot")).is_err());
        assert_eq!(drawable("李昌镐 (B) vs Cho é"), "??? (B) vs Cho ?");
    }

    #[test]
    fn a_png_that_cannot_be_written_is_said_in_the_systems_words() {
        let err = write_png(Path::new("/proc/go-train-plot.png"), (10, 10), |_| Ok(())).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.starts_with("cannot write /proc/go-train-plot.png.tmp") && text.contains("os error"), "{text}");
        assert!(!text.contains("IoError"), "{text}");
    }
}
