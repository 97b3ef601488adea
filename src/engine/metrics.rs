//! Counters the engine shell keeps about itself for `/metrics`: how long
//! journal commits take and how long work waits to be placed. Lock-free;
//! the shell writes, the server reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A Prometheus-style histogram in seconds with fixed bucket bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// `counts[i]`: observations ≤ `bounds[i]` and > `bounds[i-1]`; the
    /// last is the +Inf bucket.
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = self.bounds.iter().position(|b| s <= *b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Cumulative `(upper bound, count)` pairs ending with `+Inf`, the sum
    /// in seconds, and the count.
    pub fn snapshot(&self) -> (Vec<(f64, u64)>, f64, u64) {
        let mut acc = 0;
        let mut out = Vec::with_capacity(self.counts.len());
        for (i, c) in self.counts.iter().enumerate() {
            acc += c.load(Ordering::Relaxed);
            out.push((self.bounds.get(i).copied().unwrap_or(f64::INFINITY), acc));
        }
        (out, self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6, acc)
    }
}

/// What the shell measures.
#[derive(Debug)]
pub struct EngineMetrics {
    /// One journal commit (the fsync included).
    pub journal_write: Histogram,
    /// From submission to the first placement.
    pub placement: Histogram,
    /// Webhook tries by how they ended: delivered, failed (to be tried
    /// again), given up.
    pub webhook_tries: [AtomicU64; 3],
}

/// The outcomes [`EngineMetrics::webhook_tries`] counts, in its order.
pub const WEBHOOK_OUTCOMES: [&str; 3] = ["delivered", "failed", "given-up"];

impl EngineMetrics {
    /// Counts a delivery's record after a try (new deliveries, with no
    /// try yet, count nothing).
    pub fn webhook_try(&self, d: &crate::engine::model::DeliveryRecord) {
        use crate::engine::model::DeliveryState;
        if d.tries == 0 {
            return;
        }
        let i = match d.state {
            DeliveryState::Delivered => 0,
            DeliveryState::Pending => 1,
            DeliveryState::GivenUp => 2,
        };
        self.webhook_tries[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn webhook_tries(&self) -> [u64; 3] {
        [0, 1, 2].map(|i| self.webhook_tries[i].load(Ordering::Relaxed))
    }
}

const WRITE_BOUNDS: &[f64] = &[0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];
const PLACE_BOUNDS: &[f64] = &[0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0];

impl Default for EngineMetrics {
    fn default() -> Self {
        EngineMetrics {
            journal_write: Histogram::new(WRITE_BOUNDS),
            placement: Histogram::new(PLACE_BOUNDS),
            webhook_tries: Default::default(),
        }
    }
}
