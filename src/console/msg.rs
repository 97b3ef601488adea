//! The console's vocabulary: its views, the messages that reach it and
//! the effects it asks the run loop for, and the workload table's
//! columns, and a log line. Plain data, depending on no other console
//! module but the replay's types, so that the app, the keymap, the help
//! and each view's component can all use it without importing each other.

use super::replay::{ReplayCtl, ReplayStatus};
use crate::engine::command::{Command, CommandResult};
use crate::engine::handle::{Held, Link};
use crate::engine::model::{AttemptId, AuditRecord, Batch, EventRecord, Millis, WorkloadId};
use crate::engine::shell::{FleetStatus, Recent};
use crate::journal::AuditFilter;
use crate::server::tenants::TenantsView;
use ratatui::crossterm::event::KeyEvent;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// When it was written, as the engine knows it (when it first read
    /// the line from the provider); for a log shipped before the engine
    /// kept times, when the console read it.
    pub at: Millis,
    pub stderr: bool,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    Overview,
    Capacity,
    Nodes,
    Workloads,
    Triage,
    Detail,
    Logs,
    Editor,
    Audit,
    /// A workload's spec as submitted, as TOML (`v`, `:spec`).
    Spec,
    /// The engine's events: one workload's or all recent (`E`, `:events`).
    Events,
    /// Tenants' quotas and usage per flavor (`8`, `:tenants`).
    Tenants,
    /// GPU time and cost per day and per group, and whose fault the waste
    /// was (`9`, `:usage`).
    Usage,
    Help,
}

impl View {
    pub fn title(self) -> &'static str {
        match self {
            View::Overview => "overview",
            View::Capacity => "capacity",
            View::Nodes => "nodes",
            View::Workloads => "workloads",
            View::Triage => "triage",
            View::Detail => "detail",
            View::Logs => "logs",
            View::Editor => "editor",
            View::Audit => "audit",
            View::Spec => "spec",
            View::Events => "events",
            View::Tenants => "tenants",
            View::Usage => "usage",
            View::Help => "help",
        }
    }
}

/// Everything that can happen to the console.
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    Records(Arc<Batch>),
    Status(Arc<FleetStatus>),
    Recent(Recent),
    /// The next older page of workloads ([`Effect::LoadOlder`] answers),
    /// or why it did not come.
    Older(Result<Recent, String>),
    /// One workload the console did not hold ([`Effect::FetchWorkload`]
    /// answers): `None` when the journal has no such workload.
    Workload(WorkloadId, Box<Result<Option<Held>, String>>),
    Events(WorkloadId, Vec<EventRecord>),
    Log(AttemptId, Vec<LogLine>),
    Done {
        what: String,
        result: CommandResult,
    },
    Loaded {
        path: String,
        result: Result<String, String>,
    },
    Saved {
        path: String,
        result: Result<(), String>,
    },
    Edited(Result<String, String>),
    Tick(Millis),
    Resize(u16, u16),
    /// The state of the replay this console watches (`canopy sim --watch`).
    Replay(ReplayStatus),
    /// Whether the engine can be reached (it changes for a remote engine).
    Link(Link),
    /// The audit records [`Effect::LoadAudit`] asked for, newest first,
    /// or why the engine would not give them (a viewer's token: the
    /// operator role reads them).
    Audit(Result<Vec<AuditRecord>, String>),
    /// The tenants [`Effect::LoadTenants`] asked for (`GET /v1/tenants`),
    /// or why they did not come.
    Tenants(Box<Result<TenantsView, String>>),
    /// The usage report [`Effect::LoadUsage`] asked for (`GET /v1/usage`),
    /// or why it did not come.
    Usage(Box<Result<crate::usage::Report, String>>),
    /// The servers on the journal [`Effect::LoadServers`] asked for
    /// (`GET /v1/servers`), or why they did not come.
    Servers(Box<Result<crate::server::servers::ServersView, String>>),
}

/// What the run loop should do for the app.
#[derive(Debug, Clone)]
pub enum Effect {
    Command {
        what: String,
        cmd: Command,
        /// The operator's reason, journalled with the command.
        reason: Option<String>,
    },
    FetchEvents(WorkloadId),
    /// Fetch one workload the console does not hold ([`Msg::Workload`]
    /// answers).
    FetchWorkload(WorkloadId),
    /// Load the page of workloads older than this one ([`Msg::Older`]
    /// answers).
    LoadOlder(WorkloadId),
    /// Start tailing an attempt's logs (`None`: stop).
    TailLogs(Option<AttemptId>),
    Copy(String),
    Load(PathBuf),
    Save(PathBuf, String),
    ExternalEditor(String),
    /// Load the audit records this filter selects ([`Msg::Audit`]
    /// answers): one page, newest first.
    LoadAudit(AuditFilter),
    /// Load the tenants with their quotas and usage ([`Msg::Tenants`]
    /// answers).
    LoadTenants,
    /// Load the servers on the journal ([`Msg::Servers`] answers): where
    /// the server read stands, for the header.
    LoadServers,
    /// Load the usage report at this API path (`/v1/usage?…`;
    /// [`Msg::Usage`] answers).
    LoadUsage(String),
    /// Pause, resume or re-pace the replay.
    Replay(ReplayCtl),
    /// Quit; an engine this console started stops with it.
    Quit,
    /// Quit, leaving the engine this console started running in the
    /// background (the operator said so).
    Detach,
}

/// Workload table columns, for sorting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Id,
    Name,
    State,
    Attempt,
    Pool,
    Gpus,
    Age,
    Cost,
}

pub const COLUMNS: [Column; 8] = [
    Column::Id,
    Column::Name,
    Column::State,
    Column::Attempt,
    Column::Pool,
    Column::Gpus,
    Column::Age,
    Column::Cost,
];

impl Column {
    pub fn name(self) -> &'static str {
        match self {
            Column::Id => "id",
            Column::Name => "name",
            Column::State => "state",
            Column::Attempt => "attempt",
            Column::Pool => "pool",
            Column::Gpus => "gpus",
            Column::Age => "age",
            Column::Cost => "cost",
        }
    }
}
