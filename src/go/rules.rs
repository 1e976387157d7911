//! Rule sets as plain configuration (as KataGo's `Rules`): which repetitions
//! are forbidden, whether suicide is allowed, how the game is scored, komi.

use serde::{Deserialize, Serialize};

/// Which repeated positions are illegal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KoRule {
    /// Only the immediate recapture of a single stone is forbidden.
    Simple,
    /// A move may not recreate any earlier arrangement of stones (Chinese,
    /// Tromp–Taylor).
    PositionalSuperko,
    /// A move may not recreate an earlier arrangement with the same player
    /// to move (New Zealand, AGA).
    SituationalSuperko,
}

/// How the final position is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scoring {
    /// Stones on the board plus surrounded empty points (Chinese).
    Area,
    /// Surrounded empty points plus prisoners (Japanese).
    Territory,
}

/// A complete rule set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Forbidden repetitions.
    pub ko: KoRule,
    /// Whether a move that leaves its own string without liberties is legal
    /// (it removes that string), as in the Ing and New Zealand rules.
    pub allow_suicide: bool,
    /// Counting method.
    pub scoring: Scoring,
    /// Points given to White.
    pub komi: f32,
}

impl Rules {
    /// Chinese rules: positional superko, no suicide, area scoring, komi 7.5.
    /// go-train's default.
    pub const CHINESE: Rules =
        Rules { ko: KoRule::PositionalSuperko, allow_suicide: false, scoring: Scoring::Area, komi: 7.5 };

    /// Japanese rules: simple ko, no suicide, territory scoring, komi 6.5.
    pub const JAPANESE: Rules =
        Rules { ko: KoRule::Simple, allow_suicide: false, scoring: Scoring::Territory, komi: 6.5 };

    /// New Zealand rules: situational superko, suicide allowed, area, komi 7.
    pub const NEW_ZEALAND: Rules =
        Rules { ko: KoRule::SituationalSuperko, allow_suicide: true, scoring: Scoring::Area, komi: 7.0 };

    /// Tromp–Taylor: positional superko, suicide allowed, area, komi 7.5.
    pub const TROMP_TAYLOR: Rules =
        Rules { ko: KoRule::PositionalSuperko, allow_suicide: true, scoring: Scoring::Area, komi: 7.5 };

    /// AGA rules: situational superko, no suicide, area counting (with
    /// pass stones, which make it agree with territory), komi 7.5.
    pub const AGA: Rules =
        Rules { ko: KoRule::SituationalSuperko, allow_suicide: false, scoring: Scoring::Area, komi: 7.5 };

    /// Looks a rule set up by name, as SGF's `RU` property and the command
    /// line write it: `Chinese`, `Japanese`, `Korean`, `AGA`, `NZ` / `New
    /// Zealand`, `Tromp/Taylor` / `TT`, in any case.
    pub fn by_name(name: &str) -> Option<Rules> {
        let n = name.trim().to_ascii_lowercase().replace(['_', ' ', '/'], "-");
        match n.trim_end_matches('-') {
            "chinese" | "cn" | "old-chinese" => Some(Self::CHINESE),
            "japanese" | "jp" | "korean" => Some(Self::JAPANESE),
            "aga" => Some(Self::AGA),
            "nz" | "new-zealand" => Some(Self::NEW_ZEALAND),
            "tromp-taylor" | "tt" => Some(Self::TROMP_TAYLOR),
            _ => None,
        }
    }

    /// The name SGF's `RU` gives these rules, one that [`Rules::by_name`]
    /// reads back as the same rules (komi aside, which `KM` carries), or
    /// `None` for a rule set no name stands for.
    pub fn sgf_name(&self) -> Option<&'static str> {
        let same = |named: Rules| {
            (named.ko, named.allow_suicide, named.scoring) == (self.ko, self.allow_suicide, self.scoring)
        };
        [
            ("Chinese", Self::CHINESE),
            ("Japanese", Self::JAPANESE),
            ("AGA", Self::AGA),
            ("NZ", Self::NEW_ZEALAND),
            ("Tromp-Taylor", Self::TROMP_TAYLOR),
        ]
        .into_iter()
        .find(|&(_, named)| same(named))
        .map(|(name, _)| name)
    }
}

impl Default for Rules {
    fn default() -> Rules {
        Rules::CHINESE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_found_in_real_records() {
        assert_eq!(Rules::by_name("Japanese"), Some(Rules::JAPANESE));
        assert_eq!(Rules::by_name("Chinese"), Some(Rules::CHINESE));
        assert_eq!(Rules::by_name("AGA"), Some(Rules::AGA));
        assert_eq!(Rules::by_name("New Zealand"), Some(Rules::NEW_ZEALAND));
        assert_eq!(Rules::by_name("NZ"), Some(Rules::NEW_ZEALAND));
        assert_eq!(Rules::by_name("Tromp/Taylor"), Some(Rules::TROMP_TAYLOR));
        assert_eq!(Rules::by_name("TT--"), Some(Rules::TROMP_TAYLOR));
        assert_eq!(Rules::by_name("Ing"), None);
    }

    #[test]
    fn every_named_rule_set_is_written_under_a_name_read_back_as_itself() {
        // An area rule set written as `Chinese` lost its suicide (Tromp-
        // Taylor) or its situational superko (NZ, AGA) when read back.
        for named in [Rules::CHINESE, Rules::JAPANESE, Rules::AGA, Rules::NEW_ZEALAND, Rules::TROMP_TAYLOR] {
            for komi in [named.komi, 0.5, -3.0] {
                let rules = Rules { komi, ..named };
                let name = rules.sgf_name().unwrap_or_else(|| panic!("{rules:?} has a name"));
                assert_eq!(Rules::by_name(name).map(|r| Rules { komi, ..r }), Some(rules), "{name}");
            }
        }
        assert_eq!(Rules::TROMP_TAYLOR.sgf_name(), Some("Tromp-Taylor"));
        let unnamed = Rules { ko: KoRule::Simple, allow_suicide: true, ..Rules::CHINESE };
        assert_eq!(unnamed.sgf_name(), None);
    }
}
