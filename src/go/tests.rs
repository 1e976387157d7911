//! Hand-built positions, one rule each. Diagrams: `X` black, `O` white,
//! `.` empty; the top row is the top of the board, as `showboard` prints it.

use super::*;

fn game_from(diagram: &str, rules: Rules) -> Game {
    let rows: Vec<&str> = diagram.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let size = rows.len();
    let mut game = Game::new(size, rules);
    let mut stones = Vec::new();
    for (y, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), size, "diagram must be square");
        for (x, ch) in row.chars().enumerate() {
            let c = match ch {
                'X' => Some(Color::Black),
                'O' => Some(Color::White),
                _ => None,
            };
            if c.is_some() {
                stones.push((Vertex::new(x, y), c));
            }
        }
    }
    game.setup(&stones).unwrap();
    game.board().check_invariants().unwrap();
    game
}

fn mv(game: &Game, name: &str) -> Move {
    Move::parse_gtp(name, game.size()).unwrap()
}

fn play(game: &mut Game, color: Color, name: &str) -> Result<u32, IllegalMove> {
    let m = mv(game, name);
    let r = game.play(color, m);
    game.board().check_invariants().unwrap();
    r
}

fn libs(game: &Game, name: &str) -> usize {
    let Move::Play(v) = mv(game, name) else { panic!() };
    game.board().liberties(game.board().point(v))
}

fn color_at(game: &Game, name: &str) -> Option<Color> {
    let Move::Play(v) = mv(game, name) else { panic!() };
    game.board().color_at(game.board().point(v))
}

use Color::{Black as B, White as W};

#[test]
fn corner_edge_and_centre_liberties() {
    let g = game_from(
        "X....
         .....
         ..O..
         .....
         ..X.X",
        Rules::CHINESE,
    );
    assert_eq!(libs(&g, "A5"), 2); // corner
    assert_eq!(libs(&g, "C1"), 3); // edge
    assert_eq!(libs(&g, "E1"), 2); // corner
    assert_eq!(libs(&g, "C3"), 4); // centre
    assert_eq!(libs(&g, "B2"), 0); // empty point
}

#[test]
fn shared_liberties_are_counted_once() {
    // The black string C3-D3 and the stone at C2 share liberties; after
    // joining them the count must not double-count any point.
    let mut g = game_from(
        ".....
         .....
         ..XX.
         .....
         .....",
        Rules::CHINESE,
    );
    assert_eq!(libs(&g, "C3"), 6);
    play(&mut g, B, "C2").unwrap();
    assert_eq!(libs(&g, "D3"), 7);
    // A white stone takes one liberty from the string and keeps three.
    play(&mut g, W, "D2").unwrap();
    assert_eq!(libs(&g, "C3"), 6);
    assert_eq!(libs(&g, "D2"), 2);
}

#[test]
fn single_capture_frees_liberties_of_every_neighbour() {
    let mut g = game_from(
        ".....
         ..X..
         .XO..
         ..X..
         .....",
        Rules::CHINESE,
    );
    assert_eq!(libs(&g, "C3"), 1);
    assert_eq!(play(&mut g, B, "D3"), Ok(1));
    assert_eq!(color_at(&g, "C3"), None);
    assert_eq!(g.board().captures(B), 1);
    // Every black stone around the hole regained the freed point.
    assert_eq!(libs(&g, "C4"), 4);
    assert_eq!(libs(&g, "B3"), 4);
    assert_eq!(libs(&g, "C2"), 4);
    assert_eq!(libs(&g, "D3"), 4);
}

#[test]
fn one_move_captures_two_strings() {
    let mut g = game_from(
        ".XO..
         XO.OX
         .XOX.
         .....
         .....",
        Rules::CHINESE,
    );
    // C4 is the last liberty of both white strings B4 and C3/C5... after
    // White's D4, black C4 is suicide-looking but captures.
    // The white strings B4 (libs C4) and C3 (libs C4, C2) : make C2 black first.
    play(&mut g, B, "C2").unwrap();
    assert_eq!(libs(&g, "B4"), 1);
    assert_eq!(libs(&g, "C3"), 1);
    let captured = play(&mut g, B, "C4").unwrap();
    assert_eq!(captured, 2);
    assert_eq!(color_at(&g, "B4"), None);
    assert_eq!(color_at(&g, "C3"), None);
    assert_eq!(color_at(&g, "C5"), Some(W));
    assert_eq!(g.board().captures(B), 2);
}

