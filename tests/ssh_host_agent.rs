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

/// One call's exit status and standard output.
fn call_raw(home: &Path, req: &Request) -> (bool, Vec<u8>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["__host", "--store", STORE])
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&serde_json::to_vec(req).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), out.stdout)
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
    let launch = Launch {
        attempt,
        token: token.clone(),
        spec: spec.clone(),
        pool: "lab".into(),
        node: "here".into(),
        nodes: vec!["here".into()],
        gpus: None,
        lease_ms: 60_000,
        secrets: BTreeMap::new(),
    };
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
