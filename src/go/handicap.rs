//! Fixed handicap placement, as the GTP specification (section 4.1.1) and
//! GnuGo place the stones.

use super::Vertex;

/// The vertices of a fixed handicap of `stones` on a board of `size`, in
/// the GTP order (for 19×19: D4 Q16 D16 Q4, then K10 for odd counts, D10 Q10,
/// K4 K16). Defined for sizes 7 and up: at most 4 stones on 7×7 and even
/// sizes, at most 9 otherwise.
pub fn fixed_handicap(size: usize, stones: usize) -> Result<Vec<Vertex>, String> {
    if size < 7 {
        return Err(format!("no fixed handicap on a {size}x{size} board"));
    }
    let max = if size.is_multiple_of(2) || size == 7 { 4 } else { 9 };
    if !(2..=max).contains(&stones) {
        return Err(format!("fixed handicap on {size}x{size} must be 2 to {max} stones, not {stones}"));
    }
    let edge = if size >= 13 { 3 } else { 2 };
    let (lo, hi, mid) = (edge, size - 1 - edge, size / 2);
    let v = |x: usize, y_from_bottom: usize| Vertex::new(x, size - 1 - y_from_bottom);
    let corners = [v(lo, lo), v(hi, hi), v(lo, hi), v(hi, lo)];
    let center = v(mid, mid);
    let sides = [v(lo, mid), v(hi, mid)];
    let ends = [v(mid, lo), v(mid, hi)];
    let mut out: Vec<Vertex> = corners.iter().take(stones.min(4)).copied().collect();
    match stones {
        5 => out.push(center),
        6 => out.extend(sides),
        7 => {
            out.extend(sides);
            out.push(center);
        }
        8 => {
            out.extend(sides);
            out.extend(ends);
        }
        9 => {
            out.extend(sides);
            out.extend(ends);
            out.push(center);
        }
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(size: usize, n: usize) -> Vec<String> {
        fixed_handicap(size, n).unwrap().iter().map(|v| v.to_gtp(size)).collect()
    }

    #[test]
    fn matches_the_gtp_specification() {
        assert_eq!(names(19, 2), ["D4", "Q16"]);
        assert_eq!(names(19, 3), ["D4", "Q16", "D16"]);
        assert_eq!(names(19, 5), ["D4", "Q16", "D16", "Q4", "K10"]);
        assert_eq!(names(19, 9), ["D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16", "K10"]);
        assert_eq!(names(9, 4), ["C3", "G7", "C7", "G3"]);
        assert!(fixed_handicap(19, 10).is_err());
        assert!(fixed_handicap(18, 5).is_err());
        assert!(fixed_handicap(6, 2).is_err());
    }
}
