//! Shard files: a sequence of zstd-compressed blocks of position records,
//! then an index, read through a memory map so that any block can be
//! fetched without reading the others.
//!
//! ```text
//! "GOTRSHRD" version:u32 board_size:u16 planes:u16  header, 16 bytes
//! label_planes:u16 reserved:u16                    version 3 only: 4 bytes more
//! block 0 | block 1 | ...                          zstd frames (with content checksums)
//! index: per block { offset:u64 length:u32 records:u32 }
//! blocks:u32 records:u64 index_offset:u64 "GOTRSHRD"   footer, 28 bytes
//! ```
//!
//! All integers are little-endian. Version 1 shards held the seed's 15
//! planes and a u32 board size, version 2 no label planes; both still read.
//! Label planes (version 3: [`OWNERSHIP_PLANES`] or none) follow each
//! record's input planes: targets for a net, never its input. A decompressed block is columnar (all
//! planes, then all policy labels, ...), which compresses better than
//! record after record: see [`Block`].

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use thiserror::Error;

const MAGIC: &[u8; 8] = b"GOTRSHRD";
/// Version of the shard layout.
pub const SHARD_VERSION: u32 = 3;
/// Header bytes of version 1 and 2 shards; version 3 adds 4.
const HEADER_LEN: usize = 16;
const HEADER_V3_LEN: usize = 20;
const FOOTER_LEN: usize = 28;
const INDEX_ENTRY_LEN: usize = 16;

/// Value label of a position whose game has no usable result (or that was
/// not sampled for the value net).
pub const NO_VALUE: i8 = -1;

/// Label planes of a record with an ownership target: the points the side
/// to move owns at the end of its game, then those its opponent owns
/// ([`crate::dataset::ownership`]).
pub const OWNERSHIP_PLANES: usize = 2;

/// Problems with a shard file; each names the file.
#[derive(Debug, Error)]
pub enum ShardError {
    /// The I/O error is in the message and deliberately not the `source`:
    /// error chains (`{:#}`) would print it twice.
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: not a go-train shard ({reason})")]
    Format { path: PathBuf, reason: String },
    #[error("{path}: block {block} is corrupt ({reason})")]
    CorruptBlock { path: PathBuf, block: usize, reason: String },
}

/// The shape of a record's planes: what a block needs to be cut into records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub board_size: usize,
    /// Input planes per position ([`crate::features::FeatureSet::planes`]).
    pub planes: usize,
    /// Whether each record also holds the [`OWNERSHIP_PLANES`] after its
    /// input planes.
    pub ownership: bool,
}

impl Layout {
    /// A layout of input planes only.
    pub const fn inputs(board_size: usize, planes: usize) -> Layout {
        Layout { board_size, planes, ownership: false }
    }

    /// Planes stored per record: the input planes, then the label planes.
    pub fn stored_planes(self) -> usize {
        self.planes + if self.ownership { OWNERSHIP_PLANES } else { 0 }
    }

    /// 64-bit words of one packed plane.
    pub fn plane_words(self) -> usize {
        (self.board_size * self.board_size).div_ceil(64)
    }

    /// Bytes of the packed planes (input and label) of one position.
    pub fn planes_bytes(self) -> usize {
        self.stored_planes() * self.plane_words() * 8
    }
}

/// Records of one block, column by column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    /// Packed planes ([`crate::features::PackedPlanes::words`] as
    /// little-endian bytes), [`Layout::planes_bytes`] per record.
    pub planes: Vec<u8>,
    /// Move played: row-major point, or `size²` for a pass.
    pub policy: Vec<u16>,
    /// 1 if the side to move won the game, 0 if it lost, [`NO_VALUE`]
    /// when unknown or not sampled.
    pub value: Vec<i8>,
    /// Number of moves played before this position (0 for the first).
    pub move_number: Vec<u16>,
}

