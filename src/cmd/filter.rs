//! `go-train filter`: choose the games of a dataset.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::atomic::{file_in_the_way, write_atomic};
use go_train::bounded_read;
use go_train::bounds::{self, real_flag};
use go_train::dataset::filter::{filter, find_sgf_files, Criteria, GameList};
use go_train::progress::Progress;

/// Walk folders of SGF game records and list the games fit for training.
///
/// Keeps 19x19 games without handicap, dated 2000 or later, with komi 5 to 8
/// (even games), that replay legally under their own rules. Writes the
/// sorted list (file and game index per line) and, next to it, a JSON
/// report counting every rejected game by reason.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train filter ../shared/datasets/kgs-6d --out datasets/kgs.list
  go-train filter datasets/goban-original-games --out datasets/pro.list --min-year 0 --any-komi
  go-train filter games/ --out strong.list --require-result --min-moves 50 --allow-handicap")]
pub struct Args {
    /// Folders (searched recursively for *.sgf, any case) or SGF files.
    #[arg(required = true)]
    roots: Vec<PathBuf>,
    /// Where to write the game list.
    #[arg(long, short)]
    out: PathBuf,
    /// Where to write the JSON report [default: <OUT>.report.json].
    #[arg(long)]
    report: Option<PathBuf>,
    /// Board size to keep (2 to 25).
    #[arg(long, default_value_t = 19, value_parser = super::board_sizes())]
    size: usize,
    /// Oldest year to keep; 0 keeps every game, dated or not.
    #[arg(long, default_value_t = 2000)]
    min_year: u16,
    /// Keep handicap games too.
    #[arg(long)]
    allow_handicap: bool,
    /// Keep only games whose result (RE) names a winner or a draw.
    #[arg(long)]
    require_result: bool,
    /// Fewest moves a game must have.
    #[arg(long, default_value_t = Criteria::default().min_moves)]
    min_moves: usize,
    /// Most moves a game may have, counted to its end at two passes;
    /// at least --min-moves.
    #[arg(long, default_value_t = Criteria::default().max_moves)]
    max_moves: usize,
    /// Lowest komi kept.
    #[arg(long, default_value_t = 5.0, value_parser = real_flag::<f32>(bounds::KOMI))]
    min_komi: f32,
    /// Highest komi kept (at least --min-komi).
    #[arg(long, default_value_t = 8.0, value_parser = real_flag::<f32>(bounds::KOMI))]
    max_komi: f32,
    /// Keep games with any komi, or none.
    #[arg(long, conflicts_with_all = ["min_komi", "max_komi"])]
    any_komi: bool,
    /// Follow symbolic links while walking.
    #[arg(long)]
    follow_links: bool,
    /// Replace --out or --report even where it holds something other than
    /// a game list or report filter wrote.
    #[arg(long)]
    force: bool,
}

/// Whether `path` holds a report `go-train filter` wrote.
fn is_filter_report(path: &std::path::Path) -> bool {
    let Ok(text) = bounded_read::read_text_at_most(path, bounded_read::LIST_BYTES, "a filter report") else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|json| json.get("criteria").is_some() && json.get("report").is_some())
}

