//! What each tool does: the API requests it makes (through [`Upstream`],
//! as its caller) and the answer it shapes. A call a caller's role may
//! not make goes straight to the route it maps onto, so the refusal is the
//! API's own and audited there like any other.

use super::budget;
use super::confirm::Binding;
use super::tools::{
    self, CancelInput, EventsInput, FleetInput, IdInput, LogsInput, PlanInput, RetryInput, SubmitInput,
};
use super::upstream::{Answer, Call};
use super::{Caller, Ctx};
use crate::server::api::ListQuery;
use rmcp::model::CallToolResult;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A tool's failure, as the tool result says it (`isError`).
pub type Outcome = Result<Value, String>;

/// Runs tool `name` with `args` for `ctx`'s caller.
pub async fn call(ctx: &Ctx<'_>, name: &str, args: Value) -> CallToolResult {
    let r = match name {
        "plan" => match parse::<PlanInput>(args) {
            Ok(a) => plan(ctx, &a).await.map(|(v, _)| v),
            Err(e) => Err(e),
        },
        "submit" => with(args, |a| submit(ctx, a)).await,
        "status" => with(args, |a: IdInput| status(ctx, a)).await,
        "list" => with(args, |a| list(ctx, a)).await,
        "explain" => with(args, |a: IdInput| explain(ctx, a)).await,
        "logs" => with(args, |a| logs(ctx, a)).await,
        "events" => with(args, |a| events(ctx, a)).await,
        "artifacts" => with(args, |a: IdInput| artifacts(ctx, a)).await,
        "cancel" => with(args, |a| cancel(ctx, a)).await,
        "retry" => with(args, |a| retry(ctx, a)).await,
        "fleet" => with(args, |a| fleet(ctx, a)).await,
        other => Err(format!(
            "no tool {other:?}; the tools are {}",
            tools::TOOLS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        )),
    };
    match r {
        Ok(mut v) => {
            clean(&mut v);
            CallToolResult::structured(v)
        }
        Err(e) => CallToolResult::structured_error(json!({ "error": crate::text::sanitize_lines(&e) })),
    }
}

async fn with<T: DeserializeOwned, F: Future<Output = Outcome>>(
    args: Value,
    f: impl FnOnce(T) -> F,
) -> Outcome {
    f(parse(args)?).await
}

fn parse<T: DeserializeOwned>(args: Value) -> Result<T, String> {
    let args = if args.is_null() { json!({}) } else { args };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let at = e.path().to_string();
        if at == "." {
            format!("invalid arguments: {}", e.inner())
        } else {
            format!("invalid argument {at}: {}", e.inner())
        }
    })
}

/// Every string of someone else's (a reason, an event's message, a name)
/// with control and hidden characters replaced, as the CLI shows them.
fn clean(v: &mut Value) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(o) = crate::text::sanitize_lines(s) {
                *s = o;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(clean),
        Value::Object(o) => o.values_mut().for_each(clean),
        _ => {}
    }
}

/// The answer's JSON when it is a 2xx, else what it says.
fn ok_json(a: Answer) -> Outcome {
    if a.ok() { Ok(a.json()) } else { Err(a.message()) }
}

fn id(s: &str) -> Result<crate::engine::model::WorkloadId, String> {
    s.parse().map_err(|e: String| format!("invalid argument id: {e}"))
}

fn encode(s: &str) -> String {
    crate::client::encode(s)
}

/// Whether the caller's role may use `tool` at all; when not, the call
/// goes to the API as it is, to be refused (403) and audited there.
fn may(c: &Caller, tool: &str) -> bool {
    tools::find(tool).is_none_or(|t| c.role >= t.least_role())
}

async fn plan(ctx: &Ctx<'_>, a: &PlanInput) -> Result<(Value, f64), String> {
    let (body, ct) = a.spec.body();
    let v = ok_json(ctx.up.send(Call::post("/v1/plan", ct, body)).await?)?;
    // What the chosen placement is estimated to cost at most: the high end
    // of its range (max_runtime), else the low end (expected_runtime).
    let cost = &v["candidates"][0]["est_cost_usd"];
    let usd = cost["high"].as_f64().or_else(|| cost["low"].as_f64()).unwrap_or(0.0);
    Ok((v, usd))
}