/// Some records of a [`Block`], borrowed ([`Block::view`]).
#[derive(Clone, Copy, Debug)]
pub struct BlockView<'a> {
    planes: &'a [u8],
    policy: &'a [u16],
    value: &'a [i8],
    move_number: &'a [u16],
}

impl BlockView<'_> {
    pub fn len(&self) -> usize {
        self.policy.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policy.is_empty()
    }

    /// The records as one zstd frame (with a content checksum, so
    /// corruption is caught on reading), holding the record count, then
    /// the columns. Deterministic for given records and level.
    ///
    /// The frame is streamed from three pieces, the planes straight from
    /// the block: laying the columns out in one buffer first copied
    /// every plane once more, a tenth of `prepare`'s time.
    pub fn compress(&self, level: i32) -> std::io::Result<Vec<u8>> {
        use zstd::zstd_safe::{zstd_sys::ZSTD_EndDirective, InBuffer, OutBuffer, ResetDirective};
        thread_local! {
            // One context per thread and level: creating one per block
            // allocated and freed a megabyte each time.
            static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
                const { std::cell::RefCell::new(None) };
        }
        let zstd_error = |code: usize| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
        let head = (self.len() as u32).to_le_bytes();
        let mut tail = Vec::with_capacity(self.len() * 5);
        tail.extend(self.policy.iter().flat_map(|p| p.to_le_bytes()));
        tail.extend(self.value.iter().map(|&v| v as u8));
        tail.extend(self.move_number.iter().flat_map(|m| m.to_le_bytes()));
        let total = head.len() + self.planes.len() + tail.len();
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(total));
        COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                let mut c = zstd::bulk::Compressor::new(level)?;
                c.include_checksum(true)?;
                *slot = Some((level, c));
            }
            let (_, c) = slot.as_mut().expect("just set");
            let cctx = c.context_mut();
            cctx.reset(ResetDirective::SessionOnly).map_err(zstd_error)?;
            // The size goes in the frame header, as a one-shot compression
            // would write it.
            cctx.set_pledged_src_size(Some(total as u64)).map_err(zstd_error)?;
            let mut output = OutBuffer::around(&mut out);
            let pieces: [&[u8]; 3] = [&head, self.planes, &tail];
            for (i, piece) in pieces.into_iter().enumerate() {
                let last = i + 1 == pieces.len();
                let directive = if last { ZSTD_EndDirective::ZSTD_e_end } else { ZSTD_EndDirective::ZSTD_e_continue };
                let mut input = InBuffer::around(piece);
                loop {
                    let left = cctx.compress_stream2(&mut output, &mut input, directive).map_err(zstd_error)?;
                    let done = if last { left == 0 } else { input.pos() == piece.len() };
                    if done {
                        break;
                    }
                }
            }
            Ok::<(), std::io::Error>(())
        })?;
        Ok(out)
    }
}

impl Block {
    pub fn len(&self) -> usize {
        self.policy.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policy.is_empty()
    }

    /// Appends one record.
    pub fn push(&mut self, planes: &[u64], policy: u16, value: i8, move_number: u16) {
        for w in planes {
            self.planes.extend_from_slice(&w.to_le_bytes());
        }
        self.policy.push(policy);
        self.value.push(value);
        self.move_number.push(move_number);
    }

