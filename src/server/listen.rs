//! Where the server listens and who is on the other end: the owner-only
//! Unix socket in the store (peer credentials), plain TCP, or TCP with
//! TLS (rustls). How connections are served is `conn`'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::{TcpListener, UnixListener};

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

/// The server's listeners, bound once: the store's socket and, when
/// asked, TCP. A server on PostgreSQL keeps them while it goes from leader
/// to standing by and back (each role accepts on them while it runs), so
/// its addresses never change and a client is never refused in between:
/// a connection that arrives while no role accepts waits in the backlog
/// for the next one. Cloning shares them.
#[derive(Debug, Clone)]
pub struct Bound {
    pub socket: PathBuf,
    /// The TCP address actually bound (port 0 picks one).
    pub tcp_addr: Option<SocketAddr>,
    pub(crate) uds: Arc<UnixListener>,
    pub(crate) tcp: Option<Arc<TcpListener>>,
}

impl Bound {
    /// Binds the socket of the store at `root` and, when given,
    /// `options.listen`, after refusing what serving would refuse (plain
    /// TCP off loopback not asked for, a TLS identity that does not load).
    pub async fn bind(root: &Path, options: &super::ServerOptions) -> Result<Bound, super::ServeError> {
        super::listen_tls(options)?;
        let listen = options.listen;
        let socket = socket_path(root);
        let uds = bind_socket(&socket)
            .map_err(|source| super::ServeError::Bind { what: socket.display().to_string(), source })?;
        let mut tcp = None;
        let mut tcp_addr = None;
        if let Some(addr) = listen {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| super::ServeError::Bind { what: addr.to_string(), source })?;
            tcp_addr = l.local_addr().ok();
            tcp = Some(Arc::new(l));
        }
        Ok(Bound { socket, tcp_addr, uds: Arc::new(uds), tcp })
    }

    /// The listeners `options` were given (`true`: kept by their owner,
    /// who removes the socket), or new ones bound at the store at `root`.
    pub async fn given_or_bind(
        root: &Path,
        options: &super::ServerOptions,
    ) -> Result<(Bound, bool), super::ServeError> {
        match &options.bound {
            Some(b) => Ok((b.clone(), true)),
            None => Ok((Bound::bind(root, options).await?, false)),
        }
    }

    /// Removes the socket's file, once nothing is to accept on it again.
    pub fn remove_socket(&self) {
        let _ = std::fs::remove_file(&self.socket);
    }
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