#[test]
fn capture_saves_a_string_from_suicide() {
    // Black A1 has no empty neighbour and joins nothing with liberties, but
    // it captures the white stone at B1, so it is legal and keeps a liberty.
    let mut g = game_from(
        "...
         OX.
         .OX",
        Rules::CHINESE,
    );
    assert_eq!(play(&mut g, B, "A1"), Ok(1));
    assert_eq!(libs(&g, "A1"), 1);
    assert_eq!(color_at(&g, "B1"), None);
}

#[test]
fn suicide_is_refused_by_default_and_allowed_as_an_option() {
    let diagram = "
        .O...
        O....
        .....
        .....
        .....";
    let mut g = game_from(diagram, Rules::CHINESE);
    assert_eq!(play(&mut g, B, "A5"), Err(IllegalMove::Suicide));
    assert!(g.board().check_move(g.board().point(Vertex::new(0, 0)), B, false).is_err());

    // Multi-stone suicide under Tromp–Taylor removes the whole string.
    let mut g = game_from(
        ".XO..
         OO...
         .....
         .....
         .....",
        Rules::TROMP_TAYLOR,
    );
    assert_eq!(play(&mut g, B, "A5"), Ok(0));
    assert_eq!(color_at(&g, "A5"), None);
    assert_eq!(color_at(&g, "B5"), None);
    assert_eq!(g.board().captures(W), 2);
}

#[test]
fn simple_ko_forbids_the_immediate_retake_only() {
    let mut g = game_from(
        ".....
         .XO..
         XO.O.
         .XO..
         .....",
        Rules::JAPANESE,
    );
    assert_eq!(play(&mut g, B, "C3"), Ok(1)); // takes the ko
    assert_eq!(play(&mut g, W, "B3"), Err(IllegalMove::Ko));
    play(&mut g, W, "E5").unwrap(); // ko threat
    play(&mut g, B, "E1").unwrap(); // answer
    assert_eq!(play(&mut g, W, "B3"), Ok(1)); // retake is legal now
    assert_eq!(play(&mut g, B, "C3"), Err(IllegalMove::Ko));
}

#[test]
fn capturing_two_stones_with_one_is_not_ko() {
    // White A5 takes the two black stones B5-C5 and is left with one
    // liberty; Black may take it back at once because two stones were taken.
    let mut g = game_from(
        ".XXO.
         XOOO.
         X....
         .....
         .....",
        Rules::CHINESE,
    );
    assert_eq!(play(&mut g, W, "A5"), Ok(2));
    assert_eq!(libs(&g, "A5"), 1);
    assert!(g.board().ko_point().is_none());
    assert_eq!(play(&mut g, B, "B5"), Ok(1));
}

#[test]
fn positional_superko_forbids_a_cycle_that_simple_ko_allows() {
    let diagram = "
        .....
        .XO..
        XO.O.
        .XO..
        .....";
    // Black takes the ko, both pass, and White's retake would recreate the
    // position before Black's capture: a cycle.
    for (rules, retake_ok) in [(Rules::JAPANESE, true), (Rules::CHINESE, false), (Rules::NEW_ZEALAND, false)] {
        let mut g = game_from(diagram, rules);
        play(&mut g, B, "C3").unwrap();
        play(&mut g, W, "pass").unwrap();
        play(&mut g, B, "pass").unwrap();
        let r = play(&mut g, W, "B3");
        assert_eq!(r.is_ok(), retake_ok, "{rules:?}: {r:?}");
        if !retake_ok {
            assert_eq!(r, Err(IllegalMove::Superko));
        }
    }
}

