//! Replaying a simulation into the console (`canopy sim --watch`).
//!
//! The simulator ([`crate::sim`]) runs in virtual time as fast as it can;
//! the [`Pacer`] is its [`RecordSink`]. It holds the records back until
//! the wall clock reaches their virtual time at the chosen speed-up, hands
//! on what falls within one frame as one batch (a busy fleet must not
//! flood the console), and publishes the fleet status built from the
//! simulator's core, all through an [`EngineHandle::replay`] handle: the
//! console reads a replay exactly as it reads an engine. [`Control`] is
//! shared by both sides: the virtual clock the console shows, pause and
//! speed.
//!
//! The arithmetic ([`parse_speed`], [`wall_delay`], [`virtual_after`]) is
//! pure; waiting goes through [`Wall`], which tests replace with a clock
//! that jumps instead of sleeping.

use crate::engine::core::Core;
use crate::engine::model::{Batch, Millis, Record};
use crate::engine::shell::{EngineHandle, FleetStatus, RecordSender, StatusSender};
use crate::sim::RecordSink;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The speed-up when the trace gives no hint: a day of the fleet in a
/// minute.
pub const DEFAULT_SPEED: f64 = 1440.0;

/// How long a replay at the default speed should take to watch.
pub const WATCH_FOR_S: f64 = 120.0;

/// The default speed-up for a trace whose work spans `span_s` seconds (the
/// last job's submit plus its run): about [`WATCH_FOR_S`] of watching,
/// whatever the trace — a 48-minute trace is not over in 2 s, a year-long
/// one not a week. Within [`MIN_SPEED`]..=[`MAX_SPEED`].
pub fn speed_for(span_s: f64) -> f64 {
    if !span_s.is_finite() || span_s <= 0.0 {
        return DEFAULT_SPEED;
    }
    (span_s / WATCH_FOR_S).clamp(MIN_SPEED, MAX_SPEED).round().max(MIN_SPEED)
}
/// The slowest and fastest a replay runs (`-` and `+` stop there).
pub const MIN_SPEED: f64 = 1.0;
pub const MAX_SPEED: f64 = 10_000_000.0;
/// Records that fall within one frame of wall time reach the console
/// together, at most 20 batches a second.
pub const FRAME: Duration = Duration::from_millis(50);
/// The fleet status is rebuilt at most this often, and before every pause
/// longer than this.
pub const STATUS_EVERY: Duration = Duration::from_millis(250);
/// A simulation that falls further behind than this (a speed-up its CPU
/// cannot keep) makes the clock wait for it rather than race to catch up.
const SLACK: Duration = Duration::from_secs(1);

/// Parses a speed-up as `--speed` takes it: `1440`, `1440x` or `1440×`.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let n = t.strip_suffix(['x', 'X', '×']).unwrap_or(t).trim();
    match n.parse::<f64>() {
        Ok(v) if v.is_finite() && (MIN_SPEED..=MAX_SPEED).contains(&v) => Ok(v),
        Ok(_) => {
            Err(format!("speed {s:?} is out of range: {MIN_SPEED}..={MAX_SPEED} (1440 = a day a minute)"))
        }
        Err(_) => Err(format!("speed {s:?} is not a number: say e.g. 1440 or 1440x (a day a minute)")),
    }
}

/// How a speed-up reads: `×1440`, `×22.5`.
pub fn speed_label(speed: f64) -> String {
    if speed.fract() == 0.0 { format!("×{speed:.0}") } else { format!("×{speed:.1}") }
}

/// The wall time that virtual time takes from `from` to `to` at `speed`
/// (zero when `to` is not later).
pub fn wall_delay(from: Millis, to: Millis, speed: f64) -> Duration {
    let ms = (to.0 - from.0).max(0) as f64 / speed;
    Duration::from_secs_f64(ms / 1000.0)
}

/// The virtual time `wall` after `from` at `speed`.
pub fn virtual_after(from: Millis, wall: Duration, speed: f64) -> Millis {
    Millis(from.0.saturating_add((wall.as_secs_f64() * 1000.0 * speed) as i64))
}

/// What the console shows about a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStatus {
    /// The placement policy being replayed.
    pub policy: String,
    pub speed: f64,
    pub paused: bool,
    /// When the simulation ended (virtual time): the clock stops there.
    pub ended: Option<Millis>,
}

/// What the operator can do to a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayCtl {
    /// Pause, or resume.
    Pause,
    /// Twice as fast.
    Faster,
    /// Half as fast.
    Slower,
}

