//! Choosing the games of a dataset: walk folders of SGF files, read every
//! game, keep those that meet the criteria, and count every rejection by
//! reason. The result is a sorted game list (see [`GameList`]).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Serialize;

use crate::progress::Progress;
use crate::sgf::{written_value, GameRecord, GameResult, Property};

/// What a game must be to be kept.
#[derive(Clone, Debug, Serialize)]
pub struct Criteria {
    /// Board size.
    pub size: usize,
    /// Oldest year kept; `None` keeps games with any date or none.
    pub min_year: Option<u16>,
    /// Keep handicap games (HA ≥ 2, or setup stones).
    pub allow_handicap: bool,
    /// Keep only games whose result names a winner or a draw.
    pub require_result: bool,
    /// Fewest moves (passes included).
    pub min_moves: usize,
    /// Most moves (passes included): the longest real games have about 400.
    pub max_moves: usize,
    /// Komi range, both ends included; `None` keeps any komi (or none).
    pub komi: Option<(f32, f32)>,
}

impl Default for Criteria {
    /// The mission's defaults: even 19×19 games from 2000 on. Komi must be
    /// 5 to 8: about 8,900 KGS games without handicap have komi 0.5 (their
    /// players differ by a rank), and reverse komi exists too; neither is
    /// an even game.
    fn default() -> Criteria {
        Criteria {
            size: 19,
            min_year: Some(2000),
            allow_handicap: false,
            require_result: false,
            min_moves: 0,
            max_moves: 1000,
            komi: Some((5.0, 8.0)),
        }
    }
}

/// Why a game was not kept. The order is the order of the checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rejection {
    /// The file could not be read or holds no SGF.
    Unreadable,
    /// A game tree that is not a readable game (bad SGF, bad move value).
    Unparsable,
    WrongSize,
    /// `HA` not a whole number of stones the board can hold.
    BadHandicap,
    Handicap,
    NoDate,
    TooOld,
    NoKomi,
    KomiOutOfRange,
    NoResult,
    /// Moves after two consecutive passes ended the game.
    PlayAfterEnd,
    TooShort,
    TooLong,
    /// Passes only, or no moves: nothing to learn, a position at most.
    NoStonePlayed,
    /// A move the rules forbid (under the record's own rules).
    IllegalMove,
}

impl Rejection {
    pub fn name(self) -> &'static str {
        match self {
            Rejection::Unreadable => "unreadable file",
            Rejection::Unparsable => "unparsable game",
            Rejection::WrongSize => "wrong board size",
            Rejection::BadHandicap => "handicap out of range",
            Rejection::Handicap => "handicap",
            Rejection::NoDate => "no date",
            Rejection::TooOld => "too old",
            Rejection::NoKomi => "no komi",
            Rejection::KomiOutOfRange => "komi out of range",
            Rejection::NoResult => "no result",
            Rejection::TooShort => "too short",
            Rejection::TooLong => "too long",
            Rejection::PlayAfterEnd => "play after two passes",
            Rejection::NoStonePlayed => "no stone played",
            Rejection::IllegalMove => "illegal move",
        }
    }
}

