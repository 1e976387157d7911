//! Game results (SGF `RE`), from the `FF[4]` forms (`B+R`, `W+3.5`, `0`) and
//! the free text older files and servers write (`W+Resign`, `B+R (199
//! moves)`, `White wins by resignation`, `Black resigns. W 133.5 B 81.0`).

use std::fmt;

use crate::go::Color;

/// How a game was won.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WinBy {
    /// By this many points.
    Points(f32),
    /// The loser resigned.
    Resignation,
    /// The loser ran out of time.
    Time,
    /// The loser forfeited (including by an illegal move).
    Forfeit,
    /// The winner is known, the margin is not (`B+`).
    Unknown,
}

/// The outcome of a game.
#[derive(Clone, Debug, PartialEq)]
pub enum GameResult {
    /// One player won.
    Win {
        /// Who won.
        winner: Color,
        /// How.
        by: WinBy,
    },
    /// A draw (jigo).
    Draw,
    /// No result (suspended, annulled).
    Void,
    /// A result that could not be understood, as written (trimmed); `?` is
    /// SGF's own "unknown".
    Unknown(String),
}

impl GameResult {
    /// Interprets an `RE` value. Never fails: what is not understood is
    /// kept as [`GameResult::Unknown`].
    pub fn parse(text: &str) -> GameResult {
        let text = text.trim();
        let lower = text.to_lowercase();
        let lower = lower.as_str();
        if matches!(lower, "0" | "draw" | "jigo" | "tie") {
            return GameResult::Draw;
        }
        if matches!(lower, "void" | "no result" | "suspended" | "annulled") {
            return GameResult::Void;
        }
        scored_form(lower).or_else(|| free_text(lower)).unwrap_or_else(|| GameResult::Unknown(text.to_string()))
    }

    /// The winner, if someone won.
    pub fn winner(&self) -> Option<Color> {
        match self {
            GameResult::Win { winner, .. } => Some(*winner),
            _ => None,
        }
    }
}

/// `B+...` / `W+...`: the `FF[4]` form and the many suffixes seen after it.
fn scored_form(lower: &str) -> Option<GameResult> {
    let (color, rest) = lower.split_once('+')?;
    let winner = Color::parse(color.trim())?;
    let rest = rest.trim_start();
    if ["jigo", "j", "draw"].iter().any(|w| first_word(rest) == *w) {
        return Some(GameResult::Draw);
    }
    let by = if let Some(points) = leading_number(rest) {
        // `B+0` is how some writers put a draw.
        if points == 0.0 {
            return Some(GameResult::Draw);
        }
        WinBy::Points(points)
    } else {
        win_method(rest).unwrap_or(WinBy::Unknown)
    };
    Some(GameResult::Win { winner, by })
}

/// Sentences: `White wins by resignation`, `Black resigns. W 133.5 B 81.0`,
/// `Black lost on time`, `White wins by 3.5 points`.
fn free_text(lower: &str) -> Option<GameResult> {
    let mut words = lower.split(|c: char| !c.is_alphanumeric() && c != '.').filter(|w| !w.is_empty());
    let color = words.by_ref().find_map(Color::parse)?;
    let verb = words.next()?;
    let rest = words.collect::<Vec<_>>().join(" ");
    let (winner, by) = if verb.starts_with("resign") {
        (color.opponent(), WinBy::Resignation)
    } else if verb.starts_with("win") || verb == "won" {
        let margin = rest.strip_prefix("by ").unwrap_or(&rest);
        (color, leading_number(margin).map(WinBy::Points).or_else(|| win_method(&rest)).unwrap_or(WinBy::Unknown))
    } else if verb.starts_with("los") || verb == "lost" {
        (color.opponent(), win_method(&rest).unwrap_or(WinBy::Unknown))
    } else {
        return None;
    };
    Some(GameResult::Win { winner, by })
}

/// The method named by the first word that names one: `R`, `Resign`,
/// `resignation`, `T`, `Time`, `timeout`, `F`, `Forfeit`, `Illegal`.
fn win_method(text: &str) -> Option<WinBy> {
    text.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).find_map(|word| {
        let method = match word {
            "r" => WinBy::Resignation,
            "t" => WinBy::Time,
            "f" => WinBy::Forfeit,
            w if w.starts_with("resign") => WinBy::Resignation,
            w if w.starts_with("time") => WinBy::Time,
            w if w.starts_with("forfeit") || w.starts_with("illegal") => WinBy::Forfeit,
            _ => return None,
        };
        Some(method)
    })
}

/// The number at the start of `text` (`7.5` in `7.5?`), if any.
fn leading_number(text: &str) -> Option<f32> {
    let end = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    text[..end].parse().ok().filter(|x: &f32| x.is_finite())
}

