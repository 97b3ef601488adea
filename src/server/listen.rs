//! Where the server listens and who is on the other end: the owner-only
//! Unix socket in the store (peer credentials), plain TCP, or TCP with
//! TLS (rustls). How connections are served is `conn`'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixListener;

/// The other end of a connection: each request carries it as
/// `ConnectInfo<Peer>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// On the store's socket: the connecting process's uid.
    Socket { uid: u32 },
    /// Over TCP, with or without TLS.
    Tcp { addr: SocketAddr, tls: bool },
}

/// Binds the store's socket, owner-only (0600). A socket file left by an
/// engine that died is replaced: the caller owns the store, so no other
/// engine can be listening on it.
pub fn bind_socket(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    // Created with a umask that leaves no one else a way in, then set
    // explicitly in case the umask was looser.
    // SAFETY: umask only swaps the process's file mode mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let listener = bound?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The socket of the store at `root`.
pub fn socket_path(root: &Path) -> PathBuf {
    root.join("canopy.sock")
}

/// A rustls server configuration from PEM files.
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map(Arc::new)
        .map_err(|e| format!("the certificate and key do not make a TLS identity: {e}"))
}
