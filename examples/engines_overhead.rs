//! What Canopy costs on the path users take, against the engines driven
//! directly, in one run: N trivial jobs (`true`, one CPU)
//!
//! - **through Canopy**: a real `canopy serve` (the binary, a fresh store,
//!   a `canopy.toml` naming only that engine), every job submitted through
//!   the HTTP API on the store's socket, then polled through the API until
//!   every workload has ended;
//! - **direct**: straight to slurmrestd (`POST .../job/submit`) or to the
//!   Ray Jobs API, throttled to the concurrency Canopy reached in the
//!   round before it (the most workloads launching or running at once;
//!   unthrottled, Ray loses jobs to supervisor-start timeouts), polled
//!   every 100 ms.
//!
//! Rounds alternate (Canopy, direct, Canopy, direct, …) so drift in the
//! engines is shared. Reported: wall time from the first submit until all
//! have ended, per round, and the ratio of the medians. Target ≤ 1.1×.
//!
//! Needs the engines of `scripts/engines/start.sh` and a release build:
//! `cargo run --release --example engines_overhead -- [N] [ROUNDS] [slurm|ray|both]`
//! (uses target/release/canopy; set CANOPY_BIN to use another).

use canopy::client::{Client, Target};
use canopy::providers::SecretValue;
use canopy::providers::slurm::map;
use canopy::providers::slurm::v0038::{Api, JobProperties};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// One trivial job, held to `provider` (else Canopy would run some on
/// this host, which is faster than either engine).
fn spec(provider: &str) -> String {
    format!(
        "name = \"overhead\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ncpu_cores = 1\nmemory_gb = 0.1\n\
         [constraints]\nproviders = [\"{provider}\"]\n"
    )
}

struct Engines {
    dir: String,
    slurm_url: String,
    ray_url: String,
    jwt: String,
}

fn bin() -> PathBuf {
    std::env::var_os("CANOPY_BIN").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        exe.parent().and_then(|p| p.parent()).map(|p| p.join("canopy")).unwrap_or_else(|| "canopy".into())
    })
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(100), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let which = args.next().unwrap_or_else(|| "both".into());
    let dir = std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into());
    let e = Engines {
        slurm_url: std::env::var("CANOPY_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into()),
        ray_url: std::env::var("CANOPY_RAY_URL").unwrap_or_else(|_| "http://127.0.0.1:8265".into()),
        jwt: std::fs::read_to_string(format!("{dir}/slurm/rest/root.jwt"))
            .unwrap_or_default()
            .trim()
            .to_string(),
        dir,
    };
    for engine in ["slurm", "ray"] {
        if which != "both" && which != engine {
            continue;
        }
        let (mut direct, mut canopy) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Canopy first: the direct run then keeps as many jobs in
            // flight as Canopy did at its peak.
            let (c, peak) = through_canopy(&e, engine, n).await?;
            let d = match engine {
                "slurm" => slurm_direct(&e, n, peak, round).await?,
                _ => ray_direct(&e, n, peak, round).await?,
            };
            eprintln!(
                "{engine} round {}: through Canopy {c:.2?} (at most {peak} in flight), direct at {peak} {d:.2?}",
                round + 1
            );
            direct.push(d);
            canopy.push(c);
        }
        let (d, c) = (median(&mut direct), median(&mut canopy));
        eprintln!(
            "{engine}: {n} trivial jobs, median of {rounds}: direct {d:.2?}, through Canopy's API {c:.2?}: {:.2}x (target <= 1.1x)",
            c.as_secs_f64() / d.as_secs_f64()
        );
    }
    Ok(())
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// N jobs straight to slurmrestd, at most `c` unfinished at a time.
async fn slurm_direct(e: &Engines, n: usize, c: usize, round: usize) -> Res<Duration> {
    let api = Api::new(reqwest::Client::new(), &e.slurm_url, "root", SecretValue::new(e.jwt.clone()));
    let run = format!("overhead{}-{round}", std::process::id());
    let jobs_dir = PathBuf::from(format!("{}/jobs", e.dir));
    let t0 = Instant::now();
    let (mut ids, mut done) = (Vec::new(), 0usize);
    while done < n {
        while ids.len() < n && ids.len() - done < c {
            let i = ids.len();
            let d = jobs_dir.join(format!("{run}-{i}"));
            std::fs::create_dir_all(&d)?;
            let props = JobProperties {
                name: format!("{run}-{i}"),
                comment: String::new(),
                partition: None,
                current_working_directory: d.display().to_string(),
                standard_output: d.join("stdout.log").display().to_string(),
                standard_error: d.join("stderr.log").display().to_string(),
                environment: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
                gres: None,
                time_limit: None,
                nodes: 1,
                cpus_per_task: 1,
                memory_per_node: Some(100),
                constraints: None,
                ..JobProperties::default()
            };
            ids.push(api.submit("#!/bin/sh\nexec true\n", &props).await?);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let jobs = api.jobs().await.map_err(|e| e.to_string())?;
        done = jobs.iter().filter(|j| ids.contains(&j.job_id) && map::is_final(&j.job_state)).count();
        if t0.elapsed() > Duration::from_secs(900) {
            return Err(format!("slurm: only {done} of {n} ended").into());
        }
    }
    Ok(t0.elapsed())
}

/// N jobs straight to the Ray Jobs API, at most `c` unfinished at a time.
async fn ray_direct(e: &Engines, n: usize, c: usize, round: usize) -> Res<Duration> {
    let http = reqwest::Client::new();
    let run = format!("overhead{}-{round}", std::process::id());
    let t0 = Instant::now();
    let (mut submitted, mut live, mut done) = (0usize, Vec::<String>::new(), 0usize);
    while done < n {
        while submitted < n && live.len() < c {
            let id = format!("{run}-{submitted}");
            let body =
                serde_json::json!({ "entrypoint": "true", "submission_id": id, "entrypoint_num_cpus": 1 });
            let r = http.post(format!("{}/api/jobs/", e.ray_url)).json(&body).send().await?;
            if !r.status().is_success() {
                return Err(format!("ray refused {id}: {}", r.text().await?).into());
            }
            live.push(id);
            submitted += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut still = Vec::new();
        for id in live {
            let j: serde_json::Value =
                http.get(format!("{}/api/jobs/{id}", e.ray_url)).send().await?.json().await?;
            match j["status"].as_str() {
                Some("SUCCEEDED") => done += 1,
                Some("FAILED" | "STOPPED") => return Err(format!("ray job {id} ended {j}").into()),
                _ => still.push(id),
            }
        }
        live = still;
        if t0.elapsed() > Duration::from_secs(900) {
            return Err(format!("ray: only {done} of {n} ended").into());
        }
    }
    Ok(t0.elapsed())
}

/// Stops the server when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        let _ = self.0.wait();
    }
}

