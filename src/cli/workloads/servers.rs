//! `canopy status --servers`: the servers on the journal (`GET
//! /v1/servers`) as a table, or JSON with `--json`.

use super::super::StoreArgs;
use super::super::table::new_table;
use super::{json_pretty, local_time, run};
use canopy::engine::model::Millis;
use canopy::server::servers::ServersView;
use color_eyre::eyre::Result;
use std::process::ExitCode;

pub fn servers(store: &StoreArgs, json: bool) -> Result<ExitCode> {
    run(
        store,
        async |c| c.get::<ServersView>("/v1/servers").await,
        |v| {
            if json {
                outln!("{}", json_pretty(&v)?);
                return Ok(ExitCode::SUCCESS);
            }
            let ago = |t: i64| canopy::units::human_secs((v.now - t).max(0) as f64 / 1000.0);
            match (&v.leader, v.lease_expires_at) {
                (Some(l), Some(exp)) => outln!(
                    "journal on {}: led by {l} at epoch {} (lease held {}, renewed until {}, in {})",
                    v.journal,
                    v.epoch,
                    v.lease_taken_at.map_or("-".into(), ago),
                    local_time(Millis(exp)),
                    canopy::units::human_secs((exp - v.now).max(0) as f64 / 1000.0),
                ),
                (Some(l), None) => outln!("journal on {}: led by {l}", v.journal),
                (None, _) => outln!(
                    "journal on {}: no leader now (epoch {}): the lease is free or expired; a standby takes it within a term",
                    v.journal,
                    v.epoch
                ),
            }
            let mut t = new_table(&["SERVER", "ROLE", "ADDRESS", "LAST SEEN", "STARTED"]);
            for s in &v.servers {
                let address = if s.address.is_empty() { "-" } else { s.address.as_str() };
                t.add_row([
                    s.id.clone(),
                    s.role.clone(),
                    address.to_string(),
                    format!("{} ago", ago(s.last_seen)),
                    local_time(Millis(s.started_at)),
                ]);
            }
            outln!("{t}");
            if let Some(f) = &v.last_failover {
                let why = if f.from_expired_at == 0 {
                    "it had given the lease up".to_string()
                } else {
                    format!("its lease expired at {}", local_time(Millis(f.from_expired_at)))
                };
                outln!(
                    "last failover: {} took over from {} at {} (epoch {}); {why}",
                    f.to,
                    f.from,
                    local_time(Millis(f.at)),
                    f.epoch
                );
            }
            Ok(ExitCode::SUCCESS)
        },
    )
}
