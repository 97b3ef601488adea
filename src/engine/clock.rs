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

impl<F: Fn() -> Millis + Send + Sync> Clock for F {
    fn now(&self) -> Millis {
        self()
    }
}

/// A clock that moves only when told to, for tests and replays.
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        Self(std::sync::atomic::AtomicI64::new(start.0))
    }
    pub fn set(&self, t: Millis) {
        self.0.store(t.0, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn advance(&self, d: std::time::Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}