async fn submit(ctx: &Ctx<'_>, a: SubmitInput) -> Outcome {
    let (body, ct) = a.spec.body();
    let post = |body: Vec<u8>| {
        Call::post("/v1/workloads", ct, body).header("idempotency-key", a.idempotency_key.clone())
    };
    if !may(ctx.caller, "submit") {
        return ok_json(ctx.up.send(post(body)).await?);
    }
    if a.idempotency_key.trim().is_empty() || a.idempotency_key.len() > 200 {
        return Err(
            "invalid argument idempotency_key: give 1 to 200 characters, the same for a retried call".into(),
        );
    }
    let (placed_by, usd) = plan(ctx, &PlanInput { spec: a.spec.clone() }).await?;
    if placed_by["fits"] == json!(true) {
        budget::check(ctx, &a.spec, &placed_by).await?;
    }
    if let Some(limit) = ctx.options.confirm_above_usd
        && usd > limit
    {
        let mut h = Sha256::new();
        h.update(&body);
        h.update([0]);
        h.update(a.idempotency_key.as_bytes());
        let target = format!("spec sha256:{}", &hex::encode(h.finalize())[..16]);
        let binding = Binding { caller: ctx.caller.key(), tool: "submit".into(), target };
        match &a.confirm {
            None => {
                let confirm = ctx.book.issue(binding, ctx.now);
                return Ok(json!({
                    "confirmation_required": true,
                    "confirm": confirm,
                    "expires_in_s": super::confirm::TTL_MS / 1000,
                    "would": format!(
                        "submit {} to {}, estimated at up to ${usd:.2}, above this server's confirmation threshold of ${limit:.2}",
                        placed_by["spec"].as_str().unwrap_or("the spec"),
                        placed_by["candidates"][0]["pool"].as_str().unwrap_or("?"),
                    ),
                    "plan": placed_by,
                }));
            }
            Some(id) => ctx.book.redeem(id, &binding, ctx.now).map_err(|e| e.to_string())?,
        }
    }
    let workload = ok_json(ctx.up.send(post(body)).await?)?;
    Ok(json!({ "workload": workload, "placed_by": placed_by }))
}

async fn status(ctx: &Ctx<'_>, a: IdInput) -> Outcome {
    let id = id(&a.id)?;
    ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}"))).await?)
}

async fn list(ctx: &Ctx<'_>, q: ListQuery) -> Outcome {
    let mut parts = Vec::new();
    let mut add = |k: &str, v: &Option<String>| {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            parts.push(format!("{k}={}", encode(v)));
        }
    };
    add("state", &q.state);
    add("name", &q.name);
    add("label", &q.label);
    add("provider", &q.provider);
    add("submitted_by", &q.submitted_by);
    add("tenant", &q.tenant);
    add("cursor", &q.cursor);
    add("limit", &q.limit.map(|n| n.to_string()));
    if q.unresolved {
        parts.push("unresolved=true".into());
    }
    ok_json(ctx.up.send(Call::get(format!("/v1/workloads?{}", parts.join("&")))).await?)
}