impl Criteria {
    /// Checks a game against the criteria; the error says which failed
    /// and, for an illegal move, where.
    pub fn judge(&self, record: &GameRecord) -> Result<(), (Rejection, String)> {
        let reject = |r: Rejection, detail: String| Err((r, detail));
        if record.size != self.size {
            return reject(Rejection::WrongSize, format!("{0}x{0}", record.size));
        }
        // An `HA` that could not be read (`HA[-5]`, a number past u32) is
        // kept among the extras: unparsed, or (`HA[4294967296]`, which
        // once passed as no handicap) a number sgf-parse read.
        let unreadable_ha = record
            .extra_properties
            .iter()
            .find(|p| matches!(p, Property::HA(_)) || matches!(p, Property::Invalid(id, _) if id == "HA"));
        if unreadable_ha.is_some() || record.handicap.is_some_and(|h| h as usize >= record.size * record.size) {
            let written = unreadable_ha.map(written_value);
            return reject(
                Rejection::BadHandicap,
                format!("HA[{}]", written.unwrap_or_else(|| format!("{}", record.handicap.unwrap_or(0)))),
            );
        }
        let stones = |setup: &crate::sgf::Setup| setup.iter().filter(|(_, c)| c.is_some()).count();
        // A root that only clears points (`AE` on the empty board) sets
        // nothing up; a setup node between moves edits the game, whatever
        // it does.
        let root_stones = stones(&record.setup);
        let handicap = record.handicap.unwrap_or(0) >= 2 || root_stones > 0 || !record.later_setup.is_empty();
        if handicap && !self.allow_handicap {
            let detail = match (record.handicap, record.later_setup.first()) {
                (Some(n), _) if n >= 2 => format!("HA {n}"),
                // Stones set up without HA (it once said "HA 0").
                _ if root_stones > 0 => format!("{root_stones} setup stones, no HA"),
                (_, Some((moves, setup))) if stones(setup) == 0 => format!("stones removed after move {moves}"),
                (_, Some((moves, setup))) => format!("{} stones set up after move {moves}", stones(setup)),
                _ => String::new(),
            };
            return reject(Rejection::Handicap, detail);
        }
        if let Some(min) = self.min_year {
            match &record.date {
                None => return reject(Rejection::NoDate, String::new()),
                Some(d) if d.year < min => return reject(Rejection::TooOld, d.year.to_string()),
                Some(_) => {}
            }
        }
        if let Some((lo, hi)) = self.komi {
            match record.komi {
                None => {
                    // `KM[6,5]`, or `KM[99999]`, is kept among the extras: show it.
                    let unread = record
                        .extra_properties
                        .iter()
                        .find(|p| sgf_parse::SgfProp::identifier(*p) == "KM")
                        .map(written_value);
                    let detail = unread.map(|k| match k.trim().parse::<f64>() {
                        Ok(_) => format!("KM[{k}] is no komi a game is played with ({})", crate::bounds::KOMI),
                        Err(_) => format!("unreadable KM[{k}]"),
                    });
                    return reject(Rejection::NoKomi, detail.unwrap_or_default());
                }
                Some(k) if !(lo..=hi).contains(&k) => return reject(Rejection::KomiOutOfRange, k.to_string()),
                Some(_) => {}
            }
        }
        if self.require_result && !matches!(record.result, Some(GameResult::Win { .. } | GameResult::Draw)) {
            return reject(Rejection::NoResult, record.result.as_ref().map(|r| r.to_string()).unwrap_or_default());
        }
        // Before the length, which counts the moves up to the end only.
        if let Some(end) = record.play_after_two_passes() {
            return reject(Rejection::PlayAfterEnd, format!("{} moves after move {end}", record.moves.len() - end));
        }
        // Passes after the end are none of the game's moves (prepare drops them).
        let moves = record.end_of_play();
        if moves < self.min_moves {
            return reject(Rejection::TooShort, format!("{moves} moves"));
        }
        if moves > self.max_moves {
            return reject(Rejection::TooLong, format!("{moves} moves"));
        }
        if !record.plays_a_stone() {
            let detail = if moves == 0 { "no moves".to_string() } else { format!("{moves} passes") };
            return reject(Rejection::NoStonePlayed, detail);
        }
        record.replay(record.rules()).map_err(|e| (Rejection::IllegalMove, e.to_string()))?;
        Ok(())
    }
}

/// A game named by its file and its index in that file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GameRef {
    pub file: PathBuf,
    pub index: usize,
}

/// The list `filter` writes and `prepare` reads: one game per line,
/// `path<TAB>index`, sorted, after a comment line. A file under the
/// list's folder is named by its path from there, any other by its
/// absolute path, so the list reads the same from any working folder and
/// moves with the games beside it (as a playlist does). In paths, a
/// backslash, tab, line feed or carriage return is written `\\`, `\t`,
/// `\n`, `\r`, and a byte that is not UTF-8 `\xHH`, so that any file name
/// survives the round trip. Lists under the two older first lines are
/// read as they were written: relative paths from the working folder,
/// and under the oldest, without escapes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GameList(pub Vec<GameRef>);

const LIST_HEADER: &str = r"# go-train game list: file<TAB>game index in file (file names escaped: \\ \t \n \r \xHH; relative to this list's folder)";
/// The first line before paths were the list's folder's (read as [`OLD_LIST_HEADER`]'s are, from the working folder).
#[cfg(test)]
const CWD_LIST_HEADER: &str =
    r"# go-train game list: file<TAB>game index in file (file names escaped: \\ \t \n \r \xHH)";
const OLD_LIST_HEADER: &str = "# go-train game list: file<TAB>game index in file";

impl GameList {
    /// The list as written to `list_path` (see [`GameList`]), sorted as
    /// written: the same games found under roots spelled otherwise (a
    /// link, an absolute path) give the same text.
    pub fn to_text(&self, list_path: &Path) -> String {
        let folder = std::fs::canonicalize(list_folder(list_path)).ok();
        let mut entries: Vec<(PathBuf, usize)> = Vec::with_capacity(self.0.len());
        // A collection's games follow each other: its path is worked out once.
        let mut last: Option<(&Path, PathBuf)> = None;
        for g in &self.0 {
            let written = match &last {
                Some((file, written)) if *file == g.file.as_path() => written.clone(),
                _ => listed_path(&g.file, folder.as_deref()),
            };
            entries.push((written.clone(), g.index));
            last = Some((&g.file, written));
        }
        entries.sort();
        entries.dedup();
        let mut out = format!("{LIST_HEADER}\n");
        for (file, index) in entries {
            out.push_str(&format!("{}\t{index}\n", escape_path(&file)));
        }
        out
    }

