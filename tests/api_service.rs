//! The HTTP API as its users meet it: an engine started in this process
//! with `canopy::app::start` serves the store's socket (the owner, an
//! admin without a token) and TCP on 127.0.0.1 (a bearer token on every
//! request), and the tests talk to both over real HTTP: every endpoint
//! (who may call what is `api_roles`), idempotent submits, the event
//! stream's resume and its slow-client rule, body limits and spec errors,
//! bad tokens, the audit trail, and that no token's secret is ever
//! written anywhere in the store (the example clients: `example_clients`).
//!
//! Each test has its own store. Workloads that run are pinned to the
//! local provider (their commands really run here); the rest ask for more
//! memory than anything has, so they wait queued and cost nothing. Every
//! wait is a bounded poll for a condition.

mod api_support;

use api_support::*;

use canopy::server::ServerOptions;
use canopy::spec::validate::MAX_SPEC_BYTES;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

// ── Every endpoint ───────────────────────────────────────────────────────

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_over_tcp_and_the_socket() {
    let mut api = Api::start().await;
    let app = api.token("app", "submitter", &[], None).await;
    let admin = api.token("ops-admin", "admin", &[], None).await;
    let (app, admin) = (Who::Token(&app), Who::Token(&admin));

    // Public: health and the API's description, no token needed.
    let health = api.get(Who::Nobody, "/healthz").await.expect(200).json();
    assert_eq!(
        (health["status"].as_str(), health["store_id"].as_str()),
        (Some("ok"), Some(api.store_id.as_str()))
    );
    let doc = api.get(Who::Nobody, "/v1/openapi.json").await.expect(200).json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    for path in ["/v1/workloads", "/v1/workloads/{id}/cancel", "/v1/stream", "/v1/tokens/{name}"] {
        assert!(doc["paths"].get(path).is_some(), "{path} is not in the OpenAPI document");
    }

    // Who am I: a token's principal over TCP, the owner on the socket.
    let me = api.get(app, "/v1/whoami").await.expect(200).json();
    assert_eq!((me["principal"].as_str(), me["role"].as_str()), (Some("app"), Some("submitter")));
    assert!(me["origin"].as_str().unwrap().starts_with("127.0.0.1:"), "{me}");
    let owner = api.get(Who::Owner, "/v1/whoami").await.expect(200).json();
    assert!(owner["principal"].as_str().unwrap().starts_with("local:"), "{owner}");
    assert_eq!(owner["role"], "admin");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(api.root.join("canopy.sock")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is the owner's alone");

    // Submit a tiny workload that prints and writes one output file.
    let spec = local_spec(
        "hello",
        "echo hello; printf 'the result' > \"$CANOPY_OUTPUT_DIR/outputs/out.txt\"",
        Some("out.txt"),
    );
    let r = api.submit(app, &spec, Some("hello-1")).await.expect(201);
    let w = r.json();
    let id = id_of(&w);
    assert_eq!(r.headers["location"], format!("/v1/workloads/{id}").as_str());
    let rec = &w["workload"];
    assert_eq!(
        (rec["submitted_by"].as_str(), rec["idempotency_key"].as_str()),
        (Some("app"), Some("hello-1"))
    );
    let done = api.wait_final(&id).await;
    assert_eq!(done["workload"]["state"], "succeeded", "{done}");
    assert_eq!(done["attempts"][0]["provider"], "local", "{done}");

    // Reads: the list (filtered), one workload, its events, logs, outputs.
    let page = api.get(app, "/v1/workloads?state=succeeded&limit=10").await.expect(200).json();
    let ids: Vec<String> = page["workloads"].as_array().unwrap().iter().map(id_of).collect();
    assert_eq!(ids, std::slice::from_ref(&id));
    api.get(app, "/v1/workloads?state=nonsense").await.expect(400);
    assert_eq!(
        api.get(app, &format!("/v1/workloads/{id}")).await.expect(200).json()["workload"]["state"],
        "succeeded"
    );
    api.get(app, "/v1/workloads/w-99999").await.expect(404);
    let events = api.get(app, &format!("/v1/workloads/{id}/events")).await.expect(200).json();
    let events = events.as_array().unwrap();
    assert!(
        events.len() >= 2 && events.iter().all(|e| id_of(&json!({"id": e["workload"]})) == id),
        "{events:?}"
    );
    let recent = api.get(app, "/v1/events?limit=500").await.expect(200).json();
    assert!(recent.as_array().unwrap().len() >= events.len(), "{recent}");
    let logs = api.get(app, &format!("/v1/workloads/{id}/logs")).await.expect(200);
    assert!(logs.text.contains("hello"), "{}", logs.text);
    assert!(logs.headers.contains_key("x-canopy-next-offset"));
    // When the bytes were written: the first chunk from offset 0.
    let times = logs.headers["x-canopy-log-times"].to_str().unwrap();
    assert!(times.starts_with("0:"), "{times}");
    let arts = api.get(app, &format!("/v1/workloads/{id}/artifacts")).await.expect(200).json();
    let art = &arts.as_array().unwrap()[0];
    assert_eq!((art["name"].as_str(), art["bytes"].as_u64()), (Some("result"), Some(10)), "{arts}");
    let file = api.get(app, art["download"].as_str().unwrap()).await.expect(200);
    assert_eq!(file.text, "the result");

    // Metrics, in Prometheus' text format.
    let m = api.get(app, "/metrics").await.expect(200);
    assert!(m.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert!(m.text.contains("# TYPE canopy_workloads gauge"), "{}", m.text);
    assert!(m.text.contains("canopy_workloads{state=\"succeeded\"} 1"), "{}", m.text);
    assert!(m.text.contains("canopy_workloads{state=\"queued\"} 0"), "{}", m.text);

    // Commands on workloads: cancel one that waits, retry the one that ended.
    let waiting = api.submit_new(app, &queued_spec("waits")).await;
    let c = api
        .call(app, "POST", &format!("/v1/workloads/{waiting}/cancel"), Body::Json(json!({"reason": "test"})))
        .await;
    assert!(c.expect(200).json()["message"].is_string());
    assert_eq!(api.wait_final(&waiting).await["workload"]["state"], "cancelled");
    api.call(app, "POST", &format!("/v1/workloads/{waiting}/cancel"), Body::Empty).await.expect(409);
    let again =
        api.call(app, "POST", &format!("/v1/workloads/{id}/retry"), Body::Empty).await.expect(200).json();
    let retried = id_of(&again);
    assert_ne!(retried, id);
    assert_eq!(api.wait_final(&retried).await["workload"]["state"], "succeeded");

    // A dry run places without submitting.
    let plan =
        api.call(app, "POST", "/v1/plan", Body::Toml(local_spec("p", "true", None))).await.expect(200).json();
    assert_eq!(plan["fits"], true, "{plan}");
    let plan = api.call(app, "POST", "/v1/plan", Body::Toml(queued_spec("too-big"))).await.expect(200).json();
    assert_eq!(plan["fits"], false, "{plan}");

    // The fleet, and node commands.
    let fleet = api.get(app, "/v1/fleet").await.expect(200);
    // The mix of live work a plan reads (no GPU work here: empty).
    assert_eq!(fleet.json()["demand"], json!({ "gpus_by_width": [] }), "{}", fleet.text);
    for name in [SCOPED_PROVIDER, NODE_IN_SCOPE, NODE_OUT_OF_SCOPE, "local"] {
        assert!(fleet.text.contains(name), "{name} is not in the fleet");
    }
    for cmd in ["cordon", "uncordon", "drain"] {
        let r = api.call(admin, "POST", &format!("/v1/nodes/{NODE_IN_SCOPE}/{cmd}"), Body::Empty).await;
        assert!(r.expect(200).json()["message"].is_string());
    }
    api.call(admin, "POST", "/v1/nodes/no-such-node/cordon", Body::Empty).await.expect(404);

    // The event stream starts with where it starts.
    let mut s = api.stream(app, None).await;
    let hello = s.next().await.unwrap();
    assert_eq!(hello.event, "hello");
    let hello: Value = serde_json::from_str(&hello.data).unwrap();
    assert_eq!(hello["store_id"].as_str(), Some(api.store_id.as_str()));
    assert!(hello["seq"].as_u64().unwrap() > 0);
    drop(s);

    // The audit trail.
    let audit = api.get(admin, "/v1/audit?limit=1000").await.expect(200).json();
    assert!(
        audit.as_array().unwrap().iter().any(|a| a["principal"] == "app" && a["action"] == "submit"),
        "{audit}"
    );
    // Filtered on the server (prefixes, ASCII case ignored), and paged
    // with `until`: what the console's audit view asks for.
    let q = format!("/v1/audit?action=CORD&target={NODE_IN_SCOPE}&outcome=ok");
    let cordons = api.get(admin, &q).await.expect(200).json();
    let cordons = cordons.as_array().unwrap().clone();
    assert_eq!(cordons.len(), 1, "the cordon, not the uncordon: {cordons:?}");
    assert_eq!((&cordons[0]["action"], &cordons[0]["target"]), (&json!("cordon"), &json!(NODE_IN_SCOPE)));
    let at = cordons[0]["at"].as_i64().unwrap();
    let before = api.get(admin, &format!("/v1/audit?until={}&limit=1000", at - 1)).await.expect(200).json();
    let before = before.as_array().unwrap().clone();
    assert!(!before.is_empty() && before.iter().all(|a| a["at"].as_i64().unwrap() < at), "{before:?}");

    // Tokens: listed without secrets, made and revoked over TCP by an admin.
    let list = api.get(admin, "/v1/tokens").await.expect(200);
    let names: Vec<String> =
        list.json().as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["app", "ops-admin"]);
    assert!(
        !list.text.contains("hash") && !list.text.contains("salt") && !list.text.contains("canopy_"),
        "{}",
        list.text
    );
    let made =
        api.call(admin, "POST", "/v1/tokens", Body::Json(json!({"name": "ci", "role": "viewer"}))).await;
    let ci = made.expect(201).json()["token"].as_str().unwrap().to_string();
    api.secrets.push(ci.clone());
    api.get(Who::Token(&ci), "/v1/whoami").await.expect(200);
    api.call(admin, "POST", "/v1/tokens", Body::Json(json!({"name": "ci", "role": "viewer"})))
        .await
        .expect(409);
    api.call(admin, "DELETE", "/v1/tokens/ci", Body::Empty).await.expect(200);
    api.get(Who::Token(&ci), "/v1/whoami").await.expect(401);
    api.call(admin, "DELETE", "/v1/tokens/ci", Body::Empty).await.expect(404);

    // Anything else is a 404 in the same shape.
    api.get(app, "/v1/nothing-here").await.expect(404);
    api.call(app, "POST", &format!("/v1/workloads/{id}/frobnicate"), Body::Empty).await.expect(404);
    api.call(admin, "POST", &format!("/v1/nodes/{NODE_IN_SCOPE}/reboot"), Body::Empty).await.expect(404);
    api.finish().await;
}

// ── Idempotent submits ───────────────────────────────────────────────────

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_names_one_workload_per_principal() {
    let mut api = Api::start().await;
    let ci = api.token("ci", "submitter", &[], None).await;
    let other = api.token("other-app", "submitter", &[], None).await;
    let (ci, other) = (Who::Token(&ci), Who::Token(&other));
    let spec = queued_spec("nightly");

    let first = api.submit(ci, &spec, Some("nightly-2024-06-01")).await.expect(201).json();
    let id = id_of(&first);
    // The same key and spec (a retry after a lost answer): the same workload.
    let again = api.submit(ci, &spec, Some("nightly-2024-06-01")).await.expect(200).json();
    assert_eq!(id_of(&again), id);
    assert_eq!(again["existing"], true);
    // The same spec written differently is the same spec.
    let reformatted = spec.replace("\n\n", "\n").replace("= ", "=  ");
    let same = api.submit(ci, &reformatted, Some("nightly-2024-06-01")).await.expect(200).json();
    assert_eq!(id_of(&same), id);
    // The same key with another spec is a conflict that names the key.
    let r = api.submit(ci, &queued_spec("something-else"), Some("nightly-2024-06-01")).await.expect(409);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("nightly-2024-06-01"), "{}", r.text);
    // Another principal's key is its own.
    let theirs = api.submit(other, &spec, Some("nightly-2024-06-01")).await.expect(201).json();
    assert_ne!(id_of(&theirs), id);
    assert_eq!(theirs["workload"]["submitted_by"], "other-app");
    // Exactly two workloads exist.
    let page = api.get(Who::Owner, "/v1/workloads").await.expect(200).json();
    assert_eq!(page["workloads"].as_array().unwrap().len(), 2, "{page}");
    // A key must be printable and short.
    api.submit(ci, &spec, Some(&"k".repeat(300))).await.expect(400);
    api.finish().await;
}

