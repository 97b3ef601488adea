//! Slow, idle and hostile TCP clients cannot take the API away: a real
//! `canopy serve --listen` runs with an open-file limit of 256 while more
//! idle, unauthenticated connections than that are opened against it. The
//! server holds no more of them than its cap, the owner's socket and a
//! client with a valid token still answer, every idle connection (one that
//! never sent a byte, one that trickles its headers, a keep-alive one after
//! its response) is closed once the header read timeout has passed, an
//! event stream open all along is not cut by either timeout, and the
//! server never ran out of file descriptors. Short timeouts come from the
//! server's own options.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{DEADLINE, Process, Serve};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's RLIMIT_NOFILE.
const NOFILE: u64 = 256;
/// Idle connections opened: more than the server has file descriptors.
const FLOOD: usize = 300;
/// TCP connections the server keeps at this limit: 256 less the 128 it
/// keeps for the store, its socket and workloads (docs/api.md).
const CAP: usize = 128;

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the server has closed this connection (EOF or reset), without
/// waiting. Anything it sent is read and dropped.
fn closed(c: &TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    let mut s = c;
    let gone = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    c.set_nonblocking(false).unwrap();
    gone
}

/// `GET /v1/stream` with a token, read on a thread: how many events came,
/// and whether the server ended it.
struct EventStream {
    events: Arc<AtomicUsize>,
    ended: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl EventStream {
    fn open(addr: SocketAddr, token: &str) -> EventStream {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(
            c,
            "GET /v1/stream HTTP/1.1\r\nHost: canopy\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        c.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let (events, ended, stop): (Arc<AtomicUsize>, Arc<AtomicBool>, Arc<AtomicBool>) = Default::default();
        let (e, d, s) = (Arc::clone(&events), Arc::clone(&ended), Arc::clone(&stop));
        let seen = Mutex::new(String::new());
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while !s.load(Ordering::SeqCst) {
                match c.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let mut text = seen.lock().unwrap();
                        text.push_str(&String::from_utf8_lossy(&buf[..n]));
                        e.store(text.matches("\nevent: ").count(), Ordering::SeqCst);
                    }
                    Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            d.store(true, Ordering::SeqCst);
        });
        EventStream { events, ended, stop, reader: Some(reader) }
    }

    fn events(&self) -> usize {
        self.events.load(Ordering::SeqCst)
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

#[test]
fn idle_clients_beyond_the_file_limit_leave_the_socket_and_token_holders_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(
        &store,
        &["--listen", "127.0.0.1:0", "--header-read-timeout", "8s", "--idle-timeout", "2s"],
        Process { nofile: Some(NOFILE), ..Process::default() },
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.pid())).unwrap();
    let open_files = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    assert_eq!(open_files.split_whitespace().nth(3), Some(NOFILE.to_string().as_str()), "{open_files}");
    let url = serve.url.clone().expect("a TCP address on the ready line");
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();

    let made = serve.canopy(&["token", "create", "--name", "watcher", "--role", "viewer"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let token = String::from_utf8(made.stdout).unwrap().trim().to_string();

    // An event stream, open from before the flood until the end.
    let stream = EventStream::open(addr, &token);
    wait_until("the event stream's first event", || stream.events() >= 1);

    // More idle connections than the server has file descriptors; it keeps
    // at most its cap of them and closes the rest.
    let flood: Vec<TcpStream> = (0..FLOOD).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let still_open = || flood.iter().filter(|c| !closed(c)).count();
    wait_until(&format!("the server to hold at most {CAP} of {FLOOD} idle connections"), || {
        still_open() <= CAP
    });
    let held = still_open();
    assert!(held > 0, "the idle connections were all closed before the header read timeout");

    // A client that made a request and now idles on keep-alive, and one
    // that trickles its headers.
    let mut keep_alive = TcpStream::connect(addr).unwrap();
    keep_alive.write_all(b"GET /healthz HTTP/1.1\r\nHost: canopy\r\n\r\n").unwrap();
    keep_alive.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut head = [0u8; 12];
    keep_alive.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the keep-alive client's request was answered");
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: canopy\r\n").unwrap();

    // The owner, on the socket, and a token holder, over TCP, get answers
    // while the server holds its share of idle connections.
    let owner = serve.canopy(&["status"]);
    assert!(owner.status.success(), "the owner's socket: {}", String::from_utf8_lossy(&owner.stderr));
    let remote = serve.canopy_with(&["--server", &url, "status"], &[("CANOPY_TOKEN", &token)]);
    assert!(remote.status.success(), "a token over TCP: {}", String::from_utf8_lossy(&remote.stderr));

    // Past the header read timeout, every idle connection is closed: the
    // silent ones, the trickling one, the keep-alive one.
    let mut trickled = 0;
    wait_until("every idle connection to be closed", || {
        if slow.write_all(b"X").is_ok() {
            trickled += 1;
        }
        still_open() == 0 && closed(&keep_alive) && closed(&slow)
    });
    assert!(trickled > 0, "the slow client sent part of its headers");

    // The event stream lived through both timeouts and still delivers.
    assert!(!stream.ended(), "the event stream was cut");
    let seen = stream.events();
    wait_until("another event on the stream", || stream.events() > seen || stream.ended());
    assert!(!stream.ended(), "the event stream was cut");

    // The server still answers the token holder, and never ran out of
    // file descriptors.
    let again = serve.canopy_with(&["--server", &url, "status"], &[("CANOPY_TOKEN", &token)]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let log = std::fs::read_to_string(store.join("canopy.log")).unwrap();
    assert!(!log.contains("Too many open files"), "the server ran out of file descriptors:\n{log}");
    assert!(log.contains("TCP connections over the limits"), "the turned-away connections are reported");

    // Stopping ends the stream and the server, and leaves nothing behind.
    assert!(serve.stop().success());
    wait_until("the event stream to end with the server", || stream.ended());
    drop(stream);
    let bound = TcpStream::connect_timeout(&addr, Duration::from_secs(5));
    assert!(bound.is_err(), "something still listens on {addr}");
}