pub fn run(args: Args) -> Result<()> {
    if args.max_moves < args.min_moves {
        bail!("--max-moves {} is less than --min-moves {}: no game would be kept", args.max_moves, args.min_moves);
    }
    if args.max_komi < args.min_komi {
        bail!("--max-komi {} is less than --min-komi {}: no game would be kept", args.max_komi, args.min_komi);
    }
    for root in &args.roots {
        if !root.exists() {
            bail!("{}: no such file or folder", root.display());
        }
    }
    let report_path = args.report.clone().unwrap_or_else(|| {
        let mut name = args.out.file_name().unwrap_or_default().to_os_string();
        name.push(".report.json");
        args.out.with_file_name(name)
    });
    if super::same_file(&args.out, &report_path) {
        bail!("--out and --report both name {}: give each its own file", args.out.display());
    }
    // Found before the games are read, not after.
    for (flag, path) in [("--out", &args.out), ("--report", &report_path)] {
        // `kgs.list/` is no file: its rename failed only after the report
        // beside it had replaced the last run's.
        if path.as_os_str().as_encoded_bytes().ends_with(b"/") || path.file_name().is_none() {
            bail!("{flag} {}: names a folder; give the file to write", path.display());
        }
        if path.is_dir() {
            bail!("{flag} {}: a folder; give the file to write", path.display());
        }
        if let Some(file) = file_in_the_way(path) {
            bail!("{flag} {}: {} is not a folder", path.display(), file.display());
        }
        // A pipe at --out once failed only after the report was written.
        go_train::atomic::refuse_special_file(path).with_context(|| flag.to_string())?;
    }
    let criteria = Criteria {
        size: args.size,
        min_year: (args.min_year > 0).then_some(args.min_year),
        allow_handicap: args.allow_handicap,
        require_result: args.require_result,
        min_moves: args.min_moves,
        max_moves: args.max_moves,
        komi: (!args.any_komi).then_some((args.min_komi, args.max_komi)),
    };
    let found = find_sgf_files(&args.roots, args.follow_links);
    let files = found.files;
    if !files.iter().any(Result::is_ok) {
        let links = match found.links_skipped {
            0 => String::new(),
            n => format!(" ({n} links to SGF files or folders passed over: add --follow-links)"),
        };
        let first_error = files.iter().find_map(|f| f.as_ref().err()).map(|e| format!(": {e}")).unwrap_or_default();
        bail!("no SGF file found in {}{links}{first_error}", super::joined(&args.roots));
    }
    // Written over a game it reads, the list would replace the game.
    for (flag, path) in [("--out", &args.out), ("--report", &report_path)] {
        if let Some(game) =
            files.iter().flatten().find(|f| f.file_name() == path.file_name() && super::same_file(f, path))
        {
            bail!("{flag} {}: that is a game being read ({}); name another file", path.display(), game.display());
        }
    }
    // A list or report from an earlier filter is replaced; anything else
    // (a dataset's manifest.json, a run's config, a list made by hand) is
    // finished work.
    let written_by_filter = [GameList::is_written_list(&args.out), is_filter_report(&report_path)];
    for ((flag, path), ours) in [("--out", &args.out), ("--report", &report_path)].into_iter().zip(written_by_filter) {
        if path.exists() && !ours && !args.force {
            bail!(
                "{flag} {}: holds something other than what filter writes; name another file, or add --force to replace it",
                path.display()
            );
        }
    }
    let progress = Progress::new("filter", files.len() as u64, "files");
    let started = std::time::Instant::now();
    let (list, report) = filter(&files, &criteria, &progress);
    // The report first: a list it could not follow would replace the
    // last one with nothing to say how it was made.
    let json = serde_json::json!({"criteria": criteria, "report": report});
    write_atomic(&report_path, format!("{}\n", serde_json::to_string_pretty(&json)?).as_bytes())?;
    write_atomic(&args.out, list.to_text(&args.out).as_bytes())?;

    go_train::say!(
        "filter: {} files, {} games in {:.1} s: kept {}, rejected {}",
        report.files,
        report.games,
        started.elapsed().as_secs_f64(),
        report.kept,
        report.games - report.kept
    );
    for (reason, n) in &report.rejected {
        let example =
            report.examples.get(reason).and_then(|e| e.first()).map(|e| format!("  e.g. {e}")).unwrap_or_default();
        go_train::say!("  {n:>8}  {reason}{example}");
    }
    if found.repeats > 0 {
        go_train::say!("  {:>8}  files reached twice (overlapping inputs or links) read once", found.repeats);
    }
    if found.links_skipped > 0 {
        go_train::say!(
            "  {:>8}  links to SGF files or folders passed over (--follow-links follows them)",
            found.links_skipped
        );
    }
    if let Some(first) = found.link_loops.first() {
        go_train::say!(
            "  {:>8}  links back to a folder above them passed over, e.g. {}",
            found.link_loops.len(),
            first.display()
        );
    }
    if report.komi_in_hundredths > 0 {
        go_train::say!(
            "  {:>8}  games wrote komi in Fox's hundredths (KM[650]: 6.5; KM[375], of a stone: 7.5): read in points",
            report.komi_in_hundredths
        );
    }
    go_train::say!("list: {}\nreport: {}", args.out.display(), report_path.display());
    Ok(())
}
