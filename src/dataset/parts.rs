//! A dataset prepared in parts: `prepare --part I/N` (or a Slurm array
//! task) encodes the I-th of N contiguous slices of the game list into the
//! shared folder, its shards tagged with the part and a part manifest
//! written last; [`merge`] joins the parts' manifests into the dataset's
//! once all N are there.
//!
//! Records are appended in list order within each part, and the parts
//! are contiguous slices, so the merged dataset's shards, read part after
//! part, hold exactly the records of a one-process `prepare`, split by
//! split, in the same order: only the cuts between blocks and shards
//! differ, which no reader sees.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::manifest::{Input, Manifest, DROPPED_EXAMPLES};
use crate::lock::Lock;

/// One of N parts of a game list (`index` from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub index: usize,
    pub count: usize,
}

impl Part {
    /// The most parts a list is cut into: part files number them in four
    /// digits (and `--part 1/99999999` once listed every missing part).
    pub const MAX_COUNT: usize = 9999;

    pub fn new(index: usize, count: usize) -> Result<Part> {
        if count == 0 || index == 0 || index > count || count > Part::MAX_COUNT {
            bail!("part {index}/{count}: a part is I/N with 1 ≤ I ≤ N ≤ {}", Part::MAX_COUNT);
        }
        Ok(Part { index, count })
    }

    /// The part of this Slurm array task, from the variables `sbatch
    /// --array` sets: the task's place among the array's ids (so
    /// `--array=0-7`, `1-8` and `0-14:2` all give parts 1/8 to 8/8), or
    /// `None` outside an array job. `env` reads a variable.
    pub fn from_slurm(env: impl Fn(&str) -> Option<String>) -> Result<Option<(Part, String)>> {
        let Some(id) = env("SLURM_ARRAY_TASK_ID") else { return Ok(None) };
        let number = |name: &str, default: Option<usize>| -> Result<usize> {
            match env(name) {
                Some(v) => v.trim().parse().with_context(|| format!("{name}={v}: not a number")),
                None => default.with_context(|| format!("SLURM_ARRAY_TASK_ID is set but {name} is not")),
            }
        };
        let id = id.trim().parse::<usize>().with_context(|| format!("SLURM_ARRAY_TASK_ID={id}: not a number"))?;
        let count = number("SLURM_ARRAY_TASK_COUNT", None)?;
        let min = number("SLURM_ARRAY_TASK_MIN", Some(0))?;
        let step = number("SLURM_ARRAY_TASK_STEP", Some(1))?.max(1);
        let offset = id.checked_sub(min).filter(|o| o % step == 0);
        let part = offset.and_then(|o| Part::new(o / step + 1, count).ok()).with_context(|| {
            format!(
                "Slurm array task {id} (min {min}, step {step}, {count} tasks) is not one of an evenly spaced \
                 array: give --part I/N"
            )
        })?;
        let said = format!(
            "SLURM_ARRAY_TASK_ID={id}, SLURM_ARRAY_TASK_MIN={min}, SLURM_ARRAY_TASK_STEP={step}, \
             SLURM_ARRAY_TASK_COUNT={count}"
        );
        Ok(Some((part, said)))
    }

    /// The games of a list of `len` that this part prepares: contiguous,
    /// sizes differing by one at most.
    pub fn range(self, len: usize) -> Range<usize> {
        // In u128: index × len overflows usize for lists of 2^50 games.
        let at = |i: usize| (i as u128 * len as u128 / self.count as u128) as usize;
        at(self.index - 1)..at(self.index)
    }

    /// What the part's shard names carry: `train-p0002of0004-00000.shard`
    /// sorts after part 1's and before part 3's.
    pub fn shard_tag(self) -> String {
        format!("-p{:04}of{:04}", self.index, self.count)
    }

    /// File name of the part's manifest.
    pub fn manifest_name(self) -> String {
        format!("part-{:04}-of-{:04}.json", self.index, self.count)
    }

