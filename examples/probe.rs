use go_train::go::*;
fn main() {
    let mut evals = 0u64; let mut eyes=0u64; let mut illegal=0u64; let mut moves = 0u64;
    let mut rng = 12345u64;
    let mut next = || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng };
    for _ in 0..2000 {
        let mut g = Game::new(19, Rules::CHINESE);
        while !g.is_over() && moves < 10_000_000 {
            let b = g.board().clone();
            let c = g.to_move();
            let mut cands: Vec<Point> = b.empty_points().collect();
            let mut live = cands.len();
            let mut mv = Move::Pass;
            while live > 0 {
                let i = (next() % live as u64) as usize;
                let p = cands[i];
                evals += 1;
                if b.is_eye(p, c) { eyes += 1; } else if g.check_point(p, c).is_err() { illegal += 1; } else { mv = Move::Play(b.vertex(p)); break; }
                live -= 1; cands.swap(i, live);
            }
            g.play_unchecked(c, mv); moves += 1;
        }
    }
    println!("moves {moves} evals/move {:.2} eyes/move {:.2} illegal/move {:.2}", evals as f64/moves as f64, eyes as f64/moves as f64, illegal as f64/moves as f64);
}
