//! Writing a record as `FF[4]` SGF: go-train lays out the game tree, and
//! sgf-parse writes each node (identifiers, values, escaping).

use std::collections::HashSet;

use sgf_parse::go::{self, Prop};
use sgf_parse::{SgfNode, SimpleText};

use super::record::{GameRecord, Setup};
use crate::go::{Color, ColoredMove, Move, Vertex};

/// Moves per output line, to keep files readable.
const MOVES_PER_LINE: usize = 12;

/// The record as one `FF[4]` game tree in UTF-8: the root with `GM[1]`, `SZ`,
/// the known metadata, setup and `PL`, the extra properties, then a node
/// per move (`B[]` for a pass) and a node for each later setup. Reading
/// the text back gives the same record; resignations are not moves in SGF
/// and are left out.
///
/// Nodes are written one by one rather than as one sgf-parse tree, whose
/// writer nests each node in the one before it (recursion as deep as the
/// game, and each level copies the rest of the game's text).
pub fn write_game(record: &GameRecord) -> String {
    write_annotated(record, &[])
}

/// [`write_game`] with `comments[i]` added to the comment (`C`) of move
/// `i`'s node (a game review's figures), after the game's own comment
/// there, if it has one.
pub fn write_annotated(record: &GameRecord, comments: &[String]) -> String {
    let mut root = vec![Prop::FF(4), Prop::GM(1), Prop::CA(text("UTF-8"))];
    // sgf-parse writes `SZ` as `19:19`, FF[4]'s form for rectangles that
    // FF[3] readers (and sgfmill) refuse: written as the plain number.
    root.push(Prop::Unknown("SZ".into(), vec![record.size.to_string()]));
    let simple = |value: &Option<String>| value.as_deref().map(text);
    let known = [
        // Through its decimal text: f32 → f64 would write 0.1 as 0.10000000149011612.
        record.komi.map(|k| Prop::KM(k.to_string().parse().unwrap_or(k.into()))),
        record.handicap.map(|h| Prop::HA(h.into())),
        simple(&record.rules).map(Prop::RU),
        record.date.map(|d| Prop::DT(text(&d.to_string()))),
        simple(&record.black).map(Prop::PB),
        simple(&record.black_rank).map(Prop::BR),
        simple(&record.white).map(Prop::PW),
        simple(&record.white_rank).map(Prop::WR),
        record.result.as_ref().map(|r| Prop::RE(text(&r.to_string()))),
        record.player_to_move.map(|c| Prop::PL(sgf_color(c))),
    ];
    root.extend(known.into_iter().flatten());
    root.extend(setup_properties(&record.setup));
    let written: HashSet<String> = root.iter().map(prop_identifier).collect();
    for prop in &record.extra_properties {
        if !written.contains(&prop_identifier(prop)) {
            root.push(escaped(prop));
        }
    }
    let mut out = format!("({}\n", node(root));
    let mut later = record.later_setup.iter().peekable();
    let mut later_to_move = record.later_to_move.iter().peekable();
    // The setup nodes before move `i` (or after the last), `PL` in the last.
    let mut later_nodes = |i: usize, out: &mut String| {
        let mut nodes: Vec<Vec<Prop>> =
            std::iter::from_fn(|| later.next_if(|(k, _)| *k <= i)).map(|(_, setup)| setup_properties(setup)).collect();
        if let Some((_, color)) = std::iter::from_fn(|| later_to_move.next_if(|(k, _)| *k <= i)).last() {
            match nodes.last_mut() {
                Some(last) => last.push(Prop::PL(sgf_color(*color))),
                None => nodes.push(vec![Prop::PL(sgf_color(*color))]),
            }
        }
        for properties in nodes {
            out.push_str(&format!("\n{}\n", node(properties)));
        }
    };
    let mut own_comments = record.move_comments.iter().peekable();
    for (i, mv) in record.moves.iter().enumerate() {
        later_nodes(i, &mut out);
        // The game's own comment first, then what the caller adds.
        let own = std::iter::from_fn(|| own_comments.next_if(|(k, _)| *k <= i)).last().filter(|(k, _)| *k == i);
        let added = comments.get(i).filter(|c| !c.is_empty());
        let comment = match (own, added) {
            (Some((_, own)), Some(added)) => Some(format!("{own}\n\n{added}")),
            (Some((_, own)), None) => Some(own.clone()),
            (None, added) => added.cloned(),
        };
        if let Some(prop) = move_property(*mv) {
            let comment = comment.map(|c| Prop::C(sgf_parse::Text::from(c.as_str())));
            out.push_str(&node([prop].into_iter().chain(comment).collect()));
        }
        if (i + 1) % MOVES_PER_LINE == 0 {
            out.push('\n');
        }
    }
    later_nodes(usize::MAX, &mut out);
    out.push_str(")\n");
    out
}

