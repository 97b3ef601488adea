//! The local provider against real processes: argv, streams, exit codes,
//! secrets, terminate, idempotent launch, re-adoption and its identity
//! check, supervisor loss, containers, logs, inventory. Outputs and
//! inputs are in `local_outputs`.
//! Every wait is a bounded poll; nothing asserts on elapsed time.

mod local_provider_support;

use canopy::failure::ProviderEnd;
use canopy::providers::local::{ContainerPolicy, LocalProvider, ShimCommand, procfs};
use canopy::providers::{AttemptStatus, LaunchError, LogStream, Provider, SecretValue};
use local_provider_support::*;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[tokio::test]
async fn argv_is_passed_verbatim_and_streams_are_captured() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let tricky = ["a b", "it's", "say \"hi\"", "$HOME", "*", "back\\slash"];
    let mut argv = vec!["printf", "[%s]\\n"];
    argv.extend(tricky);
    let req = request(t.path(), 1, cmd(&argv));
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    let expected: String = tricky.iter().map(|a| format!("[{a}]\n")).collect();
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, expected);

    let req =
        request(t.path(), 2, cmd(&["sh", "-c", "echo to-err >&2; echo $CANOPY_ATTEMPT $CANOPY_WORKLOAD"]));
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "w-2.1 w-2\n");
    assert_eq!(log(&p, &req.token, LogStream::Stderr).await, "to-err\n");
}

/// A script written for a gang, or for SkyPilot or dstack, runs unchanged
/// on one node: it is rank 0 of 1 with its own master.
#[tokio::test]
async fn a_one_node_workload_sees_the_launcher_variables_as_rank_0_of_1() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script =
        "echo $NODE_RANK/$NNODES $SKYPILOT_NODE_RANK/$SKYPILOT_NUM_NODES $DSTACK_NODES_NUM $MASTER_ADDR";
    let req = request(t.path(), 3, cmd(&["sh", "-c", script]));
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "0/1 0/1 1 127.0.0.1\n");
}

#[tokio::test]
async fn exit_codes_and_signals_are_reported() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    assert_eq!(run(&p, &request(t.path(), 1, cmd(&["true"]))).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(run(&p, &request(t.path(), 2, cmd(&["false"]))).await, ProviderEnd::Exited { code: 1 });
    let killed = request(t.path(), 3, cmd(&["sh", "-c", "kill -9 $$"]));
    assert_eq!(run(&p, &killed).await, ProviderEnd::Signaled { signal: 9 });

    let missing = request(t.path(), 4, cmd(&["/no/such/program", "x"]));
    assert_eq!(run(&p, &missing).await, ProviderEnd::Exited { code: 127 });
    let err = log(&p, &missing.token, LogStream::Stderr).await;
    assert!(err.contains("cannot start \"/no/such/program\""), "{err}");
}

