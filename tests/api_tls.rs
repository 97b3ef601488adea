//! The API over TLS, as a remote user reaches it: `canopy serve --listen
//! --tls-cert --tls-key` with a self-signed certificate, a token made over
//! the socket, and the CLI pointed at it with `--server https://…`,
//! `CANOPY_TOKEN` and `CANOPY_CA_CERT`. And the refusal to serve tokens in
//! clear text on a non-loopback address.

mod reap_support;

use reap_support::Reaper;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: signals only the server this test started.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// Starts `canopy serve` and returns it with the URL its ready line names.
fn serve(store: &Path, args: &[&str], stderr: &Path) -> (Server, String) {
    let child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(["serve", "--no-faults"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        if let Some(url) =
            text.split_whitespace().find(|w| w.starts_with("https://") || w.starts_with("http://"))
        {
            return (server, url.trim_end_matches(['.', ',']).to_string());
        }
        if let Some(status) = server.0.try_wait().unwrap() {
            panic!("canopy serve exited ({status}): {text}");
        }
        assert!(Instant::now() < deadline, "canopy serve did not start: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn canopy(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN).arg("--store").arg(store).args(args).envs(env.iter().copied()).output().unwrap()
}

#[test]
fn a_remote_user_reaches_the_api_over_tls_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(dir.path());
    let store = dir.path().join("store");
    let key =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let (cert, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, key.cert.pem()).unwrap();
    std::fs::write(&key_file, key.signing_key.serialize_pem()).unwrap();
    let (_server, url) = serve(
        &store,
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key_file.to_str().unwrap(),
        ],
        &dir.path().join("serve.stderr"),
    );
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // The store's owner makes a token on the socket.
    let made = canopy(&store, &["token", "create", "--name", "remote-viewer", "--role", "viewer"], &[]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let token = String::from_utf8(made.stdout).unwrap().trim().to_string();

    // Elsewhere: no store, just the server's address, the token and its CA.
    let elsewhere = dir.path().join("elsewhere");
    let ca = cert.to_str().unwrap();
    let ok = canopy(
        &elsewhere,
        &["--server", &url, "status"],
        &[("CANOPY_TOKEN", &token), ("CANOPY_CA_CERT", ca)],
    );
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let listed = String::from_utf8_lossy(&ok.stdout);
    assert!(listed.starts_with("no workloads"), "the (empty) workload list: {listed}");

    // A viewer may read but not cancel.
    let denied = canopy(
        &elsewhere,
        &["--server", &url, "cancel", "w-1"],
        &[("CANOPY_TOKEN", &token), ("CANOPY_CA_CERT", ca)],
    );
    assert_eq!(denied.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&denied.stderr).contains("needs the submitter role"));

    // Without trusting the certificate, nothing is sent: the client
    // refuses the server (and says it cannot reach a Canopy server).
    let untrusted = canopy(&elsewhere, &["--server", &url, "status"], &[("CANOPY_TOKEN", &token)]);
    assert_eq!(untrusted.status.code(), Some(4), "{}", String::from_utf8_lossy(&untrusted.stderr));

    // Plain HTTP to the TLS port gets no answer from the API.
    let plain = url.replace("https://", "http://");
    let clear = canopy(&elsewhere, &["--server", &plain, "status"], &[("CANOPY_TOKEN", &token)]);
    assert!(!clear.status.success());

    // A wrong token is refused with 401's message.
    let wrong = canopy(
        &elsewhere,
        &["--server", &url, "status"],
        &[("CANOPY_TOKEN", "canopy_000000000000_nope"), ("CANOPY_CA_CERT", ca)],
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("not valid"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
}

#[test]
fn tokens_are_not_served_in_clear_text_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(dir.path());
    let out = Command::new(BIN)
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["serve", "--no-faults", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without TLS") && err.contains("--insecure-listen"), "{err}");
}
