//! The local provider's outputs against real processes (split from
//! `local_provider`): collected with checksums, what is never collected
//! (links out of the root, devices, FIFOs, files over the limits), the
//! privacy of what is kept, and inputs staged before a launch.
//! Every wait is a bounded poll; nothing asserts on elapsed time.

mod local_provider_support;

use canopy::failure::ProviderEnd;
use canopy::providers::local::LocalProvider;
use canopy::providers::{Collection, LaunchError, LaunchRequest, LogStream, Provider};
use local_provider_support::*;
use serde_json::json;
use std::path::Path;

#[tokio::test]
async fn outputs_are_collected_with_checksums() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = r#"printf hello > "$CANOPY_OUTPUT_DIR/outputs/result.txt"
        mkdir "$CANOPY_OUTPUT_DIR/outputs/ckpt" && printf abc > "$CANOPY_OUTPUT_DIR/outputs/ckpt/w.bin""#;
    let s = spec(json!({
        "runtime": { "command": ["sh", "-c", script] },
        "outputs": [
            { "name": "result", "path": "/outputs/result.txt", "required": true },
            { "name": "ckpt", "path": "/outputs/ckpt" },
            { "name": "extra", "path": "/outputs/never-written.txt" },
        ],
    }));
    let req = request(t.path(), 1, s.clone());
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    let dest = t.path().join("store");
    let collected = p.outputs(&req.token, &s, &dest).await.unwrap();
    assert!(collected.skipped.is_empty(), "{collected:?}");
    let arts = collected.artifacts.clone();
    assert_eq!(arts.len(), 2, "{arts:?}");
    assert_eq!((arts[0].name.as_str(), arts[0].bytes), ("result", 5));
    assert_eq!(arts[0].sha256, sha(b"hello"));
    assert_eq!(std::fs::read(&arts[0].path).unwrap(), b"hello");
    assert_eq!((arts[1].name.as_str(), arts[1].bytes), ("ckpt", 3));
    assert_eq!(arts[1].sha256, sha(format!("w.bin {}\n", sha(b"abc")).as_bytes()));
    assert_eq!(std::fs::read(dest.join("ckpt/w.bin")).unwrap(), b"abc");
    // Collecting again replaces, with the same result.
    assert_eq!(p.outputs(&req.token, &s, &dest).await.unwrap(), collected);
}

#[tokio::test]
async fn a_missing_required_output_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let s = spec(json!({
        "runtime": { "command": ["true"] },
        "outputs": [{ "name": "model", "path": "/outputs/model.bin", "required": true }],
    }));
    let req = request(t.path(), 1, s.clone());
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    let err = p.outputs(&req.token, &s, &t.path().join("store")).await.unwrap_err();
    assert!(err.message.contains("required output \"model\""), "{err}");
    assert!(err.message.contains("$CANOPY_OUTPUT_DIR/outputs/model.bin"), "{err}");
}

/// Runs `script` with these outputs and returns what collecting them gave,
/// within a bound: collection must never hang.
async fn collect_after(
    p: &LocalProvider,
    root: &Path,
    script: &str,
    outputs: serde_json::Value,
) -> (LaunchRequest, Result<Collection, canopy::providers::ProviderError>) {
    let s = spec(json!({ "runtime": { "command": ["sh", "-c", script] }, "outputs": outputs }));
    let req = request(root, 1, s.clone());
    assert_eq!(run(p, &req).await, ProviderEnd::Exited { code: 0 });
    let got = tokio::time::timeout(PATIENCE, p.outputs(&req.token, &s, &root.join("store")))
        .await
        .expect("collecting outputs did not finish");
    (req, got)
}

fn reason_of<'a>(c: &'a Collection, path: &str) -> &'a str {
    let s = c.skipped.iter().find(|s| s.path == path);
    &s.unwrap_or_else(|| panic!("{path} not among the skipped: {:?}", c.skipped)).reason
}

/// Whether any file under `dir` holds `needle`.
fn any_file_contains(dir: &Path, needle: &[u8]) -> bool {
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.iter().any(|f| std::fs::read(f).unwrap().windows(needle.len()).any(|w| w == needle))
}