#[tokio::test]
async fn secrets_reach_the_workload_but_are_never_written() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let secret = "tok-9f8e7d6c5b4a-VERY-SECRET";
    let s = spec(json!({
        "runtime": {
            "command": ["sh", "-c", "printf %s \"$API_TOKEN\" | sha256sum; echo \"len=${#API_TOKEN}\" >&2"],
            "secrets": ["API_TOKEN"],
        },
    }));
    let mut req = request(t.path(), 1, s.clone());
    req.secrets = vec![("API_TOKEN".into(), SecretValue::new(secret))];
    assert!(!format!("{req:?}").contains(secret));
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    assert!(log(&p, &req.token, LogStream::Stdout).await.starts_with(&sha(secret.as_bytes())));
    assert_eq!(log(&p, &req.token, LogStream::Stderr).await, format!("len={}\n", secret.len()));

    let dir = p.attempt_dir(&req.token);
    let mut files = Vec::new();
    walk(&dir, &mut files);
    assert!(files.len() >= 6, "{files:?}");
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "secret found in {}",
            f.display()
        );
    }
    assert!(std::fs::read_to_string(dir.join("spec.json")).unwrap().contains("API_TOKEN"));

    // A named secret without a value is refused, by name.
    let unresolved = request(t.path(), 2, s);
    match p.launch(&unresolved).await {
        Err(LaunchError::Rejected(m)) => assert!(m.contains("API_TOKEN"), "{m}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// The supervisor reads the secrets on its stdin: while the workload runs,
/// only the workload holds the value in its environment, not the
/// supervisor, and no process shows it in its arguments.
#[tokio::test]
async fn only_the_workload_holds_a_secret_in_its_environment() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let secret = "tok-0a1b2c3d-ONLY-THE-WORKLOAD";
    let s = spec(json!({ "runtime": { "command": ["sleep", "30"], "secrets": ["API_TOKEN"] } }));
    let mut req = request(t.path(), 1, s);
    req.secrets = vec![("API_TOKEN".into(), SecretValue::new(secret))];
    p.launch(&req).await.unwrap();
    let pids: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.attempt_dir(&req.token).join("pid")).unwrap()).unwrap();
    let pid_of = |who: &str| pids[who]["pid"].as_i64().unwrap_or_else(|| panic!("{who} in {pids}"));
    let holds = |pid: i64, what: &str| {
        let bytes = std::fs::read(format!("/proc/{pid}/{what}")).unwrap();
        bytes.windows(secret.len()).any(|w| w == secret.as_bytes())
    };
    let (supervisor, workload) = (pid_of("supervisor"), pid_of("child"));
    assert!(holds(workload, "environ"), "the workload has the secret");
    assert!(!holds(supervisor, "environ"), "the supervisor's environment holds the secret");
    assert!(!holds(supervisor, "cmdline") && !holds(workload, "cmdline"));
    p.terminate(&req.token).await.unwrap();
}

#[tokio::test]
async fn terminate_kills_the_whole_process_group() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let req = request(t.path(), 1, cmd(&["sh", "-c", "sleep 1000 & echo $! > grandchild.pid; wait"]));
    p.launch(&req).await.unwrap();
    let pid_file = p.attempt_dir(&req.token).join("work/grandchild.pid");
    wait_for("the grandchild's pid", || std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n')))
        .await;
    let gpid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let gstart = procfs::stat(gpid).unwrap().start_time;
    assert!(running(gpid, gstart));
    assert_eq!(p.status(&req.token).await.unwrap(), AttemptStatus::Running);

    p.terminate(&req.token).await.unwrap();
    assert_eq!(
        p.status(&req.token).await.unwrap(),
        AttemptStatus::Ended(ProviderEnd::Signaled { signal: 15 })
    );
    wait_for("the grandchild to be gone", || !running(gpid, gstart)).await;
    // Already gone: succeeds again, and so does an unknown token.
    p.terminate(&req.token).await.unwrap();
    p.terminate("canopy-t3st-w99-a1").await.unwrap();
}

#[tokio::test]
async fn terminate_escalates_to_sigkill_after_the_grace_period() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let req = request(t.path(), 1, cmd(&["sh", "-c", "trap '' TERM; touch ready; sleep 1000"]));
    p.launch(&req).await.unwrap();
    let ready = p.attempt_dir(&req.token).join("work/ready");
    wait_for("the workload to ignore SIGTERM", || ready.exists()).await;
    p.terminate(&req.token).await.unwrap();
    assert_eq!(
        p.status(&req.token).await.unwrap(),
        AttemptStatus::Ended(ProviderEnd::Signaled { signal: 9 })
    );
}

#[tokio::test]
async fn launch_is_idempotent_concurrently_and_sequentially() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (provider(t.path()), provider(t.path()));
    let marker = t.path().join("marker");
    let script = format!("echo ran >> '{}'", marker.display());
    let req = request(t.path(), 1, cmd(&["sh", "-c", &script]));
    let acks = tokio::join!(a.launch(&req), b.launch(&req), a.launch(&req), b.launch(&req));
    let acks = [acks.0.unwrap(), acks.1.unwrap(), acks.2.unwrap(), acks.3.unwrap()];
    assert_eq!(acks.iter().filter(|a| !a.adopted).count(), 1, "{acks:?}");
    assert!(acks.iter().all(|x| x.provider_ref == acks[0].provider_ref), "{acks:?}");
    assert_eq!(wait_end(&a, &req.token).await, ProviderEnd::Exited { code: 0 });

    let again = b.launch(&req).await.unwrap();
    assert!(again.adopted);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    assert!(
        !t.path()
            .join("attempts")
            .read_dir()
            .unwrap()
            .any(|e| { e.unwrap().file_name().to_string_lossy().starts_with(".launching") })
    );
}

