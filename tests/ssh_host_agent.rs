//! `canopy __host`, the host side of the ssh provider, driven directly as
//! the ssh provider drives it (one JSON request on stdin per call), with
//! no sshd in between: a lost reply must never lose what it answered.

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::providers::ssh::protocol::{Launch, Request};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const STORE: &str = "agenttest";

/// `canopy __host` for this test's store, as the owner whose home is `home`.
fn agent(home: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["__host", "--store", STORE])
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One call's exit status and standard output.
fn call_raw(home: &Path, req: &Request) -> (bool, Vec<u8>) {
    let mut child = agent(home);
    child.stdin.take().unwrap().write_all(&serde_json::to_vec(req).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), out.stdout)
}

/// One call with `payload` on stdin after the request line, as the
/// provider sends a checkpoint.
fn call_with(home: &Path, req: &Request, payload: &[u8]) -> (bool, Vec<u8>, String) {
    let mut child = agent(home);
    let mut stdin = child.stdin.take().unwrap();
    let mut line = serde_json::to_vec(req).unwrap();
    line.push(b'\n');
    stdin.write_all(&line).unwrap();
    // A refusal answers before reading the rest.
    let _ = stdin.write_all(payload);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The reply's `ok` value, or the error it answered.
fn reply(stdout: &[u8]) -> Result<Value, String> {
    let reply: Value =
        serde_json::from_slice(stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)));
    match (reply.get("ok"), reply.get("error")) {
        (Some(v), _) => Ok(v.clone()),
        (_, Some(e)) => Err(e.to_string()),
        _ => panic!("{reply}"),
    }
}

/// One call: the reply's `ok` value, or the error it answered.
fn call(home: &Path, req: &Request) -> Result<Value, String> {
    let (_, stdout) = call_raw(home, req);
    let reply: Value = serde_json::from_slice(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&stdout)));
    match (reply.get("ok"), reply.get("error")) {
        (Some(v), _) => Ok(v.clone()),
        (_, Some(e)) => Err(e.to_string()),
        _ => panic!("{reply}"),
    }
}

/// A launch on this host's one node ("here" in pool "lab") with a lease
/// of a minute and no secrets.
fn here(attempt: AttemptId, token: String, spec: canopy::spec::Spec, checkpoint: bool) -> Launch {
    Launch {
        attempt,
        token,
        spec,
        pool: "lab".into(),
        node: "here".into(),
        nodes: vec!["here".into()],
        gpus: None,
        vendor: None,
        family: None,
        lease_ms: 60_000,
        checkpoint,
        secrets: BTreeMap::new(),
    }
}