    /// File name of the lock a running part holds ([`crate::lock`]).
    pub fn lock_name(self) -> String {
        format!(".p{:04}of{:04}.lock", self.index, self.count)
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Part {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Part> {
        let (i, n) = s.split_once('/').with_context(|| format!("`{s}`: a part is I/N, e.g. 3/8"))?;
        let parse = |t: &str| t.trim().parse::<usize>().with_context(|| format!("`{s}`: a part is I/N, e.g. 3/8"));
        Part::new(parse(i)?, parse(n)?)
    }
}

/// What a finished part wrote: its place, its games, and a manifest of its
/// own shards (counts and drops of its games only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartManifest {
    pub part: usize,
    pub parts: usize,
    /// Index in the list of its first game, and how many it was given.
    pub first_game: u64,
    pub games: u64,
    pub dataset: Manifest,
}

impl PartManifest {
    pub fn part(&self) -> Part {
        Part { index: self.part, count: self.parts }
    }

    pub fn read(path: &Path) -> Result<PartManifest> {
        let text = crate::bounded_read::read_text_at_most(path, crate::bounded_read::TEXT_BYTES, "a part manifest")
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let found: PartManifest =
            serde_json::from_str(&text).with_context(|| format!("{}: not a part manifest", path.display()))?;
        Part::new(found.part, found.parts).with_context(|| format!("{}: not a part manifest", path.display()))?;
        // A copy under another part's name was merged as that part's,
        // the part it names reported missing while its file was there.
        let name = found.part().manifest_name();
        if path.file_name().and_then(|n| n.to_str()) != Some(name.as_str()) {
            bail!(
                "{}: holds part {} of {}, whose manifest is {name}: a part manifest renamed or copied is not \
                 taken for another part; remove it, or prepare that part (`go-train prepare LIST --part I/N`)",
                path.display(),
                found.part,
                found.parts
            );
        }
        Ok(found)
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        crate::atomic::write_atomic(&dir.join(self.part().manifest_name()), text.as_bytes())
    }

    /// Whether `other` was made from the same list with the same settings
    /// and part count (the list may be named by another path on another
    /// machine: its checksum is what counts).
    pub fn same_job(&self, other: &PartManifest) -> bool {
        let (a, b) = (&self.dataset, &other.dataset);
        self.parts == other.parts
            && same_list(&a.input, &b.input)
            && a.settings == b.settings
            && a.features == b.features
            && a.board_size == b.board_size
            && a.dataset_version == b.dataset_version
            && a.feature_version == b.feature_version
    }
}

/// Whether two inputs name the same list, by content, and the same
/// files, by size (an input of an earlier go-train gives no sizes).
pub fn same_list(a: &Input, b: &Input) -> bool {
    let same_files = match (&a.files_crc32, &b.files_crc32) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    a.list_crc32 == b.list_crc32 && a.games_listed == b.games_listed && same_files
}

/// Whether `name` is a part manifest's file name, `part-0003-of-0008.json`
/// (another file of the folder, `part-notes.json`, is none of ours).
pub fn is_part_manifest(name: &str) -> bool {
    let Some(numbers) = name.strip_prefix("part-").and_then(|n| n.strip_suffix(".json")) else { return false };
    let digits = |t: &str| t.len() >= 4 && t.bytes().all(|b| b.is_ascii_digit());
    numbers.split_once("-of-").is_some_and(|(i, n)| digits(i) && digits(n))
}

/// The part manifests in `dir`, by file name; the first that cannot be
/// read is the error.
pub fn part_manifests(dir: &Path) -> Result<BTreeMap<PathBuf, PartManifest>> {
    part_manifest_files(dir)?.into_iter().map(|(path, part)| Ok((path, part?))).collect()
}

/// The files in `dir` named as part manifests, each read or not.
pub fn part_manifest_files(dir: &Path) -> Result<BTreeMap<PathBuf, Result<PartManifest>>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(is_part_manifest) {
            let part = PartManifest::read(&path);
            found.insert(path, part);
        }
    }
    Ok(found)
}