    /// Whether `path` holds a list `go-train filter` wrote (any of its
    /// first lines): what a new list may replace without asking.
    pub fn is_written_list(path: &Path) -> bool {
        use std::io::BufRead;
        let Ok(file) = crate::bounded_read::open_without_waiting(path) else { return false };
        let mut first = String::new();
        // One line at most, however long the file: a list's first line is short.
        let _ = std::io::BufReader::new(std::io::Read::take(file, 1024)).read_line(&mut first);
        first.starts_with(OLD_LIST_HEADER)
    }

    /// Reads a list; errors name the file and line.
    pub fn read(path: &Path) -> Result<GameList> {
        let text = crate::bounded_read::read_text_at_most(path, crate::bounded_read::LIST_BYTES, "a game list")
            .with_context(|| format!("{}: cannot read the game list", path.display()))?;
        // `lines` drops a carriage return before each line feed, and the
        // byte-order mark goes: a list saved by a Windows editor reads as
        // written (its mark once made the header line 1's bad entry).
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let header = text.lines().next().unwrap_or_default();
        let escaped = header != OLD_LIST_HEADER;
        let from_list = header == LIST_HEADER;
        // A list reached through a link names paths from where it lies.
        let real_folder = path.is_symlink().then(|| std::fs::canonicalize(path).ok()).flatten();
        let folder = real_folder.as_deref().map_or(list_folder(path), list_folder);
        let mut games = Vec::new();
        // A game listed twice would be prepared, and trained on, twice.
        let mut first_lines = std::collections::HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let bad = || format!("{}:{}: expected `file<TAB>game index`, found {line:?}", path.display(), n + 1);
            let (file, index) =
                line.rsplit_once('\t').and_then(|(f, i)| Some((f, i.trim().parse().ok()?))).with_context(bad)?;
            // Under escapes a name holds no tab: `a.sgf<TAB>0<TAB>7` is two
            // indices, once read as game 7 of a file `a.sgf<TAB>0`.
            if escaped && file.contains('\t') {
                bail!(bad());
            }
            let file = if escaped { unescape_path(file).with_context(bad)? } else { PathBuf::from(file) };
            let file =
                if from_list && file.is_relative() && folder != Path::new(".") { folder.join(file) } else { file };
            // The file itself, not its name: `a.sgf` and `/data/a.sgf`, or
            // `x/../a.sgf`, are one file (a file not there is its name).
            let same_file = std::fs::metadata(&file).map(|m| (m.dev(), m.ino())).map_err(|_| file.clone());
            if let Some((first, spelt)) = first_lines.insert((same_file, index), (n + 1, file.clone())) {
                let spelt = if spelt == file { String::new() } else { format!(", as {}", spelt.display()) };
                bail!(
                    "{}:{}: lists game {index} of {} again (first on line {first}{spelt})",
                    path.display(),
                    n + 1,
                    file.display()
                );
            }
            games.push(GameRef { file, index });
        }
        Ok(GameList(games))
    }
}