#[test]
fn triple_ko_cycles_under_simple_ko_and_is_stopped_by_superko() {
    // Three independent kos between two living groups (columns B, E, H).
    // White holds the B and H kos, Black the E ko. Each player takes a ko
    // in turn; after six captures the stones are back where they started.
    let diagram = "
        XXXXXXXXX
        X.XX.XX.X
        XXXXXXXXX
        XOXX.XXOX
        O.OOXOO.O
        OOOOOOOOO
        O.OO.OO.O
        OOOOOOOOO
        OOOOOOOOO";
    let cycle = ["B5", "E6", "H5", "B6", "E5", "H6"];
    let play_cycle = |rules: Rules| -> Result<(), (usize, IllegalMove)> {
        let mut g = game_from(diagram, rules);
        let start = g.board().hash();
        let mut color = B;
        for round in 0..2 {
            for (i, m) in cycle.iter().enumerate() {
                let captured = g.play(color, Move::parse_gtp(m, 9).unwrap()).map_err(|e| (round * 6 + i, e))?;
                assert_eq!(captured, 1, "every move of the cycle takes a ko");
                g.board().check_invariants().unwrap();
                color = color.opponent();
            }
            assert_eq!(g.board().hash(), start, "the cycle restores the stones");
        }
        Ok(())
    };
    assert_eq!(play_cycle(Rules::JAPANESE), Ok(()));
    assert_eq!(play_cycle(Rules::CHINESE), Err((5, IllegalMove::Superko)));
    assert_eq!(play_cycle(Rules::NEW_ZEALAND), Err((5, IllegalMove::Superko)));
}

#[test]
fn hash_after_predicts_the_hash_of_the_move() {
    let mut g = game_from(
        ".XO..
         XO.OX
         .XOX.
         ..X..
         .....",
        Rules::CHINESE,
    );
    for name in ["C4", "E5", "A3", "B2"] {
        let Move::Play(v) = mv(&g, name) else { unreachable!() };
        let p = g.board().point(v);
        let predicted = g.board().move_hash(p, B, false).unwrap();
        play(&mut g, B, name).unwrap();
        assert_eq!(g.board().hash(), predicted, "{name}");
        play(&mut g, W, "pass").unwrap();
    }
}

#[test]
fn seki_points_are_neutral_in_both_scorings() {
    // Black B5-B2/A2 and the white stone A4 share their only liberties A5
    // and A3: whoever plays there is captured, so both live in seki. The
    // big white group lives with eyes at D5, D3 and D1.
    let g = game_from(
        ".XO.O
         OXOOO
         .XO.O
         XXOOO
         OOO.O",
        Rules::CHINESE,
    );
    assert_eq!(libs(&g, "B5"), 2);
    assert_eq!(libs(&g, "A4"), 2);
    let count = Count::new(g.board(), &[]);
    assert_eq!(count.neutral, 2, "the two shared liberties");
    assert_eq!(count.territory, [0, 3]);
    assert_eq!(count.stones, [5, 15]);
    assert_eq!(count.area_margin(), 5 - 18);
    assert_eq!(count.territory_margin(), -3);
    let placed = g.stones_placed();
    assert_eq!(count.area_margin() - count.territory_margin(), placed[0] as i32 - placed[1] as i32);
}

#[test]
fn dead_stones_become_territory_and_prisoners() {
    let g = game_from(
        "..X..
         .OX..
         XXX..
         .....
         .....",
        Rules::CHINESE,
    );
    let dead = [g.board().point(Vertex::new(1, 1))];
    let count = Count::new(g.board(), &dead);
    assert_eq!(count.dead, [0, 1]);
    assert_eq!(count.stones, [5, 0]);
    assert_eq!(count.territory, [20, 0]);
    assert_eq!(count.area_margin(), 25);
    assert_eq!(count.territory_margin(), 21);
    let area = Score::new(g.board(), &dead, &Rules::CHINESE);
    assert_eq!(area.black_lead, 25.0 - 7.5);
    assert_eq!(area.to_string(), "B+17.5");
    let terr = Score::new(g.board(), &dead, &Rules::JAPANESE);
    assert_eq!(terr.black_lead, 21.0 - 6.5);
    // The identity of `scoring`: 5 black stones placed, 1 white.
    let placed = g.stones_placed();
    assert_eq!(count.area_margin() - count.territory_margin(), placed[0] as i32 - placed[1] as i32);
}