/// One node as sgf-parse writes it: `;` and its properties.
fn node(properties: Vec<Prop>) -> String {
    SgfNode::new(properties, Vec::new(), false).to_string()
}

fn text(value: &str) -> SimpleText {
    SimpleText::from(value)
}

fn sgf_color(color: Color) -> sgf_parse::Color {
    match color {
        Color::Black => sgf_parse::Color::Black,
        Color::White => sgf_parse::Color::White,
    }
}

fn prop_identifier(prop: &Prop) -> String {
    match prop {
        Prop::Unknown(ident, _) | Prop::Invalid(ident, _) => ident.clone(),
        _ => sgf_parse::SgfProp::identifier(prop),
    }
}

/// The property as written: sgf-parse writes the values of a property it
/// did not read (`Unknown`, `Invalid`) as they are, so a `]` in one would end
/// the value early; they are escaped here.
fn escaped(prop: &Prop) -> Prop {
    let escape = |values: &[String]| values.iter().map(|v| v.replace('\\', "\\\\").replace(']', "\\]")).collect();
    match prop {
        Prop::Unknown(ident, values) => Prop::Unknown(ident.clone(), escape(values)),
        Prop::Invalid(ident, values) => Prop::Invalid(ident.clone(), escape(values)),
        other => other.clone(),
    }
}

/// `AB`, `AW` and `AE` of a setup. sgf-parse holds point lists as sets,
/// which it writes in no fixed order; go-train's files must come out the
/// same each time, so the points are written as a property sgf-parse does
/// not interpret, row by row.
fn setup_properties(setup: &Setup) -> Vec<Prop> {
    let mut properties = Vec::new();
    for (ident, color) in [("AB", Some(Color::Black)), ("AW", Some(Color::White)), ("AE", None)] {
        let mut points: Vec<Vertex> = setup.iter().filter(|(_, c)| *c == color).map(|(v, _)| *v).collect();
        points.sort_by_key(|v| (v.y, v.x));
        if !points.is_empty() {
            properties.push(Prop::Unknown(ident.into(), points.iter().map(|v| v.to_sgf()).collect()));
        }
    }
    properties
}

fn move_property(mv: ColoredMove) -> Option<Prop> {
    let value = match mv.mv {
        Move::Play(v) => go::Move::Move(go::Point { x: v.x, y: v.y }),
        Move::Pass => go::Move::Pass,
        Move::Resign => return None,
    };
    Some(match mv.color {
        Color::Black => Prop::B(value),
        Color::White => Prop::W(value),
    })
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
        record.extra_properties = vec![Prop::GN(text("test")), Prop::Invalid("KM".into(), vec!["dup".into()])];
        let text = write_game(&record);
        assert_eq!(
            text,
            concat!(
                "(;FF[4]GM[1]CA[UTF-8]SZ[9]KM[7.5]DT[2024-01-02]PB[a\\]b\\\\c]RE[W+R]PL[W]AB[cc][gg]GN[test]\n",
                ";W[ee];B[])\n"
            )
        );
        record.komi = Some(0.1);
        assert!(write_game(&record).contains("KM[0.1]"));
        record.komi = Some(7.5);
        // The extra KM is shadowed by the komi field, so not written.
        record.extra_properties.pop();
        assert_eq!(parse_game(&text).unwrap(), record);
    }

    /// A game's own move comments survive writing, and a review's figures
    /// go after them (a review once replaced them).
    #[test]
    fn a_games_move_comments_are_kept_and_added_to() {
        let record = parse_game("(;SZ[19]C[the root];B[aa]C[first \\] move];W[bb];B[cc]C[  ];W[dd]C[last])").unwrap();
        assert_eq!(record.move_comments, vec![(0, "first ] move".to_string()), (3, "last".to_string())]);
        let again = parse_game(&write_game(&record)).unwrap();
        assert_eq!(again.move_comments, record.move_comments);
        let review: Vec<String> = ["one", "two", "", "four"].map(String::from).to_vec();
        let written = parse_game(&write_annotated(&record, &review)).unwrap();
        let expected = [(0, "first ] move\n\none"), (1, "two"), (3, "last\n\nfour")];
        assert_eq!(written.move_comments, expected.map(|(i, c)| (i, c.to_string())).to_vec());
        assert!(written.extra_properties.iter().any(|p| matches!(p, Prop::C(t) if t.text == "the root")));
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

    #[test]
    fn a_marked_value_position_survives_writing_and_a_new_mark_replaces_it() {
        let mut record = parse_game("(;SZ[19];B[aa];W[bb];B[cc])").unwrap();
        assert_eq!(record.marked_value_position(), None);
        record.mark_value_position(1);
        record.mark_value_position(2);
        let text = write_game(&record);
        assert!(text.contains("VP[2]") && !text.contains("VP[1]"), "{text}");
        assert_eq!(parse_game(&text).unwrap().marked_value_position(), Some(2));
    }
}