fn serve(store: &Path, config: &Path, e: &Engines) -> Res<Server> {
    Ok(Server(
        Command::new(bin())
            .arg("--store")
            .arg(store)
            .arg("--config")
            .arg(config)
            .arg("serve")
            .env("CANOPY_SLURM_JWT", &e.jwt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    ))
}

/// N jobs through a fresh `canopy serve`'s API; the clock starts at the
/// first submit, once the server answers and has the engine's inventory.
/// Also how many were at the engine at once, at most (placing, launching
/// or running, as the API said at each poll).
async fn through_canopy(e: &Engines, engine: &str, n: usize) -> Res<(Duration, usize)> {
    let dir = tempfile::tempdir()?;
    let store = dir.path().join("store");
    let config = dir.path().join("canopy.toml");
    let jobs_dir = format!("{}/jobs", e.dir);
    let toml = match engine {
        "slurm" => format!(
            "include_demo_fleet = false\n[[slurm]]\nurl = {:?}\ntoken_env = \"CANOPY_SLURM_JWT\"\njobs_dir = {jobs_dir:?}\n",
            e.slurm_url
        ),
        _ => format!("include_demo_fleet = false\n[[ray]]\nurl = {:?}\njobs_dir = {jobs_dir:?}\n", e.ray_url),
    };
    std::fs::write(&config, toml)?;
    let _server = serve(&store, &config, e)?;
    let client = Client::new(Target::Socket(store.join("canopy.sock")))?;
    let t = Instant::now();
    loop {
        let ready = match client.get::<serde_json::Value>("/v1/fleet").await {
            Ok(f) => f.to_string().contains(&format!("\"{engine}")),
            Err(_) => false,
        };
        if ready {
            break;
        }
        if t.elapsed() > Duration::from_secs(60) {
            return Err(format!("canopy serve never listed {engine}'s inventory").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t0 = Instant::now();
    let spec = spec(engine);
    for i in 0..n {
        client.submit(&spec, false, &format!("overhead-{i}"), None).await?;
    }
    let mut peak = 1;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let open = client.workloads("state=queued,placing,launching,running&limit=1000").await?;
        if open.workloads.is_empty() {
            break;
        }
        let at_engine = open
            .workloads
            .iter()
            .filter(|v| matches!(v.workload.state.as_str(), "placing" | "launching" | "running"))
            .count();
        peak = peak.max(at_engine);
        if t0.elapsed() > Duration::from_secs(900) {
            return Err(format!("{engine}: {} of {n} still open", open.workloads.len()).into());
        }
    }
    let elapsed = t0.elapsed();
    let failed = client.workloads("state=failed,cancelled&limit=1000").await?;
    if !failed.workloads.is_empty() {
        return Err(
            format!("{engine}: {} of {n} did not succeed through Canopy", failed.workloads.len()).into()
        );
    }
    Ok((elapsed, peak))
}
