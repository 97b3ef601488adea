//! Overhead of Canopy's Slurm adapter against slurmrestd itself, in one
//! run: N trivial jobs (`true`) submitted straight to slurmrestd, then N
//! through `SlurmProvider::launch` (token look-up + submit), each batch
//! waited on until every job has ended. Target: Canopy ≤ 1.2× direct for
//! submit-to-all-ended; the submit-only ratio is printed too.
//!
//! Needs the engines of `scripts/engines/start.sh`:
//! `cargo run --release --example slurm_overhead -- [N]`

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::providers::slurm::v0038::{Api, JobProperties};
use canopy::providers::slurm::{SlurmConfig, SlurmProvider, map};
use canopy::providers::{LaunchRequest, Provider, SecretValue};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(100), |s| s.parse())?;
    let dir = std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into());
    let url = std::env::var("CANOPY_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into());
    let jwt = std::fs::read_to_string(format!("{dir}/slurm/rest/root.jwt"))?.trim().to_string();
    let jobs_dir = std::path::PathBuf::from(format!("{dir}/jobs"));
    let run = format!("bench{}", std::process::id());

    let api = Api::new(reqwest::Client::new(), &url, "root", SecretValue::new(jwt.clone()));
    let t0 = Instant::now();
    let mut direct_ids = Vec::new();
    for i in 0..n {
        let d = jobs_dir.join(format!("{run}-direct-{i}"));
        std::fs::create_dir_all(&d)?;
        let mut env = BTreeMap::new();
        env.insert("PATH".to_string(), "/usr/bin:/bin".to_string());
        let props = JobProperties {
            name: format!("{run}-direct-{i}"),
            comment: String::new(),
            partition: None,
            current_working_directory: d.display().to_string(),
            standard_output: d.join("stdout.log").display().to_string(),
            standard_error: d.join("stderr.log").display().to_string(),
            environment: env,
            gres: None,
            time_limit: None,
            nodes: 1,
            cpus_per_task: 1,
            memory_per_node: None,
            constraints: None,
        };
        direct_ids.push(api.submit("#!/bin/sh\nexec true\n", &props).await?);
    }
    let direct_submit = t0.elapsed();
    wait_all(&api, &direct_ids).await?;
    let direct_total = t0.elapsed();

    let cfg = SlurmConfig {
        name: "slurm".into(),
        url: url.clone(),
        user: "root".into(),
        token: SecretValue::new(jwt),
        jobs_dir,
        lend_limit_gpus: None,
        startup_limit: Duration::from_secs(600),
        pin_by_feature: false,
        pools: map::PoolSettings::default(),
        request_timeout: Duration::from_secs(30),
        outputs: Default::default(),
    };
    let p = SlurmProvider::new(cfg)?;
    let spec: canopy::spec::Spec =
        serde_json::from_value(serde_json::json!({ "name": "bench", "runtime": { "command": ["true"] } }))?;
    let spec = Arc::new(spec);
    let t1 = Instant::now();
    let mut canopy_ids = Vec::new();
    for i in 0..n {
        let attempt = AttemptId { workload: WorkloadId(i as u64 + 1), n: 1 };
        let req = LaunchRequest {
            attempt,
            token: attempt.token(&run, ""),
            spec: spec.clone(),
            pool: "debug".into(),
            node: "n1".into(),
            secrets: Vec::new(),
            artifact_dir: std::env::temp_dir(),
        };
        canopy_ids.push(p.launch(&req).await?.provider_ref.parse::<u64>()?);
    }
    let canopy_submit = t1.elapsed();
    wait_all(&api, &canopy_ids).await?;
    let canopy_total = t1.elapsed();

    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    eprintln!("{n} trivial jobs");
    eprintln!("  direct slurmrestd: submit {direct_submit:.2?}, all ended {direct_total:.2?}");
    eprintln!("  through Canopy:    submit {canopy_submit:.2?}, all ended {canopy_total:.2?}");
    eprintln!(
        "  overhead: submit {:.2}x, submit-to-all-ended {:.2}x (target <= 1.2x)",
        ratio(canopy_submit, direct_submit),
        ratio(canopy_total, direct_total)
    );
    Ok(())
}

async fn wait_all(api: &Api, ids: &[u64]) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let jobs = api.jobs().await.map_err(|e| e.to_string())?;
        let done = jobs.iter().filter(|j| ids.contains(&j.job_id) && map::is_final(&j.job_state)).count();
        if done == ids.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {done} of {} jobs ended", ids.len()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
