//! The values a setting takes, checked in one place and refused in one
//! wording, whether the value came from a flag, an agent spec or a config
//! file: a number outside its range (or not finite) never reaches the code
//! that would divide by it, loop on it or size a buffer with it.

use std::fmt;

/// The values a setting takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// A whole number from `min` to `max`.
    Count { min: u64, max: u64 },
    /// A finite number from `min` to `max`; above `min`, not `min` itself,
    /// when `open`.
    Real { min: f64, max: f64, open: bool },
    /// `on` or `off` (also `1`/`0`, `true`/`false`, `yes`/`no`).
    Switch,
    /// One of these words. A two-word domain of a switch names off, then on.
    Words(&'static [&'static str]),
    /// `word` for none (the setting's automatic or absent value), or a
    /// value of `domain`.
    Or { word: &'static str, domain: &'static Domain },
}

/// Board sides go-train plays on (`Board::valid_size`).
pub const BOARD_SIZE: Domain = Domain::Count { min: 2, max: 25 };
/// Komi, in points.
pub const KOMI: Domain = Domain::Real { min: -1000.0, max: 1000.0, open: false };
/// Threads a command runs its nets or workers on.
pub const THREADS: Domain = Domain::Count { min: 1, max: 4096 };
/// Games or jobs run at once.
pub const PARALLEL: Domain = Domain::Count { min: 1, max: 4096 };
/// A net agent's sampling temperature (0: the most likely move).
pub const TEMPERATURE: Domain = Domain::Real { min: 0.0, max: 100.0, open: false };
/// The temperature reinforcement learning samples at and divides its
/// log-probabilities by. The floor is a practical one: below a thousandth
/// sampling is as good as greedy, and far below (1/T past a 32-bit
/// float's range, T under about 3e-39) a step's loss became NaN.
pub const RL_TEMPERATURE: Domain = Domain::Real { min: 0.001, max: 10.0, open: false };
/// A duration in seconds.
pub const SECONDS: Domain = Domain::Real { min: 0.0, max: 1e6, open: true };
/// A game's length limit in moves.
pub const MAX_MOVES: Domain = Domain::Count { min: 1, max: 1_000_000 };
/// Games a self-play run plays, one file each in one folder: ext4 holds
/// about ten million names in a folder (more needs its `large_dir`), so a
/// larger run is several runs (a Slurm array).
pub const GAMES: Domain = Domain::Count { min: 1, max: 10_000_000 };
/// Games of a reinforcement-learning minibatch or match, held in memory
/// until it ends (about 18 KB a game), or positions a backward pass.
pub const RL_GAMES: Domain = Domain::Count { min: 1, max: 100_000 };
/// Random playouts that judge a counted game's dead stones.
pub const SCORING_PLAYOUTS: Domain = Domain::Count { min: 1, max: 100_000 };
/// An optimizer's learning rate given on the command line.
pub const LEARNING_RATE: Domain = Domain::Real { min: 0.0, max: 1e30, open: true };
/// Any seed.
pub const SEED: Domain = Domain::Count { min: 0, max: u64::MAX };

impl fmt::Display for Domain {
    /// What to give, as a message or a help text says it: `a whole number
    /// from 1 to 800`, `on or off`, `auto or a number from 0 to 100`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Domain::Count { min, max } if *max == u64::MAX => write!(f, "a whole number from {min}"),
            Domain::Count { min, max } => write!(f, "a whole number from {min} to {max}"),
            Domain::Real { min, max, open: false } => write!(f, "a number from {min} to {max}"),
            Domain::Real { min, max, open: true } => write!(f, "a number above {min}, up to {max}"),
            Domain::Switch => write!(f, "on or off"),
            Domain::Words(words) => write!(f, "{}", or_list(words)),
            Domain::Or { word, domain: Domain::Words(words) } => {
                write!(f, "{}", or_list(&[&[*word][..], words].concat()))
            }
            Domain::Or { word, domain } => write!(f, "{word} or {domain}"),
        }
    }
}

/// `a, b or c`.
fn or_list(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

impl Domain {
    /// The one wording of a refused value: what to give instead.
    pub fn refusal(&self) -> String {
        format!("give {self}")
    }

    /// `text` as a whole number of this domain (a [`Domain::Count`]).
    pub fn count(&self, text: &str) -> Result<u64, String> {
        match *self {
            Domain::Count { .. } => self.count_value(text.trim().parse::<u64>().map_err(|_| self.refusal())?),
            _ => Err(format!("{self} is not a whole number")),
        }
    }

    /// `n` if it is a whole number of this domain (a [`Domain::Count`]):
    /// for numbers that come parsed, as a settings file's do.
    pub fn count_value(&self, n: u64) -> Result<u64, String> {
        match *self {
            Domain::Count { min, max } => Some(n).filter(|n| (min..=max).contains(n)).ok_or_else(|| self.refusal()),
            _ => Err(format!("{self} is not a whole number")),
        }
    }

    /// `text` as a finite number of this domain (a [`Domain::Real`]).
    pub fn real(&self, text: &str) -> Result<f64, String> {
        self.real_value(text.trim().parse::<f64>().unwrap_or(f64::NAN))
    }

    /// `x` if it is a finite number of this domain (a [`Domain::Real`]):
    /// for numbers that come parsed, as JSON's do.
    pub fn real_value(&self, x: f64) -> Result<f64, String> {
        match *self {
            Domain::Real { min, max, open } => Some(x)
                .filter(|x| x.is_finite() && *x <= max && (*x > min || (!open && *x == min)))
                .ok_or_else(|| self.refusal()),
            _ => Err(format!("{self} is not a number")),
        }
    }

    /// `text` as a number of this domain (a [`Domain::Real`]) that a 32-bit
    /// float holds: one whose magnitude is under `f32::MIN_POSITIVE` would
    /// become 0 (or a subnormal that loses its digits), so it is refused
    /// rather than silently run as 0 (an open domain's refused end).
    pub fn real_f32(&self, text: &str) -> Result<f32, String> {
        let x = self.real(text)?;
        if !fits_f32(x) {
            return Err(format!(
                "{}: {} is beyond a 32-bit float, which holds sizes from {:e} to {:e}",
                self.refusal(),
                text.trim(),
                f32::MIN_POSITIVE,
                f32::MAX
            ));
        }
        Ok(x as f32)
    }

    /// `text` as a switch: a [`Domain::Switch`], or a two-word
    /// [`Domain::Words`] (its second word on).
    pub fn switch(&self, text: &str) -> Result<bool, String> {
        let word = text.trim().to_ascii_lowercase();
        match *self {
            Domain::Switch => match word.as_str() {
                "on" | "1" | "true" | "yes" => Ok(true),
                "off" | "0" | "false" | "no" => Ok(false),
                _ => Err(self.refusal()),
            },
            Domain::Words([off, on]) => match word.as_str() {
                w if w == *on => Ok(true),
                w if w == *off => Ok(false),
                _ => Err(self.refusal()),
            },
            _ => Err(format!("{self} is not a switch")),
        }
    }

    /// `text` as one of the words of a [`Domain::Words`], as the domain
    /// spells it.
    pub fn word(&self, text: &str) -> Result<&'static str, String> {
        let given = text.trim().to_ascii_lowercase();
        match *self {
            Domain::Words(words) => words.iter().copied().find(|w| *w == given).ok_or_else(|| self.refusal()),
            _ => Err(format!("{self} is not a list of words")),
        }
    }
}