/// The folder a list at `path` lies in (`.` for a bare file name).
fn list_folder(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// How a list in `folder` (resolved, when it exists) names `file`: by its
/// path from there when under it, else by its absolute path. The file's
/// folder is resolved (links, `..`) where it exists, so `..` never has to
/// be written; the file itself is kept as named, a link included.
fn listed_path(file: &Path, folder: Option<&Path>) -> PathBuf {
    let resolved = match (file.parent(), file.file_name()) {
        (Some(parent), Some(name)) => {
            let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
            std::fs::canonicalize(parent).ok().map(|p| p.join(name))
        }
        _ => None,
    };
    let absolute = resolved.or_else(|| std::path::absolute(file).ok()).unwrap_or_else(|| file.to_path_buf());
    match folder.and_then(|f| absolute.strip_prefix(f).ok()) {
        Some(relative) if !relative.as_os_str().is_empty() => relative.to_path_buf(),
        _ => absolute,
    }
}

/// A path's bytes as list text (see [`GameList`]). A leading `#` is
/// escaped too, or the line would read as a comment.
fn escape_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let (mut out, bytes) = match bytes.strip_prefix(b"#") {
        Some(rest) => ("\\x23".to_string(), rest),
        None => (String::new(), bytes),
    };
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The inverse of [`escape_path`]; `None` for a bad escape.
fn unescape_path(text: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        let (&e, tail) = rest.split_first()?;
        rest = tail;
        bytes.push(match e {
            b'\\' => b'\\',
            b't' => b'\t',
            b'n' => b'\n',
            b'r' => b'\r',
            b'x' => {
                let hex = std::str::from_utf8(rest.get(..2)?).ok()?;
                rest = &rest[2..];
                u8::from_str_radix(hex, 16).ok()?
            }
            _ => return None,
        });
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// What `filter` found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FilterReport {
    /// SGF files looked at.
    pub files: u64,
    /// Games found in them (an unreadable file counts as one).
    pub games: u64,
    pub kept: u64,
    /// Rejections by reason.
    pub rejected: BTreeMap<&'static str, u64>,
    /// A few examples per reason: `file#game: detail`.
    pub examples: BTreeMap<&'static str, Vec<String>>,
    /// Games (kept or not) whose komi was written in Fox's hundredths
    /// (`KM[750]`) and read as meant (see [`crate::sgf::fox_komi`]).
    pub komi_in_hundredths: u64,
}

const EXAMPLES_PER_REASON: usize = 5;

/// The SGF files named by a list of roots: see [`find_sgf_files`].
#[derive(Debug, Default)]
pub struct SgfFiles {
    /// Each file once, in the order found; unreadable folders as errors in
    /// place.
    pub files: Vec<Result<PathBuf, UnreadableEntry>>,
    /// Links to `*.sgf` files or folders passed over because links are not
    /// followed (worth saying: a folder of links otherwise looks empty).
    pub links_skipped: u64,
    /// Files reached twice (overlapping roots, or a link to a file also
    /// found directly), listed once.
    pub repeats: u64,
    /// Followed links back to a folder above them (`games/loop -> games`),
    /// passed over: what lies there is read once, by the other way in.
    pub link_loops: Vec<PathBuf>,
}

/// An entry of a folder that could not be read (a broken link, a folder
/// without permission): where, when that is known, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct UnreadableEntry {
    pub path: Option<PathBuf>,
    pub reason: String,
}

impl UnreadableEntry {
    fn from_walk(e: &walkdir::Error) -> Self {
        // walkdir's own message repeats the path; the cause alone reads
        // better after it.
        let reason = match e.path().and_then(link_to_nothing) {
            Some(target) => format!("a link to {}, which does not exist", target.display()),
            None => e.io_error().map_or_else(|| e.to_string(), ToString::to_string),
        };
        UnreadableEntry { path: e.path().map(Path::to_path_buf), reason }
    }
}

/// Where `path` links to, when it is a link to nothing.
fn link_to_nothing(path: &Path) -> Option<PathBuf> {
    let target = std::fs::read_link(path).ok()?;
    (!path.exists()).then_some(target)
}

/// Whether `path` is named as an SGF file (`*.sgf`, any case).
fn is_sgf_name(path: &Path) -> bool {
    path.extension().is_some_and(|x| x.eq_ignore_ascii_case("sgf"))
}

impl std::fmt::Display for UnreadableEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// The SGF files under `roots`: a root that is not a folder is taken
/// whatever its name (and refused when read if it is no file), and folders are searched for `*.sgf` (any case), sorted by
/// name. Links inside folders are followed only if asked: a link loop or a
/// link out of the tree would otherwise surprise. A file reached twice
/// (`games games/a.sgf`) is listed once, or its games would be trained on
/// twice.
pub fn find_sgf_files(roots: &[PathBuf], follow_links: bool) -> SgfFiles {
    let mut found = SgfFiles::default();
    let mut seen = std::collections::HashSet::new();
    let mut add = |found: &mut SgfFiles, path: PathBuf| {
        if seen.insert(path.canonicalize().unwrap_or_else(|_| path.clone())) {
            found.files.push(Ok(path));
        } else {
            found.repeats += 1;
        }
    };
    for root in roots {
        if std::fs::metadata(root).is_ok_and(|m| !m.is_dir()) {
            add(&mut found, root.clone());
            continue;
        }
        for entry in walkdir::WalkDir::new(root).follow_links(follow_links).sort_by_file_name() {
            match entry {
                Ok(e) => {
                    let sgf = is_sgf_name(e.path());
                    if e.file_type().is_symlink() && e.depth() > 0 {
                        found.links_skipped += u64::from(sgf || e.path().is_dir());
                    } else if sgf && e.file_type().is_file() {
                        add(&mut found, e.into_path());
                    }
                }
                Err(e) if e.loop_ancestor().is_some() => found.link_loops.extend(e.path().map(Path::to_path_buf)),
                // Followed, a link to nothing is an SGF file to read only
                // where its name says so: a stray one beside the games once
                // failed `show` of their folder.
                Err(e) if e.path().is_some_and(|p| !is_sgf_name(p) && link_to_nothing(p).is_some()) => {}
                Err(e) => found.files.push(Err(UnreadableEntry::from_walk(&e))),
            }
        }
    }
    found
}

