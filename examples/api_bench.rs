//! The service's speed as users meet it, in one run against a real
//! `canopy serve` (the binary, in a fresh temporary store):
//!
//! 1. API submit throughput over the store's socket with C concurrent
//!    clients (default 4), each submitting one after another with an
//!    Idempotency-Key, then with each client keeping K requests in flight
//!    (default 8; an application submitting asynchronously). Every 201 is
//!    an fsync'd journal commit (group commit). The workloads
//!    (`examples/api_bench.toml`) ask for 64 GPUs, which nothing in the
//!    demo fleet has, and to wait for capacity, so they queue: this
//!    measures the API and the journal, not the simulated providers.
//! 2. `canopy submit` round trip through the CLI (a process per submit,
//!    as a user runs it), p50 and p95 of N.
//! 3. The server's CPU while idle with the store full, with no client and
//!    with two event-stream clients attached (what two consoles cost),
//!    over 10 s each.
//!
//! `cargo run --release --example api_bench -- [SECONDS] [CLIENTS] [IN_FLIGHT]`
//! (builds use target/release/canopy; set CANOPY_BIN to use another).
//! With `CANOPY_BENCH_JOURNAL=postgres://…` the server's journal is that
//! (empty) PostgreSQL database instead of the store's SQLite file, its
//! password read from `CANOPY_BENCH_JOURNAL_PASSWORD`: the same run on
//! both stores, side by side (issue 33).

use canopy::client::{Client, Target};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What every submit sends (a test submits the same file).
const SPEC: &str = include_str!("api_bench.toml");

fn bin() -> PathBuf {
    std::env::var_os("CANOPY_BIN").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        // target/release/examples/api_bench → target/release/canopy
        exe.parent().and_then(|p| p.parent()).map(|p| p.join("canopy")).unwrap_or_else(|| "canopy".into())
    })
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

/// Journal commits so far and the seconds they took, from `/metrics`.
async fn commits(client: &Client) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let resp = client.open_stream("/metrics", None).await?;
    let text = resp.text().await?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
            .unwrap_or(0.0)
    };
    Ok((value("canopy_journal_write_seconds_count "), value("canopy_journal_write_seconds_sum ")))
}

/// Submits from `clients` clients with `k` requests in flight each for
/// `secs` seconds; returns how many were acknowledged.
async fn submit_for(
    client: &Client,
    clients: usize,
    k: usize,
    secs: u64,
    base: u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for c in 0..clients * k {
        let (client, done) = (client.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < deadline {
                let key = format!("bench-{base}-{c}-{i}");
                client.submit(SPEC, false, &key, None).await.map_err(|e| e.to_string())?;
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: u64 = std::env::args().nth(1).map_or(Ok(10), |s| s.parse())?;
    let clients: usize = std::env::args().nth(2).map_or(Ok(4), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    if let Ok(url) = std::env::var("CANOPY_BENCH_JOURNAL") {
        std::fs::create_dir_all(&store)?;
        let config = format!("[journal]\nurl = {url:?}\npassword_env = \"CANOPY_BENCH_JOURNAL_PASSWORD\"\n");
        std::fs::write(store.join("canopy.toml"), config)?;
        println!("journal: {url}");
    }
    let mut server = Command::new(bin())
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let socket = store.join("canopy.sock");
    let client = Client::new(Target::Socket(socket.clone()))?;
    let t0 = Instant::now();
    while client.get::<serde_json::Value>("/healthz").await.is_err() {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err("the server did not start".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // 1. Throughput: one request in flight per client, then K.
    let in_flight: usize = std::env::args().nth(3).map_or(Ok(8), |s| s.parse())?;
    let mut n = 0;
    for k in [1, in_flight] {
        let (c0, s0) = commits(&client).await?;
        let (srv0, me0) = (cpu_ticks(server.id()), cpu_ticks(std::process::id()));
        let done = submit_for(&client, clients, k, secs, n).await?;
        let (srv1, me1) = (cpu_ticks(server.id()), cpu_ticks(std::process::id()));
        let (c1, s1) = commits(&client).await?;
        let rate = done as f64 / secs as f64;
        let batches = (c1 - c0).max(1.0);
        println!(
            "API submit over the socket, {clients} clients x {k} in flight: {done} workloads in {secs} s = {rate:.0}/s \
             (each acknowledged after an fsync'd commit; {:.1} per commit, commits took {:.2} ms on average)",
            done as f64 / batches,
            1e3 * (s1 - s0) / batches
        );
        println!(
            "  CPU: server {:.0} µs per workload ({:.0} % of a core), these clients {:.0} µs per workload",
            1e4 * (srv1 - srv0) as f64 / done as f64,
            (srv1 - srv0) as f64 / secs as f64,
            1e4 * (me1 - me0) as f64 / done as f64
        );
        n += done;
    }

    // 2. CLI round trip.
    let spec_path = dir.path().join("bench.toml");
    std::fs::write(&spec_path, SPEC)?;
    let mut times = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let out = Command::new(bin()).arg("--store").arg(&store).arg("submit").arg(&spec_path).output()?;
        times.push(t.elapsed());
        if !out.status.success() {
            return Err(format!("canopy submit failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
    }
    times.sort();
    println!(
        "CLI `canopy submit` round trip: p50 {:.1} ms, p95 {:.1} ms (50 runs, a process each)",
        times[25].as_secs_f64() * 1e3,
        times[47].as_secs_f64() * 1e3
    );

    // 3. Idle CPU, alone and with two stream clients attached.
    let mut streams = Vec::new();
    for attached in [0, 2] {
        while streams.len() < attached {
            streams.push(client.open_stream("/v1/stream", None).await?);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let tick = 100.0; // USER_HZ on Linux
        let (c0, t0) = (cpu_ticks(server.id()), Instant::now());
        tokio::time::sleep(Duration::from_secs(10)).await;
        let used = (cpu_ticks(server.id()) - c0) as f64 / tick;
        println!(
            "server idle with {} workloads and {attached} stream clients: {:.2} % of a core over {:.0} s",
            n + 50,
            100.0 * used / t0.elapsed().as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
    }
    drop(streams);
    // SAFETY: kill only signals the server we started.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let _ = server.wait();
    Ok(())
}