async fn explain(ctx: &Ctx<'_>, a: IdInput) -> Outcome {
    let id = id(&a.id)?;
    let v = ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}"))).await?)?;
    let events = ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}/events"))).await?)?;
    let w = &v["workload"];
    let state = w["state"].as_str().unwrap_or("?");
    let waiting = matches!(state, "queued" | "placing");
    let why = match (waiting, w["reason"].as_str()) {
        (true, Some(r)) => format!("{id} waits: {r}"),
        (true, None) => format!("{id} waits for a placement; nothing has held it yet"),
        (false, Some(r)) => format!("{id} is {state}: {r}"),
        (false, None) => format!("{id} is {state}"),
    };
    let placements: Vec<Value> = v["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            json!({
                "attempt": a["id"],
                "state": a["state"],
                "provider": a["provider"],
                "pool": a["pool"],
                "node": a["node"],
                "region": a["region"],
                "price_per_hour": a["price_per_hour"],
                "est_cost_usd": a["est_cost_usd"],
            })
        })
        .collect();
    let placing = ["submitted", "unschedulable", "placed", "refused", "budget", "reclaim", "retry"];
    let decisions: Vec<Value> = events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"].as_str().is_some_and(|k| placing.contains(&k)))
        .cloned()
        .collect();
    let last = decisions.len().saturating_sub(20);
    Ok(json!({
        "id": id.to_string(),
        "state": state,
        "why": why,
        "queue_position": v["queue_position"],
        "placements": placements,
        "decisions": decisions[last..],
    }))
}

/// How much of a log one read brings at most.
const LOG_MAX: usize = 256 * 1024;
const LOG_DEFAULT: usize = 16 * 1024;

async fn logs(ctx: &Ctx<'_>, a: LogsInput) -> Outcome {
    let id = id(&a.id)?;
    let limit = a.limit.unwrap_or(LOG_DEFAULT).clamp(1, LOG_MAX);
    let stream = match a.stream.unwrap_or(crate::engine::handle::Stream::Stdout) {
        crate::engine::handle::Stream::Stdout => "stdout",
        crate::engine::handle::Stream::Stderr => "stderr",
    };
    let attempt = a.attempt.map(|n| format!("&attempt={n}")).unwrap_or_default();
    let read = |offset: u64, max: usize| {
        Call::get(format!("/v1/workloads/{id}/logs?stream={stream}{attempt}&offset={offset}&limit={max}"))
    };
    let (start, data, next) = match a.offset {
        Some(offset) => {
            let r = ctx.up.send(read(offset, limit)).await?;
            let r = if r.ok() { r } else { return Err(r.message()) };
            (offset, r.body, r.next_offset)
        }
        None => {
            // A tail: the whole log when it is small (one read), else its
            // end found by reading a byte at a time past doubling offsets.
            let r = ctx.up.send(read(0, LOG_MAX)).await?;
            let r = if r.ok() { r } else { return Err(r.message()) };
            if r.body.len() < LOG_MAX {
                let cut = r.body.len().saturating_sub(limit);
                (cut as u64, r.body[cut..].to_vec(), r.next_offset)
            } else {
                let end = log_end(ctx, &read, LOG_MAX as u64).await?;
                let start = end.saturating_sub(limit as u64);
                let r = ctx.up.send(read(start, limit)).await?;
                let r = if r.ok() { r } else { return Err(r.message()) };
                (start, r.body, r.next_offset)
            }
        }
    };
    let next_offset = next.unwrap_or(start + data.len() as u64);
    let mut text = crate::text::LogText::default();
    let mut out = text.push(&data);
    out.push_str(&text.finish());
    Ok(json!({
        "id": id.to_string(),
        "stream": stream,
        "offset": start,
        "bytes": data.len(),
        "next_offset": next_offset,
        "text": out,
    }))
}

/// The length of a log known to hold at least `known` bytes: doubling
/// probes past it, then a bisection (each a one-byte read).
async fn log_end(ctx: &Ctx<'_>, read: &impl Fn(u64, usize) -> Call, known: u64) -> Result<u64, String> {
    let has = async |at: u64| -> Result<bool, String> {
        let r = ctx.up.send(read(at, 1)).await?;
        if r.ok() { Ok(!r.body.is_empty()) } else { Err(r.message()) }
    };
    // Invariant: a byte at lo - 1 exists, none at hi.
    let (mut lo, mut hi) = (known, known.saturating_mul(2));
    while has(hi - 1).await? {
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if has(mid).await? { lo = mid + 1 } else { hi = mid }
    }
    Ok(lo)
}