/// Joins the parts in `dir` into the dataset's manifest and writes it.
/// Refuses, naming them, when parts are missing or were made from another
/// list, settings or part count, and when they kept no game.
pub fn merge(dir: &Path) -> Result<Manifest> {
    match write_merged(dir)? {
        Merged::Complete(manifest) => Ok(*manifest),
        Merged::Missing { parts, missing, damaged } => {
            let names: Vec<String> = missing.iter().map(|i| i.to_string()).collect();
            let what =
                if damaged.is_empty() { " not finished".to_string() } else { format!(": {}", damaged.join("; ")) };
            bail!(
                "{}: part {} of {parts}{what} (run `go-train prepare LIST --out {} --part I/N` for each)",
                dir.display(),
                names.join(", "),
                dir.display()
            )
        }
    }
}

/// Writes the dataset's manifest if every part is finished: what the
/// last part to finish does. Returns it, or the parts still missing.
pub fn merge_if_complete(dir: &Path) -> Result<Result<Manifest, Vec<usize>>> {
    Ok(match write_merged(dir)? {
        Merged::Complete(manifest) => Ok(*manifest),
        Merged::Missing { missing, damaged, .. } => {
            for why in damaged {
                crate::say!("prepare: {why}: that part is to be prepared again before the merge");
            }
            Err(missing)
        }
    })
}

enum Merged {
    Complete(Box<Manifest>),
    /// Parts not finished, or finished with a shard since damaged (why, for each).
    Missing {
        parts: usize,
        missing: Vec<usize>,
        damaged: Vec<String>,
    },
}

/// Merges the parts and, when all are there, writes the dataset's
/// manifest. Parts that finish together may both write it, the same
/// bytes; a `prepare` of the whole list into the folder keeps both out
/// ([`crate::lock`]).
fn write_merged(dir: &Path) -> Result<Merged> {
    let _shared = Lock::folder_shared(dir)?;
    let merged = merged(dir)?;
    if let Merged::Complete(manifest) = &merged {
        manifest.check_not_empty(dir)?;
        // What every reader refuses is not written (a part's totals edited
        // by hand once merged into a manifest no reader would open).
        let wrong = manifest.inconsistencies(dir);
        if !wrong.is_empty() {
            bail!(
                "{}: the parts do not merge (the totals below are summed from the part-I-of-N.json files): {}; \
                 prepare the part at fault again (`go-train prepare LIST --out {} --part I/N --force`)",
                dir.display(),
                wrong.join("; "),
                dir.display()
            );
        }
        manifest.write_shared(dir)?;
    }
    Ok(merged)
}

