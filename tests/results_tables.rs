//! The match figures the docs state, recomputed from the match records
//! kept in `docs/matches/`: every table row of README.md,
//! docs/matches/README.md and docs/results/*.md that links (or names) a
//! kept match folder must state that match's games and wins, and where the
//! table has those columns its win rate with the 95% interval and its Elo
//! difference (a row linking several folders states their sum). So a
//! rescored or finished match cannot leave a stale figure behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use go_train::eval::arena::stats::{elo_difference, wilson_interval, Z95};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Games and wins of go-train (player A) in a kept match. Where GnuGo's
/// cross-check named another winner than go-train's referee, GnuGo's count
/// is the one the docs state (docs/results/strength.md, *The referee*).
fn games_and_wins(folder: &str) -> (usize, usize) {
    let path = root().join("docs/matches").join(folder).join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let summary: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let details = summary["details"].as_array().unwrap_or_else(|| panic!("{}: no details", path.display()));
    let a_won = |game: &Value| {
        let a_black = game["a_black"].as_bool().expect("a_black");
        match (game["gnugo_agrees"].as_bool(), game["gnugo_score"].as_str()) {
            (Some(false), Some(score)) => score.starts_with('B') == a_black,
            _ => game["winner"] == "a",
        }
    };
    assert_eq!(summary["games"].as_u64(), Some(details.len() as u64), "{}: games", path.display());
    (details.len(), details.iter().filter(|g| a_won(g)).count())
}

/// A markdown table row's cells, trimmed; `None` for lines that are not rows.
fn cells(line: &str) -> Option<Vec<String>> {
    let line = line.trim();
    let inner = line.strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_string()).collect())
}

/// The numbers in `text`, in order, with `−` read as a minus sign and
/// markdown emphasis and thousands separators ignored.
fn numbers(text: &str) -> Vec<f64> {
    let text = text.replace('−', "-").replace([',', '*'], "");
    let mut found = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        let starts_number = c == '-' || c == '+';
        if c.is_ascii_digit() || c == '.' || (starts_number && current.is_empty()) {
            current.push(c);
        } else if !current.is_empty() {
            if let Ok(n) = current.parse::<f64>() {
                found.push(n);
            }
            current.clear();
            if starts_number {
                current.push(c);
            }
        }
    }
    found
}

/// The kept match folders a cell links (`…matches/NAME/…`), or the one
/// it names alone (`` `NAME` ``, as docs/matches/README.md does).
fn match_folders(cell: &str, kept: &BTreeSet<String>) -> Vec<String> {
    let named = cell.trim_matches('`');
    if kept.contains(named) {
        return vec![named.to_string()];
    }
    cell.match_indices("matches/")
        .filter_map(|(at, _)| cell[at + "matches/".len()..].split(['/', ')']).next())
        .filter(|name| kept.contains(*name))
        .map(str::to_string)
        .collect()
}

/// One checked row: where it is, the folders it links, and its mismatches.
struct RowCheck {
    place: String,
    folders: Vec<String>,
    problems: Vec<String>,
}