/// Wall time as the pacer sees it.
pub trait Wall {
    /// Time since some fixed origin.
    fn now(&self) -> Duration;
    /// Waits until `timeout` has passed (`None`: no limit) or `control`
    /// changed since it stood at generation `seen`, whichever is first.
    fn wait(&self, control: &Control, seen: u64, timeout: Option<Duration>);
}

/// The real wall clock.
#[derive(Debug, Clone, Copy)]
pub struct SystemWall {
    origin: Instant,
}

impl SystemWall {
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for SystemWall {
    fn default() -> Self {
        Self::new()
    }
}

impl Wall for SystemWall {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wait(&self, control: &Control, seen: u64, timeout: Option<Duration>) {
        let c = control.lock();
        match timeout {
            Some(d) => drop(control.poke.wait_timeout_while(c, d, |c| c.generation == seen)),
            None => drop(control.poke.wait_while(c, |c| c.generation == seen)),
        }
    }
}

#[derive(Debug)]
struct Clock {
    started: bool,
    /// The virtual time that stood at wall time `anchor_wall`.
    anchor_wall: Duration,
    anchor_virtual: Millis,
    speed: f64,
    paused: bool,
    /// Everything before this virtual time has been handed on: the clock
    /// never shows a time whose records have not arrived.
    horizon: Millis,
    ended: Option<Millis>,
    /// Bumped on every change a waiting pacer must see.
    generation: u64,
}

impl Clock {
    fn now(&self, wall: Duration) -> Millis {
        if !self.started || self.paused {
            return self.anchor_virtual;
        }
        let t = virtual_after(self.anchor_virtual, wall.saturating_sub(self.anchor_wall), self.speed);
        t.min(self.horizon).max(self.anchor_virtual)
    }

    /// Moves the anchor to now, keeping the clock where it is.
    fn reanchor(&mut self, wall: Duration) {
        self.anchor_virtual = self.now(wall);
        self.anchor_wall = wall;
    }