/// Reads every game of `files` (from [`find_sgf_files`]) in parallel and
/// keeps those that meet `criteria`. The list is sorted, so the same tree
/// gives the same list.
pub fn filter(
    files: &[Result<PathBuf, UnreadableEntry>],
    criteria: &Criteria,
    progress: &Progress,
) -> (GameList, FilterReport) {
    let tallies: Vec<(Vec<GameRef>, FilterReport)> = files
        .par_iter()
        .map(|file| {
            let tally = match file {
                Err(e) => unreadable(e.to_string()),
                Ok(path) => filter_file(path, criteria),
            };
            progress.inc(1);
            tally
        })
        .collect();
    progress.finish();

    let mut report = FilterReport { files: files.len() as u64, ..FilterReport::default() };
    let mut kept = Vec::new();
    for (games, tally) in tallies {
        kept.extend(games);
        report.add(tally);
    }
    kept.sort();
    report.kept = kept.len() as u64;
    (GameList(kept), report)
}

/// The games of one file that meet `criteria`, and its tally: judged as
/// each is read, so that what is held grows with the games kept, not with
/// the games in the file (a file of millions of empty games once took
/// gigabytes).
fn filter_file(path: &Path, criteria: &Criteria) -> (Vec<GameRef>, FilterReport) {
    let mut kept = Vec::new();
    let mut tally = FilterReport::default();
    let read = crate::sgf::visit_file(path, |index, game| {
        tally.games += 1;
        tally.komi_in_hundredths += u64::from(game.as_ref().is_ok_and(|r| r.komi_in_hundredths));
        let verdict = match game {
            Err(e) => Err((Rejection::Unparsable, e.to_string())),
            Ok(record) => criteria.judge(&record),
        };
        match verdict {
            Ok(()) => kept.push(GameRef { file: path.to_path_buf(), index }),
            Err((reason, detail)) => tally.reject(reason, || format!("{}#{index}: {detail}", path.display())),
        }
    });
    match read {
        Ok(()) => (kept, tally),
        Err(e) => unreadable(format!("{}: {e}", path.display())),
    }
}

/// The tally of a file that cannot be read: one game, rejected.
fn unreadable(detail: String) -> (Vec<GameRef>, FilterReport) {
    let mut tally = FilterReport { games: 1, ..FilterReport::default() };
    tally.reject(Rejection::Unreadable, || detail);
    (Vec::new(), tally)
}

impl FilterReport {
    /// Counts a rejection, keeping its detail while the reason has fewer
    /// than [`EXAMPLES_PER_REASON`] examples.
    fn reject(&mut self, reason: Rejection, detail: impl FnOnce() -> String) {
        *self.rejected.entry(reason.name()).or_default() += 1;
        let examples = self.examples.entry(reason.name()).or_default();
        if examples.len() < EXAMPLES_PER_REASON {
            examples.push(detail());
        }
    }

