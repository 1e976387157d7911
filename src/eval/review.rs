//! Game review: what the nets think of every move of a real game — the
//! rank and probability of the move played under the policy, the policy's
//! top 3, the value before and after — and where the game swung. Written
//! as SGF comments (read in Sabaki as Leela Zero's and KaTrain's reviews
//! are) and as a plot of Black's win probability over the game.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::Color as _;
use serde::Serialize;

use crate::go::{Color, Game, Move, Vertex};
use crate::plot::plot_error;
use crate::search::NetEval;
use crate::sgf::{GameRecord, ReplayError};

/// Positions per net call.
const BATCH: usize = 64;

/// The review of one move.
#[derive(Clone, Debug, Serialize)]
pub struct MoveReview {
    /// 1 for the first move.
    pub number: usize,
    #[serde(serialize_with = "color_name")]
    pub color: Color,
    /// The move in GTP form (`Q16`, `pass`).
    #[serde(rename = "move")]
    pub mv: String,
    /// Its rank among the legal moves under the policy (1: the policy's
    /// choice); `None` without a policy net.
    pub rank: Option<usize>,
    /// Its policy probability.
    pub probability: Option<f32>,
    /// The policy's three likeliest legal moves and their probabilities.
    pub top: Vec<(String, f32)>,
    /// Black's win probability before and after the move (value net).
    pub black_before: Option<f32>,
    pub black_after: Option<f32>,
}

impl MoveReview {
    /// How much the move changed its player's win probability.
    pub fn swing(&self) -> Option<f32> {
        let change = self.black_after? - self.black_before?;
        Some(if self.color == Color::Black { change } else { -change })
    }

    /// The SGF comment: the figures as a reader of the game wants them.
    pub fn comment(&self) -> String {
        let mut lines = Vec::new();
        if let (Some(rank), Some(p)) = (self.rank, self.probability) {
            lines.push(format!("Policy: {} is the #{rank} move ({:.1}%)", self.mv, 100.0 * p));
            let top: Vec<String> = self.top.iter().map(|(m, p)| format!("{m} {:.1}%", 100.0 * p)).collect();
            lines.push(format!("Top 3: {}", top.join(", ")));
        }
        if let (Some(before), Some(after), Some(swing)) = (self.black_before, self.black_after, self.swing()) {
            lines.push(format!(
                "Black wins: {:.1}% -> {:.1}% ({} {:+.1} points of win rate)",
                100.0 * before,
                100.0 * after,
                self.color,
                100.0 * swing
            ));
        }
        lines.join("\n")
    }
}

/// The review of a game: its moves up to the first the rules forbid, if
/// any, and that move.
pub struct Review {
    pub moves: Vec<MoveReview>,
    /// Why the replay stopped before the end of the record.
    pub stopped: Option<ReplayError>,
}