async fn events(ctx: &Ctx<'_>, a: EventsInput) -> Outcome {
    let limit = a.limit.unwrap_or(200).clamp(1, 10_000);
    match a.id {
        None => ok_json(ctx.up.send(Call::get(format!("/v1/events?limit={limit}"))).await?),
        Some(w) => {
            let id = id(&w)?;
            let mut v = ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}/events"))).await?)?;
            if let Some(all) = v.as_array_mut() {
                let cut = all.len().saturating_sub(limit);
                all.drain(..cut);
            }
            Ok(v)
        }
    }
}

/// The largest artifact offered as a resource.
pub const RESOURCE_MAX: u64 = 256 * 1024;

/// An artifact's resource URI.
pub fn artifact_uri(id: &str, attempt: u64, name: &str) -> String {
    format!("canopy://workloads/{id}/artifacts/{attempt}/{}", encode(name))
}

async fn artifacts(ctx: &Ctx<'_>, a: IdInput) -> Outcome {
    let id = id(&a.id)?;
    let mut v = ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}/artifacts"))).await?)?;
    for art in v.as_array_mut().into_iter().flatten() {
        let small = art["bytes"].as_u64().is_some_and(|b| b <= RESOURCE_MAX);
        if small
            && !art["download"].is_null()
            && let (Some(n), Some(name)) = (art["attempt"].as_u64(), art["name"].as_str())
        {
            let uri = artifact_uri(&id.to_string(), n, name);
            art["uri"] = Value::String(uri);
        }
        // Where the server keeps it is no business of an agent's.
        if let Some(o) = art.as_object_mut() {
            o.remove("path");
        }
    }
    Ok(v)
}

async fn cancel(ctx: &Ctx<'_>, a: CancelInput) -> Outcome {
    let id = id(&a.id)?;
    let body = serde_json::to_vec(&json!({ "reason": a.reason })).unwrap_or_default();
    let post = || Call::post(format!("/v1/workloads/{id}/cancel"), "application/json", body.clone());
    if !may(ctx.caller, "cancel") {
        return ok_json(ctx.up.send(post()).await?);
    }
    let binding = Binding { caller: ctx.caller.key(), tool: "cancel".into(), target: id.to_string() };
    match &a.confirm {
        None => {
            let v = ok_json(ctx.up.send(Call::get(format!("/v1/workloads/{id}"))).await?)?;
            let w = &v["workload"];
            let state = w["state"].as_str().unwrap_or("?");
            if matches!(state, "succeeded" | "failed" | "cancelled") {
                return Err(format!("{id} has already ended ({state}); there is nothing to cancel"));
            }
            let running = v["attempts"].as_array().and_then(|a| a.last()).cloned().unwrap_or(Value::Null);
            let confirm = ctx.book.issue(binding, ctx.now);
            Ok(json!({
                "confirmation_required": true,
                "confirm": confirm,
                "expires_in_s": super::confirm::TTL_MS / 1000,
                "would": format!(
                    "cancel {id} ({}), now {state}{}",
                    w["name"].as_str().unwrap_or(""),
                    match running["node"].as_str() {
                        Some(n) if state == "running" => format!(", stopping its attempt on {n}"),
                        _ => String::new(),
                    }
                ),
            }))
        }
        Some(c) => {
            ctx.book.redeem(c, &binding, ctx.now).map_err(|e| e.to_string())?;
            ok_json(ctx.up.send(post()).await?)
        }
    }
}

async fn retry(ctx: &Ctx<'_>, a: RetryInput) -> Outcome {
    let id = id(&a.id)?;
    let body = serde_json::to_vec(&json!({ "reason": a.reason })).unwrap_or_default();
    ok_json(ctx.up.send(Call::post(format!("/v1/workloads/{id}/retry"), "application/json", body)).await?)
}

async fn fleet(ctx: &Ctx<'_>, _: FleetInput) -> Outcome {
    let a = ctx.up.send(Call::get("/v1/fleet")).await?;
    if !a.ok() {
        return Err(a.message());
    }
    let s: crate::engine::handle::FleetStatus =
        serde_json::from_slice(&a.body).map_err(|e| format!("reading the fleet: {e}"))?;
    Ok(super::fleet::summary(&s))
}
