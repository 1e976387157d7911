//! Turning a game list into a dataset: replay each game, encode every
//! position, and write shards and the manifest.
//!
//! Games are processed in chunks, in parallel, and their records appended
//! in list order; blocks are cut every `block_records` records of a split
//! and compressed in parallel. Nothing in the output depends on the number
//! of threads, so the same list and settings give byte-identical files.
//!
//! Crash safety: an old manifest is removed before any shard is touched,
//! shards are written under temporary names and renamed when complete, and
//! the manifest is written last. A folder with a manifest is a finished
//! dataset; one without is redone from the start by the next run (a full
//! run over 36,000 games takes seconds, so resuming mid-way is not worth
//! its complexity).
//!
//! With [`PrepareOptions::part`], a run prepares one contiguous slice of
//! the list and writes a part manifest instead ([`super::parts`]); it
//! touches only its own files, so parts may run at once into one folder,
//! and a killed part is redone alone.
//!
//! Two writers: a run over the whole list holds the folder's lock alone
//! ([`crate::lock`]); a part shares it with the other parts and holds a
//! lock of its own, so that the same part cannot run twice at once and
//! no part runs beside a whole-list run.
//!
//! A list of which no game is kept writes no dataset: `prepare` fails,
//! counting why the games were dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rayon::prelude::*;

use super::filter::{GameList, GameRef};
use super::manifest::{
    Input, Manifest, Settings, ShardEntry, SplitCounts, DATASET_VERSION, DROPPED_EXAMPLES, MANIFEST, STAGING,
};
use super::ownership;
use super::parts::{is_part_manifest, part_manifest_files, same_list, Part, PartManifest};
use super::shard::{tmp_path, Block, Layout, ShardWriter, NO_VALUE};
use super::split::{game_key, Split, SplitFractions, ValueSampling};
use crate::atomic::remove_if_present;
use crate::features::{FeatureSet, PackedPlanes};
use crate::go::Rules;
use crate::lock::Lock;
use crate::progress::Progress;
use crate::sgf::{visit_file, GameRecord, ParsedGame};

/// Settings of `prepare` (all recorded in the manifest).
#[derive(Clone, Debug)]
pub struct PrepareOptions {
    /// Board size of the dataset; games of other sizes are dropped.
    pub board_size: usize,
    /// The input planes written for each position.
    pub features: FeatureSet,
    pub seed: u64,
    pub split: SplitFractions,
    pub value: ValueSampling,
    /// Name of the rules for records without a known `RU`.
    pub default_rules: String,
    pub shard_records: u64,
    pub block_records: usize,
    pub zstd_level: i32,
    /// Replace a dataset made with other inputs or settings.
    pub force: bool,
    /// Prepare only this part of the list ([`super::parts`]).
    pub part: Option<Part>,
    /// Give each record its game's final ownership ([`super::ownership`]).
    pub ownership: bool,
}

impl PrepareOptions {
    /// The settings a dataset prepared with these options records.
    pub fn settings(&self) -> Settings {
        Settings {
            seed: self.seed,
            split: self.split,
            value: self.value,
            default_rules: self.default_rules.to_ascii_lowercase(),
            shard_records: self.shard_records,
            block_records: self.block_records as u64,
            zstd_level: self.zstd_level,
            ownership: self.ownership,
        }
    }
}

impl Default for PrepareOptions {
    fn default() -> PrepareOptions {
        PrepareOptions {
            board_size: 19,
            features: FeatureSet::Seed,
            seed: 1,
            split: SplitFractions::default(),
            value: ValueSampling::All,
            default_rules: "japanese".into(),
            shard_records: 1 << 20,
            block_records: 1024,
            zstd_level: 3,
            force: false,
            part: None,
            ownership: false,
        }
    }
}

impl PrepareOptions {
    /// Board size and planes of the records written.
    pub fn layout(&self) -> Layout {
        Layout { board_size: self.board_size, planes: self.features.planes(), ownership: self.ownership }
    }
}