/// Reviews every move of `record` (replayed under `rules`) with a policy
/// net, a value net, or both: up to the first illegal move, since a record
/// damaged late (5 of the 596 professional games at hand) still has a
/// game worth reviewing before it.
pub fn review_game(
    record: &GameRecord,
    rules: crate::go::Rules,
    policy: Option<&NetEval>,
    value: Option<&NetEval>,
) -> Result<Review> {
    let mut positions: Vec<Game> = Vec::with_capacity(record.moves.len());
    let mut afters: Vec<Game> = Vec::with_capacity(record.moves.len());
    let mut moves = Vec::with_capacity(record.moves.len());
    let stopped = record
        .replay_with(rules, |_, game, mv| {
            positions.push(game.clone());
            let mut after = game.clone();
            after.play_unchecked(mv.color, mv.mv);
            afters.push(after);
            moves.push(mv);
        })
        .err();
    let size = record.size;
    // The position after a move is the one before the next, unless a setup
    // node (`AE`, `AB`, `AW`, `PL`) or a second move of one colour comes
    // between them: a move is judged by what it did, not by what came after.
    let after_is_own = |i: usize| {
        positions
            .get(i + 1)
            .is_none_or(|next| next.board().hash() != afters[i].board().hash() || next.to_move() != afters[i].to_move())
    };
    // Black's win probability before every move, then after the moves
    // whose after-position is not the next move's before-position.
    let black: Option<(Vec<f32>, Vec<Option<f32>>)> = match value {
        Some(net) => {
            let own: Vec<usize> = (0..moves.len()).filter(|&i| after_is_own(i)).collect();
            let evaluated: Vec<&Game> = positions.iter().chain(own.iter().map(|&i| &afters[i])).collect();
            let mut probs = Vec::with_capacity(evaluated.len());
            for chunk in evaluated.chunks(BATCH) {
                let p = net.win_probs(chunk)?;
                probs.extend(chunk.iter().zip(p).map(|(g, p)| if g.to_move() == Color::Black { p } else { 1.0 - p }));
            }
            let mut after = vec![None; moves.len()];
            for (&i, &p) in own.iter().zip(&probs[moves.len()..]) {
                after[i] = Some(p);
            }
            probs.truncate(moves.len());
            Some((probs, after))
        }
        None => None,
    };
    let black_after = |i: usize| black.as_ref().map(|(before, after)| after[i].unwrap_or_else(|| before[i + 1]));
    let mut reviews = Vec::with_capacity(moves.len());
    for (start, chunk) in positions.chunks(BATCH).enumerate().map(|(i, c)| (i * BATCH, c)) {
        let refs: Vec<&Game> = chunk.iter().collect();
        let probs = match policy {
            Some(net) => net.move_probs(&refs)?.into_iter().map(Some).collect(),
            None => vec![None; chunk.len()],
        };
        for (offset, (game, probs)) in chunk.iter().zip(probs).enumerate() {
            let i = start + offset;
            let mv = moves[i];
            let (rank, probability, top) = match probs {
                Some(p) => policy_view(game, mv.color, mv.mv, &p),
                None => (None, None, Vec::new()),
            };
            reviews.push(MoveReview {
                number: i + 1,
                color: mv.color,
                mv: mv.mv.to_gtp(size),
                rank,
                probability,
                top,
                black_before: black.as_ref().map(|(before, _)| before[i]),
                black_after: black_after(i),
            });
        }
    }
    Ok(Review { moves: reviews, stopped })
}

/// The played move's rank and probability among `color`'s legal moves,
/// and the three likeliest.
fn policy_view(
    game: &Game,
    color: Color,
    played: Move,
    probs: &[f32],
) -> (Option<usize>, Option<f32>, Vec<(String, f32)>) {
    let size = game.size();
    let mut legal: Vec<(Move, f32)> = (0..probs.len())
        .map(|i| (if i == size * size { Move::Pass } else { Move::Play(Vertex::from_index(i, size)) }, probs[i]))
        .filter(|&(m, _)| game.is_legal(color, m))
        .collect();
    legal.sort_by(|a, b| b.1.total_cmp(&a.1));
    let rank = legal.iter().position(|&(m, _)| m == played).map(|r| r + 1);
    let probability = played.policy_index(size).map(|i| probs[i]);
    let top = legal.iter().take(3).map(|&(m, p)| (m.to_gtp(size), p)).collect();
    (rank, probability, top)
}

fn color_name<S: serde::Serializer>(color: &Color, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(if *color == Color::Black { "B" } else { "W" })
}