// ── The event stream ─────────────────────────────────────────────────────

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_after_the_last_event_id_missing_nothing() {
    let mut api = Api::start().await;
    let watcher = api.token("watcher", "viewer", &[], None).await;
    let app = api.token("app", "submitter", &[], None).await;
    let (watcher, app) = (Who::Token(&watcher), Who::Token(&app));

    let mut s = api.stream(watcher, None).await;
    let hello = s.next().await.unwrap();
    assert_eq!(hello.event, "hello");
    let start = serde_json::from_str::<Value>(&hello.data).unwrap()["seq"].as_u64().unwrap();

    // Three submits and a refused cancel (an audit record) while reading.
    let mut first = Vec::new();
    for i in 0..3 {
        first.push(api.submit_new(app, &queued_spec(&format!("first-{i}"))).await);
    }
    api.call(watcher, "POST", &format!("/v1/workloads/{}/cancel", first[0]), Body::Empty).await.expect(403);
    first.push(api.submit_new(app, &queued_spec("first-3")).await);
    let mut seen: Vec<u64> = Vec::new();
    let mut ids = BTreeSet::new();
    let mut last_id = String::new();
    while !first.iter().all(|id| ids.contains(id)) {
        let (event_id, batch) = s.next_batch().await;
        let seq = batch["seq"].as_u64().unwrap();
        assert_eq!(event_id, format!("{}:{seq}", api.store_id));
        ids.extend(workload_ids(&batch));
        seen.push(seq);
        last_id = event_id;
    }
    let last = *seen.last().unwrap();
    let journal: Vec<u64> = api.journal_seqs(start).into_iter().filter(|s| *s <= last).collect();
    assert_eq!(seen, journal, "the live stream skipped or repeated batches the journal holds");

    // Gone for a while: five more submits and another refused cancel.
    drop(s);
    let mut second = Vec::new();
    for i in 0..5 {
        second.push(api.submit_new(app, &queued_spec(&format!("second-{i}"))).await);
        if i == 2 {
            api.call(watcher, "POST", &format!("/v1/workloads/{}/cancel", first[1]), Body::Empty)
                .await
                .expect(403);
        }
    }
    let target = *api.journal_seqs(last).last().unwrap();

    // Back with the last id seen: what came after it, in order, once.
    let mut s = api.stream(watcher, Some(&last_id)).await;
    let mut resumed: Vec<u64> = Vec::new();
    let mut ids = BTreeSet::new();
    while resumed.last().is_none_or(|s| *s < target) {
        let (_, batch) = s.next_batch().await;
        resumed.push(batch["seq"].as_u64().unwrap());
        ids.extend(workload_ids(&batch));
    }
    assert!(second.iter().all(|id| ids.contains(id)), "{second:?} not all in {ids:?}");
    assert!(first.iter().all(|id| !ids.contains(id) || resumed.len() > 10), "old batches came again");
    let journal: Vec<u64> = api.journal_seqs(last).into_iter().filter(|s| *s <= target).collect();
    assert_eq!(resumed, journal, "the resumed stream skipped or repeated batches");
    // And it is live after the replay.
    let later = api.submit_new(app, &queued_spec("later")).await;
    loop {
        let (_, batch) = s.next_batch().await;
        let seq = batch["seq"].as_u64().unwrap();
        assert!(seq > *resumed.last().unwrap(), "batch {seq} came twice");
        resumed.push(seq);
        if workload_ids(&batch).contains(&later) {
            break;
        }
    }
    // An id from another store cannot be resumed: reload.
    let mut s = api.stream(watcher, Some("st-elsewhere:5")).await;
    assert_eq!(s.next().await.unwrap().event, "resync");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_told_to_resync_and_slows_no_one() {
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut api = Api::start_with(ServerOptions { stream_buffer: 4, ..ServerOptions::default() }).await;
    let slow = api.token("slow", "viewer", &[], None).await;
    let app = api.token("app", "submitter", &[], None).await;

    // A raw connection with a small receive window, read only up to the
    // stream's first event, then left alone.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(api.tcp).await.unwrap();
    let req = format!(
        "GET /v1/stream HTTP/1.1\r\nHost: canopy\r\nAuthorization: Bearer {slow}\r\nAccept: text/event-stream\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    while !contains(&got, b"event: hello") {
        let n = tokio::time::timeout(DEADLINE, conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "the stream closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));

    // 200 submits from another client (8 at a time), each carrying
    // 64 KiB so the batches outgrow the socket buffers (MiBs on loopback).
    // They all finish while the slow client still reads nothing.
    let pad = "lorem ipsum dolor sit amet ".repeat(64 * 1024 / 27);
    let submits = futures::stream::iter(0..200)
        .map(|i| {
            let spec =
                queued_spec(&format!("burst-{i}")).replace("[\"true\"]", &format!("[\"true\", {pad:?}]"));
            let api = &api;
            let app = Who::Token(&app);
            async move { api.submit(app, &spec, None).await.status }
        })
        .buffer_unordered(8)
        .collect::<Vec<u16>>();
    let statuses =
        tokio::time::timeout(Duration::from_secs(60), submits).await.expect("the submits were held up");
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let page = api.get(Who::Owner, "/v1/workloads?limit=1000").await.expect(200).json();
    assert_eq!(page["workloads"].as_array().unwrap().len(), 200);

    // Now it reads: what was buffered, then `resync` with where the store
    // is, then the end of the stream.
    let needle = b"event: resync";
    let mut buf = vec![0u8; 256 * 1024];
    let mut scanned = 0;
    let deadline = Instant::now() + DEADLINE;
    let found = loop {
        if let Some(at) = got[scanned..].windows(needle.len()).position(|w| w == needle) {
            break Some(scanned + at);
        }
        // The end of the chunked body, or of the connection.
        if got.ends_with(b"\r\n0\r\n\r\n") {
            break None;
        }
        scanned = got.len().saturating_sub(needle.len());
        assert!(Instant::now() < deadline, "no resync after {} bytes", got.len());
        let n = tokio::time::timeout(DEADLINE, conn.read(&mut buf))
            .await
            .expect("the stream went quiet")
            .unwrap();
        if n == 0 {
            break None;
        }
        got.extend_from_slice(&buf[..n]);
    };
    let batches = got.windows(12).filter(|w| w == b"event: batch").count();
    let at = found.unwrap_or_else(|| {
        panic!("the stream ended with no resync ({} bytes, {batches} batches)", got.len())
    });
    // The rest of the event, up to its blank line.
    while !got[at..].windows(2).any(|w| w == b"\n\n") {
        let n = tokio::time::timeout(DEADLINE, conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "the resync event was cut short");
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got[at..]).to_string();
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let resync: Value = serde_json::from_str(data).unwrap();
    assert_eq!(resync["store_id"].as_str(), Some(api.store_id.as_str()));
    assert!(resync["seq"].as_u64().unwrap() > 0);
    api.secrets.push(slow);
    api.finish().await;
}

// ── Bodies, specs and tokens that are wrong ─────────────────────────────

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_specs_are_refused_with_where_and_why() {
    let mut api = Api::start().await;
    let app = api.token("app", "submitter", &[], None).await;
    let app = Who::Token(&app);

    // At the limit is a spec; one byte over is 413, for submit and plan.
    let mut at_limit = queued_spec("big");
    at_limit.push('#');
    at_limit.push_str(&"x".repeat(MAX_SPEC_BYTES - at_limit.len() - 1));
    at_limit.push('\n');
    assert_eq!(at_limit.len(), MAX_SPEC_BYTES);
    api.submit(app, &at_limit, None).await.expect(201);
    let over = format!("{at_limit}#");
    assert_eq!(over.len(), MAX_SPEC_BYTES + 1);
    let r = api.submit(app, &over, None).await.expect(413);
    assert_eq!(r.json()["error"]["code"], "too-large");
    api.call(app, "POST", "/v1/plan", Body::Toml(over)).await.expect(413);

    // Malformed TOML: 422, the position in the message and in problems.
    let bad_toml = "name = \"broken\"\n[runtime]\ncommand = [\"true\"\n";
    let r = api.submit(app, bad_toml, None).await.expect(422);
    let e = &r.json()["error"];
    let message = e["message"].as_str().unwrap();
    assert!(regex::Regex::new(r"request\.toml:\d+:\d+: ").unwrap().is_match(message), "{message}");
    let p = &e["problems"][0];
    assert!(p["line"].as_u64().unwrap() >= 3 && p["col"].as_u64().unwrap() >= 1, "{p}");

    // Malformed JSON: the same, for request.json.
    let bad_json = "{\n  \"name\": \"broken\",\n  \"runtime\": {\"command\": [\"true\"]\n";
    let r = api
        .call(app, "POST", "/v1/workloads", Body::Raw("application/json", bad_json.into()))
        .await
        .expect(422);
    let e = &r.json()["error"];
    let message = e["message"].as_str().unwrap();
    assert!(regex::Regex::new(r"request\.json:\d+:\d+: ").unwrap().is_match(message), "{message}");
    assert!(e["problems"][0]["line"].as_u64().unwrap() >= 3, "{e}");

    // A well-formed spec that does not validate names the field.
    let r = api.submit(app, "name = \"x\"\n[runtime]\ncommand = []\n", None).await.expect(422);
    let e = &r.json()["error"];
    assert!(
        e["problems"].as_array().unwrap().iter().any(|p| p["path"].as_str().unwrap().starts_with("runtime")),
        "{e}"
    );
    // Every problem comes back, each at its line, the first in the message.
    let three = "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = \"two\"\n[retry]\nmax_attempts = 0\n";
    let r = api.submit(app, three, None).await.expect(422);
    let e = &r.json()["error"];
    let lines: Vec<u64> =
        e["problems"].as_array().unwrap().iter().map(|p| p["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [2, 6, 8], "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("request.toml:2:1: unknown field `prority`"), "{e}");
    // Not UTF-8.
    api.call(app, "POST", "/v1/workloads", Body::Raw("application/toml", vec![0xff, 0xfe, b'a']))
        .await
        .expect(422);
    // A command body that is not JSON.
    let id = api.submit_new(app, &queued_spec("w")).await;
    let r = api
        .call(
            app,
            "POST",
            &format!("/v1/workloads/{id}/cancel"),
            Body::Raw("application/json", b"{oops".to_vec()),
        )
        .await
        .expect(422);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("line 1"), "{}", r.text);
    // Nothing but the one at the limit and `w` was submitted.
    let page = api.get(Who::Owner, "/v1/workloads").await.expect(200).json();
    assert_eq!(page["workloads"].as_array().unwrap().len(), 2, "{page}");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_wrong_expired_and_revoked_tokens_get_401() {
    let mut api = Api::start().await;
    let good = api.token("good", "viewer", &[], None).await;
    let brief = api.token("brief", "viewer", &[], Some(now_ms() + 2_000)).await;
    let revoked = api.token("revoked", "viewer", &[], None).await;

    let code_and_message = |r: Reply| {
        let r = r.expect(401);
        let e = r.json()["error"].clone();
        assert_eq!(e["code"], "unauthorized");
        e["message"].as_str().unwrap().to_string()
    };
    api.get(Who::Token(&good), "/v1/whoami").await.expect(200);
    api.get(Who::Token(&brief), "/v1/whoami").await.expect(200);
    api.get(Who::Token(&revoked), "/v1/whoami").await.expect(200);

    // None at all.
    let m = code_and_message(api.get(Who::Nobody, "/v1/workloads").await);
    assert!(m.contains("Bearer"), "{m}");
    // Wrong: a changed secret, another token's id, garbage, another scheme.
    let mut wrong = good.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == '0' { '1' } else { '0' });
    for bad in [wrong.as_str(), "canopy_000000000000_abc", "nonsense"] {
        let m = code_and_message(api.get(Who::Token(bad), "/v1/whoami").await);
        assert!(!m.contains(bad), "the message repeats the token: {m}");
    }
    let basic = api.request(Who::Nobody, "GET", "/v1/whoami").basic_auth("good", Some(&good));
    code_and_message(api.send(basic, Body::Empty).await);

    // Revoked over the API: refused from the next request on.
    api.call(Who::Owner, "DELETE", "/v1/tokens/revoked", Body::Empty).await.expect(200);
    let m = code_and_message(api.get(Who::Token(&revoked), "/v1/whoami").await);
    assert!(m.contains("revoked"), "{m}");

    // Expired: refused once its time has passed.
    wait_until("the brief token to expire", || async {
        api.get(Who::Token(&brief), "/v1/whoami").await.status == 401
    })
    .await;
    let m = code_and_message(api.get(Who::Token(&brief), "/v1/fleet").await);
    assert!(m.contains("expired"), "{m}");
    // A token cannot be made already expired, nor an admin with scopes.
    let past = json!({ "name": "late", "role": "viewer", "expires_at": now_ms() - 1 });
    api.call(Who::Owner, "POST", "/v1/tokens", Body::Json(past)).await.expect(422);
    let scoped_admin = json!({ "name": "x", "role": "admin", "scopes": ["provider=local"] });
    api.call(Who::Owner, "POST", "/v1/tokens", Body::Json(scoped_admin)).await.expect(422);
    // The good one still works.
    api.get(Who::Token(&good), "/v1/whoami").await.expect(200);
    api.finish().await;
}

/// Query strings and ids that do not parse get the API's JSON error with a
/// 4xx naming the parameter, never axum's plain text or a 500; a page size
/// over the cap says what it applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_query_strings_and_ids_get_the_json_error() {
    let api = Api::start().await;
    let id = api.submit_new(Who::Owner, &queued_spec("q")).await;
    for (path, field) in [
        (format!("/v1/workloads/{id}/logs?offset=-5"), Some("offset")),
        (format!("/v1/workloads/{id}/logs?limit=-1"), Some("limit")),
        (format!("/v1/workloads/{id}/logs?follow=maybe"), Some("follow")),
        ("/v1/workloads?limit=-1".to_string(), Some("limit")),
        ("/v1/events?limit=lots".to_string(), Some("limit")),
        ("/v1/audit?since=yesterday".to_string(), Some("since")),
        ("/v1/workloads/w-9223372036854775808".to_string(), Some("id")),
        ("/v1/workloads/w-99999999999999999999".to_string(), Some("id")),
        (format!("/v1/workloads/{id}/artifacts/0/x"), Some("attempt")),
        (format!("/v1/workloads/{id}/artifacts/-1/x"), Some("attempt")),
    ] {
        let r = api.get(Who::Owner, &path).await;
        assert_eq!(r.status, 400, "{path}: {} {}", r.status, r.text);
        let e = r.json();
        assert_eq!(e["error"]["code"], "bad-request", "{path}: {}", r.text);
        assert_eq!(e["error"]["field"].as_str(), field, "{path}: {}", r.text);
    }
    // The largest id the store can hold is merely absent.
    api.get(Who::Owner, "/v1/workloads/w-9223372036854775807").await.expect(404);
    let page = api.get(Who::Owner, "/v1/workloads?limit=10000").await.expect(200).json();
    assert_eq!(page["limit"], 1000, "the cap is stated: {page}");
    api.finish().await;
}

// ── The audit trail ──────────────────────────────────────────────────────

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_trail_says_who_changed_what_and_who_was_refused() {
    let mut api = Api::start().await;
    let sub = api.token("sub", "submitter", &[], None).await;
    let op = api.token("op", "operator", &[], None).await;
    let viewer = api.token("viewer", "viewer", &[], None).await;
    let (sub, op, viewer) = (Who::Token(&sub), Who::Token(&op), Who::Token(&viewer));

    let id = api.submit_new(sub, &queued_spec("audited")).await;
    api.call(viewer, "POST", &format!("/v1/workloads/{id}/cancel"), Body::Empty).await.expect(403);
    api.call(viewer, "POST", "/v1/tokens", Body::Json(json!({"name": "sneaky", "role": "admin"})))
        .await
        .expect(403);
    api.call(sub, "POST", &format!("/v1/nodes/{NODE_IN_SCOPE}/drain"), Body::Empty).await.expect(403);
    api.call(
        op,
        "POST",
        &format!("/v1/nodes/{NODE_IN_SCOPE}/cordon"),
        Body::Json(json!({"reason": "bad fan"})),
    )
    .await
    .expect(200);
    api.call(sub, "POST", &format!("/v1/workloads/{id}/cancel"), Body::Empty).await.expect(200);
    api.call(Who::Owner, "DELETE", "/v1/tokens/viewer", Body::Empty).await.expect(200);

    // Viewers and submitters may not read it.
    api.get(viewer, "/v1/audit").await.expect(401);
    api.get(sub, "/v1/audit").await.expect(403);
    let audit = api.get(op, "/v1/audit?limit=1000").await.expect(200).json();
    let rows = audit.as_array().unwrap();
    let find = |principal: &str, action: &str| {
        rows.iter()
            .find(|a| a["principal"] == principal && a["action"] == action)
            .unwrap_or_else(|| panic!("no audit record of {principal} doing {action}: {audit:#}"))
    };
    let submit = find("sub", "submit");
    assert_eq!((submit["target"].as_str(), submit["outcome"].as_str()), (Some(id.as_str()), Some("ok")));
    assert!(submit["origin"].as_str().unwrap().starts_with("127.0.0.1:"), "{submit}");
    assert_eq!(find("sub", "cancel")["outcome"], "ok");
    let cordon = find("op", "cordon");
    assert_eq!((cordon["target"].as_str(), cordon["outcome"].as_str()), (Some(NODE_IN_SCOPE), Some("ok")));
    assert!(cordon["reason"].as_str().unwrap().contains("bad fan"), "{cordon}");
    for (who, action) in [
        ("viewer", "POST /v1/workloads/{id}/cancel"),
        ("viewer", "POST /v1/tokens"),
        ("sub", "POST /v1/nodes/{name}/drain"),
    ] {
        let denied = find(who, action);
        assert!(denied["outcome"].as_str().unwrap().starts_with("denied"), "{denied}");
    }
    let owner = rows.iter().find(|a| a["action"] == "token-create").expect("token creations are audited");
    assert!(owner["principal"].as_str().unwrap().starts_with("local:"), "{owner}");
    assert!(owner["origin"].as_str().unwrap().starts_with("socket"), "{owner}");
    let revoke = find(owner["principal"].as_str().unwrap(), "token-revoke");
    assert_eq!((revoke["target"].as_str(), revoke["outcome"].as_str()), (Some("viewer"), Some("ok")));
    // Newest first; filtered by principal.
    let ats: Vec<i64> = rows.iter().map(|a| a["at"].as_i64().unwrap()).collect();
    assert!(ats.windows(2).all(|w| w[0] >= w[1]), "{ats:?}");
    let only = api.get(op, "/v1/audit?principal=sub").await.expect(200).json();
    assert!(
        only.as_array().unwrap().iter().all(|a| a["principal"] == "sub")
            && only.as_array().unwrap().len() >= 3
    );
    api.finish().await;
}

/// A failure stays in triage (`unresolved=true`) whatever its age until
/// someone acknowledges it, with a reason recorded on it and in the audit
/// trail, or retries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_stays_unresolved_until_acknowledged_or_retried() {
    let mut api = Api::start().await;
    let op = api.token("op", "operator", &[], None).await;
    let op = Who::Token(&op);
    let no_retries =
        |name: &str| format!("{}\n[retry]\nmax_attempts = 1\n", local_spec(name, "exit 3", None));
    let acked = api.submit_new(Who::Owner, &no_retries("acked")).await;
    let retried = api.submit_new(Who::Owner, &no_retries("retried")).await;
    let open = api.submit_new(Who::Owner, &no_retries("open")).await;
    for id in [&acked, &retried, &open] {
        assert_eq!(api.wait_final(id).await["workload"]["state"], "failed");
    }
    let unresolved = async |api: &Api| -> Vec<String> {
        let page = api.get(Who::Owner, "/v1/workloads?unresolved=true").await.expect(200).json();
        page["workloads"].as_array().unwrap().iter().map(|v| id_of(&v["workload"])).collect()
    };
    let mut all = unresolved(&api).await;
    all.sort();
    let mut want = vec![acked.clone(), retried.clone(), open.clone()];
    want.sort();
    assert_eq!(all, want);

    // Acknowledging asks for nothing more than the reason, once.
    let path = format!("/v1/workloads/{acked}/acknowledge");
    api.call(op, "POST", &path, Body::Json(json!({"reason": "bad input file, fixed upstream"})))
        .await
        .expect(200);
    api.call(op, "POST", &path, Body::Json(json!({"reason": "again"}))).await.expect(200);
    let w = api.workload(&acked).await;
    assert_eq!(w["workload"]["acknowledged"]["by"], "op", "{w:#}");
    assert_eq!(w["workload"]["acknowledged"]["reason"], "bad input file, fixed upstream", "{w:#}");
    api.call(op, "POST", &format!("/v1/workloads/{retried}/retry"), Body::Empty).await.expect(200);
    assert_eq!(unresolved(&api).await, vec![open.clone()]);

    let audit = api.get(op, "/v1/audit?limit=100").await.expect(200).json();
    let ack = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "acknowledge")
        .unwrap_or_else(|| panic!("no audit record of the acknowledgement: {audit:#}"));
    assert_eq!((ack["principal"].as_str(), ack["target"].as_str()), (Some("op"), Some(acked.as_str())));
    let page = api.get(Who::Owner, "/v1/workloads?state=failed&limit=1").await.expect(200).json();
    assert_eq!(page["total"], 3, "the page says how many match: {page:#}");
    api.finish().await;
}