/// Games per unit of parallel work: small enough to bound memory (a chunk
/// holds the encoded positions of its games), large enough to keep the
/// threads busy between the serial writes.
const CHUNK_GAMES: usize = 32;

/// What happened to one game of the list.
enum GameOutcome {
    Written {
        split: Split,
        block: Block,
    },
    /// Why, and (from [`encode_chunk`]) where and the cause if any.
    Dropped(&'static str, String),
}

/// Prepares a dataset from the game list at `list_path` into `out`.
/// Returns the manifest, and whether the dataset was already up to date.
pub fn prepare(
    list_path: &Path,
    out: &Path,
    options: &PrepareOptions,
    progress: &Progress,
) -> Result<(Manifest, bool)> {
    let list_bytes = crate::bounded_read::read_at_most(list_path, crate::bounded_read::LIST_BYTES, "a game list")
        .with_context(|| format!("{}: cannot read the game list", list_path.display()))?;
    let list = GameList::read(list_path)?;
    let rules = Rules::by_name(&options.default_rules).with_context(|| {
        format!("unknown rules `{}` (chinese, japanese, aga, nz, tromp-taylor)", options.default_rules)
    })?;
    if options.block_records == 0 || options.shard_records < options.block_records as u64 {
        bail!(
            "--shard-records {} is less than --block-records {}: a shard must hold at least one block",
            options.shard_records,
            options.block_records
        );
    }
    let input = Input {
        list: list_path.display().to_string(),
        list_crc32: format!("{:08x}", crc32fast::hash(&list_bytes)),
        games_listed: list.0.len() as u64,
        files_crc32: Some(files_crc32(&list)),
    };
    let settings = options.settings();

    // One writer of the whole folder, or parts that each write their own
    // files (and share the folder with the other parts).
    let what = "a dataset (--out) is a folder of shards";
    let _locks = match options.part {
        None => [Some(Lock::create_folder(out, what)?), None],
        Some(part) => {
            crate::atomic::create_folder(out, what)?;
            [Some(Lock::folder_shared(out)?), Some(Lock::own(out, &part.lock_name())?)]
        }
    };
    // A run killed while moving its finished dataset in: the move is
    // finished first, so the folder holds that dataset again.
    if options.part.is_none() && Manifest::read(&out.join(STAGING)).is_ok() {
        crate::say!("prepare: {}: finishing the move of the dataset a killed run had finished", out.display());
        move_staged_in(out)?;
    }
    // A manifest there that cannot be read is another program's file, or
    // a dataset of another version: replaced only when asked.
    let existing = match Manifest::read(out) {
        Ok(existing) => Some(existing),
        Err(_) if !out.join(MANIFEST).exists() => None,
        Err(e) if options.force => {
            crate::say!("prepare: replacing what --force names: {e:#}");
            None
        }
        Err(e) => bail!("{e:#}; --force replaces it, or name another --out"),
    };
    if let Some(existing) = existing {
        let same = same_list(&existing.input, &input)
            && existing.settings == settings
            && existing.board_size == options.board_size
            && existing.features == options.features;
        // A part is done when its own part manifest is there (clear_part):
        // one lost after the merge is redone.
        if same && !options.force && options.part.is_none() {
            // A shard gone or cut short once passed as "up to date".
            if let Some(entry) = existing.damaged_shard(out) {
                bail!(
                    "{}: the dataset there is damaged ({} is missing or not its {} bytes); --force prepares it again",
                    out.display(),
                    entry.file,
                    entry.bytes
                );
            }
            // What a killed `--force` left of the dataset it was writing.
            remove_if_present(&out.join(STAGING))?;
            return Ok((existing, true));
        }
        // Parts of a dataset prepared whole would start by removing its
        // manifest (and did): it is finished, and its parts are not there.
        if same && !options.force && options.part.is_some() && part_manifest_files(out)?.is_empty() {
            bail!(
                "{} holds this dataset already, prepared whole in one process: no part needs doing \
                 (--force prepares it again in parts)",
                out.display()
            );
        }
        if !same && !options.force {
            let mut differ = existing.settings_differences(&settings, options.features, options.board_size);
            if !same_list(&existing.input, &input) {
                differ.push(format!("the games listed in {} or their files", input.list));
            }
            bail!(
                "{} holds a dataset made from other inputs or settings ({}); use --force to replace it, or another --out",
                out.display(),
                differ.join("; ")
            );
        }
    } else if options.part.is_none() && !options.force {
        // Parts not yet merged are finished work of a `--part` job, which
        // the whole list would replace (and once did, silently).
        let parts: Vec<String> =
            part_manifest_files(out)?.into_keys().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
        if !parts.is_empty() {
            bail!(
                "{} holds parts of a dataset prepared with --part ({}): run the missing parts or `go-train dataset \
                 merge`, or use --force to prepare the whole list there instead",
                out.display(),
                parts.join(", ")
            );
        }
    }
    // The whole list is written beside the dataset it replaces, which
    // stays whole until the new one is known to hold something (a
    // `--force` with a wrong setting once left an empty folder).
    let staging = out.join(STAGING);
    remove_if_present(&staging)?;
    let games = match options.part {
        None => {
            std::fs::create_dir(&staging).with_context(|| format!("creating {}", staging.display()))?;
            &list.0[..]
        }
        Some(part) => {
            if let Some(done) = clear_part(out, part, &input, &settings, options)? {
                return Ok((done, true));
            }
            &list.0[part.range(list.0.len())]
        }
    };

    let mut writer = DatasetWriter::new(if options.part.is_none() { &staging } else { out }, options);
    let chunks: Vec<&[GameRef]> = games.chunks(CHUNK_GAMES).collect();
    let window = 4 * rayon::current_num_threads();
    let mut files = ParsedFiles::new(games);
    for group in chunks.chunks(window) {
        files.load(group.iter().flat_map(|chunk| chunk.iter()));
        let outcomes: Vec<Vec<GameOutcome>> = group
            .par_iter()
            .map(|chunk| {
                let r = encode_chunk(chunk, &files, rules, options);
                progress.inc(chunk.len() as u64);
                r
            })
            .collect();
        for outcome in outcomes.into_iter().flatten() {
            writer.add(outcome);
        }
        writer.write_full_blocks()?;
    }
    progress.finish();
    let (splits, (dropped, dropped_examples), shards) = writer.finish()?;
    let manifest = Manifest {
        dataset_version: DATASET_VERSION,
        go_train_version: env!("CARGO_PKG_VERSION").to_string(),
        features: options.features,
        feature_version: options.features.version(),
        planes: options.features.planes(),
        board_size: options.board_size,
        input,
        settings,
        splits,
        dropped,
        dropped_examples,
        shards,
    };
    match options.part {
        None => {
            // A dataset of nothing would only fail later, in training.
            if let Err(e) = manifest.check_not_empty(out) {
                remove_if_present(&staging)?;
                return Err(e);
            }
            manifest.write(&staging)?;
            move_staged_in(out)?
        }
        Some(part) => {
            let first_game = part.range(list.0.len()).start as u64;
            let games = games.len() as u64;
            let dataset = manifest.clone();
            PartManifest { part: part.index, parts: part.count, first_game, games, dataset }.write(out)?
        }
    }
    Ok((manifest, false))
}

/// Moves the dataset finished in `out`'s staging folder (its manifest
/// written there last, so a manifest there means every shard is) into
/// `out`, replacing the dataset there: the old manifest goes first (the
/// folder stops being that dataset before its shards change), then the
/// new shards move in, what is left of ours goes, and the new manifest
/// comes last. Every step can be done again, so a run killed anywhere in
/// it leaves the staged manifest for the next `prepare` to finish the move
/// with: a kill leaves the old dataset or the new one, never neither.
fn move_staged_in(out: &Path) -> Result<()> {
    let staging = out.join(STAGING);
    let manifest = Manifest::read(&staging)?;
    remove_if_there(&out.join(MANIFEST))?;
    for shard in &manifest.shards {
        let (from, to) = (staging.join(&shard.file), out.join(&shard.file));
        if from.exists() {
            std::fs::rename(&from, &to).with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
        }
    }
    let new: HashSet<&str> = manifest.shards.iter().map(|s| s.file.as_str()).collect();
    for entry in std::fs::read_dir(out).with_context(|| format!("reading {}", out.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let ours = name.ends_with(".shard")
            || name.ends_with(".shard.tmp")
            || (name.starts_with(MANIFEST) && name.ends_with(".tmp"))
            || is_part_manifest(name.trim_end_matches(".tmp"));
        if ours && !new.contains(name) {
            remove_if_there(&path)?;
        }
    }
    let (from, to) = (staging.join(MANIFEST), out.join(MANIFEST));
    std::fs::rename(&from, &to).with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
    crate::atomic::sync_dir(out)?;
    remove_if_present(&staging)
}

/// Readies `dir` for `part`: returns its manifest when the part is already
/// done with these settings; otherwise removes the part's own files (and,
/// with `force`, the dataset's manifest and the parts made with other
/// settings), never another part's of the same job, which may be running.
fn clear_part(
    dir: &Path,
    part: Part,
    input: &Input,
    settings: &Settings,
    options: &PrepareOptions,
) -> Result<Option<Manifest>> {
    // How a part found differs from this one, each named with its value
    // here and there (empty: made as this one is).
    let differences = |p: &PartManifest| {
        let mut differ = p.dataset.settings_differences(settings, options.features, options.board_size);
        if p.parts != part.count {
            differ.insert(0, format!("part count: {} here, {} there", part.count, p.parts));
        }
        if !same_list(&p.dataset.input, input) {
            differ.push(format!("the games listed in {} or their files", input.list));
        }
        differ
    };
    let mut stale = Vec::new();
    for (path, found) in part_manifest_files(dir)? {
        // One that cannot be read (a kill mid-write of another program's)
        // is replaced by --force, as a dataset's manifest is; it once
        // blocked every part, --force or not.
        let found = match found {
            Ok(found) => found,
            Err(e) if options.force => {
                crate::say!("prepare: removing what --force names: {e:#}");
                remove_if_there(&path)?;
                continue;
            }
            Err(e) => bail!("{e:#}; --force replaces it"),
        };
        let differ = differences(&found);
        if !differ.is_empty() {
            stale.push((path, found, differ));
        } else if found.part == part.index && !options.force {
            // A part's shard gone or cut short once passed as done, and
            // the merged manifest listed it: the part is prepared again,
            // as a failed array task submitted again would be.
            match found.dataset.damaged_shard(dir) {
                None => return Ok(Some(found.dataset)),
                Some(entry) => crate::say!(
                    "prepare: part {part}'s {} is missing or not its {} bytes: preparing the part again",
                    entry.file,
                    entry.bytes
                ),
            }
        }
    }
    if !stale.is_empty() && !options.force {
        let named: Vec<String> =
            stale.iter().map(|(p, _, differ)| format!("{}: {}", p.display(), differ.join("; "))).collect();
        bail!(
            "{} holds parts made from other inputs, settings or part counts ({}); use --force to replace them",
            dir.display(),
            named.join(" | ")
        );
    }
    remove_if_there(&dir.join(MANIFEST))?;
    for (path, found, _) in stale {
        remove_if_there(&path)?;
        for shard in &found.dataset.shards {
            remove_if_there(&dir.join(&shard.file))?;
        }
    }
    // Shards without a part's tag are a dataset prepared whole, whose
    // manifest is gone now: left, they would lie unlisted beside the parts'.
    let tag = part.shard_tag();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.contains(&format!("{tag}-"))
            || name.trim_end_matches(".tmp") == part.manifest_name()
            || is_whole_dataset_shard(name)
        {
            remove_if_there(&path)?;
        }
    }
    Ok(None)
}

/// [`Input::files_crc32`] of `list`: one `stat` a file (0.06 s for the
/// 36,692 files of kgs-6d, cached).
fn files_crc32(list: &GameList) -> String {
    let mut hasher = crc32fast::Hasher::new();
    let mut last: Option<&Path> = None;
    for game in &list.0 {
        if last != Some(game.file.as_path()) {
            last = Some(&game.file);
            let size = std::fs::metadata(&game.file).map_or(u64::MAX, |m| m.len());
            hasher.update(&size.to_le_bytes());
        }
    }
    format!("{:08x}", hasher.finalize())
}

/// Whether `name` is a shard (or its temporary file) of a dataset prepared
/// whole: `SPLIT-NUMBER.shard`, with no part's tag between.
fn is_whole_dataset_shard(name: &str) -> bool {
    let stem = name.trim_end_matches(".tmp").strip_suffix(".shard").unwrap_or_default();
    stem.split_once('-').is_some_and(|(split, number)| {
        !split.is_empty()
            && split.bytes().all(|b| b.is_ascii_lowercase())
            && !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Removes a file, if it is there: another part may have removed it first.
fn remove_if_there(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// The parsed game files a group of chunks reads. Each file is parsed
/// once, in parallel with the others, and kept for the next group: a
/// collection (tygem's monthly files hold 3,200 games, 4.5 MB) spans many
/// chunks, and parsing it once per chunk made `prepare` take minutes per
/// file. Of a file only the games the list names are kept: a file of
/// millions of empty games (`(;)`) took gigabytes held whole.
struct ParsedFiles {
    /// The games of each file the list names.
    listed: HashMap<PathBuf, HashSet<usize>>,
    files: HashMap<PathBuf, Result<ParsedFile, String>>,
    /// Files parsed so far (what the tests count).
    parses: usize,
}

/// The listed games of a file, and how many it holds.
struct ParsedFile {
    games: HashMap<usize, ParsedGame>,
    trees: usize,
}

impl ParsedFiles {
    /// Ready to read the games of `list`.
    fn new(list: &[GameRef]) -> ParsedFiles {
        let mut listed: HashMap<PathBuf, HashSet<usize>> = HashMap::new();
        for g in list {
            listed.entry(g.file.clone()).or_default().insert(g.index);
        }
        ParsedFiles { listed, files: HashMap::new(), parses: 0 }
    }

    /// Keeps the files `games` need (parsing those not yet held) and drops
    /// the others.
    fn load<'a>(&mut self, games: impl Iterator<Item = &'a GameRef>) {
        let mut needed: Vec<&PathBuf> = games.map(|g| &g.file).collect();
        needed.dedup();
        let mut kept = HashMap::with_capacity(needed.len());
        let mut missing = Vec::new();
        for path in needed {
            match self.files.remove(path) {
                Some(parsed) => drop(kept.insert(path.clone(), parsed)),
                None if !kept.contains_key(path) && !missing.contains(&path) => missing.push(path),
                None => {}
            }
        }
        let listed = &self.listed;
        let parsed: Vec<_> = missing
            .par_iter()
            .map(|&path| {
                let wanted = listed.get(path);
                let mut file = ParsedFile { games: HashMap::new(), trees: 0 };
                let read = visit_file(path, |index, game| {
                    file.trees += 1;
                    if wanted.is_some_and(|w| w.contains(&index)) {
                        file.games.insert(index, game);
                    }
                });
                (path.clone(), read.map(|()| file).map_err(|e| e.to_string()))
            })
            .collect();
        self.parses += parsed.len();
        kept.extend(parsed);
        self.files = kept;
    }

    fn get(&self, path: &Path) -> Option<&Result<ParsedFile, String>> {
        self.files.get(path)
    }
}

/// Replays and encodes the games of one chunk, in list order.
fn encode_chunk(games: &[GameRef], files: &ParsedFiles, rules: Rules, options: &PrepareOptions) -> Vec<GameOutcome> {
    let mut planes = PackedPlanes::new(options.board_size, options.features.planes());
    games
        .iter()
        .map(|g| {
            let outcome = match files.get(&g.file) {
                Some(Err(e)) => GameOutcome::Dropped("unreadable file", e.clone()),
                None => GameOutcome::Dropped("unreadable file", String::new()),
                Some(Ok(parsed)) => match parsed.games.get(&g.index) {
                    None => GameOutcome::Dropped("game not in file", format!("the file holds {}", parsed.trees)),
                    Some(Err(e)) => GameOutcome::Dropped("unparsable game", e.to_string()),
                    Some(Ok(record)) => encode_game(record, rules, options, &mut planes),
                },
            };
            // Where, written out only for a dropped game (most are kept).
            let at = || format!("{}#{}", g.file.display(), g.index);
            match outcome {
                GameOutcome::Dropped(why, cause) if cause.is_empty() => GameOutcome::Dropped(why, at()),
                GameOutcome::Dropped(why, cause) => GameOutcome::Dropped(why, format!("{}: {cause}", at())),
                written => written,
            }
        })
        .collect()
}

/// One record per position of the game: the position before each move,
/// labelled with that move and, when sampled, with the game's result.
fn encode_game(record: &GameRecord, rules: Rules, options: &PrepareOptions, planes: &mut PackedPlanes) -> GameOutcome {
    if record.size != options.board_size {
        return GameOutcome::Dropped("wrong board size", format!("{0}x{0}", record.size));
    }
    if record.moves.is_empty() {
        return GameOutcome::Dropped("no moves", String::new());
    }
    // Lists not written by `filter` may name such games.
    if record.play_after_two_passes().is_some() {
        return GameOutcome::Dropped("play after two passes", String::new());
    }
    if !record.plays_a_stone() {
        return GameOutcome::Dropped("no stone played", String::new());
    }
    // Passes after the end (a game of endless passes) would become as many
    // training positions after the game.
    let trimmed = record.without_passes_after_end();
    let record = trimmed.as_ref().unwrap_or(record);
    let key = game_key(record);
    let split = options.split.assign(key, options.seed);
    let Some(labelled) = options.value.chosen_in(record, key, options.seed) else {
        return match record.marked_value_position() {
            Some(marked) => GameOutcome::Dropped(
                "marked value position after the last move",
                format!("position {marked} of a game of {} moves", record.moves.len()),
            ),
            None => GameOutcome::Dropped("no marked value position", String::new()),
        };
    };
    let winner = record.result.as_ref().and_then(|r| r.winner());
    let unlabelled = options.value.writes_unlabelled();
    if !unlabelled && winner.is_none() {
        return GameOutcome::Dropped("no winner for the marked position", String::new());
    }
    let layout = options.layout();
    let mut block = Block::default();
    block.reserve(record.moves.len(), layout);
    // The label planes are known only at the end: zeroed until then.
    let label_bytes = layout.planes_bytes() - layout.planes * layout.plane_words() * 8;
    let mut to_move = Vec::new();
    let replayed = record.replay_with(record.rules_or(rules), |i, game, mv| {
        if !(unlabelled || labelled[i]) {
            return;
        }
        options.features.encode_into(game, planes);
        let policy = mv.mv.policy_index(options.board_size).expect("recorded moves are points or passes") as u16;
        let value = match winner {
            Some(w) if labelled[i] => (w == mv.color) as i8,
            _ => NO_VALUE,
        };
        block.push(planes.words(), policy, value, i.min(u16::MAX as usize) as u16);
        if layout.ownership {
            block.planes.resize(block.planes.len() + label_bytes, 0);
            to_move.push(mv.color);
        }
    });
    match replayed {
        Ok(last) => {
            if layout.ownership {
                let owners = ownership::final_owners(&last, key ^ options.seed);
                ownership::fill_labels(&mut block, layout, &owners, &to_move);
            }
            GameOutcome::Written { split, block }
        }
        // A game that turns out illegal is dropped whole, never half-written.
        Err(e) => GameOutcome::Dropped("illegal move", e.to_string()),
    }
}

/// What a finished writer reports: counts per split, dropped games by
/// reason with a few examples of each, and the shards.
type Written = (BTreeMap<Split, SplitCounts>, Dropped, Vec<ShardEntry>);

/// Dropped games: how many by reason, and the first few of each.
type Dropped = (BTreeMap<String, u64>, BTreeMap<String, Vec<String>>);

/// Appends records split by split, cuts blocks, and rolls shards.
struct DatasetWriter<'a> {
    dir: &'a Path,
    options: &'a PrepareOptions,
    /// Records not yet in a block, per split.
    pending: BTreeMap<Split, Block>,
    /// The shard being written, per split.
    open: BTreeMap<Split, (String, ShardWriter)>,
    /// Shards finished so far, in order.
    shards: Vec<ShardEntry>,
    counts: BTreeMap<Split, SplitCounts>,
    dropped: Dropped,
}

impl<'a> DatasetWriter<'a> {
    fn new(dir: &'a Path, options: &'a PrepareOptions) -> DatasetWriter<'a> {
        DatasetWriter {
            dir,
            options,
            pending: BTreeMap::new(),
            open: BTreeMap::new(),
            shards: Vec::new(),
            counts: Split::ALL.iter().map(|&s| (s, SplitCounts::default())).collect(),
            dropped: Dropped::default(),
        }
    }

    fn add(&mut self, outcome: GameOutcome) {
        match outcome {
            GameOutcome::Dropped(reason, example) => {
                *self.dropped.0.entry(reason.to_string()).or_default() += 1;
                let examples = self.dropped.1.entry(reason.to_string()).or_default();
                if examples.len() < DROPPED_EXAMPLES {
                    examples.push(example);
                }
            }
            GameOutcome::Written { split, block } => {
                let c = self.counts.get_mut(&split).expect("all splits counted");
                c.games += 1;
                c.positions += block.len() as u64;
                c.value_positions += block.value.iter().filter(|&&v| v != NO_VALUE).count() as u64;
                self.pending.entry(split).or_default().append(&block);
            }
        }
    }

    /// Cuts every full block from the pending records, compresses them in
    /// parallel and writes them in order; with `all`, the last partial
    /// blocks too.
    fn write_blocks(&mut self, all: bool) -> Result<()> {
        let n = self.options.block_records;
        let layout = self.options.layout();
        let level = self.options.zstd_level;
        // Blocks are compressed from views into the pending records, and
        // the consumed records dropped at once after: cutting one block at
        // a time would move the rest every time.
        let mut views = Vec::new();
        let mut consumed = Vec::new();
        for (&split, pending) in self.pending.iter() {
            let full = pending.len() / n * n;
            let end = if all { pending.len() } else { full };
            views.extend((0..end).step_by(n).map(|start| (split, pending.view(start..(start + n).min(end), layout))));
            consumed.push((split, end));
        }
        let frames: Vec<std::io::Result<Vec<u8>>> = views.par_iter().map(|(_, b)| b.compress(level)).collect();
        let blocks: Vec<(Split, usize)> = views.iter().map(|(split, b)| (*split, b.len())).collect();
        for (split, end) in consumed {
            self.pending.get_mut(&split).expect("a pending split").drain_front(end, layout);
        }
        for ((split, records), frame) in blocks.into_iter().zip(frames) {
            let frame = frame.context("compressing a block")?;
            // --shard-records is a most: a block that would take the open
            // shard past it starts the next (shards once held up to a
            // block less than twice as many).
            let over = self.open.get(&split).is_some_and(|(_, open)| {
                open.records() > 0 && open.records() + records as u64 > self.options.shard_records
            });
            if over {
                self.close_shard(split)?;
            }
            self.shard_for(split)?.write_block(&frame, records)?;
            if self.open[&split].1.records() >= self.options.shard_records {
                self.close_shard(split)?;
            }
        }
        Ok(())
    }

    fn write_full_blocks(&mut self) -> Result<()> {
        self.write_blocks(false)
    }

    /// The open shard of `split`, starting a new one if needed.
    fn shard_for(&mut self, split: Split) -> Result<&mut ShardWriter> {
        if !self.open.contains_key(&split) {
            let number = self.shards.iter().filter(|s| s.split == split).count();
            let tag = self.options.part.map(Part::shard_tag).unwrap_or_default();
            let name = format!("{split}{tag}-{number:05}.shard");
            let writer = ShardWriter::create(&self.dir.join(&name), self.options.layout())?;
            self.open.insert(split, (name, writer));
        }
        Ok(&mut self.open.get_mut(&split).expect("just opened").1)
    }

    fn close_shard(&mut self, split: Split) -> Result<()> {
        if let Some((file, writer)) = self.open.remove(&split) {
            self.shards.push(ShardEntry::new(file, split, &writer.finish()?));
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Written> {
        self.write_blocks(true)?;
        for split in Split::ALL {
            self.close_shard(split)?;
        }
        // Split by split, each in the order written: by number (a sort by
        // name would put shard 100000 before 10001).
        self.shards.sort_by_key(|s| s.split);
        Ok((self.counts, self.dropped, self.shards))
    }
}

/// The path of a dataset's temporary manifest (for tests of crash safety).
pub fn manifest_tmp(dir: &Path) -> PathBuf {
    tmp_path(&dir.join(MANIFEST))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collection spread over many chunks and groups is parsed once, and
    /// a file that leaves the window is dropped.
    #[test]
    fn each_file_is_parsed_once_while_its_games_last() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.sgf"), dir.path().join("b.sgf"));
        std::fs::write(&a, "(;SZ[9];B[aa])(;SZ[9];B[bb])(;SZ[9];B[cc])(;SZ[9];B[dd])").unwrap();
        std::fs::write(&b, "(;SZ[9];W[ee])").unwrap();
        let game = |file: &Path, index| GameRef { file: file.to_path_buf(), index };
        let list = [game(&a, 0), game(&a, 1), game(&a, 3), game(&b, 0)];
        let mut files = ParsedFiles::new(&list);
        files.load(list[..2].iter());
        files.load(list[2..].iter());
        assert_eq!(files.parses, 2, "a is kept from the first group, b parsed once");
        let parsed = files.get(&a).unwrap().as_ref().unwrap();
        assert_eq!(parsed.trees, 4);
        let mut held: Vec<usize> = parsed.games.keys().copied().collect();
        held.sort();
        assert_eq!(held, [0, 1, 3], "only the games listed are held");
        files.load([game(&b, 0)].iter());
        assert_eq!(files.parses, 2);
        assert!(files.get(&a).is_none(), "a is no longer needed");
    }

    /// Passes after a game's end (NNGS recorded a third) once made a
    /// position after the game, labelled pass; a game that plays on after
    /// its end is dropped.
    #[test]
    fn a_game_learns_nothing_after_its_two_passes() {
        let options = PrepareOptions { board_size: 9, ..PrepareOptions::default() };
        let mut planes = PackedPlanes::new(9, options.features.planes());
        let mut positions = |moves: &str| {
            let record = crate::sgf::parse_game(&format!("(;SZ[9]KM[6.5]RE[B+R]{moves})")).unwrap();
            match encode_game(&record, Rules::CHINESE, &options, &mut planes) {
                GameOutcome::Written { block, .. } => Ok(block.len()),
                GameOutcome::Dropped(reason, _) => Err(reason),
            }
        };
        assert_eq!(positions(";B[aa];W[];B[]"), Ok(3));
        assert_eq!(positions(";B[aa];W[];B[];W[]"), Ok(3));
        assert_eq!(positions(&format!(";B[aa]{}", ";W[];B[]".repeat(300))), Ok(3));
        assert_eq!(positions(";B[aa];W[];B[];W[bb]"), Err("play after two passes"));
        // A game of passes only was two positions, each labelled pass.
        assert_eq!(positions(&";B[];W[]".repeat(3)), Err("no stone played"));
    }
}