#[test]
fn a_launch_sets_the_host_vendors_visible_devices_variable_and_clears_the_others() {
    use canopy::accel::{Family, Vendor};
    use canopy::providers::ssh::remote::visible_devices;
    let spec: canopy::spec::Spec =
        serde_json::from_value(json!({ "name": "npu", "runtime": { "command": ["true"] } })).unwrap();
    let attempt = AttemptId { workload: WorkloadId(1), n: 1 };
    let mut l = here(attempt, "t".into(), spec, false);
    let set = |l: &Launch| -> Vec<(String, String)> {
        visible_devices(l).into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))).collect()
    };
    l.gpus = Some(vec![2, 3]);
    l.vendor = Some(Vendor::Huawei);
    l.family = Some(Family::Ascend910b);
    assert_eq!(set(&l), [("ASCEND_RT_VISIBLE_DEVICES".to_string(), "2,3".to_string())]);
    assert!(visible_devices(&l).iter().any(|(k, v)| *k == "CUDA_VISIBLE_DEVICES" && v.is_none()));
    l.vendor = Some(Vendor::Kunlunxin);
    l.family = None;
    assert_eq!(set(&l), [("XPU_VISIBLE_DEVICES".to_string(), "2,3".to_string())]);
    l.vendor = Some(Vendor::Cambricon);
    assert_eq!(set(&l), [("MLU_VISIBLE_DEVICES".to_string(), "2,3".to_string())]);
    // Every vendor's variable, as docs/accelerators.md gives it.
    let every = [
        (Vendor::Nvidia, None, "CUDA_VISIBLE_DEVICES", "2,3"),
        (Vendor::Amd, Some(Family::Cdna2), "ROCR_VISIBLE_DEVICES", "2,3"),
        (Vendor::Intel, Some(Family::Gaudi3), "HABANA_VISIBLE_MODULES", "2,3"),
        (Vendor::Intel, Some(Family::XeHpc), "ONEAPI_DEVICE_SELECTOR", "level_zero:2,3"),
        (Vendor::Hygon, Some(Family::DcuK100), "HIP_VISIBLE_DEVICES", "2,3"),
        (Vendor::MooreThreads, Some(Family::MttS), "MUSA_VISIBLE_DEVICES", "2,3"),
        (Vendor::Metax, Some(Family::Xiyun), "CUDA_VISIBLE_DEVICES", "2,3"),
        (Vendor::Iluvatar, Some(Family::Zhikai), "CUDA_VISIBLE_DEVICES", "2,3"),
        (Vendor::Enflame, Some(Family::EnflameS), "TOPS_VISIBLE_DEVICES", "2,3"),
    ];
    for (vendor, family, var, value) in every {
        l.vendor = Some(vendor);
        l.family = family;
        assert_eq!(set(&l), [(var.to_string(), value.to_string())], "{vendor} {family:?}");
        let cleared = visible_devices(&l).iter().filter(|(_, v)| v.is_none()).count();
        // Ten variables in all (MetaX and Iluvatar share NVIDIA's): the nine others cleared.
        assert_eq!(cleared, 9, "{vendor}: every other vendor's variable is cleared");
    }
    l.family = None;
    l.vendor = None;
    assert_eq!(
        set(&l),
        [("CUDA_VISIBLE_DEVICES".to_string(), "2,3".to_string())],
        "an older controller: NVIDIA"
    );
    l.gpus = None;
    assert!(set(&l).is_empty(), "a host without accelerators clears them all");
}