fn first_word(text: &str) -> &str {
    text.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("")
}

impl fmt::Display for WinBy {
    /// The part after `+` in `FF[4]`: `R`, `T`, `F`, the points, or nothing.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WinBy::Points(points) => write!(f, "{points}"),
            WinBy::Resignation => f.write_str("R"),
            WinBy::Time => f.write_str("T"),
            WinBy::Forfeit => f.write_str("F"),
            WinBy::Unknown => Ok(()),
        }
    }
}

impl fmt::Display for GameResult {
    /// The canonical `FF[4]` form (`B+R`, `W+3.5`, `0`, `Void`); an unknown
    /// result as it was written (`?`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GameResult::Win { winner, by } => write!(f, "{}+{by}", winner.letter()),
            GameResult::Draw => f.write_str("0"),
            GameResult::Void => f.write_str("Void"),
            GameResult::Unknown(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Color::{Black, White};

    fn win(winner: Color, by: WinBy) -> GameResult {
        GameResult::Win { winner, by }
    }

    #[test]
    fn parses_what_real_files_write() {
        let unknown = |s: &str| GameResult::Unknown(s.to_string());
        let cases = [
            ("B+R", win(Black, WinBy::Resignation)),
            ("W+Resign", win(White, WinBy::Resignation)),
            ("B+Resign", win(Black, WinBy::Resignation)),
            ("B+R.", win(Black, WinBy::Resignation)),
            ("B+Time", win(Black, WinBy::Time)),
            ("W+time", win(White, WinBy::Time)),
            ("B+T", win(Black, WinBy::Time)),
            ("W+Time Over", win(White, WinBy::Time)),
            ("W+Forfeit", win(White, WinBy::Forfeit)),
            ("W+F", win(White, WinBy::Forfeit)),
            ("B+Illegal", win(Black, WinBy::Forfeit)),
            ("B+12.50", win(Black, WinBy::Points(12.5))),
            ("W+0.5", win(White, WinBy::Points(0.5))),
            ("W+24", win(White, WinBy::Points(24.0))),
            ("B+7.5?", win(Black, WinBy::Points(7.5))),
            ("B+1.5 ? W+timeout", win(Black, WinBy::Points(1.5))),
            ("B+", win(Black, WinBy::Unknown)),
            ("W+Repetition", win(White, WinBy::Unknown)),
            ("B+, Goro crushed in his 126th move", win(Black, WinBy::Unknown)),
            ("B+R (199 moves)", win(Black, WinBy::Resignation)),
            ("B+R (after 125 moves)", win(Black, WinBy::Resignation)),
            (" b+r ", win(Black, WinBy::Resignation)),
            ("0", GameResult::Draw),
            ("Draw", GameResult::Draw),
            ("Jigo", GameResult::Draw),
            ("W+Jigo", GameResult::Draw),
            ("W+jigo", GameResult::Draw),
            ("W+J", GameResult::Draw),
            ("W+0", GameResult::Draw),
            ("Void", GameResult::Void),
            ("?", unknown("?")),
            ("has adjourned.", unknown("has adjourned.")),
            ("White wins by resignation", win(White, WinBy::Resignation)),
            ("White resigns.", win(Black, WinBy::Resignation)),
            ("Black resigns. W 133.5 B 81.0", win(White, WinBy::Resignation)),
            ("Black wins by 3.5 points", win(Black, WinBy::Points(3.5))),
            ("White wins on time", win(White, WinBy::Time)),
            ("Black lost on time", win(White, WinBy::Time)),
            ("White wins", win(White, WinBy::Unknown)),
        ];
        for (text, expected) in cases {
            assert_eq!(GameResult::parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn displays_canonical_ff4() {
        let cases = [
            (win(Black, WinBy::Resignation), "B+R"),
            (win(White, WinBy::Points(3.5)), "W+3.5"),
            (win(White, WinBy::Points(12.0)), "W+12"),
            (win(Black, WinBy::Time), "B+T"),
            (win(Black, WinBy::Forfeit), "B+F"),
            (win(White, WinBy::Unknown), "W+"),
            (GameResult::Draw, "0"),
            (GameResult::Void, "Void"),
            (GameResult::Unknown("?".into()), "?"),
        ];
        for (result, text) in cases {
            assert_eq!(result.to_string(), text);
            assert_eq!(GameResult::parse(text), result, "display then parse is the identity");
        }
    }

    #[test]
    fn winner() {
        assert_eq!(GameResult::parse("W+R").winner(), Some(White));
        assert_eq!(GameResult::parse("0").winner(), None);
    }
}
