//! Game dates (SGF `DT`): the `FF[4]` forms (`2017-08-24`, `2017-08-24,25`,
//! `1999-05`, `1999`) and the free text of older collections
//! (`Sept 8/9, 1965`, `10, 11 septembre 1975`, `1968/Aug/30,31`,
//! `2001/02/01 19:53:20 UT`, `1997年`).

use std::fmt;

/// Earliest and latest years taken for a year.
const YEARS: std::ops::RangeInclusive<u16> = 1600..=2100;

/// Month names by their first three letters (English, and French or German
/// where they agree).
const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// The (first) day a game was played, as precisely as the record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GameDate {
    /// The year.
    pub year: u16,
    /// The month, 1 to 12, when known.
    pub month: Option<u8>,
    /// The day of the month, 1 to 31, when known (only with a month).
    pub day: Option<u8>,
}

/// A piece of a date text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Token<'a> {
    /// A run of ASCII digits.
    Number(&'a str),
    /// A run of letters.
    Word(&'a str),
}

impl GameDate {
    /// Reads a `DT` value; the first date when it lists several. `None`
    /// when no year between 1600 and 2100 can be found. Month and day are
    /// kept only when they are unambiguous.
    pub fn parse(text: &str) -> Option<GameDate> {
        let tokens = tokenize(text);
        let year_at = tokens.iter().position(|t| year(*t).is_some())?;
        let year = year(tokens[year_at])?;
        let (month, day) =
            if year_at == 0 { year_first(&tokens[1..]) } else { day_or_month_first(&tokens[..year_at], text) };
        Some(GameDate { year, month, day: month.and(day) })
    }
}

/// `1999-05-10`, `1968/Aug/30`, `1966, August 23,24`, `1997年5月10日`:
/// the tokens after the year, where words other than month names (`年`)
/// only separate.
fn year_first(after: &[Token]) -> (Option<u8>, Option<u8>) {
    let mut rest = after.iter().filter(|t| matches!(t, Token::Number(_)) || month_name(**t).is_some());
    let Some(month) = rest.next().and_then(|t| month(*t)) else {
        return (None, None);
    };
    (Some(month), rest.next().and_then(|t| number_in(*t, 1..=31)))
}

/// `Sept 8/9, 1965`, `10, 11 septembre 1975`, `19.11.2002`: the tokens
/// before the year.
fn day_or_month_first(before: &[Token], text: &str) -> (Option<u8>, Option<u8>) {
    let first_number = before.iter().find_map(|t| number_in(*t, 1..=31));
    if let Some(month) = before.iter().find_map(|t| month_name(*t)) {
        return (Some(month), first_number);
    }
    let numbers: Vec<u8> = before.iter().filter_map(|t| number_in(*t, 1..=31)).collect();
    let &[a, b] = numbers.as_slice() else {
        return (None, None);
    };
    // Day first is certain with dots (European) or when the first number
    // cannot be a month; month first only when the second cannot be.
    let dotted = text.contains('.');
    match (a <= 12, b <= 12) {
        (_, true) if dotted || a > 12 => (Some(b), Some(a)),
        (true, false) => (Some(a), Some(b)),
        _ => (None, None),
    }
}

fn tokenize(text: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let same_kind = |d: char| if c.is_ascii_digit() { d.is_ascii_digit() } else { d.is_alphabetic() };
        if !c.is_ascii_digit() && !c.is_alphabetic() {
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(i, d)) = chars.peek() {
            if !same_kind(d) {
                break;
            }
            end = i + d.len_utf8();
            chars.next();
        }
        let piece = &text[start..end];
        tokens.push(if c.is_ascii_digit() { Token::Number(piece) } else { Token::Word(piece) });
    }
    tokens
}

/// A four-digit number in [`YEARS`].
fn year(token: Token) -> Option<u16> {
    match token {
        Token::Number(digits) if digits.len() == 4 => digits.parse().ok().filter(|y| YEARS.contains(y)),
        _ => None,
    }
}