    fn changed(&mut self) {
        self.generation += 1;
    }
}

/// The replay's clock and controls, shared by the pacer (on the
/// simulator's thread) and the console.
#[derive(Debug)]
pub struct Control {
    policy: String,
    clock: Mutex<Clock>,
    poke: Condvar,
}

impl Control {
    /// A clock standing at `start`, not yet running (see [`start`](Self::start)).
    pub fn new(policy: &str, speed: f64, start: Millis) -> Arc<Self> {
        Arc::new(Self {
            policy: policy.to_string(),
            clock: Mutex::new(Clock {
                started: false,
                anchor_wall: Duration::ZERO,
                anchor_virtual: start,
                speed: speed.clamp(MIN_SPEED, MAX_SPEED),
                paused: false,
                horizon: start,
                ended: None,
                generation: 0,
            }),
            poke: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Clock> {
        self.clock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the clock at wall time `wall`. The pacer holds every record
    /// back until then, so the console starts it once it listens.
    pub fn start(&self, wall: Duration) {
        let mut c = self.lock();
        if !c.started {
            c.started = true;
            c.anchor_wall = wall;
            c.changed();
            self.poke.notify_all();
        }
    }

    /// The virtual time to show at wall time `wall`.
    pub fn now(&self, wall: Duration) -> Millis {
        self.lock().now(wall)
    }

    pub fn status(&self) -> ReplayStatus {
        let c = self.lock();
        ReplayStatus { policy: self.policy.clone(), speed: c.speed, paused: c.paused, ended: c.ended }
    }

    /// Pauses, resumes or changes speed at wall time `wall`; the clock
    /// goes on from where it stands.
    pub fn apply(&self, ctl: ReplayCtl, wall: Duration) {
        let mut c = self.lock();
        c.reanchor(wall);
        match ctl {
            ReplayCtl::Pause => c.paused = !c.paused,
            ReplayCtl::Faster => c.speed = (c.speed * 2.0).min(MAX_SPEED),
            ReplayCtl::Slower => c.speed = (c.speed / 2.0).max(MIN_SPEED),
        }
        c.changed();
        self.poke.notify_all();
    }

    /// When (wall time) virtual time `at` is due, or `None` while paused
    /// or not started; with the generation it was read at.
    fn due(&self, at: Millis) -> (Option<Duration>, u64) {
        let c = self.lock();
        let due = (c.started && !c.paused).then(|| c.anchor_wall + wall_delay(c.anchor_virtual, at, c.speed));
        (due, c.generation)
    }

    /// Everything before `v` has been handed on, at wall time `wall`. A
    /// clock that ran more than [`SLACK`] ahead of the simulation waits
    /// for it from here.
    fn reached(&self, v: Millis, wall: Duration) {
        let mut c = self.lock();
        c.horizon = c.horizon.max(v);
        if c.started && !c.paused {
            let ideal = virtual_after(c.anchor_virtual, wall.saturating_sub(c.anchor_wall), c.speed);
            if ideal > virtual_after(v, SLACK, c.speed) {
                c.anchor_virtual = v.max(c.anchor_virtual);
                c.anchor_wall = wall;
            }
        }
    }

    fn finish(&self, end: Millis) {
        let mut c = self.lock();
        c.horizon = c.horizon.max(end);
        c.ended = Some(c.horizon);
        c.changed();
        self.poke.notify_all();
    }
}

/// The console's side of a replay: its clock and controls.
#[derive(Debug, Clone)]
pub struct Replay {
    pub control: Arc<Control>,
    pub wall: SystemWall,
}

impl Replay {
    pub fn start(&self) {
        self.control.start(self.wall.now());
    }
    /// The virtual time to show now.
    pub fn now(&self) -> Millis {
        self.control.now(self.wall.now())
    }
    pub fn status(&self) -> ReplayStatus {
        self.control.status()
    }
    pub fn apply(&self, ctl: ReplayCtl) {
        self.control.apply(ctl, self.wall.now());
    }
}

/// A replay's three ends: the pacer (the simulator's sink, for its
/// thread), the console's side, and the engine handle the console reads.
/// Virtual time starts at [`crate::sim::EPOCH`].
pub fn replay(policy: &str, speed: f64) -> (Pacer<SystemWall>, Replay, EngineHandle) {
    let (handle, records, status) = EngineHandle::replay();
    let control = Control::new(policy, speed, crate::sim::EPOCH);
    let wall = SystemWall::new();
    let pacer = Pacer::new(control.clone(), wall, records, status);
    (pacer, Replay { control, wall }, handle)
}

/// The simulator's [`RecordSink`] in a replay: paces records by their
/// virtual time and publishes them with the fleet status.
pub struct Pacer<W: Wall> {
    control: Arc<Control>,
    wall: W,
    records: RecordSender,
    status: StatusSender,
    pending: Vec<Record>,
    /// The number of the next batch handed on.
    seq: u64,
    last_flush: Duration,
    last_status: Option<Duration>,
}

impl<W: Wall> Pacer<W> {
    pub fn new(control: Arc<Control>, wall: W, records: RecordSender, status: StatusSender) -> Self {
        let last_flush = wall.now();
        Self { control, wall, records, status, pending: Vec::new(), seq: 1, last_flush, last_status: None }
    }

    /// Hands on the records held back, and the fleet status of `core` at
    /// `at` when `status` is asked for or [`STATUS_EVERY`] has passed.
    fn flush(&mut self, at: Millis, core: &Core, status: bool) {
        let now = self.wall.now();
        if !self.pending.is_empty() {
            // No receiver (the console has gone) is not the replay's problem.
            let records = std::mem::take(&mut self.pending);
            let _ = self.records.send(Arc::new(Batch { seq: self.seq, records }));
            self.seq += 1;
        }
        if status || self.last_status.is_none_or(|t| now >= t + STATUS_EVERY) {
            self.status.send_replace(Some(Arc::new(FleetStatus::of(core, at, BTreeMap::new()))));
            self.last_status = Some(now);
        }
        self.last_flush = now;
    }

    /// Waits until virtual time `at` is due: through pauses and speed
    /// changes, and until the console has started the clock.
    fn wait_until(&self, at: Millis) {
        loop {
            let (due, seen) = self.control.due(at);
            let now = self.wall.now();
            match due {
                Some(d) if d <= now => return,
                Some(d) => self.wall.wait(&self.control, seen, Some(d - now)),
                None => self.wall.wait(&self.control, seen, None),
            }
        }
    }
}

impl<W: Wall> RecordSink for Pacer<W> {
    fn batch(&mut self, _at: Millis, records: &[Record]) {
        self.pending.extend_from_slice(records);
    }

    fn settled(&mut self, at: Millis, next: Option<Millis>, core: &Core) {
        let now = self.wall.now();
        let Some(next) = next else {
            self.flush(at, core, true);
            self.control.finish(at);
            return;
        };
        match self.control.due(next).0 {
            // Nothing happens for more than a frame: hand on what is
            // held, then sleep until the next event is due.
            d if d.is_none_or(|d| d > now + FRAME) => {
                let long = d.is_none_or(|d| d > now + STATUS_EVERY);
                self.flush(at, core, long);
                self.control.reached(next, now);
                self.wait_until(next);
            }
            // Events close together: gather them for a frame, but no
            // longer (nor when the simulation cannot keep up).
            _ if now >= self.last_flush + FRAME => {
                self.flush(at, core, false);
                self.control.reached(at, now);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_speed_fits_the_trace() {
        // A 48-minute trace takes about two minutes, not two seconds.
        assert_eq!(super::speed_for(48.0 * 60.0), 24.0);
        // A year of trace still fits, within the fastest speed.
        assert_eq!(super::speed_for(365.0 * 86400.0), 262_800.0);
        assert_eq!(super::speed_for(30.0), super::MIN_SPEED);
        assert_eq!(super::speed_for(0.0), super::DEFAULT_SPEED);
    }

    use super::*;

    #[test]
    fn speeds_parse_with_or_without_x() {
        assert_eq!(parse_speed("1440"), Ok(1440.0));
        assert_eq!(parse_speed("1440x"), Ok(1440.0));
        assert_eq!(parse_speed(" 100000X "), Ok(100_000.0));
        assert_eq!(parse_speed("60×"), Ok(60.0));
        assert_eq!(parse_speed("2.5"), Ok(2.5));
        assert!(parse_speed("fast").unwrap_err().contains("not a number"));
        assert!(parse_speed("0").unwrap_err().contains("out of range"));
        assert!(parse_speed("-3x").is_err());
        assert!(parse_speed("inf").is_err());
        assert_eq!(speed_label(1440.0), "×1440");
        assert_eq!(speed_label(22.5), "×22.5");
    }

    #[test]
    fn a_day_takes_a_minute_at_1440() {
        let day = Millis(86_400_000);
        assert_eq!(wall_delay(Millis(0), day, 1440.0), Duration::from_secs(60));
        assert_eq!(wall_delay(Millis(0), Millis(3_000), 1.0), Duration::from_secs(3));
        assert_eq!(wall_delay(Millis(5_000), Millis(0), 10.0), Duration::ZERO, "the past is due now");
        assert_eq!(virtual_after(Millis(0), Duration::from_secs(60), 1440.0), day);
        assert_eq!(virtual_after(Millis(7), Duration::ZERO, 1e6), Millis(7));
    }

    #[test]
    fn the_clock_starts_pauses_and_changes_speed_without_jumping() {
        let c = Control::new("canopy", 1000.0, Millis(0));
        c.reached(Millis(1_000_000_000), Duration::ZERO);
        assert_eq!(c.now(Duration::from_secs(5)), Millis(0), "not started: stands still");
        c.start(Duration::from_secs(5));
        assert_eq!(c.now(Duration::from_secs(6)), Millis(1_000_000));
        c.apply(ReplayCtl::Pause, Duration::from_secs(6));
        assert!(c.status().paused);
        assert_eq!(c.now(Duration::from_secs(60)), Millis(1_000_000), "paused: stands still");
        assert_eq!(c.due(Millis(2_000_000)).0, None);
        c.apply(ReplayCtl::Pause, Duration::from_secs(60));
        c.apply(ReplayCtl::Faster, Duration::from_secs(60));
        assert_eq!(c.status().speed, 2000.0);
        assert_eq!(c.now(Duration::from_secs(61)), Millis(3_000_000), "resumed from where it stood");
        assert_eq!(c.due(Millis(5_000_000)).0, Some(Duration::from_secs(62)));
        c.apply(ReplayCtl::Slower, Duration::from_secs(61));
        c.apply(ReplayCtl::Slower, Duration::from_secs(61));
        assert_eq!(c.status().speed, 500.0);
    }

    #[test]
    fn the_clock_never_runs_ahead_of_the_records() {
        let c = Control::new("canopy", 1000.0, Millis(0));
        c.start(Duration::ZERO);
        c.reached(Millis(2_000), Duration::ZERO);
        assert_eq!(c.now(Duration::from_secs(10)), Millis(2_000));
        // 10 s behind at ×1000: the clock waits for the simulation.
        c.reached(Millis(3_000), Duration::from_secs(10));
        c.reached(Millis(1_000_000_000), Duration::from_secs(10));
        assert_eq!(c.now(Duration::from_secs(11)), Millis(1_003_000));
        c.finish(Millis(1_000_000_000));
        assert_eq!(c.status().ended, Some(Millis(1_000_000_000)));
        assert_eq!(c.now(Duration::from_secs(1_000_000)), Millis(1_000_000_000), "stops at the end");
    }
}