#[tokio::test]
async fn links_to_host_files_are_never_collected() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let host = t.path().join("host-secret.txt");
    std::fs::write(&host, "HOST-ONLY-CONTENT").unwrap();
    let script = format!(
        r#"cd "$CANOPY_OUTPUT_DIR/outputs" && ln -s /etc/passwd passwd && ln -s '{h}' secret &&
        mkdir dir && printf fine > dir/ok.txt && ln -s '{h}' dir/shadow && ln -s .. dir/up &&
        rmdir linked-dir && ln -s /etc linked-dir && printf done > result.txt"#,
        h = host.display()
    );
    let outputs = json!([
        { "name": "result", "path": "/outputs/result.txt", "required": true },
        { "name": "passwd", "path": "/outputs/passwd" },
        { "name": "secret", "path": "/outputs/secret" },
        { "name": "dir", "path": "/outputs/dir", "required": true },
        { "name": "etc", "path": "/outputs/linked-dir/passwd" },
    ]);
    let (_, got) = collect_after(&p, t.path(), &script, outputs).await;
    let c = got.unwrap();
    let names: Vec<&str> = c.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["result", "dir"], "{c:?}");
    // The directory holds its regular file only.
    assert_eq!(c.artifacts[1].sha256, sha(format!("ok.txt {}\n", sha(b"fine")).as_bytes()));
    assert!(reason_of(&c, "/outputs/passwd").contains("symbolic link"));
    assert!(reason_of(&c, "/outputs/secret").contains("symbolic link"));
    assert!(reason_of(&c, "/outputs/dir/shadow").contains("symbolic link"));
    assert!(reason_of(&c, "/outputs/dir/up").contains("symbolic link"));
    assert!(reason_of(&c, "/outputs/linked-dir/passwd").contains("symbolic link or not a directory"));
    let store = t.path().join("store");
    assert!(!store.join("passwd").exists() && !store.join("secret").exists() && !store.join("etc").exists());
    assert!(!any_file_contains(&store, b"HOST-ONLY-CONTENT"));
    assert!(!any_file_contains(&store, b"root:"));

    // A required output that is a link fails the collection, by name, with
    // the reason and what to do.
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = r#"ln -s /etc/passwd "$CANOPY_OUTPUT_DIR/outputs/model.bin""#;
    let outputs = json!([{ "name": "model", "path": "/outputs/model.bin", "required": true }]);
    let err = collect_after(&p, t.path(), script, outputs).await.1.unwrap_err();
    assert!(err.message.contains("required output \"model\""), "{err}");
    assert!(err.message.contains("symbolic link"), "{err}");
    assert!(err.message.contains("write a regular file"), "{err}");
}

#[tokio::test]
async fn a_link_to_dev_zero_is_skipped_not_copied() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script =
        r#"ln -s /dev/zero "$CANOPY_OUTPUT_DIR/outputs/zero"; printf ok > "$CANOPY_OUTPUT_DIR/outputs/ok""#;
    let outputs =
        json!([{ "name": "zero", "path": "/outputs/zero" }, { "name": "ok", "path": "/outputs/ok" }]);
    let c = collect_after(&p, t.path(), script, outputs).await.1.unwrap();
    assert_eq!(c.artifacts.len(), 1, "{c:?}");
    assert_eq!(c.artifacts[0].name, "ok");
    assert!(reason_of(&c, "/outputs/zero").contains("symbolic link"));
    assert!(!t.path().join("store/zero").exists());
}

#[tokio::test]
async fn a_fifo_output_is_skipped_promptly() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = r#"mkfifo "$CANOPY_OUTPUT_DIR/outputs/pipe" && mkdir "$CANOPY_OUTPUT_DIR/outputs/d" &&
        mkfifo "$CANOPY_OUTPUT_DIR/outputs/d/inner" && printf x > "$CANOPY_OUTPUT_DIR/outputs/d/x""#;
    let outputs = json!([{ "name": "pipe", "path": "/outputs/pipe" }, { "name": "d", "path": "/outputs/d" }]);
    let c = collect_after(&p, t.path(), script, outputs).await.1.unwrap();
    assert_eq!(c.artifacts.len(), 1, "{c:?}");
    assert_eq!((c.artifacts[0].name.as_str(), c.artifacts[0].bytes), ("d", 1));
    assert!(reason_of(&c, "/outputs/pipe").contains("FIFO"));
    assert!(reason_of(&c, "/outputs/d/inner").contains("FIFO"));
}

#[tokio::test]
async fn outputs_over_the_size_limits_are_skipped_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(t.path());
    cfg.outputs.max_output_bytes = 1 << 20;
    cfg.outputs.max_attempt_bytes = 3 << 20;
    let p = LocalProvider::new(cfg);
    // 2 MiB (over the 1 MiB per output); a directory whose second file no
    // longer fits its output's bound; small files up to the attempt's bound.
    let script = r#"cd "$CANOPY_OUTPUT_DIR/outputs" && head -c 2097152 /dev/zero > big &&
        mkdir d && head -c 700000 /dev/zero > d/a && head -c 700000 /dev/zero > d/b &&
        for i in 1 2 3; do head -c 1000000 /dev/zero > s$i; done"#;
    let outputs = json!([
        { "name": "big", "path": "/outputs/big" },
        { "name": "d", "path": "/outputs/d" },
        { "name": "s1", "path": "/outputs/s1" },
        { "name": "s2", "path": "/outputs/s2" },
        { "name": "s3", "path": "/outputs/s3" },
    ]);
    let c = collect_after(&p, t.path(), script, outputs).await.1.unwrap();
    let got: Vec<(&str, u64)> = c.artifacts.iter().map(|a| (a.name.as_str(), a.bytes)).collect();
    assert_eq!(got, [("d", 700000), ("s1", 1000000), ("s2", 1000000)], "{c:?}");
    assert!(reason_of(&c, "/outputs/big").contains("over the limit of 1.0 MiB per output"), "{c:?}");
    assert!(reason_of(&c, "/outputs/d/b").contains("per output"), "{c:?}");
    assert!(reason_of(&c, "/outputs/s3").contains("for all of an attempt's outputs"), "{c:?}");
    assert!(!t.path().join("store/big").exists() && !t.path().join("store/d/b").exists());

    // Required and too big: the collection fails, saying so.
    let t = tempfile::tempdir().unwrap();
    let mut cfg = config(t.path());
    cfg.outputs.max_output_bytes = 1 << 20;
    let p = LocalProvider::new(cfg);
    let script = r#"head -c 2097152 /dev/zero > "$CANOPY_OUTPUT_DIR/outputs/model.bin""#;
    let outputs = json!([{ "name": "model", "path": "/outputs/model.bin", "required": true }]);
    let err = collect_after(&p, t.path(), script, outputs).await.1.unwrap_err();
    assert!(err.message.contains("required output \"model\""), "{err}");
    assert!(err.message.contains("over the limit of 1.0 MiB per output"), "{err}");
    assert!(err.message.contains("max_output_size"), "{err}");
}