/// Whether a 32-bit float holds `x`: 0, or a size from `f32::MIN_POSITIVE`
/// to `f32::MAX` (smaller ones become 0 or subnormals that lose their
/// digits, larger ones infinity). What nets, searches and optimizers
/// compute in.
pub fn fits_f32(x: f64) -> bool {
    x == 0.0 || (x as f32).is_normal()
}

/// A parser for a clap flag of `domain` (a [`Domain::Count`]): the flag's
/// value as `T`, or the domain's refusal, which clap prints after the
/// flag's name.
pub fn count_flag<T: TryFrom<u64>>(domain: Domain) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync {
    move |text| T::try_from(domain.count(text)?).map_err(|_| domain.refusal())
}

/// A number type a [`Domain::Real`] setting is read into.
pub trait FromReal: Sized {
    fn read_real(domain: &Domain, text: &str) -> Result<Self, String>;
}

impl FromReal for f64 {
    fn read_real(domain: &Domain, text: &str) -> Result<f64, String> {
        domain.real(text)
    }
}

impl FromReal for f32 {
    fn read_real(domain: &Domain, text: &str) -> Result<f32, String> {
        domain.real_f32(text)
    }
}

/// A parser for a clap flag of `domain` (a [`Domain::Real`]).
pub fn real_flag<T: FromReal>(domain: Domain) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync {
    move |text| T::read_real(&domain, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_a_domain_are_refused_with_what_to_give() {
        let iterations = Domain::Count { min: 1, max: 800 };
        assert_eq!(iterations.count(" 800 "), Ok(800));
        for bad in ["0", "801", "-1", "1.5", "", "many", "1e3"] {
            assert_eq!(iterations.count(bad), Err("give a whole number from 1 to 800".into()), "{bad:?}");
        }
        let weight = Domain::Real { min: 0.0, max: 1.0, open: false };
        assert_eq!(weight.real("0"), Ok(0.0));
        for bad in ["nan", "NaN", "inf", "-inf", "1.01", "-0.5", "x"] {
            assert_eq!(weight.real(bad), Err("give a number from 0 to 1".into()), "{bad:?}");
        }
        assert_eq!(SECONDS.real("0"), Err("give a number above 0, up to 1000000".into()));
        // A number f32 cannot hold is refused, not run as 0 (or infinity).
        assert_eq!(TEMPERATURE.real_f32("0"), Ok(0.0));
        assert_eq!(TEMPERATURE.real_f32("1e-30"), Ok(1e-30));
        for tiny in ["1e-300", "1e-40"] {
            let err = TEMPERATURE.real_f32(tiny).unwrap_err();
            assert_eq!(
                err,
                format!("give a number from 0 to 100: {tiny} is beyond a 32-bit float, which holds sizes from 1.1754944e-38 to 3.4028235e38")
            );
        }
        assert!(real_flag::<f32>(LEARNING_RATE)("1e-45").is_err(), "an open domain's end is not reached by rounding");
        assert!(real_flag::<f32>(LEARNING_RATE)("1e30").is_ok());
        assert_eq!(real_flag::<f64>(LEARNING_RATE)("1e-300"), Ok(1e-300), "f64 holds it");
        assert_eq!(Domain::Switch.switch("YES"), Ok(true));
        assert_eq!(Domain::Switch.switch("maybe"), Err("give on or off".into()));
        let symmetry = Domain::Words(&["identity", "random"]);
        assert_eq!(symmetry.switch("Random"), Ok(true));
        assert_eq!(symmetry.switch("sideways"), Err("give identity or random".into()));
        let c = Domain::Or { word: "auto", domain: &Domain::Real { min: 0.0, max: 100.0, open: false } };
        assert_eq!(c.refusal(), "give auto or a number from 0 to 100");
        assert_eq!(Domain::Words(&["a", "b", "c"]).refusal(), "give a, b or c");
        assert_eq!(
            count_flag::<u8>(Domain::Count { min: 0, max: 300 })("300"),
            Err("give a whole number from 0 to 300".into())
        );
    }
}