/// `unexclude` reaches the engine with who and why: a waiting workload's
/// record carries its exclusions (none here), clearing what it does not
/// exclude is a 409 that says so, and the audit trail has the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unexclude_answers_with_what_the_workload_excludes_and_is_audited() {
    let mut api = Api::start().await;
    let op = api.token("op", "operator", &[], None).await;
    let op = Who::Token(&op);
    let w = api.submit_new(Who::Owner, &queued_spec("waiting")).await;
    let view = api.workload(&w).await;
    assert_eq!(view["workload"]["exclusions"], json!({}), "{view:#}");
    let path = format!("/v1/workloads/{w}/unexclude");
    let body = Body::Json(json!({"node": "fra-h100-02", "reason": "cable replaced"}));
    for body in [body, Body::Empty] {
        let r = api.call(op, "POST", &path, body).await.expect(409);
        assert_eq!(r.json()["error"]["message"], format!("{w} excludes no node or pool; nothing to clear"));
    }
    let cancel = format!("/v1/workloads/{w}/cancel");
    let r = api.call(op, "POST", &cancel, Body::Json(json!({"node": "x"}))).await.expect(422);
    assert!(r.text.contains("node applies to an unexclude only"), "{}", r.text);
    let audit = api.get(op, "/v1/audit?limit=100").await.expect(200).json();
    let rec = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "unexclude" && a["reason"] == "cable replaced")
        .unwrap_or_else(|| panic!("no audit record of the unexclude: {audit:#}"));
    assert_eq!(rec["principal"], "op");
    assert_eq!(rec["target"], format!("{w} fra-h100-02"));
    api.finish().await;
}
