//! `canopy sim --watch` without a terminal: a tiny trace runs through the
//! replay pacer (with a wall clock that jumps instead of sleeping) into
//! the console's `App`, which ends with the run's workloads and states,
//! in virtual time, read-only.

use canopy::console::app::{App, Config, Effect, Msg, View};
use canopy::console::replay::{Control, FRAME, Pacer, ReplayCtl, Wall, wall_delay};
use canopy::console::views;
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::core::Core;
use canopy::engine::model::{Millis, Record, WorkloadState};
use canopy::engine::shell::{EngineHandle, REPLAY_READ_ONLY};
use canopy::sim::{self, EPOCH, FaultModel, Input, PlacementPolicy, RecordSink};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

const TRACE: &str = "\
submit_s,duration_s,gpus,name,outcome
0,600,1,warmup,ok
60,1800,2,train-a,ok
120,900,0,prep,ok
300,1200,1,bad-config,failed
3600,600,4,big,ok
";

/// Wall time that moves only when the pacer waits, by exactly as long.
#[derive(Clone, Default)]
struct JumpingWall(Rc<Cell<Duration>>);

impl Wall for JumpingWall {
    fn now(&self) -> Duration {
        self.0.get()
    }
    fn wait(&self, _: &Control, _: u64, timeout: Option<Duration>) {
        let d = timeout.expect("a started, unpaused replay never waits without a limit");
        self.0.set(self.0.get() + d);
    }
}

/// Counts what the simulator emits before the pacer sees it.
struct Counting<'a> {
    inner: &'a mut dyn RecordSink,
    batches: usize,
    /// When the run ended.
    end: Millis,
}

impl RecordSink for Counting<'_> {
    fn batch(&mut self, at: Millis, records: &[Record]) {
        self.batches += 1;
        self.inner.batch(at, records);
    }
    fn settled(&mut self, at: Millis, next: Option<Millis>, core: &Core) {
        if next.is_none() {
            self.end = at;
        }
        self.inner.settled(at, next, core);
    }
}

struct Watched {
    app: App,
    handle: EngineHandle,
    control: Arc<Control>,
    /// Batches the simulator emitted, and those the console received.
    emitted: usize,
    received: usize,
    /// When the run ended (virtual), and the wall time the replay took.
    end: Millis,
    wall: Duration,
}

fn watch(speed: f64) -> Watched {
    let fleet = canopy::fleet::load::demo().unwrap();
    let jobs = sim::trace::parse(sim::trace::detect("tiny.csv", TRACE), TRACE, "tiny.csv").unwrap();
    let faults = FaultModel::none();
    let (handle, records, status) = EngineHandle::replay();
    let mut updates = handle.subscribe();
    let control = Control::new("canopy", speed, EPOCH);
    control.start(Duration::ZERO);
    let wall = JumpingWall::default();
    let mut pacer = Pacer::new(control.clone(), wall.clone(), records, status);
    let mut sink = Counting { inner: &mut pacer, batches: 0, end: EPOCH };
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 7,
        optimize: Default::default(),
        policies: &[PlacementPolicy::HealthAware],
        fleet_name: "demo",
        trace_name: "tiny.csv",
        tenancy: None,
    };
    sim::simulate(&input, &mut sink).unwrap();
    let (emitted, end) = (sink.batches, sink.end);

    let config = Config { read_only: true, stale_after_s: f64::INFINITY, ..Config::default() };
    let mut app = App::new(config, canopy::console::Model::default(), EPOCH);
    app.update(Msg::Resize(80, 24));
    app.update(Msg::Replay(control.status()));
    let mut received = 0;
    while let Ok(batch) = updates.try_recv() {
        received += 1;
        app.update(Msg::Records(batch));
    }
    let s = handle.status().borrow().clone().expect("the replay published a fleet status");
    app.update(Msg::Status(s));
    // However long after: the clock stands at the run's end.
    app.update(Msg::Tick(control.now(wall.now() + Duration::from_secs(3600))));
    app.update(Msg::Replay(control.status()));
    Watched { app, handle, control, emitted, received, end, wall: wall.now() }
}

fn screen(app: &App) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t
}

fn key(app: &mut App, code: KeyCode, m: KeyModifiers) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(code, m)))
}