    /// Records `range`, borrowed: what compressing them needs, without a
    /// copy of their planes.
    pub fn view(&self, range: std::ops::Range<usize>, layout: Layout) -> BlockView<'_> {
        let pb = layout.planes_bytes();
        BlockView {
            planes: &self.planes[range.start * pb..range.end * pb],
            policy: &self.policy[range.clone()],
            value: &self.value[range.clone()],
            move_number: &self.move_number[range],
        }
    }

    /// Removes the first `n` records.
    pub fn drain_front(&mut self, n: usize, layout: Layout) {
        self.planes.drain(..n * layout.planes_bytes());
        self.policy.drain(..n);
        self.value.drain(..n);
        self.move_number.drain(..n);
    }

    /// Appends all records of `other`.
    pub fn append(&mut self, other: &Block) {
        self.planes.extend_from_slice(&other.planes);
        self.policy.extend_from_slice(&other.policy);
        self.value.extend_from_slice(&other.value);
        self.move_number.extend_from_slice(&other.move_number);
    }

    /// The packed planes of record `i` as words.
    pub fn planes_of(&self, i: usize, layout: Layout) -> Vec<u64> {
        self.words_of(i, layout, 0..layout.planes_bytes() / 8)
    }

    /// Words `words` of record `i`'s packed planes: the input planes
    /// alone, or the label planes alone, without copying the rest.
    pub fn words_of(&self, i: usize, layout: Layout, words: std::ops::Range<usize>) -> Vec<u64> {
        let at = i * layout.planes_bytes();
        self.planes[at + 8 * words.start..at + 8 * words.end]
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    fn deserialize(bytes: &[u8], layout: Layout) -> Result<Block, String> {
        let n = u32::from_le_bytes(bytes.get(..4).ok_or("empty block")?.try_into().unwrap()) as usize;
        let pb = layout.planes_bytes();
        if bytes.len() != 4 + n * (pb + 5) {
            return Err(format!("{} bytes for {n} records", bytes.len()));
        }
        let (planes, rest) = bytes[4..].split_at(n * pb);
        let (policy, rest) = rest.split_at(2 * n);
        let (value, moves) = rest.split_at(n);
        let u16s = |b: &[u8]| b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        Ok(Block {
            planes: planes.to_vec(),
            policy: u16s(policy),
            value: value.iter().map(|&v| v as i8).collect(),
            move_number: u16s(moves),
        })
    }

    /// The block as one zstd frame: see [`BlockView::compress`].
    pub fn compress(&self, level: i32) -> std::io::Result<Vec<u8>> {
        BlockView { planes: &self.planes, policy: &self.policy, value: &self.value, move_number: &self.move_number }
            .compress(level)
    }

    /// Room for `n` more records.
    pub fn reserve(&mut self, n: usize, layout: Layout) {
        self.planes.reserve(n * layout.planes_bytes());
        self.policy.reserve(n);
        self.value.reserve(n);
        self.move_number.reserve(n);
    }

    /// Decompresses a frame written by [`Block::compress`].
    pub fn decompress(frame: &[u8], layout: Layout) -> Result<Block, String> {
        let mut d = zstd::stream::read::Decoder::new(frame).map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut bytes).map_err(|e| e.to_string())?;
        Block::deserialize(&bytes, layout)
    }
}

/// Where a block lies in its shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockEntry {
    pub offset: u64,
    pub length: u32,
    pub records: u32,
}

/// What a finished shard holds: what the manifest records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSummary {
    pub records: u64,
    pub blocks: u32,
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
}

/// Writes a shard to `<path>.tmp` and renames it to `path` only when it is
/// complete and on disk, so a killed run never leaves a partial shard under
/// a final name.
pub struct ShardWriter {
    path: PathBuf,
    tmp: PathBuf,
    file: BufWriter<File>,
    index: Vec<BlockEntry>,
    offset: u64,
    records: u64,
    crc: crc32fast::Hasher,
}

