//! An agent's spend limit, checked at submit. The limit is a `[[budget]]`
//! with `token = "NAME"` (issue 26's budgets, the one mechanism): the
//! engine holds work over it at admission, with the numbers. `submit`
//! checks the same arithmetic first ([`Standing::refuses`] over the
//! plan's estimate, as admission estimates), so an agent over its limit
//! is refused at once with the numbers instead of leaving work queued
//! behind a hold. What slips past it (two submits racing) is still held.
//!
//! [`Standing::refuses`]: crate::tenant::budget::Standing::refuses

use super::tools::SpecInput;
use super::upstream::Call;
use super::{Caller, Ctx};
use crate::engine::handle::FleetStatus;
use crate::spec::Spec;
use crate::spec::load::{self, Format};
use crate::tenant::budget::Standing;
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
    if status.budgets.is_empty() {
        return Ok(());
    }
    let (body, ct) = spec.body();
    let text = String::from_utf8_lossy(&body);
    let (file, format) =
        if ct.contains("json") { ("request.json", Format::Json) } else { ("request.toml", Format::Toml) };
    // The plan parsed it already; a spec it took parses here the same.
    let Ok(loaded) = load::parse(&text, file, format) else { return Ok(()) };
    match refusal(ctx.caller, &status.budgets, &loaded.spec, placed_by) {
        Some(why) => Err(format!("refused: {why}; nothing was submitted")),
        None => Ok(()),
    }
}

/// Why `spec`, placed as `placed_by` says, does not fit a budget counting
/// `caller`'s token or tenant: the first such budget and its numbers.
pub fn refusal(caller: &Caller, budgets: &[Standing], spec: &Spec, placed_by: &Value) -> Option<String> {
    let token = format!("token {}", caller.name);
    let tenant = caller.tenant.as_ref().map(|t| format!("tenant {t}"));
    let runtime = spec.expected_runtime.map(|d| d.0).or(spec.constraints.max_runtime.map(|d| d.0));
    let chosen = &placed_by["candidates"][0];
    let hourly = chosen["hourly_usd"].as_f64().unwrap_or(0.0);
    let nodes = chosen["gang"].as_array().map_or(1, |g| g.len().max(1));
    let est = crate::tenant::budget::estimate(runtime, hourly, nodes, spec.resources.gpus);
    budgets
        .iter()
        .filter(|b| b.scope == token || Some(&b.scope) == tenant.as_ref())
        .find_map(|b| b.refuses(est))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::Millis;
    use crate::server::auth::Role;
    use crate::tenant::budget::{Period, Spend};
    use serde_json::json;

    fn standing(scope: &str, gpu_hours: u64, spent_h: u64) -> Standing {
        Standing {
            name: format!("{}-day", scope.rsplit(' ').next().unwrap_or_default()),
            scope: scope.into(),
            period: Period::Day,
            time_zone: "UTC".into(),
            start: Millis(0),
            end: Millis(86_400_000),
            limit_micro_usd: None,
            limit_gpu_ms: Some(gpu_hours * 3_600_000),
            spent: Spend { micro_usd: 0, gpu_ms: spent_h * 3_600_000 },
            committed: Spend::default(),
            holding: 0,
            hard: false,
        }
    }

    fn caller(name: &str, tenant: Option<&str>) -> Caller {
        Caller { name: name.into(), token_id: None, role: Role::Submitter, tenant: tenant.map(Into::into) }
    }

    #[test]
    fn the_budgets_of_the_callers_token_and_tenant_refuse_with_their_numbers() {
        // Four hours on two GPUs of one node: 8 GPU-hours.
        let spec = load::parse(
            "name = \"x\"\nexpected_runtime = \"4h\"\n[runtime]\ncommand = [\"t\"]\n[resources]\ngpus = 2\n",
            "x.toml",
            Format::Toml,
        )
        .expect("a spec")
        .spec;
        let plan = json!({ "candidates": [{ "hourly_usd": 8.0 }] });
        let budgets = [
            standing("token agent", 10, 3),
            standing("tenant team-a", 100, 95),
            standing("token other", 1, 1),
        ];
        let why = refusal(&caller("agent", None), &budgets, &spec, &plan).expect("over its token's budget");
        assert_eq!(
            why,
            "budget agent-day (token agent, per day): estimated 8.00 GPU-h but 7.00 GPU-h is left (3.00 GPU-h spent of 10.00 GPU-h)"
        );
        let why =
            refusal(&caller("someone", Some("team-a")), &budgets, &spec, &plan).expect("over its tenant's");
        assert!(
            why.starts_with("budget team-a-day (tenant team-a, per day): estimated 8.00 GPU-h but 5.00"),
            "{why}"
        );
        // Another token's budget, or none, does not count.
        assert_eq!(refusal(&caller("free", Some("team-b")), &budgets, &spec, &plan), None);
        // Without a runtime nothing is estimated: only a spent budget refuses.
        let open = load::parse("name = \"y\"\n[runtime]\ncommand = [\"t\"]\n", "y.toml", Format::Toml)
            .expect("spec")
            .spec;
        assert_eq!(refusal(&caller("agent", None), &budgets, &open, &plan), None);
        let spent = [standing("token agent", 10, 10)];
        assert!(refusal(&caller("agent", None), &spent, &open, &plan).is_some());
    }
}