#[test]
fn staged_outputs_are_answered_again_after_a_lost_reply() {
    let home = tempfile::tempdir().unwrap();
    let attempt = AttemptId { workload: WorkloadId(1), n: 1 };
    let token = attempt.token(STORE, "");
    let spec: canopy::spec::Spec = serde_json::from_value(json!({
        "name": "agent",
        "runtime": { "command": ["sh", "-c", "echo done > \"$CANOPY_OUTPUT_DIR/result.txt\""] },
        "outputs": [{ "name": "result", "path": "/result.txt", "required": true }],
    }))
    .unwrap();
    let launch = here(attempt, token.clone(), spec.clone(), false);
    call(home.path(), &Request::Launch(Box::new(launch))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = call(home.path(), &Request::Status { token: token.clone() }).unwrap();
        if s.to_string().contains("ended") {
            assert!(s.to_string().contains("\"code\":0"), "{s}");
            break;
        }
        assert!(Instant::now() < deadline, "still {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let ask = Request::Outputs { token: token.clone(), spec: Box::new(spec) };
    let first = call(home.path(), &ask).unwrap();
    assert_eq!(first["artifacts"][0]["name"], "result", "{first}");
    assert_eq!(first["artifacts"][0]["bytes"], 5, "{first}");
    // The reply was lost; the provider asks again and must get the same,
    // not an empty collection (the first call moved the files).
    let again = call(home.path(), &ask).unwrap();
    assert_eq!(again, first);
    // Fetching only reads: twice, the same tar stream with the file in it.
    let fetch = Request::Fetch { token: token.clone() };
    let (ok, tar) = call_raw(home.path(), &fetch);
    assert!(ok && tar.windows(b"result".len()).any(|w| w == b"result"), "{} bytes", tar.len());
    assert_eq!(call_raw(home.path(), &fetch), (true, tar));
    call(home.path(), &Request::Cleanup { token: token.clone() }).unwrap();
    let left = home.path().join(".canopy-host").join(STORE).join("attempts").join(&token);
    assert!(!left.exists(), "cleanup removed the attempt");
}

/// Waits until the attempt has ended, and says how.
fn wait_ended(home: &Path, token: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = call(home, &Request::Status { token: token.to_string() }).unwrap();
        if s.to_string().contains("ended") {
            return s;
        }
        assert!(Instant::now() < deadline, "still {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The host's side of checkpoints copied through Canopy's store: the one
/// Canopy hands arrives complete before the launch and is the attempt's
/// `$CANOPY_CHECKPOINT_DIR`; it is known as handed; once the attempt runs
/// nothing is put into its directory; the newest complete one it wrote
/// goes back without links, and only as the checkpoint that was asked
/// for, within the cap.
#[test]
fn a_checkpoint_goes_to_the_host_before_the_launch_and_the_newest_comes_back() {
    use canopy::providers::ssh::checkpoints::{self, Bounds, Marker};
    let home = tempfile::tempdir().unwrap();
    let attempt = AttemptId { workload: WorkloadId(2), n: 2 };
    let token = attempt.token(STORE, "");
    // What Canopy's store holds: step-2, with a link to a file outside it.
    let store = tempfile::tempdir().unwrap();
    let outside = store.path().join("outside-secret");
    std::fs::write(&outside, "not to be copied").unwrap();
    let step2 = store.path().join("w-2/step-2");
    std::fs::create_dir_all(&step2).unwrap();
    std::fs::write(step2.join("state"), "2").unwrap();
    std::fs::write(step2.join("COMPLETE"), "").unwrap();
    std::os::unix::fs::symlink(&outside, step2.join("leak")).unwrap();
    let mut tar = Vec::new();
    checkpoints::write_tar(&step2, &mut tar, Bounds::checkpoint(1 << 20)).unwrap();
    let put = Request::PutCheckpoint { token: token.clone(), name: "step-2".into(), max_bytes: 1 << 20 };
    let (ok, out, err) = call_with(home.path(), &put, &tar);
    let handed = reply(&out).unwrap_or_else(|e| panic!("{e} {err}"));
    assert!(ok);
    assert_eq!((handed["name"].as_str(), handed["handed"].as_bool()), (Some("step-2"), Some(true)));
    let newest = Request::NewestCheckpoint { token: token.clone() };
    assert_eq!(call(home.path(), &newest).unwrap(), handed);

    let script = r#"d="$CANOPY_CHECKPOINT_DIR"; echo "holds: $(ls -A "$d" | tr '\n' ' ') state $(cat "$d/step-2/state")"
[ -e "$d/step-2/leak" ] && echo "the link came along"
mkdir "$d/step-3"; echo 3 > "$d/step-3/state"; ln -s /etc/passwd "$d/step-3/passwd"; mkfifo "$d/step-3/pipe"
touch "$d/step-3/COMPLETE"; mkdir "$d/step-4"; echo 4 > "$d/step-4/state""#;
    let spec: canopy::spec::Spec = serde_json::from_value(json!({
        "name": "agent-ckpt",
        "runtime": { "command": ["sh", "-c", script] },
        "checkpoint": { "path": "/ckpt" },
    }))
    .unwrap();
    let stdout = run_to_success(home.path(), attempt, &token, spec, true);
    assert!(stdout.contains("holds: step-2  state 2"), "{stdout}");
    assert!(!stdout.contains("the link came along"), "{stdout}");

    // Launched: nothing goes into its directory any more.
    let (ok, out, _) = call_with(home.path(), &put, &tar);
    let e = reply(&out).unwrap_err();
    assert!(!ok && e.contains("launched already"), "{e}");

    let newest = call(home.path(), &newest).unwrap();
    assert_eq!((newest["name"].as_str(), newest["handed"].as_bool()), (Some("step-3"), Some(false)));
    let at_ms = newest["at_ms"].as_i64().unwrap();
    let fetch = |at_ms: i64, max_bytes: u64| Request::FetchCheckpoint {
        token: token.clone(),
        name: "step-3".into(),
        at_ms,
        max_bytes,
    };
    let (ok, sent) = call_raw(home.path(), &fetch(at_ms, 1 << 20));
    assert!(ok, "{}", String::from_utf8_lossy(&sent));
    let marker = Marker { token: token.clone(), host: "here".into(), host_at_ms: at_ms };
    let back = store.path().join("w-2");
    let found = checkpoints::receive(&back, "step-3", &sent[..], 1 << 20, &marker).unwrap();
    assert_eq!(found.name, "step-3");
    let mut names: Vec<String> = std::fs::read_dir(back.join("step-3"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["COMPLETE", "state"], "links and FIFOs stay on the host");
    assert!(checkpoints::holds(&back, &token, "step-3", at_ms));
    let left: Vec<_> = std::fs::read_dir(&back).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["step-3"], "the older checkpoint goes once a newer one is in");
    // Not the checkpoint complete at that time, or over the cap: refused.
    assert!(!call_raw(home.path(), &fetch(at_ms - 1, 1 << 20)).0);
    assert!(!call_raw(home.path(), &fetch(at_ms, 1)).0);

    call(home.path(), &Request::Cleanup { token: token.clone() }).unwrap();
    let host = home.path().join(".canopy-host").join(STORE);
    assert!(!host.join("attempts").join(&token).exists());
    assert!(!host.join("checkpoints").join(&token).exists(), "cleanup removed its checkpoints");
}

/// A workload on an owner's host gets the same Canopy variables as on
/// Slurm and Ray: `$CANOPY_ATTEMPT_TOKEN` is the attempt's token (it was
/// empty on SSH hosts), beside `$CANOPY_ATTEMPT`.
#[test]
fn the_workload_sees_its_attempt_token_as_on_slurm_and_ray() {
    let home = tempfile::tempdir().unwrap();
    let attempt = AttemptId { workload: WorkloadId(3), n: 2 };
    let token = attempt.token(STORE, "");
    let spec: canopy::spec::Spec = serde_json::from_value(json!({
        "name": "token",
        "runtime": { "command": ["sh", "-c", "echo \"token=[$CANOPY_ATTEMPT_TOKEN] attempt=[$CANOPY_ATTEMPT]\""] },
    }))
    .unwrap();
    let stdout = run_to_success(home.path(), attempt, &token, spec, false);
    assert_eq!(stdout.trim(), format!("token=[{token}] attempt=[w-3.2]"));
    call(home.path(), &Request::Cleanup { token: token.clone() }).unwrap();
}

/// Launches `spec` through the agent on the one node `here`, waits for a
/// clean exit, and returns its stdout.
fn run_to_success(
    home: &std::path::Path,
    attempt: AttemptId,
    token: &str,
    spec: canopy::spec::Spec,
    checkpoint: bool,
) -> String {
    let launch = here(attempt, token.to_string(), spec, checkpoint);
    call(home, &Request::Launch(Box::new(launch))).unwrap();
    let end = wait_ended(home, token);
    assert!(end.to_string().contains("\"code\":0"), "{end}");
    let logs = Request::Logs {
        token: token.to_string(),
        stream: canopy::providers::ssh::protocol::WireStream::Stdout,
        offset: 0,
        max: 1 << 16,
    };
    let (ok, stdout) = call_raw(home, &logs);
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    assert!(ok, "{stdout}");
    stdout
}

/// The host agent runs a workload with `runtime.image` in the owner's
/// container engine (here: the user running the test) the way the local
/// provider does: the probe says the host runs images, the container's
/// log and output come back, and nothing is left in the engine after.
/// Skips visibly where `podman run --rm IMAGE true` does not work here.
#[test]
fn an_image_runs_in_the_owners_podman_through_the_agent() {
    let test = "an_image_runs_in_the_owners_podman_through_the_agent";
    let image = std::env::var("CANOPY_TEST_IMAGE").unwrap_or_else(|_| "localhost/canopy-test:latest".into());
    let runs = Command::new("podman").args(["run", "--rm", "--pull=never", &image, "true"]).output();
    if !runs.as_ref().is_ok_and(|o| o.status.success()) {
        let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require")
            || std::env::var_os("CANOPY_TEST_REQUIRE_CONTAINERS").is_some();
        assert!(!require, "{test}: containers are required here but podman cannot run {image}: {runs:?}");
        eprintln!("SKIPPED {test}: podman cannot run {image} here (scripts/containers/setup.sh sets it up)");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let probe = call(home.path(), &Request::Probe).unwrap();
    let tags: Vec<&str> = probe["containers"].as_array().unwrap().iter().filter_map(|t| t.as_str()).collect();
    assert!(tags.contains(&canopy::fleet::CONTAINER_TAG), "{probe}");
    let attempt = AttemptId { workload: WorkloadId(3), n: 1 };
    let token = attempt.token(STORE, "");
    let spec: canopy::spec::Spec = serde_json::from_value(json!({
        "name": "agent-image",
        "runtime": {
            "image": image,
            "command": ["sh", "-c", "echo in-image; echo done > /outputs/result.txt"],
        },
        "resources": { "cpu_cores": 0.5, "memory_gb": 0.2 },
        "outputs": [{ "name": "result", "path": "/outputs/result.txt", "required": true }],
    }))
    .unwrap();
    let launch = here(attempt, token.clone(), spec.clone(), false);
    let started = call(home.path(), &Request::Launch(Box::new(launch))).unwrap();
    assert_eq!(started["outcome"], "started", "{started}");
    let end = wait_ended(home.path(), &token);
    assert!(end.to_string().contains("\"code\":0"), "{end}");
    let logs = Request::Logs {
        token: token.clone(),
        stream: canopy::providers::ssh::protocol::WireStream::Stdout,
        offset: 0,
        max: 1 << 16,
    };
    let stdout = String::from_utf8_lossy(&call_raw(home.path(), &logs).1).into_owned();
    assert!(stdout.contains("in-image"), "{stdout}");
    let staged = call(home.path(), &Request::Outputs { token: token.clone(), spec: Box::new(spec) }).unwrap();
    assert_eq!(
        (staged["artifacts"][0]["name"].as_str(), staged["artifacts"][0]["bytes"].as_u64()),
        (Some("result"), Some(5)),
        "{staged}"
    );
    let left = Command::new("podman")
        .args(["ps", "-a", "-q", "--filter", &format!("label=canopy.token={token}")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "", "the container was left behind");
    call(home.path(), &Request::Cleanup { token }).unwrap();
}

/// The host's probe finds each vendor's accelerators through that vendor's
/// tool: here the tools are scripts that print the published samples
/// (`tests/fixtures/accel/`), alone on the agent's PATH, so nothing else
/// on this machine answers for them.
#[test]
fn a_probe_finds_each_vendors_accelerators_through_its_tool() {
    use std::os::unix::fs::PermissionsExt;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/accel");
    let fx = |name: &str| fixtures.join(name).display().to_string();
    // (tool, its script's body, vendor, model, family, GB, count)
    let cases = [
        (
            "cnmon",
            format!("/bin/cat {}", fx("cnmon-mlu370-x8.txt")),
            "cambricon",
            "MLU370-X8",
            "mlu370",
            24.0,
            2,
        ),
        (
            "efsmi",
            format!("/bin/cat {}", fx("efsmi-s60.txt")),
            "enflame",
            "Enflame S60",
            "enflame-s",
            48.0,
            2,
        ),
        (
            "hl-smi",
            format!("/bin/cat {}", fx("hl-smi-hl325l.csv")),
            "intel",
            "Gaudi3 HL-325L",
            "gaudi3",
            128.0,
            2,
        ),
        (
            "amd-smi",
            format!("/bin/cat {}", fx("amd-smi-static-mi210.json")),
            "amd",
            "AMD Instinct MI210",
            "cdna2",
            64.0,
            1,
        ),
        (
            "xpu-smi",
            format!(
                "case \"$*\" in\n  'discovery -j') /bin/cat {} ;;\n  'discovery -d 0 -j') /bin/cat {} ;;\n  *) exit 2 ;;\nesac",
                fx("xpu-smi-discovery-max1100.json"),
                fx("xpu-smi-discovery-d0-max1100.json")
            ),
            "intel",
            "Intel(R) Data Center GPU Max 1100",
            "xe-hpc",
            48.0,
            2,
        ),
    ];
    for (tool, body, vendor, model, family, gb, count) in cases {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let script = bin.join(tool);
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
            .args(["__host", "--store", STORE])
            .env("HOME", home.path())
            .env("PATH", &bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&serde_json::to_vec(&Request::Probe).unwrap()).unwrap();
        let out = child.wait_with_output().unwrap();
        let probe = reply(&out.stdout).unwrap_or_else(|e| panic!("{tool}: {e}"));
        let shape = &probe["shape"];
        let a = &shape["accelerator"];
        assert_eq!(
            (a["vendor"].as_str(), a["model"].as_str(), a["family"].as_str(), a["memory_gb"].as_f64()),
            (Some(vendor), Some(model), Some(family), Some(gb)),
            "{tool}: {shape}"
        );
        assert_eq!(shape["gpus_per_node"], count, "{tool}: {shape}");
    }
}
