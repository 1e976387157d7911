//! Checking a dataset against its manifest, file by file and block by
//! block (`dataset verify`): a dataset copied between machines, or cut
//! short by a full disk, should fail here rather than in the middle of a
//! training run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;

use super::manifest::{Manifest, ShardEntry};
use super::reader::{check_against_manifest, check_labels, open_entry};
use super::shard::{Layout, Shard, NO_VALUE};
use super::split::Split;
use crate::progress::Progress;

/// Block errors listed per shard; a badly damaged file would bury the
/// others under thousands of lines.
const BLOCK_ERRORS_SHOWN: usize = 5;

/// What was found in one shard the manifest names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardReport {
    /// File name, as the manifest gives it.
    pub file: String,
    /// Its split.
    pub split: Split,
    /// Records in the blocks that decoded.
    pub records: u64,
    /// Of those, records with a value label.
    pub value_records: u64,
    /// Every problem, each naming the file (and the block).
    pub errors: Vec<String>,
}

/// What [`verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// One per manifest entry, in manifest order.
    pub shards: Vec<ShardReport>,
    /// Problems of the whole: split totals, names given twice.
    pub errors: Vec<String>,
    /// What does not make the dataset wrong but may be left over: stray
    /// temporary files and shard files the manifest does not name.
    pub warnings: Vec<String>,
}

impl VerifyReport {
    /// Whether nothing is wrong (warnings aside).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty() && self.shards.iter().all(|s| s.errors.is_empty())
    }

    /// Every error: the shards' in manifest order, then the dataset's.
    pub fn all_errors(&self) -> impl Iterator<Item = &String> {
        self.shards.iter().flat_map(|s| &s.errors).chain(&self.errors)
    }
}

/// Checks every shard the manifest of `dir` names (file size, CRC-32, board
/// size and counts, index, every block's zstd checksum, record count and
/// labels), the manifest's totals per split, and looks for stray files. `progress`
/// counts blocks checked (all of a shard's at once when the file cannot be
/// read). Fails only when there is no readable
/// manifest; everything else is in the report.
pub fn verify(dir: &Path, progress: &Progress) -> Result<VerifyReport> {
    let manifest = Manifest::read(dir)?;
    let shards: Vec<ShardReport> =
        manifest.shards.iter().map(|entry| verify_shard(dir, manifest.layout(), entry, progress)).collect();
    let mut errors = manifest.inconsistencies(dir);
    errors.extend(value_totals(dir, &manifest, &shards));
    let warnings = stray_files(dir, &manifest)?;
    Ok(VerifyReport { shards, errors, warnings })
}

fn verify_shard(dir: &Path, layout: Layout, entry: &ShardEntry, progress: &Progress) -> ShardReport {
    let mut report =
        ShardReport { file: entry.file.clone(), split: entry.split, records: 0, value_records: 0, errors: Vec::new() };
    let shard = match open_entry(dir, entry) {
        Ok(shard) => shard,
        Err(e) => {
            progress.inc(entry.blocks as u64);
            report.errors.push(format!("{e:#}"));
            return report;
        }
    };
    report.errors.extend(check_file(&shard, entry, layout));
    check_blocks(&shard, &mut report, progress);
    report
}

/// The checks of a whole file: CRC-32, size, board size and counts
/// against the manifest, blocks in order and apart.
fn check_file(shard: &Shard, entry: &ShardEntry, layout: Layout) -> Vec<String> {
    let path = shard.path().display();
    let mut errors = Vec::new();
    match u32::from_str_radix(entry.crc32.trim_start_matches("0x"), 16) {
        Ok(expected) if shard.crc32() != expected => {
            errors.push(format!("{path}: CRC-32 is {:08x}, the manifest says {}", shard.crc32(), entry.crc32))
        }
        Ok(_) => {}
        Err(_) => errors.push(format!("{path}: the manifest's CRC-32 `{}` is not hexadecimal", entry.crc32)),
    }
    if let Err(e) = check_against_manifest(shard, entry, layout) {
        errors.push(e.to_string());
    }
    let blocks = shard.blocks();
    if let Some(i) = blocks.windows(2).position(|w| w[0].offset + w[0].length as u64 > w[1].offset) {
        errors.push(format!("{path}: index: block {} overlaps or precedes block {i}", i + 1));
    }
    errors
}

/// Decompresses every block in parallel, counting records and value
/// labels of the good ones and listing the bad.
fn check_blocks(shard: &Shard, report: &mut ShardReport, progress: &Progress) {
    let results: Vec<Result<(u64, u64), String>> = (0..shard.blocks().len())
        .into_par_iter()
        .map(|i| {
            let read = shard.read_block(i).map_err(|e| e.to_string()).and_then(|block| {
                check_labels(&block, shard.board_size())
                    .map_err(|e| format!("{}: block {i}: {e}", shard.path().display()))?;
                Ok((block.len() as u64, block.value.iter().filter(|&&v| v != NO_VALUE).count() as u64))
            });
            progress.inc(1);
            read
        })
        .collect();
    let bad: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().cloned()).collect();
    for (records, values) in results.into_iter().flatten() {
        report.records += records;
        report.value_records += values;
    }
    if bad.len() > BLOCK_ERRORS_SHOWN {
        let more = format!("{}: {} more bad blocks", shard.path().display(), bad.len() - BLOCK_ERRORS_SHOWN);
        report.errors.extend(bad.into_iter().take(BLOCK_ERRORS_SHOWN).chain([more]));
    } else {
        report.errors.extend(bad);
    }
}

/// Whether the value labels read from each split's shards add up to the
/// manifest's counts (its positions are checked against the shards'
/// entries by [`Manifest::inconsistencies`], and the entries against the
/// files). A split with a bad shard is left out: its shard's errors say
/// more.
fn value_totals(dir: &Path, manifest: &Manifest, shards: &[ShardReport]) -> Vec<String> {
    let mut read: BTreeMap<Split, (u64, bool)> = manifest.splits.keys().map(|&s| (s, (0, true))).collect();
    for s in shards {
        let t = read.entry(s.split).or_insert((0, true));
        *t = (t.0 + s.value_records, t.1 && s.errors.is_empty());
    }
    let manifest_path = dir.join(super::MANIFEST);
    read.into_iter()
        .filter(|(_, (_, all_good))| *all_good)
        .filter_map(|(split, (found, _))| {
            let said = manifest.splits.get(&split).map_or(0, |c| c.value_positions);
            (said != found).then(|| {
                format!("{}: {split} has {said} value positions, its shards hold {found}", manifest_path.display())
            })
        })
        .collect()
}

/// Temporary files and folders (a run killed while writing) and shard
/// files the manifest does not name (left from an earlier run) in `dir`.
fn stray_files(dir: &Path, manifest: &Manifest) -> Result<Vec<String>> {
    let named: BTreeSet<&str> = manifest.shards.iter().map(|e| e.file.as_str()).collect();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    let warnings = names.into_iter().filter_map(|name| {
        let path = dir.join(&name);
        if name.ends_with(".tmp") {
            Some(format!("{}: temporary file left by an interrupted run", path.display()))
        } else if name == super::manifest::STAGING {
            Some(format!(
                "{}: the dataset a killed `prepare` was writing (the next prepare into this folder removes it)",
                path.display()
            ))
        } else if name.ends_with(".shard") && !named.contains(name.as_str()) {
            Some(format!("{}: shard file the manifest does not name", path.display()))
        } else {
            None
        }
    });
    Ok(warnings.collect())
}
