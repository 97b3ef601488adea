//! Time, injected: the core takes `now` as an argument; the shell asks a
//! [`Clock`]. Tests and the simulator supply their own.

use super::model::Millis;

pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Millis(d.as_millis() as i64)
    }
}