#[tokio::test]
async fn artifacts_and_attempt_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = r#"cd "$CANOPY_OUTPUT_DIR/outputs" && umask 022 && printf r > r.txt && mkdir -m 755 ck &&
        printf w > ck/w.bin && chmod 644 r.txt ck/w.bin && echo out && echo err >&2"#;
    let outputs = json!([{ "name": "r", "path": "/outputs/r.txt" }, { "name": "ck", "path": "/outputs/ck" }]);
    let (req, got) = collect_after(&p, t.path(), script, outputs).await;
    got.unwrap();
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    let store = t.path().join("store");
    assert_eq!(mode(&store), 0o700);
    assert_eq!(mode(&store.join("r")), 0o600);
    assert_eq!(mode(&store.join("ck")), 0o700);
    assert_eq!(mode(&store.join("ck/w.bin")), 0o600);
    let dir = p.attempt_dir(&req.token);
    for f in [
        "stdout.log",
        "stderr.log",
        "supervisor.log",
        "pid",
        "exit.json",
        "spec.json",
        "launch.json",
        "launch.lock",
        "collected.json",
    ] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    assert_eq!(mode(&dir), 0o700);
}

#[tokio::test]
async fn an_attempt_without_a_collection_record_is_collected_by_the_provider_safely() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script =
        r#"printf hi > "$CANOPY_OUTPUT_DIR/outputs/a" && ln -s /etc/passwd "$CANOPY_OUTPUT_DIR/outputs/b""#;
    let s = spec(json!({
        "runtime": { "command": ["sh", "-c", script] },
        "outputs": [{ "name": "a", "path": "/outputs/a", "required": true }, { "name": "b", "path": "/outputs/b" }],
    }));
    let req = request(t.path(), 1, s.clone());
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    // What an older supervisor leaves: no collected.json, no collected/.
    let dir = p.attempt_dir(&req.token);
    std::fs::remove_file(dir.join("collected.json")).unwrap();
    std::fs::remove_dir_all(dir.join("collected")).unwrap();
    let c = p.outputs(&req.token, &s, &t.path().join("store")).await.unwrap();
    assert_eq!(c.artifacts.len(), 1);
    assert_eq!(c.artifacts[0].sha256, sha(b"hi"));
    assert!(reason_of(&c, "/outputs/b").contains("symbolic link"));
}

#[tokio::test]
async fn file_inputs_are_staged_and_other_schemes_refused() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("train data.jsonl");
    std::fs::write(&data, "{\"x\":1}\n").unwrap();
    let s = spec(json!({
        "runtime": { "command": ["sh", "-c", "cat \"$CANOPY_INPUT_TRAIN_SET\""] },
        "inputs": [{ "name": "train-set", "source": format!("file://{}", data.display()).replace(' ', "%20") }],
    }));
    let p = provider(t.path());
    let req = request(t.path(), 1, s.clone());
    assert_eq!(run(&p, &req).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "{\"x\":1}\n");
    let staged = p.attempt_dir(&req.token).join("inputs/train-set");
    assert_eq!(std::fs::read_link(&staged).unwrap(), data);

    let mut cfg = config(t.path());
    cfg.copy_inputs = true;
    let copying = LocalProvider::new(cfg);
    let req = request(t.path(), 2, s);
    assert_eq!(run(&copying, &req).await, ProviderEnd::Exited { code: 0 });
    let staged = copying.attempt_dir(&req.token).join("inputs/train-set");
    assert!(std::fs::symlink_metadata(&staged).unwrap().is_file());

    let remote = spec(json!({
        "runtime": { "command": ["true"] },
        "inputs": [{ "name": "weights", "source": "s3://bucket/weights" }],
    }));
    let req = request(t.path(), 3, remote);
    match p.launch(&req).await {
        Err(LaunchError::Rejected(m)) => assert!(m.contains("only file://"), "{m}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(!p.attempt_dir(&req.token).exists());
}
