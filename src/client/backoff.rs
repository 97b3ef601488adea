//! How a client that lost its server tries again: the first retry after
//! 200 ms, each next one after twice as long, never more than 2 s apart.
//! An attached console and `canopy logs --follow` wait the same way. It
//! only counts; the caller sleeps and decides when to give up.

use std::time::Duration;

const FIRST: Duration = Duration::from_millis(200);
const MOST: Duration = Duration::from_secs(2);

/// The waits between tries while a server does not answer.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: FIRST }
    }
}

impl Backoff {
    /// How long to wait before the next try (and doubles the one after).
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(MOST);
        wait
    }

    /// The server answered: the next outage starts from the first wait.
    pub fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_two_seconds_and_start_over_after_an_answer() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..6).map(|_| b.next_wait().as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 2000, 2000]);
        b.reset();
        assert_eq!(b.next_wait(), Duration::from_millis(200));
    }
}