fn check_row(place: String, header: &[String], row: &[String], kept: &BTreeSet<String>) -> Option<RowCheck> {
    let folders: Vec<String> = row.iter().flat_map(|c| match_folders(c, kept)).collect();
    if folders.is_empty() {
        return None;
    }
    let column = |name: &str| header.iter().position(|h| h.to_lowercase().starts_with(name));
    let (games, wins) = folders.iter().map(|f| games_and_wins(f)).fold((0, 0), |(g, w), (g1, w1)| (g + g1, w + w1));
    let p = wins as f64 / games as f64;
    let (lo, hi) = wilson_interval(wins as f64, games as f64, Z95);
    let mut problems = Vec::new();
    // Games and wins every checked table states; the rate and Elo where it has those columns.
    let mut expect = |name: &str, stated: Option<Vec<f64>>, computed: Vec<f64>, tolerance: f64| match stated {
        None if matches!(name, "win rate" | "elo") => {}
        None => problems.push(format!("no {name:?} column")),
        Some(stated) => {
            let close = stated.len() >= computed.len()
                && stated.iter().zip(&computed).all(|(s, c)| (s - c).abs() <= tolerance + 1e-9);
            if !close {
                problems.push(format!("{name}: the row says {stated:?}, the records give {computed:?}"));
            }
        }
    };
    let stated = |name: &str| column(name).and_then(|i| row.get(i)).map(|c| numbers(c));
    expect("games", stated("games"), vec![games as f64], 0.0);
    expect("wins", stated("wins"), vec![wins as f64], 0.0);
    expect("win rate", stated("win rate"), vec![100.0 * p, 100.0 * lo, 100.0 * hi], 0.05);
    if wins > 0 && wins < games {
        let elo = [p, lo, hi].map(elo_difference);
        expect("elo", stated("elo"), elo.to_vec(), 0.5);
    }
    Some(RowCheck { place, folders, problems })
}

fn checked_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("docs/matches/README.md")];
    let results = root().join("docs/results");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&results)
        .unwrap_or_else(|e| panic!("{}: {e}", results.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

fn kept_matches() -> BTreeSet<String> {
    std::fs::read_dir(root().join("docs/matches"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("summary.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn rows_of(file: &Path, kept: &BTreeSet<String>) -> Vec<RowCheck> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let name = file.strip_prefix(root()).unwrap_or(file).display().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut checks = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some(row) = cells(line) else {
            header = None;
            continue;
        };
        let is_separator = row.iter().all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')));
        match &header {
            None if lines.get(i + 1).and_then(|l| cells(l)).is_some() => header = Some(row),
            None => {}
            Some(_) if is_separator => {}
            Some(h) => checks.extend(check_row(format!("{name}:{}", i + 1), h, &row, kept)),
        }
    }
    checks
}

#[test]
fn every_row_citing_a_kept_match_states_its_records_figures() {
    let kept = kept_matches();
    assert!(kept.len() >= 6, "kept matches found: {kept:?}");
    let checks: Vec<RowCheck> = checked_files().iter().flat_map(|f| rows_of(f, &kept)).collect();
    let problems: Vec<String> = checks
        .iter()
        .flat_map(|c| c.problems.iter().map(move |p| format!("{} ({}): {p}", c.place, c.folders.join(" + "))))
        .collect();
    assert!(problems.is_empty(), "figures out of step with docs/matches:\n{}", problems.join("\n"));
    let cited: BTreeSet<&String> = checks.iter().flat_map(|c| &c.folders).collect();
    let uncited: Vec<&String> = kept.iter().filter(|k| !cited.contains(k)).collect();
    assert!(uncited.is_empty(), "kept matches no results table states: {uncited:?}");
}

#[test]
fn a_stale_figure_is_caught() {
    let kept = kept_matches();
    let header: Vec<String> =
        ["go-train", "games", "wins", "win rate (95% interval)", "Elo", "records"].map(String::from).to_vec();
    let row = |wins: &str| -> Vec<String> {
        [
            "root policy",
            "40",
            wins,
            "72.5% (57.2–83.9%)",
            "+168 (+50 to +287)",
            "[s32](../matches/rootresnet-vs-gnugo10-s32/)",
        ]
        .map(String::from)
        .to_vec()
    };
    let right = check_row("right".into(), &header, &row("29"), &kept).expect("a row citing a kept match");
    assert!(right.problems.is_empty(), "{:?}", right.problems);
    // The referee's count (30) is not what GnuGo's count of game 35 gives.
    let stale = check_row("stale".into(), &header, &row("**30**"), &kept).unwrap();
    assert_eq!(stale.problems.len(), 1, "{:?}", stale.problems);
    assert!(
        check_row("none".into(), &header, &row("29")[..5], &kept).is_none(),
        "rows citing no match are not checked"
    );
}