fn merged(dir: &Path) -> Result<Merged> {
    let found = part_manifests(dir)?;
    let Some((first_path, first)) = found.iter().next() else {
        bail!("{}: no part manifests (part-I-of-N.json) here: run `go-train prepare --part I/N` first", dir.display())
    };
    let strangers: Vec<String> =
        found.iter().filter(|(_, p)| !first.same_job(p)).map(|(path, _)| path.display().to_string()).collect();
    if !strangers.is_empty() {
        bail!(
            "{} and {} were made from other lists, settings or part counts: remove the stale ones, or make them again \
             (`go-train prepare LIST --part I/N --force` with one list and one set of settings)",
            first_path.display(),
            strangers.join(", ")
        );
    }
    let parts = first.parts;
    let by_index: BTreeMap<usize, &PartManifest> = found.values().map(|p| (p.part, p)).collect();
    let missing: Vec<usize> = (1..=parts).filter(|i| !by_index.contains_key(i)).collect();
    if !missing.is_empty() {
        return Ok(Merged::Missing { parts, missing, damaged: Vec::new() });
    }
    // A part's shard gone or cut short would make a manifest that only
    // `dataset verify` or training finds wrong; prepared again, the part
    // writes it anew (`clear_part`).
    let damaged: Vec<(usize, String)> = by_index
        .iter()
        .filter_map(|(index, part)| {
            let entry = part.dataset.damaged_shard(dir)?;
            Some((*index, format!("part {index}'s {} is missing or not its {} bytes", entry.file, entry.bytes)))
        })
        .collect();
    if !damaged.is_empty() {
        let (missing, damaged) = damaged.into_iter().unzip();
        return Ok(Merged::Missing { parts, missing, damaged });
    }
    let mut manifest = first.dataset.clone();
    manifest.splits = BTreeMap::new();
    manifest.dropped = BTreeMap::new();
    manifest.dropped_examples = BTreeMap::new();
    manifest.shards = Vec::new();
    for part in by_index.values() {
        for (split, c) in &part.dataset.splits {
            let total = manifest.splits.entry(*split).or_default();
            total.games += c.games;
            total.positions += c.positions;
            total.value_positions += c.value_positions;
        }
        for (reason, n) in &part.dataset.dropped {
            *manifest.dropped.entry(reason.clone()).or_default() += n;
        }
        for (reason, examples) in &part.dataset.dropped_examples {
            let kept = manifest.dropped_examples.entry(reason.clone()).or_default();
            let room = DROPPED_EXAMPLES.saturating_sub(kept.len());
            kept.extend(examples.iter().take(room).cloned());
        }
        manifest.shards.extend(part.dataset.shards.iter().cloned());
    }
    // Split by split, then part by part, each part's in its own order, as
    // a one-process prepare lists them.
    manifest.shards.sort_by_key(|s| s.split);
    Ok(Merged::Complete(Box::new(manifest)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_list_once() {
        for len in [0, 1, 7, 100, 36_692] {
            for count in 1..=9 {
                let ranges: Vec<_> = (1..=count).map(|i| Part::new(i, count).unwrap().range(len)).collect();
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges.last().unwrap().end, len);
                for w in ranges.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let sizes: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1, "{sizes:?}");
            }
        }
        // A huge list's last part once got nothing: index × len overflowed.
        let last = Part::new(Part::MAX_COUNT, Part::MAX_COUNT).unwrap();
        assert_eq!(last.range(usize::MAX / 2).end, usize::MAX / 2);
        // `--part 1/99999999` once held every missing part in memory.
        for (i, n) in [(1, Part::MAX_COUNT + 1), (0, 4), (5, 4), (1, 0)] {
            let err = Part::new(i, n).unwrap_err().to_string();
            assert!(err.ends_with("1 ≤ I ≤ N ≤ 9999"), "{i}/{n}: {err}");
        }
    }

    #[test]
    fn only_part_manifests_are_taken_for_them() {
        let part = Part::new(3, 8).unwrap();
        assert!(is_part_manifest(&part.manifest_name()));
        for other in ["part-notes.json", "part-3-of-8.json", "part-0003-of-0008.json.tmp", "manifest.json"] {
            assert!(!is_part_manifest(other), "{other}");
        }
    }

    #[test]
    fn parts_parse_and_refuse() {
        assert_eq!("3/8".parse::<Part>().unwrap(), Part { index: 3, count: 8 });
        for bad in ["0/8", "9/8", "3", "a/8", "1/0"] {
            assert!(bad.parse::<Part>().is_err(), "{bad}");
        }
    }

    #[test]
    fn slurm_array_tasks_become_parts() {
        fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        }
        let part = |vars: &[(&str, &str)]| Part::from_slurm(env(vars)).unwrap().map(|(p, _)| p);
        assert_eq!(part(&[]), None);
        let zero_based = [("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_COUNT", "8"), ("SLURM_ARRAY_TASK_MIN", "0")];
        assert_eq!(part(&zero_based), Some(Part { index: 1, count: 8 }));
        let one_based = [("SLURM_ARRAY_TASK_ID", "8"), ("SLURM_ARRAY_TASK_COUNT", "8"), ("SLURM_ARRAY_TASK_MIN", "1")];
        assert_eq!(part(&one_based), Some(Part { index: 8, count: 8 }));
        let stepped = [
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_COUNT", "8"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ];
        assert_eq!(part(&stepped), Some(Part { index: 3, count: 8 }));
        let outside = [("SLURM_ARRAY_TASK_ID", "9"), ("SLURM_ARRAY_TASK_COUNT", "8"), ("SLURM_ARRAY_TASK_MIN", "1")];
        assert!(Part::from_slurm(env(&outside)).is_err());
        assert!(Part::from_slurm(env(&[("SLURM_ARRAY_TASK_ID", "2")])).is_err(), "no count");
    }
}