/// How much of move `i`'s swing the reply left standing: its swing and
/// the change from before it to after the reply, both from the mover's
/// side, when they agree in sign, the smaller (0 when the reply undid it);
/// `None` without a judged reply (the last move, or one a setup node
/// follows), whose raw swing would outrank the rest.
/// The value net favours the side that has just moved, so raw swings saw
/// up and down: ranked by them, most of the biggest were a move and the
/// reply that took it back (23 of the top 5 of 6 kgs-6d games).
pub fn lasting_swing(reviews: &[MoveReview], i: usize) -> Option<f32> {
    let this = &reviews[i];
    let swing = this.swing()?;
    // The reply judged from the same position, not across a setup node.
    let reply = reviews.get(i + 1).filter(|r| r.black_before == this.black_after)?;
    let after_reply = reply.black_after? - this.black_before?;
    let after_reply = if this.color == Color::Black { after_reply } else { -after_reply };
    Some(if swing.signum() == after_reply.signum() { swing.signum() * swing.abs().min(after_reply.abs()) } else { 0.0 })
}

/// The `n` moves whose swing lasted most ([`lasting_swing`]), either way,
/// largest first.
pub fn biggest_swings(reviews: &[MoveReview], n: usize) -> Vec<&MoveReview> {
    let mut swinging: Vec<(f32, &MoveReview)> = (0..reviews.len())
        .filter_map(|i| lasting_swing(reviews, i).map(|s| (s.abs(), &reviews[i])))
        .filter(|&(s, _)| s > 0.0)
        .collect();
    swinging.sort_by(|a, b| b.0.total_cmp(&a.0));
    swinging.into_iter().take(n).map(|(_, r)| r).collect()
}

/// Draws Black's win probability after each move at `path`, as SVG when
/// it ends in `.svg` and as PNG otherwise, the `marked` moves (the biggest
/// swings) labelled on the curve.
pub fn plot_win_rate(reviews: &[MoveReview], marked: &[&MoveReview], title: &str, path: &Path) -> Result<()> {
    const SIZE: (u32, u32) = (1000, 420);
    if crate::plot::is_svg(path) {
        crate::plot::register_font();
        let mut svg = String::new();
        draw_win_rate(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), reviews, marked, title)?;
        return crate::atomic::write_atomic(path, svg.as_bytes());
    }
    // The PNG's font is cut to ASCII: a name it cannot draw is marked, not
    // left out (a Chinese name once vanished from the title).
    let title = crate::plot::drawable(title);
    crate::plot::write_png(path, SIZE, |root| draw_win_rate(root, reviews, marked, &title))
}

fn draw_win_rate<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    reviews: &[MoveReview],
    marked: &[&MoveReview],
    title: &str,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let points: Vec<(f64, f64)> =
        std::iter::once(reviews.first().and_then(|r| r.black_before).map(|b| (0.0, b as f64)))
            .chain(reviews.iter().map(|r| r.black_after.map(|b| (r.number as f64, b as f64))))
            .flatten()
            .collect();
    let moves = reviews.len().max(1) as f64;
    let err = plot_error("the win-rate plot");
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..moves, 0.0..1.0)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc("move")
        .y_desc("Black wins")
        // No more ticks than moves: a game of two moves once had eleven,
        // rounded to "0 0 0 1 1 1 1 1 2 2 2".
        .x_labels((reviews.len() + 1).min(10))
        .y_label_formatter(&|y| format!("{:.0}%", 100.0 * y))
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(&err)?;
    chart.draw_series(LineSeries::new([(0.0, 0.5), (moves, 0.5)], BLACK.mix(0.4))).map_err(&err)?;
    let blue = RGBColor(31, 119, 180);
    chart
        .draw_series(LineSeries::new(points.iter().copied(), blue.mix(0.45).stroke_width(1)))
        .map_err(&err)?
        .label("after each move")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.mix(0.45).stroke_width(1)));
    // A value net that favours the side that just moved saws up and
    // down from move to move; the mean of two moves shows the trend.
    let paired: Vec<(f64, f64)> = points.windows(2).map(|w| (w[1].0, (w[0].1 + w[1].1) / 2.0)).collect();
    chart
        .draw_series(LineSeries::new(paired, blue.stroke_width(2)))
        .map_err(&err)?
        .label("mean of two moves")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2)));
    let red = RGBColor(214, 39, 40);
    let marks: Vec<Mark> = marked
        .iter()
        .filter_map(|r| {
            let after = r.black_after?;
            // Above a point that went Black's way, below one that did not.
            let up = r.black_before.is_some_and(|b| after >= b);
            Some(Mark { x: r.number as f64, y: after as f64, up, label: format!("{} {}", r.number, r.mv) })
        })
        .collect();
    let (area_width, area_height) = chart.plotting_area().dim_in_pixel();
    let scale = (moves / area_width.max(1) as f64, 1.0 / area_height.max(1) as f64);
    for (mark, place) in marks.iter().zip(place_labels(&marks, scale, moves)) {
        chart.draw_series(std::iter::once(Circle::new((mark.x, mark.y), 4, red.filled()))).map_err(&err)?;
        // A white ground under the label, the curve faint through it: the curve
        // runs through labels often, and then hid them.
        let ground = Rectangle::new([(place.x0, place.y0), (place.x1, place.y1)], WHITE.mix(0.85).filled());
        chart.draw_series(std::iter::once(ground)).map_err(&err)?;
        let style = ("sans-serif", 13).into_font().color(&red).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            if place.up { plotters::style::text_anchor::VPos::Bottom } else { plotters::style::text_anchor::VPos::Top },
        ));
        chart.draw_series(std::iter::once(Text::new(mark.label.clone(), (place.x, place.y), style))).map_err(&err)?;
    }
    crate::plot::draw_legend(&mut chart).map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// A labelled point of the win-rate plot.