#[tokio::test]
async fn a_fresh_provider_re_adopts_running_attempts() {
    let t = tempfile::tempdir().unwrap();
    let req = request(t.path(), 1, cmd(&["sh", "-c", "sleep 2; echo done"]));
    {
        let p = provider(t.path());
        p.launch(&req).await.unwrap();
    }
    let p = provider(t.path());
    assert_eq!(p.status(&req.token).await.unwrap(), AttemptStatus::Running);
    let owned = p.list_owned(STORE).await.unwrap();
    assert_eq!((owned.len(), owned[0].running), (1, true), "{owned:?}");
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "done\n");
    assert!(p.launch(&req).await.unwrap().adopted);
}

/// Set only for the child process of the test below, which plays the
/// engine: it launches and exits.
const LAUNCHER_ROOT: &str = "CANOPY_TEST_LAUNCHER_ROOT";

#[tokio::test]
async fn launcher_process_for_the_outlives_test() {
    let Some(root) = std::env::var_os(LAUNCHER_ROOT).map(PathBuf::from) else { return };
    let req = request(&root, 1, cmd(&["sh", "-c", "sleep 2; echo survived"]));
    assert!(!provider(&root).launch(&req).await.unwrap().adopted);
}

#[tokio::test]
async fn a_workload_outlives_the_process_that_launched_it() {
    let t = tempfile::tempdir().unwrap();
    let launcher = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "launcher_process_for_the_outlives_test", "--test-threads=1", "-q"])
        .env(LAUNCHER_ROOT, t.path())
        .output()
        .unwrap();
    assert!(launcher.status.success(), "{}", String::from_utf8_lossy(&launcher.stdout));
    let p = provider(t.path());
    let req = request(t.path(), 1, cmd(&["unused"]));
    assert_eq!(p.status(&req.token).await.unwrap(), AttemptStatus::Running);
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "survived\n");
}

#[tokio::test]
async fn a_killed_supervisor_takes_its_workload_along_and_the_end_is_the_providers() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    // A leader with a background child in its group, as shells leave them.
    let req = request(t.path(), 1, cmd(&["sh", "-c", "sleep 1000 & echo $! > bg.pid; wait"]));
    p.launch(&req).await.unwrap();
    let bg_file = p.attempt_dir(&req.token).join("work/bg.pid");
    wait_for("the background pid", || std::fs::read_to_string(&bg_file).is_ok_and(|s| s.ends_with('\n')))
        .await;
    let bg: i32 = std::fs::read_to_string(&bg_file).unwrap().trim().parse().unwrap();
    let bg_start = procfs::stat(bg).unwrap().start_time;
    let pids: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.attempt_dir(&req.token).join("pid")).unwrap()).unwrap();
    let sup = pids["supervisor"]["pid"].as_i64().unwrap().to_string();
    let (child, child_start) =
        (pids["child"]["pid"].as_i64().unwrap() as i32, pids["child"]["start_time"].as_u64().unwrap());
    assert!(running(child, child_start) && running(bg, bg_start));
    assert!(std::process::Command::new("kill").args(["-9", &sup]).status().unwrap().success());

    // The leader dies with the supervisor, by itself (PR_SET_PDEATHSIG).
    wait_for("the workload's leader to die with its supervisor", || !running(child, child_start)).await;
    // The provider stops what is left in its group before reporting the end.
    let end = wait_end(&p, &req.token).await;
    assert_eq!(
        end,
        ProviderEnd::ApiError {
            message: "the supervisor of this attempt died without recording an end; its workload was stopped"
                .into()
        }
    );
    assert!(!running(bg, bg_start), "the background process of the old attempt still runs");
    let c = canopy::engine::classify::classify(&end, &[]);
    assert_eq!(c.class, canopy::failure::FailureClass::Provider, "{c:?}");
    assert!(!p.list_owned(STORE).await.unwrap()[0].running);
    p.terminate(&req.token).await.unwrap();
}

