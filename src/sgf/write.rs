//! Writing a record as `FF[4]` SGF.

use std::fmt::Write;

use super::record::{GameRecord, Setup};
use crate::go::{Color, ColoredMove, Move};

/// Moves per output line, to keep files readable.
const MOVES_PER_LINE: usize = 12;

/// The record as one `FF[4]` game tree in UTF-8: the root with `GM[1]`, `SZ`,
/// the known metadata, the extra properties, setup and `PL`, then a node
/// per move (`B[]` for a pass) and a node for each later setup. Reading
/// the text back gives the same record (root setup is written `AB`, `AW`,
/// `AE`, so it comes back in that order); resignations are not moves in
/// SGF and are left out.
pub fn write_game(record: &GameRecord) -> String {
    let mut root = Root { out: String::from("(;FF[4]GM[1]CA[UTF-8]"), written: vec!["FF", "GM", "CA"] };
    root.property("SZ", record.size);
    let optional: [(&str, Option<String>); 9] = [
        ("KM", record.komi.map(|k| k.to_string())),
        ("HA", record.handicap.map(|h| h.to_string())),
        ("RU", record.rules.clone()),
        ("DT", record.date.map(|d| d.to_string())),
        ("PB", record.black.clone()),
        ("BR", record.black_rank.clone()),
        ("PW", record.white.clone()),
        ("WR", record.white_rank.clone()),
        ("RE", record.result.as_ref().map(|r| r.to_string())),
    ];
    for (ident, value) in optional {
        if let Some(value) = value {
            root.property(ident, value);
        }
    }
    if let Some(color) = record.player_to_move {
        root.property("PL", color.letter());
    }
    write_setup(&mut root.out, &record.setup);
    root.written.extend(["AB", "AW", "AE", "B", "W"]);
    let Root { mut out, written } = root;
    for (ident, values) in &record.extra_properties {
        if !written.contains(&ident.as_str()) {
            write_property(&mut out, ident, values);
        }
    }
    out.push('\n');
    let mut later = record.later_setup.iter().peekable();
    for (i, mv) in record.moves.iter().enumerate() {
        while let Some((_, setup)) = later.next_if(|(k, _)| *k <= i) {
            write_setup_node(&mut out, setup);
        }
        write_move(&mut out, *mv);
        if (i + 1) % MOVES_PER_LINE == 0 {
            out.push('\n');
        }
    }
    for (_, setup) in later {
        write_setup_node(&mut out, setup);
    }
    out.push_str(")\n");
    out
}

/// The root node being written, and the identifiers it holds so far (so
/// that extra properties do not repeat them).
struct Root {
    out: String,
    written: Vec<&'static str>,
}

impl Root {
    fn property(&mut self, ident: &'static str, value: impl ToString) {
        write_property(&mut self.out, ident, &[value.to_string()]);
        self.written.push(ident);
    }
}

fn write_setup_node(out: &mut String, setup: &Setup) {
    out.push_str("\n;");
    write_setup(out, setup);
    out.push('\n');
}

fn write_setup(out: &mut String, setup: &Setup) {
    for (ident, color) in [("AB", Some(Color::Black)), ("AW", Some(Color::White)), ("AE", None)] {
        let points: Vec<String> = setup.iter().filter(|(_, c)| *c == color).map(|(v, _)| v.to_sgf()).collect();
        if !points.is_empty() {
            write_property(out, ident, &points);
        }
    }
}

fn write_move(out: &mut String, mv: ColoredMove) {
    let value = match mv.mv {
        Move::Play(v) => v.to_sgf(),
        Move::Pass => String::new(),
        Move::Resign => return,
    };
    let _ = write!(out, ";{}[{value}]", mv.color.letter());
}

fn write_property(out: &mut String, ident: &str, values: &[String]) {
    out.push_str(ident);
    for value in values {
        out.push('[');
        for c in value.chars() {
            if c == ']' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Rules, Vertex};
    use crate::sgf::{parse_game, GameDate, GameResult};

    #[test]
    fn writes_ff4() {
        let mut record = GameRecord::new(9);
        record.komi = Some(7.5);
        record.result = Some(GameResult::parse("W+Resign"));
        record.date = GameDate::parse("2024-01-02");
        record.black = Some("a]b\\c".into());
        record.setup = vec![(Vertex::new(2, 2), Some(Color::Black)), (Vertex::new(6, 6), Some(Color::Black))];
        record.player_to_move = Some(Color::White);
        record.moves = vec![
            ColoredMove { color: Color::White, mv: Move::Play(Vertex::new(4, 4)) },
            ColoredMove { color: Color::Black, mv: Move::Pass },
        ];
        record.extra_properties = vec![("GN".into(), vec!["test".into()]), ("KM".into(), vec!["dup".into()])];
        let text = write_game(&record);
        assert_eq!(
            text,
            concat!(
                "(;FF[4]GM[1]CA[UTF-8]SZ[9]KM[7.5]DT[2024-01-02]PB[a\\]b\\\\c]RE[W+R]PL[W]AB[cc][gg]GN[test]\n",
                ";W[ee];B[])\n"
            )
        );
        // The extra KM is shadowed by the komi field, so not written.
        record.extra_properties.pop();
        assert_eq!(parse_game(&text).unwrap(), record);
    }

    #[test]
    fn round_trips_later_setup_and_long_games() {
        let mut record = GameRecord::new(19);
        let game = parse_game("(;SZ[19];B[aa];W[bb];AB[cc]AE[aa];B[dd];AW[ee])").unwrap();
        record.moves = game.moves.clone();
        record.later_setup = game.later_setup.clone();
        for i in 0..40 {
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            record.moves.push(ColoredMove { color, mv: Move::Play(Vertex::new(i % 19, 5 + i / 19)) });
        }
        let read = parse_game(&write_game(&record)).unwrap();
        assert_eq!(read, record);
        assert!(read.replay(Rules::CHINESE).is_ok());
    }
}
