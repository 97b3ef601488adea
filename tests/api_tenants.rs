//! Tenants over HTTP against a real server: each tenant's principals see
//! and act on their own tenant's workloads only (another's is 404, and the
//! event stream carries none of its records), tokens belong to a tenant,
//! and an admin's change of quotas is audited, in force at once and kept
//! across a restart.

mod api_support;

use api_support::{Api, Body, Who, id_of, queued_spec, workload_ids};
use canopy::server::ServerOptions;
use serde_json::{Value, json};

const TENANTS: &str = r#"
default_tenant = "team-a"
[[flavor]]
name = "any"
[[tenant]]
name = "team-a"
cohort = "lab"
[tenant.quota.any]
gpus = 8
[[tenant]]
name = "team-b"
cohort = "lab"
[tenant.quota.any]
gpus = 4
"#;

async fn start() -> Api {
    Api::start_configured(ServerOptions::default(), TENANTS).await
}

fn ids(page: &Value) -> Vec<String> {
    page["workloads"].as_array().unwrap().iter().map(id_of).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_principals_never_see_or_touch_another_tenants_workloads() {
    let mut api = start().await;
    let a_sub = api.tenant_token("a-sub", "submitter", &[], "team-a").await;
    let a_view = api.tenant_token("a-view", "viewer", &[], "team-a").await;
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;

    // A's stream is open before either submits.
    let mut a_stream = api.stream(Who::Token(&a_view), None).await;
    let b_work = api.submit_new(Who::Token(&b_sub), &queued_spec("b-secret")).await;
    let a_work = api.submit_new(Who::Token(&a_sub), &queued_spec("a-work")).await;
    assert_eq!(api.workload(&b_work).await["workload"]["tenant"], "team-b");
    assert_eq!(api.workload(&a_work).await["workload"]["tenant"], "team-a");

    // A's submitter: B's workload does not exist for it.
    for path in [
        format!("/v1/workloads/{b_work}"),
        format!("/v1/workloads/{b_work}/events"),
        format!("/v1/workloads/{b_work}/logs"),
        format!("/v1/workloads/{b_work}/artifacts"),
    ] {
        let r = api.get(Who::Token(&a_sub), &path).await.expect(404);
        assert!(!r.text.contains("b-secret"), "{path}: {}", r.text);
    }
    let r =
        api.call(Who::Token(&a_sub), "POST", &format!("/v1/workloads/{b_work}/cancel"), Body::Empty).await;
    r.expect(404);
    assert_eq!(api.workload(&b_work).await["workload"]["state"], "queued", "B's work was not cancelled");
    // …and its own is there, with where it stands in its tenant's queue.
    let r = api.get(Who::Token(&a_sub), &format!("/v1/workloads/{a_work}")).await.expect(200);
    let position = |v: &Value| (v["queue_position"]["position"].clone(), v["queue_position"]["of"].clone());
    assert_eq!(position(&r.json()), (1.into(), 1.into()), "{}", r.text);
    assert_eq!(r.json()["queue_position"]["tenant"], "team-a");

    // A's viewer lists exactly A's; the owner (an admin) both.
    let page = api.get(Who::Token(&a_view), "/v1/workloads").await.expect(200).json();
    assert_eq!(ids(&page), vec![a_work.clone()]);
    assert_eq!(page["total"], 1);
    let all = api.get(Who::Owner, "/v1/workloads").await.expect(200).json();
    assert_eq!(ids(&all).len(), 2);
    let only_b = api.get(Who::Owner, "/v1/workloads?tenant=team-b").await.expect(200).json();
    assert_eq!(ids(&only_b), vec![b_work.clone()]);
    let events = api.get(Who::Token(&a_view), "/v1/events").await.expect(200).json();
    assert!(events.as_array().unwrap().iter().all(|e| e["workload"] != json!(b_work)), "{events}");

    // The stream: A's workload's records, none of B's.
    let mut seen = Vec::new();
    while !seen.contains(&a_work) {
        let (_, batch) = a_stream.next_batch().await;
        let text = batch.to_string();
        assert!(!text.contains("b-secret") && !text.contains(&format!("\"{b_work}\"")), "B leaked: {text}");
        seen.extend(workload_ids(&batch));
    }
    assert!(!seen.contains(&b_work));

    // Submitting for another tenant: only admins.
    let mut rb = api.request(Who::Token(&a_sub), "POST", "/v1/workloads?tenant=team-b");
    rb = rb.header("content-type", "application/toml");
    let r = api.send(rb, Body::Toml(queued_spec("sneaky"))).await.expect(403);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only an admin may submit for another tenant")
    );
    // ... and the refusal is in the audit trail, with the tenant it named.
    let audit = api.get(Who::Owner, "/v1/audit?action=POST").await.expect(200).json();
    let refused = audit.as_array().unwrap().iter().any(|r| {
        r["target"] == "tenant team-b"
            && r["outcome"].as_str().unwrap_or("").contains("only an admin may submit for another tenant")
    });
    assert!(refused, "{audit}");
    let rb = api.request(Who::Owner, "POST", "/v1/workloads?tenant=team-b");
    let r = api.send(rb, Body::Toml(queued_spec("for-b"))).await.expect(201);
    assert_eq!(r.json()["workload"]["tenant"], "team-b");
    let for_b = id_of(&r.json());

    // Everyone reads every tenant's quotas and totals, never others' ids.
    let t = api.get(Who::Token(&a_view), "/v1/tenants").await.expect(200);
    let v = t.json();
    let b_row = v["tenants"].as_array().unwrap().iter().find(|r| r["tenant"] == "team-b").unwrap().clone();
    assert_eq!(b_row["waiting"], 2, "{v}");
    assert_eq!(b_row["limits"]["gpus"]["nominal"], 4);
    assert_eq!(v["reclaims"], json!({}), "no owner takes capacity back: {v}");
    assert!(!t.text.contains(&b_work) && !t.text.contains("b-secret"), "{}", t.text);
    let m = api.get(Who::Token(&a_view), "/metrics").await.expect(200).text;
    assert!(m.contains("canopy_tenant_quota_gpus{tenant=\"team-b\",flavor=\"any\"} 4"), "{m}");
    assert!(m.contains("canopy_tenant_pending_workloads{tenant=\"team-b\"} 2"), "{m}");
    assert!(m.contains("canopy_tenant_used_gpus{tenant=\"team-a\",flavor=\"any\"} 0"), "{m}");
    assert!(m.contains("canopy_tenant_lent_gpus{tenant=\"team-a\",flavor=\"any\"} 0"), "{m}");
    assert!(m.contains("canopy_tenant_reclaims_in_flight{tenant=\"team-a\"} 0"), "{m}");

    // B's queue is B's alone (A's work is not in it): its third waits
    // behind its first two, in the order they came.
    let b3 = api.submit_new(Who::Token(&b_sub), &queued_spec("b-3")).await;
    for (id, at) in [(&b_work, 1), (&for_b, 2), (&b3, 3)] {
        assert_eq!(position(&api.workload(id).await), (at.into(), 3.into()), "{id}");
        assert_eq!(api.workload(id).await["queue_position"]["tenant"], "team-b");
    }
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_belong_to_a_tenant_and_those_from_before_tenants_are_refused_without_a_default() {
    // A store without tenants, and a token made then.
    let mut api = Api::start().await;
    let old = api.token("old", "submitter", &[], None).await;
    api.get(Who::Token(&old), "/v1/workloads").await.expect(200);
    let r = api.get(Who::Owner, "/v1/workloads?tenant=x").await.expect(400);
    assert!(r.text.contains("no tenants are configured"), "{}", r.text);

    // Tenants configured, no default tenant: the old token is refused,
    // saying how to fix it.
    api.restart(&TENANTS.replace("default_tenant = \"team-a\"", "")).await;
    let r = api.get(Who::Token(&old), "/v1/workloads").await.expect(403);
    let m = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(m.contains("made before tenants") && m.contains("--tenant"), "{m}");
    // ... and the refusal is audited, as a refused token is.
    let audit = api.get(Who::Owner, "/v1/audit").await.expect(200).json();
    let seen = audit.as_array().unwrap().iter().any(|r| {
        r["principal"] == "old" && r["outcome"].as_str().unwrap_or("").contains("made before tenants")
    });
    assert!(seen, "{audit}");
    // A new non-admin token must name an existing tenant.
    let body = json!({ "name": "nameless", "role": "viewer" });
    let r = api.call(Who::Owner, "POST", "/v1/tokens", Body::Json(body)).await.expect(422);
    assert!(r.text.contains("must belong to one"), "{}", r.text);
    let body = json!({ "name": "lost", "role": "viewer", "tenant": "team-z" });
    let r = api.call(Who::Owner, "POST", "/v1/tokens", Body::Json(body)).await.expect(422);
    let m = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(m.contains("no tenant \"team-z\""), "{m}");

    // With a default tenant, the old token belongs to it.
    api.restart(TENANTS).await;
    let id = api.submit_new(Who::Token(&old), &queued_spec("old-token")).await;
    assert_eq!(api.workload(&id).await["workload"]["tenant"], "team-a");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_quota_change_is_audited_in_force_at_once_and_survives_a_restart() {
    let mut api = start().await;
    let a_sub = api.tenant_token("a-sub", "submitter", &[], "team-a").await;
    let doc = TENANTS.replace("gpus = 4", "gpus = 6");
    // Not an admin: refused.
    api.call(Who::Token(&a_sub), "PUT", "/v1/tenants", Body::Toml(doc.clone())).await.expect(403);
    // A mistake: 422 naming it, nothing changes.
    let bad = TENANTS.replace("gpus = 4", "gpus = 1.5");
    let r = api.call(Who::Owner, "PUT", "/v1/tenants", Body::Toml(bad)).await.expect(422);
    assert!(r.text.contains("quota.any.gpus nominal 1.5 is not valid"), "{}", r.text);

    let b_nominal = |v: &Value| {
        v["tenants"].as_array().unwrap().iter().find(|r| r["tenant"] == "team-b").unwrap()["limits"]["gpus"]
            ["nominal"]
            .clone()
    };
    let r = api.call(Who::Owner, "PUT", "/v1/tenants", Body::Toml(doc)).await.expect(200);
    assert_eq!(b_nominal(&r.json()), 6);
    let now = api.get(Who::Token(&a_sub), "/v1/tenants").await.expect(200).json();
    assert_eq!(b_nominal(&now), 6);
    assert!(now["set_by"].as_str().unwrap().starts_with("local:"), "{now}");
    let audit = api.get(Who::Owner, "/v1/audit?action=tenants-set").await.expect(200).json();
    let by: Vec<&str> = audit.as_array().unwrap().iter().map(|a| a["principal"].as_str().unwrap()).collect();
    assert_eq!(by.len(), 2, "the file's seeding and the admin's change: {audit}");
    assert!(by[0].starts_with("local:") && by[1] == "canopy.toml", "{by:?}");

    // The file unchanged: the admin's version stays in force.
    api.restart(TENANTS).await;
    let after = api.get(Who::Owner, "/v1/tenants").await.expect(200).json();
    assert_eq!(b_nominal(&after), 6, "{after}");
    // The file changed: it wins, audited as made by the file.
    api.restart(&TENANTS.replace("gpus = 4", "gpus = 2")).await;
    let after = api.get(Who::Owner, "/v1/tenants").await.expect(200).json();
    assert_eq!(b_nominal(&after), 2, "{after}");
    assert_eq!(after["set_by"], "canopy.toml");
    api.finish().await;
}

/// With `[fair_share]`, `GET /v1/tenants` and `/metrics` say where each
/// tenant stands in the serving order; a half-life too short to mean
/// anything is refused with what to write instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_share_standings_are_shown_and_a_bad_half_life_is_refused() {
    let doc =
        format!("[fair_share]\nhalf_life = \"1h\"\n{}", TENANTS.replace("default_tenant = \"team-a\"\n", ""));
    let doc = format!("default_tenant = \"team-a\"\n{doc}");
    let mut api = Api::start_configured(ServerOptions::default(), &doc).await;
    let mut standings = Value::Null;
    for _ in 0..100 {
        let v = api.get(Who::Owner, "/v1/tenants").await.expect(200).json();
        standings = v["fair_share"].clone();
        if standings.as_array().is_some_and(|a| a.len() == 2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let rows = standings.as_array().unwrap_or_else(|| panic!("no standings: {standings}"));
    assert_eq!(rows.len(), 2, "{standings}");
    assert_eq!((rows[0]["tenant"].as_str(), rows[0]["position"].as_u64()), (Some("team-a"), Some(1)));
    assert_eq!(rows[1]["fair_share"], 0.5, "equal weights: {standings}");
    let m = api.get(Who::Owner, "/metrics").await.expect(200).text;
    assert!(m.contains("canopy_tenant_fair_share_position{tenant=\"team-b\"} 2"), "{m}");
    assert!(m.contains("canopy_tenant_fair_share_target{tenant=\"team-a\"} 0.5"), "{m}");

    // A waiting workload says where its tenant stands.
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;
    let waiting = api.submit_new(Who::Token(&b_sub), &queued_spec("b-waits")).await;
    let q = api.workload(&waiting).await["queue_position"].clone();
    assert_eq!(q["fair_share"], "team-b is at 0.00 of its fair share 0.50; next after team-a", "{q}");

    let bad = doc.replace("half_life = \"1h\"", "half_life = \"5s\"");
    let r = api.call(Who::Owner, "PUT", "/v1/tenants", Body::Toml(bad)).await.expect(422);
    assert!(r.text.contains("[fair_share] half_life") && r.text.contains("at least"), "{}", r.text);
    api.finish().await;
}

/// A tenant's decayed usage survives a restart: it is rebuilt from what
/// its attempts held, as the journal has them, so the serving order does
/// not start over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_share_usage_survives_a_restart() {
    let doc = TENANTS.replace(
        "default_tenant = \"team-a\"\n",
        "default_tenant = \"team-a\"\n[fair_share]\nhalf_life = \"1h\"\n",
    );
    let mut api = Api::start_configured(ServerOptions::default(), &doc).await;
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;
    let spec = "name = \"holds-a-gpu\"\n[runtime]\ncommand = [\"sleep\", \"600\"]\n\
                [resources]\ngpus = 1\ncpu_cores = 1\nmemory_gb = 4\n";
    api.submit_new(Who::Token(&b_sub), spec).await;
    let usage = |v: &Value, t: &str| {
        v["fair_share"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["tenant"] == t))
            .map_or(0.0, |s| s["usage_gpu_hours"].as_f64().unwrap_or(0.0) * 3600.0)
    };
    // team-b holds its GPU until it has used 8 GPU-seconds or more.
    let mut before = 0.0;
    for _ in 0..300 {
        before = usage(&api.get(Who::Owner, "/v1/tenants").await.expect(200).json(), "team-b");
        if before >= 8.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(before >= 8.0, "team-b's usage did not grow: {before}");
    api.restart(&doc).await;
    let after = usage(&api.get(Who::Owner, "/v1/tenants").await.expect(200).json(), "team-b");
    assert!(after >= before * 0.99, "usage restarted from {after:.1} GPU-s, was {before:.1}");
    let order = api.get(Who::Owner, "/v1/tenants").await.expect(200).json()["fair_share"].clone();
    assert_eq!(order[0]["tenant"], "team-a", "team-a used less, so it is served first: {order}");
    api.finish().await;
}

/// A `[[budget]]` over HTTP: a workload that would pass it waits, its
/// reason naming the budget and the numbers; `GET /v1/tenants` and
/// `/metrics` show the budget's period; a bad budget is refused with
/// where and what; and after a restart the budget still holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_holds_work_with_its_numbers_and_still_does_after_a_restart() {
    let doc = format!(
        "{TENANTS}\n[[budget]]\nname = \"b-gpu\"\ntenant = \"team-b\"\nperiod = \"month\"\n\
         time_zone = \"Europe/Berlin\"\ngpu_hours = 5\n"
    );
    let mut api = Api::start_configured(ServerOptions::default(), &doc).await;
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;
    // Ten hours on one GPU of the demo fleet: 10 GPU-hours of 5.
    let spec = "name = \"long\"\nexpected_runtime = \"10h\"\n\n[runtime]\ncommand = [\"train\"]\n\n\
                [resources]\ngpus = 1\n";
    let id = api.submit_new(Who::Token(&b_sub), spec).await;
    let held = |v: &Value| v["workload"]["reason"].as_str().unwrap_or_default().starts_with("held by budget");
    let mut w = api.workload(&id).await;
    for _ in 0..100 {
        if held(&w) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        w = api.workload(&id).await;
    }
    let reason = w["workload"]["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.starts_with(
            "held by budget b-gpu (tenant team-b, per month): estimated 10.00 GPU-h but 5.00 GPU-h is left"
        ),
        "{w}"
    );
    assert!(reason.contains("the period renews") && reason.ends_with("00:00 Europe/Berlin"), "{reason}");
    assert_eq!(w["workload"]["state"], "queued");
    // The engine publishes where budgets stand within a second.
    let mut budgets = Value::Null;
    for _ in 0..100 {
        budgets = api.get(Who::Owner, "/v1/tenants").await.expect(200).json()["budgets"].clone();
        if budgets[0]["holding"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(budgets[0]["name"], "b-gpu", "{budgets}");
    assert_eq!(budgets[0]["holding"], 1, "{budgets}");
    assert_eq!(budgets[0]["limit_gpu_ms"], 18_000_000, "{budgets}");
    let m = api.get(Who::Owner, "/metrics").await.expect(200).text;
    assert!(m.contains("canopy_budget_held_workloads{budget=\"b-gpu\",scope=\"tenant team-b\"} 1"), "{m}");
    assert!(
        m.contains("canopy_budget_limit_gpu_seconds{budget=\"b-gpu\",scope=\"tenant team-b\"} 18000"),
        "{m}"
    );

    // A budget naming no tenant is refused, saying which and what to do.
    let bad = doc.replace("tenant = \"team-b\"\nperiod", "tenant = \"team-x\"\nperiod");
    let r = api.call(Who::Owner, "PUT", "/v1/tenants", Body::Toml(bad)).await.expect(422);
    assert!(r.text.contains("tenant \\\"team-x\\\" is not a [[tenant]]"), "{}", r.text);

    api.restart(&doc).await;
    let mut budgets = Value::Null;
    for _ in 0..100 {
        budgets = api.get(Who::Owner, "/v1/tenants").await.expect(200).json()["budgets"].clone();
        if budgets[0]["holding"] == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(budgets[0]["holding"], 1, "still held after a restart: {budgets}");
    assert_eq!(api.workload(&id).await["workload"]["state"], "queued");
    api.finish().await;
}

/// A scoped operator's audit page (it sees its tenant's records and its
/// scopes') is full even when the newest records are another tenant's: the server reads on past what the
/// operator may not see (it used to filter one page and answer it short,
/// empty here, which reads as "nothing more").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_operators_audit_page_is_full_past_another_tenants_records() {
    let mut api = start().await;
    let a_sub = api.tenant_token("a-sub", "submitter", &[], "team-a").await;
    let a_op = api.tenant_token("a-op", "operator", &["provider=local"], "team-a").await;
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;
    let a_first = api.submit_new(Who::Token(&a_sub), &queued_spec("a-first")).await;
    let mut b_work = Vec::new();
    for i in 0..5 {
        b_work.push(api.submit_new(Who::Token(&b_sub), &queued_spec(&format!("b-{i}"))).await);
    }
    let a_then = api.submit_new(Who::Token(&a_sub), &queued_spec("a-then")).await;
    for i in 5..10 {
        b_work.push(api.submit_new(Who::Token(&b_sub), &queued_spec(&format!("b-{i}"))).await);
    }

    let targets = |page: &serde_json::Value| -> Vec<String> {
        page.as_array().unwrap().iter().map(|r| r["target"].as_str().unwrap_or("").to_string()).collect()
    };
    let page = api.get(Who::Token(&a_op), "/v1/audit?limit=1").await.expect(200).json();
    assert_eq!(targets(&page), std::slice::from_ref(&a_then), "{page}");
    // A longer page reaches past five more of B's; the trail then ends.
    let page = api.get(Who::Token(&a_op), "/v1/audit?limit=3").await.expect(200).json();
    assert_eq!(targets(&page), [a_then.clone(), a_first.clone()], "{page}");
    // The admin's page is the newest, B's included.
    let all = api.get(Who::Owner, "/v1/audit?limit=1").await.expect(200).json();
    assert_eq!(all[0]["target"], b_work[9].as_str(), "{all}");
    api.finish().await;
}
