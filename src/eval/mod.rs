//! Measuring nets and players: on held-out positions ([`positions`]: move
//! accuracy, value error, by game phase), against a value predictor that
//! learns nothing ([`baseline`]), and in games ([`arena`]: matches between
//! agents and GTP engines). Training uses [`positions`] for its validation
//! passes; nothing here depends on training.

pub mod arena;
pub mod baseline;
pub mod positions;
pub mod review;
