//! A view's load from the engine: where it stands ([`Load`]) and, for the
//! views that refresh while shown ([`Poll`]: tenants, usage), when to ask
//! again. One load is in flight at a time; a change that comes while one
//! is out (the tables changed, another grouping) is asked for when it
//! answers, once. Pure: the views turn "ask now" into their effect.

use crate::engine::model::Millis;

/// Where a view's load from the engine stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Load {
    /// The view was never opened.
    #[default]
    NotAsked,
    /// Asked, and nothing to show yet.
    Loading,
    Loaded,
    /// The engine would not give it (a role, a replay), or could not be
    /// reached.
    Failed(String),
}

/// A load asked for on entering a view and every `every` ms while it is
/// shown.
#[derive(Debug, Clone, Default)]
pub struct Poll {
    pub load: Load,
    in_flight: bool,
    /// Asked again when the answer in flight comes.
    again: bool,
    asked_at: Option<Millis>,
    /// An answer was taken once: a later load shows it meanwhile.
    answered_once: bool,
}

impl Poll {
    /// Asks now, unless a load is in flight: whether to send one.
    pub fn ask(&mut self, now: Millis) -> bool {
        self.asked_at = Some(now);
        if self.in_flight {
            return false;
        }
        self.in_flight = true;
        if !self.answered_once {
            self.load = Load::Loading;
        }
        true
    }

    /// While the view is shown: asks when `every` ms have passed since
    /// the last ask.
    pub fn due(&mut self, now: Millis, every: i64) -> bool {
        match self.asked_at {
            Some(at) if now.0.saturating_sub(at.0) < every => false,
            _ => self.ask(now),
        }
    }

    /// What the view shows changed: asks now, or when the load in flight
    /// answers.
    pub fn reload(&mut self, now: Millis) -> bool {
        if self.in_flight {
            self.again = true;
            return false;
        }
        self.ask(now)
    }

    /// The engine answered (`Err`: why not); whether to ask again now.
    pub fn answered(&mut self, got: Result<(), String>, now: Millis) -> bool {
        self.in_flight = false;
        match got {
            Ok(()) => {
                self.answered_once = true;
                self.load = Load::Loaded;
            }
            Err(e) => self.load = Load::Failed(e),
        }
        std::mem::take(&mut self.again) && self.ask(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_flight_a_change_asked_for_once_when_it_answers_and_then_every_period() {
        let mut p = Poll::default();
        assert!(p.ask(Millis(0)));
        assert_eq!(p.load, Load::Loading);
        assert!(!p.due(Millis(1_000), 5_000), "one in flight");
        assert!(!p.reload(Millis(1_500)), "asked again when it answers");
        assert!(!p.reload(Millis(1_600)), "still once");
        assert!(p.answered(Ok(()), Millis(2_000)), "the change asked for");
        assert_eq!(p.load, Load::Loaded);
        assert!(!p.answered(Err("gone".into()), Millis(2_100)));
        assert_eq!(p.load, Load::Failed("gone".into()));
        assert!(!p.due(Millis(3_000), 5_000), "not yet due");
        assert!(p.due(Millis(2_000 + 5_000), 5_000));
        assert_eq!(p.load, Load::Failed("gone".into()), "what was shown stays until it answers");
    }
}