#[test]
fn a_suicide_that_recreates_the_position_is_superko_even_before_any_capture() {
    // From the empty board, by moves only: White's suicide at A2 would
    // leave the stones exactly as they were after Black's B2.
    let mut game = Game::new(2, Rules::TROMP_TAYLOR);
    play(&mut game, Color::Black, "A1").unwrap();
    play(&mut game, Color::White, "pass").unwrap();
    play(&mut game, Color::Black, "B2").unwrap();
    assert_eq!(play(&mut game, Color::White, "A2"), Err(IllegalMove::Superko));
    // Without superko the same suicide is legal and changes nothing.
    let mut game = Game::new(2, Rules { ko: KoRule::Simple, ..Rules::TROMP_TAYLOR });
    for (c, m) in [(Color::Black, "A1"), (Color::White, "pass"), (Color::Black, "B2")] {
        play(&mut game, c, m).unwrap();
    }
    let before = game.board().hash();
    play(&mut game, Color::White, "A2").unwrap();
    assert_eq!(game.board().hash(), before);
}

/// `move_outcome` (liberties, stones and captures of a move, without
/// playing it) against playing it, at every empty point of every position
/// of pseudo-random games on small boards, where captures and big strings
/// are common. Each move is also played on a board that `copy_from`
/// made of the position, reused across positions and sizes, as the ladder
/// reader reuses its boards.
#[test]
fn move_outcome_agrees_with_playing_the_move() {
    let mut reused = Board::new(MAX_SIZE);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut checked = (0, 0);
    for size in [5, 7, 9] {
        for _ in 0..20 {
            let mut g = Game::new(size, Rules::CHINESE);
            for _ in 0..3 * size * size {
                let color = g.to_move();
                let board = g.board().clone();
                for p in board.points().filter(|&p| board.color_at(p).is_none()) {
                    let outcome = board.move_outcome(p, color);
                    assert_eq!(outcome.is_some(), board.check_move(p, color, false).is_ok());
                    let Some(o) = outcome else { continue };
                    let mut after = board.clone();
                    let captured = after.play(p, color);
                    let actual = (after.liberties(p) as u32, after.string_size(p) as u32, captured);
                    assert_eq!((o.liberties, o.stones, o.captured), actual, "{}", board.vertex(p));
                    assert_eq!(o.hash, after.hash(), "{}", board.vertex(p));
                    reused.copy_from(&board);
                    let on_copy = reused.play(p, color);
                    let copied = (reused.liberties(p) as u32, reused.string_size(p) as u32, on_copy);
                    let state = |b: &Board| {
                        (b.hash(), b.empty_points().len(), b.points().map(|q| b.liberties(q)).sum::<usize>())
                    };
                    assert_eq!((copied, state(&reused)), (actual, state(&after)), "{}", board.vertex(p));
                    checked.0 += 1;
                    checked.1 += (captured > 0) as u32;
                }
                let empty: Vec<Point> = board.empty_points().collect();
                let choice = empty[next() as usize % empty.len()];
                if g.check_point(choice, color).is_ok() && !board.is_eye(choice, color) {
                    g.play_point(color, choice);
                } else {
                    g.play(color, Move::Pass).unwrap();
                }
            }
        }
    }
    assert!(checked.1 > 100, "captures were checked: {checked:?}");
}

#[test]
fn points_are_every_vertex_once_row_by_row() {
    for size in 2..=MAX_SIZE {
        let board = Board::new(size);
        let points: Vec<Point> = board.points().collect();
        assert_eq!(board.points().len(), size * size, "{size}x{size}");
        let vertices: Vec<Vertex> = points.iter().map(|&p| board.vertex(p)).collect();
        let expected: Vec<Vertex> = (0..size)
            .flat_map(|y| (0..size).map(move |x| (x, y)))
            .map(|(x, y)| Vertex { x: x as u8, y: y as u8 })
            .collect();
        assert_eq!(vertices, expected, "{size}x{size}");
        assert!(points.iter().all(|&p| board.cell(p) == Cell::Empty), "{size}x{size}: a border point");
    }
}
