//! An agent's spend limit, checked at submit. The limit is a `[[budget]]`
//! with `token = "NAME"` (issue 26's budgets, the one mechanism): the
//! engine holds work over it at admission, with the numbers. `submit`
//! checks the same arithmetic first ([`Standing::refuses`] over the
//! plan's estimate, as admission estimates), so an agent over its limit
//! is refused at once with the numbers instead of leaving work queued
//! behind a hold. What slips past it (two submits racing) is still held.
//!
//! [`Standing::refuses`]: crate::tenant::budget::Standing::refuses

use super::Ctx;
use super::tools::SpecInput;
use super::upstream::Call;
use crate::engine::handle::FleetStatus;
use crate::spec::load::{self, Format};
use serde_json::Value;

/// Refuses, with the budget's numbers, a submit whose estimate does not
/// fit a budget counting the caller's token or tenant. `placed_by`: the
/// plan (`POST /v1/plan`) of a spec that fits.
pub async fn check(ctx: &Ctx<'_>, spec: &SpecInput, placed_by: &Value) -> Result<(), String> {
    let a = ctx.up.send(Call::get("/v1/fleet")).await?;
    if !a.ok() {
        return Err(a.message());
    }
    let status: FleetStatus =
        serde_json::from_slice(&a.body).map_err(|e| format!("reading the fleet: {e}"))?;
    let token = format!("token {}", ctx.caller.name);
    let tenant = ctx.caller.tenant.as_ref().map(|t| format!("tenant {t}"));
    let mine: Vec<_> =
        status.budgets.iter().filter(|b| b.scope == token || Some(&b.scope) == tenant.as_ref()).collect();
    if mine.is_empty() {
        return Ok(());
    }
    let (body, ct) = spec.body();
    let text = String::from_utf8_lossy(&body);
    let (file, format) =
        if ct.contains("json") { ("request.json", Format::Json) } else { ("request.toml", Format::Toml) };
    // The plan parsed it already; a spec it took parses here the same.
    let Ok(loaded) = load::parse(&text, file, format) else { return Ok(()) };
    let s = &loaded.spec;
    let runtime = s.expected_runtime.map(|d| d.0).or(s.constraints.max_runtime.map(|d| d.0));
    let chosen = &placed_by["candidates"][0];
    let hourly = chosen["hourly_usd"].as_f64().unwrap_or(0.0);
    let nodes = chosen["gang"].as_array().map_or(1, |g| g.len().max(1));
    let est = crate::tenant::budget::estimate(runtime, hourly, nodes, s.resources.gpus);
    for b in mine {
        if let Some(why) = b.refuses(est) {
            return Err(format!("refused: {why}; nothing was submitted"));
        }
    }
    Ok(())
}