/// A number of at most two digits in `range`.
fn number_in(token: Token, range: std::ops::RangeInclusive<u8>) -> Option<u8> {
    match token {
        Token::Number(digits) if digits.len() <= 2 => digits.parse().ok().filter(|n| range.contains(n)),
        _ => None,
    }
}

/// A month by number or by name.
fn month(token: Token) -> Option<u8> {
    number_in(token, 1..=12).or_else(|| month_name(token))
}

/// A month name of at least three letters (`Sept`, `August`, `septembre`).
fn month_name(token: Token) -> Option<u8> {
    let Token::Word(word) = token else { return None };
    let word = word.to_lowercase();
    if word.chars().count() < 3 {
        return None;
    }
    MONTHS.iter().position(|m| word.starts_with(m)).map(|i| i as u8 + 1)
}

impl fmt::Display for GameDate {
    /// `FF[4]` form: `2017-08-24`, `2017-08` or `2017`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}", self.year)?;
        if let Some(month) = self.month {
            write!(f, "-{month:02}")?;
            if let Some(day) = self.day {
                write!(f, "-{day:02}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: u16, month: Option<u8>, day: Option<u8>) -> Option<GameDate> {
        Some(GameDate { year, month, day })
    }

    #[test]
    fn parses_ff4_and_free_text() {
        let cases = [
            ("2017-08-24", date(2017, Some(8), Some(24))),
            ("2017-08-24,25", date(2017, Some(8), Some(24))),
            ("2017-08-24,2017-08-26", date(2017, Some(8), Some(24))),
            ("1999", date(1999, None, None)),
            ("1999-05", date(1999, Some(5), None)),
            ("1941-", date(1941, None, None)),
            ("1945-11-", date(1945, Some(11), None)),
            ("2017-8-4", date(2017, Some(8), Some(4))),
            ("2003-01-02 10:00", date(2003, Some(1), Some(2))),
            ("2004-10-27 16:01:54", date(2004, Some(10), Some(27))),
            ("2001/02/01 19:53:20 UT", date(2001, Some(2), Some(1))),
            ("1945-07-23..25", date(1945, Some(7), Some(23))),
            ("1968/Aug/30,31", date(1968, Some(8), Some(30))),
            ("1968/Aug", date(1968, Some(8), None)),
            ("1996-July-02,03", date(1996, Some(7), Some(2))),
            ("1966, August 23,24", date(1966, Some(8), Some(23))),
            ("1950 April 26, 27, 28", date(1950, Some(4), Some(26))),
            ("Sept 8/9, 1965", date(1965, Some(9), Some(8))),
            ("August 1, 2001", date(2001, Some(8), Some(1))),
            ("10, 11 septembre 1975", date(1975, Some(9), Some(10))),
            ("2/3 June 1997", date(1997, Some(6), Some(2))),
            ("19.11.2002", date(2002, Some(11), Some(19))),
            ("01.08.2001", date(2001, Some(8), Some(1))),
            ("9-09-2000", date(2000, None, None)),
            ("13-09-2000", date(2000, Some(9), Some(13))),
            ("09-13-2000", date(2000, Some(9), Some(13))),
            ("Summer 1997", date(1997, None, None)),
            ("1997年", date(1997, None, None)),
            ("1997年5月10日", date(1997, Some(5), Some(10))),
            ("played 1599 or 2101", None),
            ("12345", None),
            ("", None),
            ("sometime", None),
        ];
        for (text, expected) in cases {
            assert_eq!(GameDate::parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn displays_ff4() {
        assert_eq!(date(2017, Some(8), Some(4)).unwrap().to_string(), "2017-08-04");
        assert_eq!(date(1999, Some(5), None).unwrap().to_string(), "1999-05");
        assert_eq!(date(1999, None, None).unwrap().to_string(), "1999");
        for text in ["2017-08-04", "1999-05", "1999"] {
            assert_eq!(GameDate::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn orders_by_year_then_month_then_day() {
        assert!(date(1999, None, None) < date(1999, Some(1), None));
        assert!(date(1999, Some(12), Some(31)) < date(2000, None, None));
    }
}