#[tokio::test]
async fn a_directory_holding_another_workloads_attempt_is_not_adopted() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let theirs = request(t.path(), 1, cmd(&["sleep", "1000"]));
    p.launch(&theirs).await.unwrap();
    let pids: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.attempt_dir(&theirs.token).join("pid")).unwrap()).unwrap();
    let (child, child_start) =
        (pids["child"]["pid"].as_i64().unwrap() as i32, pids["child"]["start_time"].as_u64().unwrap());

    // Same token, another spec: another store's attempt, or a recreated one.
    let mine = request(t.path(), 1, cmd(&["sh", "-c", "echo mine"]));
    assert_eq!(mine.token, theirs.token);
    match p.launch(&mine).await {
        Err(LaunchError::Rejected(m)) => {
            assert!(m.contains(&p.attempt_dir(&mine.token).display().to_string()), "{m}");
            assert!(m.contains("different workload's attempt"), "{m}");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    // Neither adopted nor signalled.
    assert!(running(child, child_start));
    assert_eq!(p.status(&theirs.token).await.unwrap(), AttemptStatus::Running);
    // The same spec still adopts.
    assert!(p.launch(&theirs).await.unwrap().adopted);
    p.terminate(&theirs.token).await.unwrap();
}

#[tokio::test]
async fn a_failed_or_hung_supervisor_start_is_reported_and_never_retried_under_the_same_token() {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(t.path());
    cfg.shim = ShimCommand { program: "false".into(), args: vec![] };
    let p = LocalProvider::new(cfg.clone());
    let req = request(t.path(), 1, cmd(&["true"]));
    match p.launch(&req).await {
        Err(LaunchError::Api(m)) => assert!(m.contains("supervisor.log"), "{m}"),
        other => panic!("expected an API error, got {other:?}"),
    }
    // Nothing ran and the machine is not to blame: a launch failure.
    let interrupted = ProviderEnd::LaunchRejected {
        message: "the launch was interrupted before the supervisor started".into(),
        capacity: false,
    };
    // Polled: processes other tests fork hold the launch lock until they exec.
    assert_eq!(wait_end(&p, &req.token).await, interrupted);
    assert!(p.launch(&req).await.unwrap().adopted);

    cfg.shim =
        ShimCommand { program: "sh".into(), args: vec!["-c".into(), "exec sleep 1000".into(), "sh".into()] };
    cfg.launch_timeout = Duration::from_millis(500);
    let p = LocalProvider::new(cfg);
    let req = request(t.path(), 2, cmd(&["true"]));
    assert_eq!(p.launch(&req).await, Err(LaunchError::Timeout));
    assert_eq!(wait_end(&p, &req.token).await, interrupted);
}

#[tokio::test]
async fn an_image_without_a_container_runtime_is_rejected() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let s = spec(json!({ "runtime": { "image": "python:3.12", "command": ["python", "-V"] } }));
    let req = request(t.path(), 1, s);
    match p.launch(&req).await {
        Err(LaunchError::Rejected(m)) => {
            assert!(m.contains("no container runtime (podman or docker)"), "{m}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(!p.attempt_dir(&req.token).exists());
}

#[tokio::test]
async fn an_image_runs_in_a_container_where_a_runtime_exists() {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(t.path());
    cfg.containers = ContainerPolicy::Detect;
    let p = LocalProvider::new(cfg);
    // Built offline by scripts/containers/setup.sh.
    let image = std::env::var("CANOPY_TEST_IMAGE").unwrap_or_else(|_| "localhost/canopy-test:latest".into());
    let usable = match p.container_engine().await {
        None => Err("no podman or docker engine here".to_string()),
        Some(engine) => container_runs(&engine.program, &image).await,
    };
    if let Err(why) = usable {
        // Set where containers must run (CI): a skip would hide a broken runtime.
        let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require")
            || std::env::var_os("CANOPY_TEST_REQUIRE_CONTAINERS").is_some();
        assert!(!require, "containers are required here but {why}; run scripts/containers/setup.sh");
        // Written to the terminal directly, past the test harness's capture,
        // so a skipped check is visible in every run.
        let _ =
            writeln!(std::io::stderr(), "SKIPPED an_image_runs_in_a_container_where_a_runtime_exists: {why}");
        return;
    }
    let s = spec(json!({
        "runtime": { "image": image, "command": ["sh", "-c", "echo hi > /outputs/x.txt; echo $CANOPY_ATTEMPT"] },
        "outputs": [{ "name": "x", "path": "/outputs/x.txt", "required": true }],
    }));
    let req = request(t.path(), 1, s.clone());
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "w-1.1\n");
    let arts = p.outputs(&req.token, &s, &t.path().join("store")).await.unwrap().artifacts;
    assert_eq!(arts[0].sha256, sha(b"hi\n"));
}

/// Whether `program run --rm IMAGE true` works here (pulling the image if
/// it must): an installed podman or docker may still be unable to run a
/// container (no daemon, no user namespaces, no image and no network).
/// The reason when it cannot.
async fn container_runs(program: &Path, image: &str) -> Result<(), String> {
    /// Room for a first pull of a small image.
    const PROBE: Duration = Duration::from_secs(120);
    let probe = tokio::process::Command::new(program)
        .args(["run", "--rm", image, "true"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let shown = format!("`{} run --rm {image} true`", program.display());
    match tokio::time::timeout(PROBE, probe).await {
        Err(_) => Err(format!("{shown} did not finish within {}s", PROBE.as_secs())),
        Ok(Err(e)) => Err(format!("{shown} could not start: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            Err(format!("{shown} failed ({}): {}", out.status, last.trim()))
        }
    }
}

#[tokio::test]
async fn logs_are_read_from_an_offset_and_bounded() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let req = request(t.path(), 1, cmd(&["printf", "abcdefghij"]));
    run(&p, &req).await;
    let chunk = p.logs(&req.token, LogStream::Stdout, 2, 3).await.unwrap();
    assert_eq!((chunk.data.as_slice(), chunk.next_offset), (&b"cde"[..], 5));
    let end = p.logs(&req.token, LogStream::Stdout, 10, 100).await.unwrap();
    assert_eq!((end.data.len(), end.next_offset), (0, 10));
    assert_eq!(p.logs(&req.token, LogStream::Stderr, 0, 100).await.unwrap().data, b"");
    assert!(p.logs("canopy-t3st-w9-a1", LogStream::Stdout, 0, 10).await.is_err());
    assert_eq!(p.status("canopy-t3st-w9-a1").await.unwrap(), AttemptStatus::NotFound);
}

#[tokio::test]
async fn list_owned_reports_only_this_stores_attempts() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let mine = [request(t.path(), 1, cmd(&["true"])), request(t.path(), 2, cmd(&["true"]))];
    let mut theirs = request(t.path(), 1, cmd(&["true"]));
    theirs.token = theirs.attempt.token("other", "");
    for r in mine.iter().chain([&theirs]) {
        run(&p, r).await;
    }
    let owned = p.list_owned(STORE).await.unwrap();
    let tokens: Vec<&str> = owned.iter().map(|o| o.token.as_str()).collect();
    assert_eq!(tokens, [mine[0].token.as_str(), mine[1].token.as_str()]);
    assert!(owned.iter().all(|o| !o.running && o.provider_ref.parse::<u32>().is_ok()));
}

#[tokio::test]
async fn inventory_describes_this_host_as_one_pool() {
    let t = tempfile::tempdir().unwrap();
    let inv = provider(t.path()).inventory().await.unwrap();
    assert_eq!(inv.pools.len(), 1);
    let pool = &inv.pools[0];
    assert_eq!((pool.def.name.as_str(), pool.def.price_per_hour), ("host", 0.0));
    assert!(
        pool.def.shape.cpu_cores >= 1.0 && pool.def.shape.memory_gb > 0.0 && pool.def.shape.disk_gb > 0.0
    );
    assert!(pool.def.capabilities.is_empty(), "containers are disabled in this test");
    assert_eq!(pool.nodes.len(), 1);
}
