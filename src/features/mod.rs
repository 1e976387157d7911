//! Input features of the nets: the seed design's 15 planes, seen from the
//! side to move, in a bit-packed form (for shards) and as f32 (for
//! tensors), and the 8 symmetries of the square.

pub mod planes;
pub mod symmetry;

pub use planes::{encode, PackedPlanes, FEATURE_VERSION, PLANES};
pub use symmetry::Symmetry;