impl ShardWriter {
    pub fn create(path: &Path, layout: Layout) -> Result<ShardWriter, ShardError> {
        let tmp = tmp_path(path);
        let file = File::create(&tmp).map_err(|error| ShardError::Io { path: tmp.clone(), error })?;
        let mut w = ShardWriter {
            path: path.to_path_buf(),
            tmp,
            file: BufWriter::with_capacity(1 << 20, file),
            index: Vec::new(),
            offset: 0,
            records: 0,
            crc: crc32fast::Hasher::new(),
        };
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&SHARD_VERSION.to_le_bytes());
        header.extend_from_slice(&(layout.board_size as u16).to_le_bytes());
        header.extend_from_slice(&(layout.planes as u16).to_le_bytes());
        header.extend_from_slice(&((layout.stored_planes() - layout.planes) as u16).to_le_bytes());
        header.extend_from_slice(&0u16.to_le_bytes());
        w.write_raw(&header)?;
        Ok(w)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ShardError> {
        self.file.write_all(bytes).map_err(|error| ShardError::Io { path: self.tmp.clone(), error })?;
        self.crc.update(bytes);
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Appends a block already compressed with [`Block::compress`].
    pub fn write_block(&mut self, frame: &[u8], records: usize) -> Result<(), ShardError> {
        self.index.push(BlockEntry { offset: self.offset, length: frame.len() as u32, records: records as u32 });
        self.records += records as u64;
        self.write_raw(frame)
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes index and footer, syncs, and gives the file its final name.
    pub fn finish(mut self) -> Result<ShardSummary, ShardError> {
        let index_offset = self.offset;
        let mut tail = Vec::with_capacity(self.index.len() * INDEX_ENTRY_LEN + FOOTER_LEN);
        for e in &self.index {
            tail.extend_from_slice(&e.offset.to_le_bytes());
            tail.extend_from_slice(&e.length.to_le_bytes());
            tail.extend_from_slice(&e.records.to_le_bytes());
        }
        tail.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        tail.extend_from_slice(&self.records.to_le_bytes());
        tail.extend_from_slice(&index_offset.to_le_bytes());
        tail.extend_from_slice(MAGIC);
        self.write_raw(&tail)?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| ShardError::Io { path, error }
        };
        let file = self.file.into_inner().map_err(|e| io(&self.tmp)(e.into_error()))?;
        file.sync_all().map_err(io(&self.tmp))?;
        std::fs::rename(&self.tmp, &self.path).map_err(io(&self.path))?;
        Ok(ShardSummary {
            records: self.records,
            blocks: self.index.len() as u32,
            bytes: self.offset,
            crc32: self.crc.finalize(),
        })
    }
}

pub use crate::atomic::tmp_path;

/// A shard opened for reading through a memory map.
pub struct Shard {
    path: PathBuf,
    map: Mmap,
    layout: Layout,
    index: Vec<BlockEntry>,
    records: u64,
}

impl Shard {
    /// Opens a shard and reads its index (not its blocks).
    pub fn open(path: &Path) -> Result<Shard, ShardError> {
        let io = |error| ShardError::Io { path: path.to_path_buf(), error };
        // A FIFO in a shard's place would block `open` without this.
        let file = crate::bounded_read::open_without_waiting(path).map_err(io)?;
        // A folder opens but cannot be mapped: mmap's own error would say
        // "No such device".
        let kind = file.metadata().map_err(io)?.file_type();
        if !kind.is_file() {
            let what = if kind.is_dir() { "a folder" } else { "not a regular file" };
            return Err(ShardError::Format { path: path.to_path_buf(), reason: what.to_string() });
        }
        // SAFETY: shards are written once under a temporary name and then
        // renamed; nothing writes to a file under its final name.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let bad = |reason: String| ShardError::Format { path: path.to_path_buf(), reason };
        if map.len() < HEADER_LEN + FOOTER_LEN || &map[..8] != MAGIC || &map[map.len() - 8..] != MAGIC {
            return Err(bad(format!("missing header or footer ({} bytes)", map.len())));
        }
        let u32_at = |o: usize| u32::from_le_bytes(map[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(map[o..o + 8].try_into().unwrap());
        let u16_at = |o: usize| u16::from_le_bytes(map[o..o + 2].try_into().unwrap()) as usize;
        let (layout, header_len) = match u32_at(8) {
            1 => (Layout::inputs(u32_at(12) as usize, crate::features::PLANES), HEADER_LEN),
            2 => (Layout::inputs(u16_at(12), u16_at(14)), HEADER_LEN),
            SHARD_VERSION => {
                let ownership = match u16_at(16) {
                    0 => false,
                    OWNERSHIP_PLANES => true,
                    n => return Err(bad(format!("{n} label planes, this go-train knows 0 and {OWNERSHIP_PLANES}"))),
                };
                (Layout { board_size: u16_at(12), planes: u16_at(14), ownership }, HEADER_V3_LEN)
            }
            version => return Err(bad(format!("shard version {version}, this go-train reads 1 to {SHARD_VERSION}"))),
        };
        if map.len() < header_len + FOOTER_LEN {
            return Err(bad(format!("missing header or footer ({} bytes)", map.len())));
        }
        let f = map.len() - FOOTER_LEN;
        let (blocks, records, index_offset) = (u32_at(f) as usize, u64_at(f + 4), u64_at(f + 12) as usize);
        // Checked sums: a damaged footer or index holds any number, and a
        // wrapped sum passed these checks and panicked in `read_block`.
        if blocks.checked_mul(INDEX_ENTRY_LEN).and_then(|n| index_offset.checked_add(n)) != Some(f) {
            return Err(bad("index does not fit the file".into()));
        }
        let index: Vec<BlockEntry> = (0..blocks)
            .map(|i| {
                let o = index_offset + i * INDEX_ENTRY_LEN;
                BlockEntry { offset: u64_at(o), length: u32_at(o + 8), records: u32_at(o + 12) }
            })
            .collect();
        let in_bounds = index.iter().all(|e| {
            e.offset >= header_len as u64
                && e.offset.checked_add(e.length as u64).is_some_and(|end| end <= index_offset as u64)
        });
        let total: u64 = index.iter().map(|e| e.records as u64).sum();
        if !in_bounds || total != records {
            return Err(bad("index entries out of bounds or record counts inconsistent".into()));
        }
        Ok(Shard { path: path.to_path_buf(), map, layout, index, records })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn board_size(&self) -> usize {
        self.layout.board_size
    }

    /// Board size and planes of its records.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn blocks(&self) -> &[BlockEntry] {
        &self.index
    }

    /// Decompresses block `i`, checking its checksum and record count.
    pub fn read_block(&self, i: usize) -> Result<Block, ShardError> {
        let e = self.index[i];
        let frame = &self.map[e.offset as usize..(e.offset + e.length as u64) as usize];
        let corrupt = |reason: String| ShardError::CorruptBlock { path: self.path.clone(), block: i, reason };
        let block = Block::decompress(frame, self.layout).map_err(corrupt)?;
        if block.len() != e.records as usize {
            return Err(corrupt(format!("{} records, index says {}", block.len(), e.records)));
        }
        Ok(block)
    }

    /// Size of the file.
    pub fn bytes(&self) -> u64 {
        self.map.len() as u64
    }

    /// CRC-32 of the whole file (what the manifest records).
    pub fn crc32(&self) -> u32 {
        crc32fast::hash(&self.map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_19: Layout = Layout::inputs(19, crate::features::PLANES);

    fn block(n: usize, seed: u64) -> Block {
        let mut b = Block::default();
        let words = SEED_19.planes_bytes() / 8;
        for i in 0..n {
            let planes: Vec<u64> =
                (0..words).map(|w| (seed + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (w % 7)).collect();
            b.push(&planes, (i % 362) as u16, (i % 3) as i8 - 1, i as u16);
        }
        b
    }

    #[test]
    fn blocks_round_trip_through_a_shard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train-00000.shard");
        let blocks = [block(100, 1), block(37, 2), block(1, 3)];
        let mut w = ShardWriter::create(&path, SEED_19).unwrap();
        assert!(tmp_path(&path).exists() && !path.exists(), "written under a temporary name");
        for b in &blocks {
            w.write_block(&b.compress(3).unwrap(), b.len()).unwrap();
        }
        let summary = w.finish().unwrap();
        assert!(path.exists() && !tmp_path(&path).exists());
        assert_eq!(summary.records, 138);
        let shard = Shard::open(&path).unwrap();
        assert_eq!(shard.records(), 138);
        assert_eq!(shard.crc32(), summary.crc32);
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(&shard.read_block(i).unwrap(), b);
        }
        assert_eq!(blocks[0].planes_of(5, SEED_19).len(), SEED_19.planes_bytes() / 8);
        assert_eq!(shard.layout(), SEED_19);
    }

    #[test]
    fn the_layout_travels_in_the_header_and_version_1_shards_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.shard");
        let extended = Layout::inputs(19, 52);
        let w = ShardWriter::create(&path, extended).unwrap();
        w.finish().unwrap();
        assert_eq!(Shard::open(&path).unwrap().layout(), extended);
        let owned = Layout { ownership: true, ..extended };
        ShardWriter::create(&path, owned).unwrap().finish().unwrap();
        assert_eq!(Shard::open(&path).unwrap().layout(), owned);
        // Version 2: no label planes, a 16-byte header.
        let v3 = std::fs::read(&path).unwrap();
        let mut v2 = v3[..HEADER_LEN].to_vec();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        v2.extend_from_slice(&v3[HEADER_V3_LEN..v3.len() - 16]);
        v2.extend_from_slice(&(HEADER_LEN as u64).to_le_bytes());
        v2.extend_from_slice(MAGIC);
        let mut odd = v3.clone();
        odd[16..18].copy_from_slice(&3u16.to_le_bytes());
        std::fs::write(&path, &odd).unwrap();
        let err = Shard::open(&path).err().unwrap().to_string();
        assert!(err.contains("x.shard") && err.contains("3 label planes"), "{err}");
        std::fs::write(&path, &v2).unwrap();
        assert_eq!(Shard::open(&path).unwrap().layout(), extended);
        // Version 1: a u32 board size, the seed's planes implied.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        bytes[12..16].copy_from_slice(&19u32.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Shard::open(&path).unwrap().layout(), SEED_19);
    }

    #[test]
    fn corruption_is_reported_with_the_file_and_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.shard");
        let mut w = ShardWriter::create(&path, SEED_19).unwrap();
        let b = block(50, 9);
        w.write_block(&b.compress(3).unwrap(), b.len()).unwrap();
        w.finish().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_V3_LEN + 40] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let err = Shard::open(&path).unwrap().read_block(0).unwrap_err().to_string();
        assert!(err.contains("x.shard") && err.contains("block 0"), "{err}");
        // An index entry's offset of 2^64 - 2^32 once wrapped past the
        // bounds check and panicked on reading.
        let mut damaged = std::fs::read(&path).unwrap();
        let entry = damaged.len() - FOOTER_LEN - INDEX_ENTRY_LEN;
        damaged[entry..entry + 8].copy_from_slice(&(u64::MAX - u32::MAX as u64).to_le_bytes());
        std::fs::write(&path, &damaged).unwrap();
        let err = Shard::open(&path).err().unwrap().to_string();
        assert!(err.contains("index entries out of bounds"), "{err}");
        // So did a footer whose index offset wraps the sum.
        let footer = damaged.len() - FOOTER_LEN;
        damaged[footer + 12..footer + 20].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(&path, &damaged).unwrap();
        let err = Shard::open(&path).err().unwrap().to_string();
        assert!(err.contains("index does not fit"), "{err}");
        // A truncated file is refused at open.
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = Shard::open(&path).err().unwrap().to_string();
        assert!(err.contains("not a go-train shard"), "{err}");
    }

    #[test]
    fn a_folder_in_a_shards_place_is_named_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train-00000.shard");
        std::fs::create_dir(&path).unwrap();
        let err = Shard::open(&path).err().unwrap().to_string();
        assert!(err.contains("train-00000.shard") && err.contains("a folder"), "{err}");
        assert!(!err.contains("No such device"), "{err}");
    }
}
