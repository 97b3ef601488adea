//! systemd's readiness protocol (`sd_notify(3)`) without libsystemd: one
//! datagram to the socket `$NOTIFY_SOCKET` names (a path, or an abstract
//! name after `@`). `canopy serve` says `READY=1` once its API answers and
//! `STOPPING=1` when it stops, so `Type=notify` units (dist/systemd) order
//! what depends on Canopy after it is really up. Without the variable
//! nothing is sent.

use std::os::unix::net::UnixDatagram;

/// The environment variable systemd sets for a `Type=notify` service.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `state` (newline-separated `KEY=VALUE` lines) to systemd. `Ok(false)`
/// when no notify socket is set.
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(path) = std::env::var_os(NOTIFY_SOCKET) else { return Ok(false) };
    let sock = UnixDatagram::unbound()?;
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    match bytes.split_first() {
        Some((b'@', name)) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(state.as_bytes(), &addr)?;
        }
        Some(_) => {
            sock.send_to(state.as_bytes(), &path)?;
        }
        None => return Ok(false),
    }
    Ok(true)
}
