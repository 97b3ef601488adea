//! The audit view's component: loading the engine's audit trail a page
//! at a time, and asking the engine for the records a `/` filter selects.
//!
//! The first visit loads the newest page; the end of the list loads the
//! next older one, as the workloads list does. The filter's `action=`,
//! `outcome=` and `target=` go to the engine (`GET /v1/audit` filters on
//! them), so a record far older than the pages held is found; the rest
//! of the filter (text, `who=`, `!word`) narrows what came, in the
//! derived rows. One load is in flight at a time; a filter changed while
//! one is out is asked for when it answers. Pure: no I/O.

use super::model::Model;
use super::msg::Effect;
use super::poll::Load;
use crate::engine::model::{AuditRecord, Millis};
use crate::journal::AuditFilter;

/// How many audit records one load asks for.
pub const AUDIT_PAGE: usize = 500;

/// The audit view's loads.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    pub load: Load,
    /// What the load in flight asked for.
    in_flight: Option<AuditFilter>,
    /// The engine's part of the filter the held pages were asked with.
    asked: Option<AuditFilter>,
    /// Where the next older page starts (`None`: the filter's oldest
    /// record is held, or nothing was loaded).
    pub next_page: Option<Millis>,
}

impl Audit {
    /// Entering the view: the first page of the filter's records, the first
    /// time (and again after a failed load).
    pub fn enter(&mut self, filter: &str) -> Vec<Effect> {
        match self.load {
            Load::NotAsked | Load::Failed(_) => self.ask(server_part(filter)),
            Load::Loading | Load::Loaded => Vec::new(),
        }
    }

    /// Loads the first page again (after a reconnection, or when the
    /// console fell behind), if the view loaded one.
    pub fn reload(&mut self, filter: &str) -> Vec<Effect> {
        if self.load == Load::NotAsked {
            return Vec::new();
        }
        // What was in flight may be lost with the connection.
        self.in_flight = None;
        self.ask(server_part(filter))
    }

    /// After the filter changed: its first page, when what the engine
    /// filters on changed and the view has loaded (a failed load is tried
    /// again on the next visit, not on every key).
    pub fn filter_changed(&mut self, filter: &str) -> Vec<Effect> {
        let want = server_part(filter);
        let loaded = matches!(self.load, Load::Loaded | Load::Loading);
        if !loaded || self.asked.as_ref() == Some(&want) {
            return Vec::new();
        }
        if self.in_flight.as_ref().is_some_and(|f| f.until.is_none() && *f == want) {
            return Vec::new();
        }
        self.ask(want)
    }

    /// At the end of the list: the next older page, if there is one.
    pub fn at_end(&mut self) -> Vec<Effect> {
        match (&self.asked, self.next_page, &self.in_flight) {
            (Some(asked), Some(until), None) => {
                let f = AuditFilter { until: Some(until), ..asked.clone() };
                self.ask(f)
            }
            _ => Vec::new(),
        }
    }

    /// Whether an older page is being loaded.
    pub fn paging(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|f| f.until.is_some())
    }

    /// Takes the engine's answer into `model`; asks for the filter of
    /// `filter` if it changed meanwhile.
    pub fn answered(
        &mut self,
        got: Result<Vec<AuditRecord>, String>,
        model: &mut Model,
        filter: &str,
    ) -> Vec<Effect> {
        let asked = self.in_flight.take();
        match got {
            Ok(records) => {
                let full = records.len() >= AUDIT_PAGE;
                let oldest = records.last().map(|a| a.at);
                let added = model.load_audit(records);
                // A full page that brought nothing new is a millisecond
                // holding more than a page: no further page can pass it.
                self.next_page = oldest.filter(|_| full && added > 0);
                self.asked = asked.map(|f| AuditFilter { until: None, ..f });
                self.load = Load::Loaded;
            }
            Err(e) => self.load = Load::Failed(e),
        }
        if self.load == Load::Loaded { self.filter_changed(filter) } else { Vec::new() }
    }

    fn ask(&mut self, f: AuditFilter) -> Vec<Effect> {
        if self.in_flight.is_some() {
            // Asked again when the answer comes (`answered`).
            return Vec::new();
        }
        self.load = Load::Loading;
        self.in_flight = Some(f.clone());
        vec![Effect::LoadAudit(f)]
    }
}

/// What of a `/` filter the engine filters on: `action=`, `outcome=` and
/// `target=` (prefixes, as the console's filter matches them), one page.
/// A negated or repeated key stays with the console.
pub fn server_part(filter: &str) -> AuditFilter {
    let mut f = AuditFilter { limit: Some(AUDIT_PAGE), ..AuditFilter::default() };
    for word in filter.split_whitespace() {
        let Some((k, v)) = word.split_once('=') else { continue };
        if v.is_empty() {
            continue;
        }
        let slot = match k.to_lowercase().as_str() {
            "action" => &mut f.action,
            "outcome" => &mut f.outcome,
            "target" => &mut f.target,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(v.to_string());
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_filters_on_action_outcome_and_target() {
        let f = server_part("outcome=denied alice action=cordon !target=x target=fra who=ops");
        assert_eq!(f.action.as_deref(), Some("cordon"));
        assert_eq!(f.outcome.as_deref(), Some("denied"));
        assert_eq!(f.target.as_deref(), Some("fra"), "a negated term stays with the console");
        assert_eq!(f.principal, None, "who= is a prefix: the console matches it");
        assert_eq!(f.limit, Some(AUDIT_PAGE));
        assert_eq!(server_part("text only"), server_part(""));
    }
}
