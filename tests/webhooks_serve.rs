//! Webhooks end to end (issue 31): a real `canopy serve` calling a real
//! HTTP receiver on this host. The receiver is down at first, so the
//! first tries fail and are retried; the server is killed with `kill -9`
//! mid-retry and started again; then the receiver comes up and every
//! change of every workload arrives — signed with the shared secret, in
//! order per workload, duplicates under the same delivery id, none lost.
//! The workload's events tell of each try. A target on a cloud metadata
//! address is refused at submit.

mod serve_support;

use serve_support::{DEADLINE, Process, Serve};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "whsec-test-0123456789";

/// One request the receiver took.
#[derive(Debug, Clone)]
struct Got {
    headers: BTreeMap<String, String>,
    body: String,
}

/// A minimal HTTP/1.1 receiver: answers 200 to every POST and keeps what
/// it got.
fn receiver(listener: TcpListener) -> Arc<Mutex<Vec<Got>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut headers = BTreeMap::new();
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((k, v)) = line.trim_end().split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
            let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; len.min(1 << 20)];
            if r.read_exact(&mut body).is_err() {
                continue;
            }
            keep.lock().unwrap().push(Got { headers, body: String::from_utf8_lossy(&body).into_owned() });
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    got
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn spec(name: &str, port: u16) -> String {
    format!(
        "name = {name:?}\n[runtime]\ncommand = [\"sh\", \"-c\", \"sleep 2; echo {name}\"]\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n\
         [notify]\nwebhook = \"http://127.0.0.1:{port}/hooks/canopy?key=abc\"\n\
         events = [\"running\", \"succeeded\", \"failed\"]\n"
    )
}