    /// Adds the tally of a later file (its examples after ours).
    fn add(&mut self, later: FilterReport) {
        self.games += later.games;
        self.komi_in_hundredths += later.komi_in_hundredths;
        for (reason, count) in later.rejected {
            *self.rejected.entry(reason).or_default() += count;
        }
        for (reason, details) in later.examples {
            let examples = self.examples.entry(reason).or_default();
            let room = EXAMPLES_PER_REASON.saturating_sub(examples.len());
            examples.extend(details.into_iter().take(room));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sgf::parse_game;

    #[test]
    fn each_criterion_rejects_with_its_reason() {
        let c = Criteria::default();
        let game = |props: &str| parse_game(&format!("(;GM[1]FF[4]{props};B[cd];W[dc])")).unwrap();
        let even = "SZ[19]KM[6.5]DT[2005-01-02]RE[B+R]";
        assert_eq!(c.judge(&game(even)), Ok(()));
        let reason = |props: &str| c.judge(&game(props)).unwrap_err().0;
        assert_eq!(reason("SZ[13]KM[6.5]DT[2005]"), Rejection::WrongSize);
        assert_eq!(reason("SZ[19]KM[0.5]HA[2]AB[dd][pp]DT[2005]"), Rejection::Handicap);
        let detail = |props: &str| c.judge(&game(props)).unwrap_err().1;
        assert_eq!(detail("SZ[19]KM[0.5]HA[2]AB[dd][pp]DT[2005]"), "HA 2");
        assert_eq!(detail("SZ[19]KM[6.5]AB[dd][pp]DT[2005]"), "2 setup stones, no HA");
        // Clearing points of the empty board sets nothing up.
        assert_eq!(c.judge(&game("SZ[19]KM[6.5]AE[dd]DT[2005]")), Ok(()));
        let edited = parse_game("(;GM[1]FF[4]SZ[19]KM[6.5]DT[2005];B[cd];AE[cd];W[dc])").unwrap();
        assert_eq!(c.judge(&edited).unwrap_err(), (Rejection::Handicap, "stones removed after move 1".to_string()));
        assert_eq!(reason("SZ[19]KM[6.5]"), Rejection::NoDate);
        assert_eq!(reason("SZ[19]KM[6.5]DT[1999-12-31]"), Rejection::TooOld);
        assert_eq!(reason("SZ[19]KM[0.5]DT[2005]"), Rejection::KomiOutOfRange);
        assert_eq!(reason("SZ[19]DT[2005]"), Rejection::NoKomi);
        let unreadable = c.judge(&game("SZ[19]DT[2005]KM[6,5]")).unwrap_err();
        assert_eq!(unreadable, (Rejection::NoKomi, "unreadable KM[6,5]".to_string()));
        let (why, detail) = c.judge(&game("SZ[19]DT[2005]KM[99999]")).unwrap_err();
        assert_eq!(why, Rejection::NoKomi);
        assert!(detail.starts_with("KM[99999] is no komi") && detail.contains("1000"), "{detail}");
        let strict = Criteria { require_result: true, min_moves: 3, ..Criteria::default() };
        assert_eq!(strict.judge(&game("SZ[19]KM[6.5]DT[2005]RE[Void]")).unwrap_err().0, Rejection::NoResult);
        assert_eq!(strict.judge(&game(even)).unwrap_err().0, Rejection::TooShort);
        assert_eq!(reason("SZ[19]KM[6.5]DT[2005]HA[-5]"), Rejection::BadHandicap);
        assert_eq!(reason("SZ[19]KM[6.5]DT[2005]HA[99999999999999999999]"), Rejection::BadHandicap);
        assert_eq!(reason("SZ[19]KM[6.5]DT[2005]HA[400]"), Rejection::BadHandicap);
        for past_u32 in ["4294967296", "4294967298"] {
            let text = format!("SZ[19]KM[6.5]DT[2005]HA[{past_u32}]");
            assert_eq!(reason(&text), Rejection::BadHandicap, "{text}");
            assert_eq!(c.judge(&game(&text)).unwrap_err().1, format!("HA[{past_u32}]"));
        }
        let played_on = parse_game("(;SZ[19]KM[6.5]DT[2005];B[aa];W[];B[];W[bb])").unwrap();
        assert_eq!(c.judge(&played_on).unwrap_err().0, Rejection::PlayAfterEnd);
        // Said so, not "too short" for its 3 moves up to the end.
        let played_on =
            parse_game(&format!("(;SZ[19]KM[6.5]DT[2005]RE[B+R];B[aa];W[];B[]{})", ";W[bb];B[cc]".repeat(30)));
        let long = Criteria { min_moves: 10, ..Criteria::default() };
        assert_eq!(long.judge(&played_on.unwrap()).unwrap_err().0, Rejection::PlayAfterEnd);
        // A third pass (NNGS, IGS) ends a game that counts as it ended; a
        // game of endless passes is one of two.
        let third_pass = parse_game("(;SZ[19]KM[6.5]DT[2005];B[aa];W[];B[];W[])").unwrap();
        assert_eq!(c.judge(&third_pass), Ok(()));
        // A game of passes only was kept, as a game of two passes.
        let endless = parse_game(&format!("(;SZ[19]KM[6.5]DT[2005]{})", ";B[];W[]".repeat(600))).unwrap();
        assert_eq!(c.judge(&endless).unwrap_err(), (Rejection::NoStonePlayed, "2 passes".to_string()));
        let empty = parse_game("(;SZ[19]KM[6.5]DT[2005]RE[B+R])").unwrap();
        assert_eq!(c.judge(&empty).unwrap_err(), (Rejection::NoStonePlayed, "no moves".to_string()));
        let endless = parse_game(&format!("(;SZ[19]KM[6.5]DT[2005]RE[W+R]{})", ";B[];W[]".repeat(600))).unwrap();
        assert_eq!(strict.judge(&endless).unwrap_err(), (Rejection::TooShort, "2 moves".to_string()));
        let long = parse_game(&format!("(;SZ[19]KM[6.5]DT[2005]{})", ";B[aa];W[]".repeat(501))).unwrap();
        assert_eq!(c.judge(&long).unwrap_err().0, Rejection::TooLong);
        let fox = parse_game("(;GM[1]SZ[19]KM[375]DT[2019-05-01];B[cd];W[dc])").unwrap();
        assert_eq!((c.judge(&fox), fox.komi), (Ok(()), Some(7.5)));
        let illegal = parse_game("(;SZ[19]KM[6.5]DT[2005];B[cd];W[cd])").unwrap();
        let (r, detail) = c.judge(&illegal).unwrap_err();
        assert_eq!(r, Rejection::IllegalMove);
        assert!(detail.contains("move 2"), "{detail}");
    }

    #[test]
    fn any_file_name_survives_a_list() {
        use std::os::unix::ffi::OsStrExt;
        let odd = [
            PathBuf::from("new\nline/game\t1.sgf"),
            PathBuf::from("back\\slash\r.sgf"),
            PathBuf::from(std::ffi::OsStr::from_bytes(b"latin1-\xe9t\xe9.sgf")),
            PathBuf::from("名人戦/第1局.sgf"),
            PathBuf::from("#misc/a.sgf"),
        ];
        let dir = tempfile::tempdir().unwrap();
        let list = GameList(
            odd.iter().enumerate().map(|(index, file)| GameRef { file: dir.path().join(file), index }).collect(),
        );
        let path = dir.path().join("games.txt");
        std::fs::write(&path, list.to_text(&path)).unwrap();
        let mut sorted = list.0.clone();
        sorted.sort();
        assert_eq!(GameList::read(&path).unwrap().0, sorted);
        // A list written before escapes reads as it is.
        std::fs::write(&path, format!("{OLD_LIST_HEADER}\nC:\\games\\a.sgf\t2\n")).unwrap();
        assert_eq!(GameList::read(&path).unwrap().0[0].file, PathBuf::from("C:\\games\\a.sgf"));
        std::fs::write(&path, format!("{LIST_HEADER}\nbad\\q.sgf\t2\n")).unwrap();
        assert!(GameList::read(&path).unwrap_err().to_string().contains("games.txt:2"));
        std::fs::write(&path, format!("{LIST_HEADER}\na.sgf\t0\t7\n")).unwrap();
        assert!(GameList::read(&path).unwrap_err().to_string().contains("games.txt:2: expected"));
        // A game listed twice was once prepared (and trained on) twice.
        std::fs::write(&path, format!("{LIST_HEADER}\na.sgf\t2\nb.sgf\t2\na.sgf\t1\na.sgf\t2\n")).unwrap();
        let err = GameList::read(&path).unwrap_err().to_string();
        assert!(err.contains("games.txt:5: lists game 2 of") && err.contains("first on line 2"), "{err}");
        // Under another name, too: it was prepared twice.
        std::fs::write(dir.path().join("a.sgf"), "(;SZ[9];B[aa])").unwrap();
        std::fs::create_dir(dir.path().join("x")).unwrap();
        std::fs::write(&path, format!("{LIST_HEADER}\na.sgf\t0\nx/../a.sgf\t0\n")).unwrap();
        let err = GameList::read(&path).unwrap_err().to_string();
        assert!(err.contains("games.txt:3: lists game 0 of") && err.contains("first on line 2, as "), "{err}");
        // Written by filter, a list is read back, and so a list is only
        // replaced where filter wrote it.
        assert!(GameList::is_written_list(&path));
        std::fs::write(&path, "{\"manifest\": 1}").unwrap();
        assert!(!GameList::is_written_list(&path) && !GameList::is_written_list(&dir.path().join("none")));
    }

    #[test]
    fn each_file_is_found_once_links_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let games = dir.path().join("games");
        std::fs::create_dir(&games).unwrap();
        std::fs::write(games.join("a.sgf"), "(;GM[1])").unwrap();
        std::fs::write(games.join("notes.txt"), "").unwrap();
        let named = dir.path().join("b.txt");
        std::fs::write(&named, "(;GM[1])").unwrap();
        let link = dir.path().join("link.sgf");
        std::os::unix::fs::symlink(games.join("a.sgf"), &link).unwrap();
        std::os::unix::fs::symlink(&games, games.join("loop")).unwrap();

        // Overlapping roots list a file once; a file named is taken
        // whatever its name, and a link named as a root is read.
        let found = find_sgf_files(&[games.clone(), games.join("a.sgf"), named.clone(), link.clone()], false);
        let files: Vec<_> = found.files.into_iter().map(Result::unwrap).collect();
        assert_eq!(files, [games.join("a.sgf"), named]);
        assert_eq!(found.repeats, 2);
        // Links inside a folder are counted, not followed.
        let found = find_sgf_files(&[dir.path().to_path_buf()], false);
        assert_eq!(found.files.len(), 1);
        assert_eq!(found.links_skipped, 2);
        // Followed, the loop is named as one, not taken for an unreadable
        // file (it once was, and counted among the files).
        let found = find_sgf_files(&[dir.path().to_path_buf()], true);
        assert_eq!(found.files, [Ok(games.join("a.sgf"))]);
        assert!(found.repeats >= 1);
        assert_eq!(found.link_loops, [games.join("loop")]);

        // Followed, a link to nothing is skipped unless named as SGF, and
        // then named as what it is (any such link was once an unreadable
        // file, failing `show` of the folder).
        std::os::unix::fs::symlink(dir.path().join("gone"), games.join("stray")).unwrap();
        assert_eq!(find_sgf_files(std::slice::from_ref(&games), true).files, [Ok(games.join("a.sgf"))]);
        std::os::unix::fs::symlink(dir.path().join("gone.sgf"), games.join("z.sgf")).unwrap();
        let found = find_sgf_files(std::slice::from_ref(&games), true);
        let reason = format!("a link to {}, which does not exist", dir.path().join("gone.sgf").display());
        assert_eq!(found.files[1], Err(UnreadableEntry { path: Some(games.join("z.sgf")), reason }));
    }

    /// A list names the games under its folder from there and any other by
    /// its absolute path, so it reads the same from any working folder
    /// (relative paths were once the working folder's, and were read as
    /// that of whoever read the list).
    #[test]
    fn lists_round_trip_and_name_files_from_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("lists");
        std::fs::create_dir_all(folder.join("a b")).unwrap();
        std::fs::write(folder.join("a b/c.sgf"), "(;)").unwrap();
        let elsewhere = dir.path().join("elsewhere.sgf");
        std::fs::write(&elsewhere, "(;)").unwrap();
        // The list's own folder named with a detour: the paths still read from it.
        let path = folder.join("../lists/games.txt");
        let list = GameList(vec![
            GameRef { file: folder.join("a b/c.sgf"), index: 0 },
            GameRef { file: folder.join("a b/../../elsewhere.sgf"), index: 1 },
            GameRef { file: folder.join("d.sgf"), index: 3 },
        ]);
        let text = list.to_text(&path);
        std::fs::write(&path, &text).unwrap();
        let written: Vec<&str> = text.lines().skip(1).collect();
        let real = elsewhere.canonicalize().unwrap();
        // Sorted as written (absolute paths first), not as given.
        assert_eq!(written, [&format!("{}\t1", real.display()), "a b/c.sgf\t0", "d.sgf\t3"]);
        let read = GameList::read(&path).unwrap();
        let read_files: Vec<PathBuf> = read.0.iter().map(|g| g.file.clone()).collect();
        assert_eq!(read_files, [real.clone(), folder.join("../lists/a b/c.sgf"), folder.join("../lists/d.sgf")]);
        // The same games spelled otherwise (reversed, through `..`) give the same text.
        let respelled = GameList(vec![
            GameRef { file: folder.join("d.sgf"), index: 3 },
            GameRef { file: real.clone(), index: 1 },
            GameRef { file: folder.join("a b/../a b/c.sgf"), index: 0 },
        ]);
        assert_eq!(respelled.to_text(&path), text);
        // Windows line ends and byte-order mark, and a list reached through
        // a link: read from the folder the list lies in.
        let crlf = folder.join("crlf.list");
        std::fs::write(&crlf, format!("\u{feff}{}", text.replace('\n', "\r\n"))).unwrap();
        assert_eq!(GameList::read(&crlf).unwrap().0[1].file, folder.join("a b/c.sgf"));
        let link = dir.path().join("link.list");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let through_link = GameList::read(&link).unwrap();
        assert!(through_link.0[1].file.ends_with("lists/a b/c.sgf") && through_link.0[1].file.is_file());
        // Lists written before: relative paths from the working folder.
        std::fs::write(&path, format!("{CWD_LIST_HEADER}\na b/c.sgf\t0\n")).unwrap();
        assert_eq!(GameList::read(&path).unwrap().0[0].file, PathBuf::from("a b/c.sgf"));
        std::fs::write(&path, "x.sgf 3\n").unwrap();
        let err = GameList::read(&path).unwrap_err().to_string();
        assert!(err.contains("games.txt:1"), "{err}");
    }
}