#[test]
fn a_replay_ends_with_the_runs_workloads_in_virtual_time() {
    let w = watch(1000.0);
    let states: Vec<(String, WorkloadState)> =
        w.app.model.workloads.values().map(|r| (r.rec.name.clone(), r.rec.state)).collect();
    assert_eq!(
        states,
        [
            ("warmup".to_string(), WorkloadState::Succeeded),
            ("train-a".to_string(), WorkloadState::Succeeded),
            ("prep".to_string(), WorkloadState::Succeeded),
            ("bad-config".to_string(), WorkloadState::Failed),
            ("big".to_string(), WorkloadState::Succeeded),
        ]
    );
    assert_eq!(w.control.status().ended, Some(w.end));
    // The console's clock is the simulation's, standing at its end.
    assert_eq!(w.app.now, w.end);
    assert_eq!(w.app.model.status.as_ref().unwrap().at, w.end);
    // Paced: the replay took the run's virtual span at ×1000 (give or take
    // the frame it gathers records over) and handed on fewer batches than
    // the simulator made.
    let span = wall_delay(EPOCH, w.end, 1000.0);
    assert!(w.wall <= span && w.wall + FRAME >= span, "{:?} for {span:?}", w.wall);
    assert!(w.received < w.emitted, "{} batches of {}", w.received, w.emitted);
    assert!(w.received > 1, "an hour apart is not one frame at ×1000");

    insta::assert_snapshot!("replay_overview", screen(&w.app).backend());
}

#[test]
fn at_a_huge_speed_up_a_frame_holds_everything() {
    let w = watch(1e6);
    assert_eq!(w.app.model.workloads.len(), 5);
    assert!(w.received <= 2, "{} batches", w.received);
}

#[test]
fn a_replay_is_read_only_and_has_no_logs() {
    let mut w = watch(1e6);
    let app = &mut w.app;
    // Cancel is refused by the action layer, before any confirmation.
    key(app, KeyCode::Char('4'), KeyModifiers::NONE);
    let fx = key(app, KeyCode::Char('k'), KeyModifiers::CONTROL);
    assert!(fx.is_empty() && app.confirm.is_none());
    let text = screen(app).backend().to_string();
    assert!(text.contains("replay: cancel w-5 is disabled (a replay is read-only)"), "{text}");
    // And the handle refuses whatever gets through.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let r = rt.block_on(w.handle.command(Command::Cordon { node: "fra-h100-01".into(), until: None }));
    assert!(matches!(&r, CommandResult::Error { message, .. } if message == REPLAY_READ_ONLY), "{r:?}");
    assert!(rt.block_on(w.handle.recent(10, 10)).is_err());

    // Logs: a clear empty state, and nothing to tail.
    let fx = key(app, KeyCode::Char('l'), KeyModifiers::NONE);
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(app.view, View::Logs);
    let text = screen(app).backend().to_string();
    assert!(text.contains("no logs in a replay"), "{text}");

    // The detail view shows the events the console already holds.
    key(app, KeyCode::Esc, KeyModifiers::NONE);
    key(app, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(app.view, View::Detail);
    assert!(!app.detail.events.is_empty());
}

#[test]
fn replay_keys_pace_only_a_replay() {
    let mut w = watch(1e6);
    let fx = key(&mut w.app, KeyCode::Char(' '), KeyModifiers::NONE);
    assert!(matches!(fx[..], [Effect::Replay(ReplayCtl::Pause)]), "{fx:?}");
    let fx = key(&mut w.app, KeyCode::Char('+'), KeyModifiers::SHIFT);
    assert!(matches!(fx[..], [Effect::Replay(ReplayCtl::Faster)]), "{fx:?}");
    key(&mut w.app, KeyCode::Char('?'), KeyModifiers::NONE);
    assert!(screen(&w.app).backend().to_string().contains("replay (canopy sim --watch)"));

    // Not a replay: the keys say so and do nothing.
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut live = App::new(Config::default(), canopy::console::fixture::model(fleet, 3), EPOCH);
    let fx = key(&mut live, KeyCode::Char(' '), KeyModifiers::NONE);
    assert!(fx.is_empty());
    assert!(live.flash.as_ref().is_some_and(|(m, err)| *err && m.starts_with("not a replay")));
}