struct Mark {
    x: f64,
    y: f64,
    /// Whether its label goes above it (else below).
    up: bool,
    label: String,
}

/// Where a mark's label goes.
#[derive(Clone, Copy, Debug)]
struct LabelPlace {
    /// The label's centre.
    x: f64,
    /// Its anchor: its bottom edge when it hangs above the point, its top
    /// edge below.
    y: f64,
    up: bool,
    /// The box the label takes: x from `x0` to `x1`, y from `y0` to `y1`.
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

/// Where each mark's label goes. Swings cluster (a fight is a run of big
/// swings), and labels drawn at their points covered each other; each
/// label is moved away from its point, past the labels placed before it,
/// and to the other side when it would leave the plot; at either end it
/// is moved in, whole (the last move's "285 A12" was once cut to "285 A1",
/// another point). `scale` is chart units per pixel; x runs from 0 to
/// `x_max`.
fn place_labels(marks: &[Mark], scale: (f64, f64), x_max: f64) -> Vec<LabelPlace> {
    const GAP_PX: f64 = 6.0;
    const HEIGHT_PX: f64 = 15.0;
    const CHAR_PX: f64 = 7.5;
    let height = HEIGHT_PX * scale.1;
    let mut placed: Vec<(f64, f64, f64, f64)> = Vec::new(); // x0, x1, y0, y1
    marks
        .iter()
        .map(|m| {
            let half_width = m.label.chars().count() as f64 * CHAR_PX * scale.0 / 2.0;
            let x = if 2.0 * half_width >= x_max { x_max / 2.0 } else { m.x.clamp(half_width, x_max - half_width) };
            let (x0, x1) = (x - half_width, x + half_width);
            let free = |y0: f64| {
                (0.0..=1.0).contains(&y0)
                    && y0 + height <= 1.0
                    && placed.iter().all(|&(a0, a1, b0, b1)| x1 <= a0 || a1 <= x0 || y0 + height <= b0 || b1 <= y0)
            };
            // The label's bottom edge for a label above, its top less its
            // height below; moving out a label height at a time.
            let spot = |up: bool, step: usize| {
                let away = GAP_PX * scale.1 + step as f64 * height;
                if up {
                    m.y + away
                } else {
                    m.y - away - height
                }
            };
            let (y0, up) = (0..12)
                .flat_map(|step| [(spot(m.up, step), m.up), (spot(!m.up, step), !m.up)])
                .find(|&(y0, _)| free(y0))
                .unwrap_or((spot(m.up, 0), m.up));
            placed.push((x0, x1, y0, y0 + height));
            LabelPlace { x, y: if up { y0 } else { y0 + height }, up, x0, x1, y0, y1: y0 + height }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(number: usize, color: Color, before: f32, after: f32) -> MoveReview {
        MoveReview {
            number,
            color,
            mv: "D4".into(),
            rank: Some(2),
            probability: Some(0.25),
            top: vec![("Q16".into(), 0.5), ("D4".into(), 0.25), ("C3".into(), 0.125)],
            black_before: Some(before),
            black_after: Some(after),
        }
    }

    #[test]
    fn labels_of_swings_side_by_side_do_not_cover_each_other() {
        // The review example's cluster: moves 97, 100 and 106 near 75%.
        let mark = |x: f64, y: f64, up| Mark { x, y, up, label: format!("{x} E11") };
        let marks =
            [mark(97.0, 0.753, true), mark(100.0, 0.748, true), mark(106.0, 0.742, true), mark(107.0, 0.578, false)];
        let scale = (223.0 / 920.0, 1.0 / 330.0);
        let boxes = |marks: &[Mark], x_max: f64| -> Vec<(f64, f64, f64, f64)> {
            let height = 15.0 * scale.1;
            marks
                .iter()
                .zip(place_labels(marks, scale, x_max))
                .map(|(m, place)| {
                    let half = m.label.len() as f64 * 7.5 * scale.0 / 2.0;
                    let y0 = if place.up { place.y } else { place.y - height };
                    let taken = (place.x - half, place.x + half, y0, y0 + height);
                    // The white ground drawn under the label is where the label is.
                    let ground = (place.x0, place.x1, place.y0, place.y1);
                    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
                    assert!(
                        close(taken.0, ground.0)
                            && close(taken.1, ground.1)
                            && close(taken.2, ground.2)
                            && close(taken.3, ground.3),
                        "{ground:?} is not the label's box {taken:?}"
                    );
                    taken
                })
                .collect()
        };
        let placed = boxes(&marks, 223.0);
        for (i, a) in placed.iter().enumerate() {
            assert!(a.2 >= 0.0 && a.3 <= 1.0, "{a:?} inside the plot");
            for b in &placed[i + 1..] {
                assert!(a.1 <= b.0 || b.1 <= a.0 || a.3 <= b.2 || b.3 <= a.2, "{a:?} overlaps {b:?}");
            }
        }
        // A lone label sits next to its point, on its side, centred on it.
        let lone = place_labels(&marks[..1], scale, 223.0)[0];
        assert!(lone.up && (lone.y - 0.753 - 6.0 * scale.1).abs() < 1e-9 && lone.x == 97.0, "{lone:?}");
        // The labels of the first and the last move stay whole inside the
        // plot, moved in from the edges.
        let ends = [mark(1.0, 0.5, true), mark(223.0, 0.9, false)];
        for b in boxes(&ends, 223.0) {
            assert!(b.0 >= 0.0 && b.1 <= 223.0, "{b:?} inside 0..223");
        }
    }

    #[test]
    fn a_move_is_judged_by_its_own_position_not_the_setup_after_it() {
        use crate::features::FeatureSet;
        use crate::nn::{Arch, Model};
        use candle_core::Device;
        // White's C17 is taken off the board by an `AE` node before Black's
        // next move: the review of C17 must see the board with C17 on it.
        let record = crate::sgf::parse_game("(;SZ[19]KM[7];B[pd];W[cc];AE[cc];B[dp])").unwrap();
        let value = NetEval::new(Model::new(Arch::Value, FeatureSet::Seed, &Device::Cpu, 5).unwrap(), "untrained");
        let reviews = review_game(&record, record.rules(), None, Some(&value)).unwrap().moves;
        assert_eq!(reviews.len(), 3);
        let mut game = Game::new(19, record.rules());
        let black_wins = |game: &Game| {
            let p = value.win_probs(&[game]).unwrap()[0];
            if game.to_move() == Color::Black {
                p
            } else {
                1.0 - p
            }
        };
        let mut wanted = vec![black_wins(&game)];
        for mv in &record.moves[..2] {
            game.play(mv.color, mv.mv).unwrap();
            wanted.push(black_wins(&game));
        }
        let after_setup = {
            let mut g = game.clone();
            g.setup(&record.later_setup[0].1).unwrap();
            black_wins(&g)
        };
        assert_ne!(wanted[2], after_setup, "the test needs a net that tells the two boards apart");
        let seen: Vec<(f32, f32)> = reviews.iter().map(|r| (r.black_before.unwrap(), r.black_after.unwrap())).collect();
        assert_eq!(seen[0], (wanted[0], wanted[1]));
        assert_eq!(seen[1], (wanted[1], wanted[2]), "C17 judged with C17 on the board");
        assert_eq!(seen[2].0, after_setup, "D4 judged after the setup");

        // Two black moves in a row: the first is judged with White to move.
        let record = crate::sgf::parse_game("(;SZ[19]KM[7];B[pd];B[dp];W[dd])").unwrap();
        let reviews = review_game(&record, record.rules(), None, Some(&value)).unwrap().moves;
        let mut game = Game::new(19, record.rules());
        game.play(Color::Black, record.moves[0].mv).unwrap();
        assert_eq!(game.to_move(), Color::White);
        assert_eq!(reviews[0].black_after, Some(black_wins(&game)));
    }

    /// A record with an illegal move is reviewed up to it (a pro game with
    /// a bad move 228 was once refused whole).
    #[test]
    fn an_illegal_move_ends_the_review_there() {
        let record = crate::sgf::parse_game("(;SZ[19]KM[7];B[pd];W[dp];B[dp];W[dd])").unwrap();
        let value = NetEval::new(
            crate::nn::Model::new(
                crate::nn::Arch::Value,
                crate::features::FeatureSet::Seed,
                &candle_core::Device::Cpu,
                5,
            )
            .unwrap(),
            "untrained",
        );
        let review = review_game(&record, record.rules(), None, Some(&value)).unwrap();
        assert_eq!(review.moves.len(), 2);
        let stopped = review.stopped.expect("move 3 is illegal").to_string();
        assert!(stopped.contains("move 3 (B D4)"), "{stopped}");
        assert!(review.moves[1].black_after.is_some(), "the last legal move is judged by its own position");
    }

    #[test]
    fn a_swing_is_seen_from_the_mover_and_the_biggest_come_first() {
        let reviews =
            [review(1, Color::Black, 0.5, 0.4), review(2, Color::White, 0.4, 0.7), review(3, Color::Black, 0.7, 0.75)];
        assert!((reviews[0].swing().unwrap() + 0.1).abs() < 1e-6);
        assert!((reviews[1].swing().unwrap() + 0.3).abs() < 1e-6, "white lost 30 points of win rate");
        // Move 2's swing lasts (after the reply White is 35 points down);
        // move 1's the reply undid, so it is no swing; move 3 has no reply.
        let order: Vec<usize> = biggest_swings(&reviews, 3).iter().map(|r| r.number).collect();
        assert_eq!(order, [2]);
        assert!((lasting_swing(&reviews, 1).unwrap() + 0.3).abs() < 1e-6);
        assert_eq!(lasting_swing(&reviews, 0), Some(0.0));
        assert_eq!(lasting_swing(&reviews, 2), None);
        let comment = reviews[1].comment();
        assert!(comment.contains("D4 is the #2 move (25.0%)") && comment.contains("Q16 50.0%"), "{comment}");
        assert!(comment.contains("40.0% -> 70.0% (white -30.0"), "{comment}");
    }
}