fn events(serve: &Serve, id: &str) -> String {
    let out = serve.canopy(&["events", id]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One sample of the server's `/metrics`, read over its socket.
fn metric(serve: &Serve, series: &str) -> f64 {
    let mut c = std::os::unix::net::UnixStream::connect(serve.store.join("canopy.sock")).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nhost: canopy\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    let line = text.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '));
    line.unwrap_or_else(|| panic!("no {series} in:\n{text}")).rsplit_once(' ').unwrap().1.parse().unwrap()
}

const ENV: &[(&str, &str)] = &[("CANOPY_WEBHOOK_SECRET", SECRET)];

#[test]
fn every_change_arrives_signed_and_in_order_across_a_receiver_outage_and_a_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // A port nobody listens on yet: the receiver is down.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        tmp.path().join("canopy.toml"),
        "include_demo_fleet = false\n[webhooks]\nallow_http = true\nallow = [\"127.0.0.1/32\"]\n\
         first_retry = \"1s\"\nretry_for = \"10m\"\n",
    )
    .unwrap();
    let serve = Serve::start(&store, &[], Process { env: ENV, ..Process::default() });

    // A metadata address is refused at submit, with the reason.
    let meta = tmp.path().join("meta.toml");
    std::fs::write(&meta, spec("meta", port).replace(&format!("127.0.0.1:{port}"), "169.254.169.254"))
        .unwrap();
    let out = serve.canopy(&["submit", meta.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("metadata"), "{err}");

    let mut ids = Vec::new();
    for name in ["first", "second"] {
        let path = tmp.path().join(format!("{name}.toml"));
        std::fs::write(&path, spec(name, port)).unwrap();
        let out = serve.canopy(&["submit", path.to_str().unwrap(), "--wait"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        let id = text
            .split_whitespace()
            .find(|w| w.starts_with("w-"))
            .unwrap()
            .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-');
        ids.push(id.to_string());
    }
    // Tries fail while the receiver is down, and say so in the events.
    wait_for("a failed try in the events", || events(&serve, &ids[0]).contains("cannot connect"));
    let ev = events(&serve, &ids[0]);
    assert!(ev.contains("next try in") && ev.contains("http://127.0.0.1"), "{ev}");
    assert!(!ev.contains("delivered"), "still pending when the server dies: {ev}");
    assert!(
        !ev.contains("key=abc") && !ev.contains("/hooks"),
        "the URL's path and query are never shown: {ev}"
    );

    // The server dies mid-retry and comes back; then the receiver comes up.
    serve.kill9();
    let serve = Serve::start(&store, &[], Process { env: ENV, ..Process::default() });
    let got = receiver(TcpListener::bind(("127.0.0.1", port)).unwrap());
    let start = Instant::now();
    wait_for("four deliveries", || {
        if start.elapsed() > Duration::from_secs(50) {
            panic!(
                "got {:?}\n{}\n{}\n{}",
                got.lock().unwrap(),
                events(&serve, &ids[0]),
                events(&serve, &ids[1]),
                serve.stderr_text()
            );
        }
        let g = got.lock().unwrap();
        let ids: std::collections::BTreeSet<&str> =
            g.iter().filter_map(|x| x.headers.get("canopy-delivery").map(String::as_str)).collect();
        ids.len() >= 4
    });
    wait_for("the events to say delivered", || events(&serve, &ids[1]).contains("delivered"));
    let got = got.lock().unwrap().clone();

    // Signed under the shared secret, over the exact bytes received.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    for g in &got {
        let sig = &g.headers["canopy-signature"];
        canopy::notify::signature::verify(sig, SECRET.as_bytes(), g.body.as_bytes(), now, 300)
            .unwrap_or_else(|e| panic!("{e}: {g:?}"));
        assert!(
            canopy::notify::signature::verify(sig, b"another secret", g.body.as_bytes(), now, 300).is_err()
        );
        assert_eq!(g.headers["content-type"], "application/json");
    }
    // Per workload: running, then succeeded; each delivery id always with
    // the same body (a duplicate is recognisable), and no change missing.
    let mut by_id: BTreeMap<String, String> = BTreeMap::new();
    for g in &got {
        let prev = by_id.insert(g.headers["canopy-delivery"].clone(), g.body.clone());
        assert!(prev.is_none_or(|p| p == g.body), "a duplicate under the same id carries the same body");
    }
    for w in &ids {
        let seq: Vec<String> = got
            .iter()
            .map(|g| serde_json::from_str::<serde_json::Value>(&g.body).unwrap())
            .filter(|b| b["workload"]["id"] == w.as_str())
            .map(|b| b["event"].as_str().unwrap().to_string())
            .collect();
        let mut distinct = seq.clone();
        distinct.dedup();
        assert_eq!(distinct, vec!["running", "succeeded"], "{w}: {seq:?}");
        let header_events: Vec<&str> = got
            .iter()
            .filter(|g| g.body.contains(&format!("\"id\":\"{w}\"")))
            .map(|g| g.headers["canopy-event"].as_str())
            .collect();
        assert!(header_events.first() == Some(&"running"), "{header_events:?}");
    }
    let ev = events(&serve, &ids[1]);
    assert!(ev.contains("(succeeded) to http://127.0.0.1") && ev.contains("delivered (HTTP 200)"), "{ev}");
    // What an operator's dashboard reads.
    wait_for("nothing pending", || metric(&serve, "canopy_webhook_deliveries_pending") == 0.0);
    assert!(metric(&serve, "canopy_webhook_tries_total{outcome=\"delivered\"}") >= 4.0);
    serve.stop();
}

/// A receiver that takes connections and never answers: each try ends at
/// the configured timeout, no more than `max_in_flight` are ever open at
/// once, and workloads go on being placed and finishing meanwhile.
#[test]
fn a_receiver_that_never_answers_holds_open_at_most_max_in_flight_and_stops_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Counts connections open at once; holds each until the peer closes it.
    let open = Arc::new(Mutex::new((0usize, 0usize, 0usize))); // (now, most, total)
    let count = open.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            {
                let mut o = count.lock().unwrap();
                o.0 += 1;
                o.1 = o.1.max(o.0);
                o.2 += 1;
            }
            let count = count.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
                count.lock().unwrap().0 -= 1;
            });
        }
    });
    std::fs::write(
        tmp.path().join("canopy.toml"),
        "include_demo_fleet = false\n[webhooks]\nallow_http = true\nallow = [\"127.0.0.1/32\"]\n\
         max_in_flight = 1\ntimeout = \"1s\"\nfirst_retry = \"1s\"\n",
    )
    .unwrap();
    let serve = Serve::start(&store, &[], Process { env: ENV, ..Process::default() });
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        let path = tmp.path().join(format!("{name}.toml"));
        std::fs::write(&path, spec(name, port)).unwrap();
        let out = serve.canopy(&["submit", path.to_str().unwrap(), "--wait"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "placed and finished while the receiver hangs: {text}");
        ids.push(
            text.split_whitespace().find(|w| w.starts_with("w-")).unwrap().trim_end_matches(':').to_string(),
        );
    }
    wait_for("three tries", || open.lock().unwrap().2 >= 3);
    let ev = events(&serve, &ids[0]);
    assert!(ev.contains("no answer within 1 s"), "{ev}");
    let (_, most, _) = *open.lock().unwrap();
    assert_eq!(most, 1, "at most max_in_flight connections at once");
    assert!(metric(&serve, "canopy_webhook_deliveries_pending") >= 1.0);
    assert!(metric(&serve, "canopy_webhook_deliveries_in_flight") <= 1.0);
    assert!(metric(&serve, "canopy_webhook_tries_total{outcome=\"failed\"}") >= 1.0);
    serve.stop();
}
