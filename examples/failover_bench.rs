//! Failover time on a PostgreSQL journal (issue 33): three `canopy serve`
//! processes on one database, each on its own home and loopback port;
//! round after round the leader is killed with `kill -9`, and the time
//! from the kill to the first placement of a workload submitted just
//! after it is measured. The submit goes to the two survivors through the
//! CLI's own client with both listed (`CANOPY_SERVER=a,b`): a standby with
//! no leader answers 503 and the client goes round until the new leader
//! takes it. The killed server then comes back on its home and port and
//! stands by for the next round.
//!
//! ```sh
//! eval "$(scripts/engines/postgres.sh start)"
//! PGPASSWORD=$CANOPY_TEST_POSTGRES_PASSWORD psql -h 127.0.0.1 -p 55432 -U canopy -d postgres -c 'CREATE DATABASE failover'
//! CANOPY_BENCH_JOURNAL=postgres://canopy@127.0.0.1:55432/failover \
//!   CANOPY_BENCH_JOURNAL_PASSWORD=$CANOPY_TEST_POSTGRES_PASSWORD \
//!   cargo run --release --example failover_bench -- 20 15s
//! ```
//!
//! Arguments: rounds (default 20) and the lease term (default 15s, the
//! default of `[journal] lease_term`). At the end every acknowledged submit
//! is looked up: each must exist once (the bench fails otherwise).

use canopy::client::{Client, Target};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A workload the demo fleet's simulated providers place at once.
const SPEC: &str = "name = \"failover\"\n\n[runtime]\ncommand = [\"true\"]\n\n\
                    [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\ngpus = 1\n";

type Error = Box<dyn std::error::Error>;

fn bin() -> PathBuf {
    std::env::var_os("CANOPY_BIN").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        exe.parent().and_then(|p| p.parent()).map(|p| p.join("canopy")).unwrap_or_else(|| "canopy".into())
    })
}

/// One server: its home, port and process (killed when dropped).
struct Server {
    home: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Server {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) -> Result<(), Error> {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.home.join("serve.stderr"))?;
        let child = Command::new(bin())
            .arg("--store")
            .arg(&self.home)
            .args(["serve", "--no-faults", "--listen", &format!("127.0.0.1:{}", self.port)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn client(urls: &[String], token: &str) -> Result<Client, Error> {
    Ok(Client::new(Target::Url { base: urls.join(","), token: Some(token.to_string()) })?)
}

/// The leader's address as `GET /v1/servers` names it, asked of `c`.
async fn leader(c: &Client) -> Option<String> {
    let v: serde_json::Value = c.get("/v1/servers").await.ok()?;
    v["leader_address"].as_str().filter(|a| !a.is_empty()).map(str::to_string)
}

/// How many servers `/v1/servers` shows as standbys.
async fn standbys(c: &Client) -> usize {
    let Ok(v) = c.get::<serde_json::Value>("/v1/servers").await else { return 0 };
    v["servers"].as_array().map_or(0, |s| s.iter().filter(|e| e["role"] == "standby").count())
}

fn token(home: &Path) -> Result<String, Error> {
    let out = Command::new(bin())
        .arg("--store")
        .arg(home)
        .args(["token", "create", "--name", "bench", "--role", "admin"])
        .output()?;
    if !out.status.success() {
        return Err(format!("token create: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().trim().to_string())
}

async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut ok: impl FnMut() -> F,
) -> Result<(), Error> {
    let t0 = Instant::now();
    while !ok().await {
        if t0.elapsed() > Duration::from_secs(120) {
            return Err(format!("gave up waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(20), |s| s.parse())?;
    let term = std::env::args().nth(2).unwrap_or_else(|| "15s".into());
    let url = std::env::var("CANOPY_BENCH_JOURNAL").map_err(
        |_| "set CANOPY_BENCH_JOURNAL=postgres://… (an empty database) and CANOPY_BENCH_JOURNAL_PASSWORD",
    )?;
    let dir = tempfile::tempdir()?;
    let config = format!(
        "include_demo_fleet = true\n\n[journal]\nurl = {url:?}\npassword_env = \"CANOPY_BENCH_JOURNAL_PASSWORD\"\n\
         lease_term = {term:?}\n"
    );
    let mut servers = Vec::new();
    for name in ["a", "b", "c"] {
        let home = dir.path().join(name);
        std::fs::create_dir_all(&home)?;
        std::fs::write(home.join("canopy.toml"), &config)?;
        servers.push(Server { home, port: free_port()?, child: None });
    }
    servers[0].start()?;
    let socket = Client::for_store(&servers[0].home)?;
    wait_until("the first server to lead", || async {
        socket.get::<serde_json::Value>("/healthz").await.is_ok()
    })
    .await?;
    let token = token(&servers[0].home)?;
    for s in &mut servers[1..] {
        s.start()?;
    }
    let all: Vec<String> = servers.iter().map(Server::url).collect();
    let everyone = client(&all, &token)?;
    wait_until("two standbys", || async { standbys(&everyone).await == 2 }).await?;
    println!("3 servers on one journal ({url}), lease term {term}; {rounds} rounds of kill -9 of the leader");

    let mut acknowledged = BTreeSet::new();
    let mut times = Vec::new();
    for round in 1..=rounds {
        let Some(addr) = leader(&everyone).await else { return Err("no leader".into()) };
        let Some(k) = servers.iter().position(|s| s.url() == addr) else {
            return Err(format!("the leader {addr} is none of ours").into());
        };
        let survivors: Vec<String> = servers.iter().filter(|s| s.url() != addr).map(Server::url).collect();
        let them = client(&survivors, &token)?;
        servers[k].kill9();
        let t0 = Instant::now();
        let key = format!("failover-{round}");
        let v = them.submit(SPEC, false, &key, None).await?;
        let id = v.workload.id;
        let acked = t0.elapsed().as_secs_f64();
        acknowledged.insert(id);
        loop {
            let w = them.workload(id).await?;
            if !w.attempts.is_empty() {
                break;
            }
            if t0.elapsed() > Duration::from_secs(180) {
                return Err(format!("{id} was not placed within 180 s of the kill").into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let placed = t0.elapsed().as_secs_f64();
        times.push(placed);
        println!(
            "round {round:>2}: killed {addr}; submit acknowledged after {acked:.2} s, {id} placed after {placed:.2} s"
        );
        servers[k].start()?;
        wait_until("the killed server to stand by", || async { standbys(&everyone).await == 2 }).await?;
    }

    // Every acknowledged submit is there, once.
    let mut seen = BTreeSet::new();
    for v in everyone.all_pages("name=failover").await? {
        if !seen.insert(v.workload.id) {
            return Err(format!("{} listed twice", v.workload.id).into());
        }
    }
    let missing: Vec<_> = acknowledged.difference(&seen).collect();
    if !missing.is_empty() {
        return Err(format!("acknowledged but missing: {missing:?}").into());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "failover, kill -9 -> first new placement, over {} rounds: p50 {:.2} s, p99 {:.2} s, min {:.2} s, max {:.2} s; \
         {} acknowledged submits, each there once",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times[0],
        times[times.len() - 1],
        acknowledged.len()
    );
    Ok(())
}
