//! TLS on `--listen`: the serving certificate from `--tls-cert-file` and
//! `--tls-private-key-file`, read again whenever the files change (cert-manager and the kubelet
//! rotate them in place), or a self-signed one made at start when none is given. TLS 1.2 at
//! least, HTTP/1.1 only.
//!
//! The handshake never reads a file: it takes the certificate last loaded, and a task polls
//! the files every [`RELOAD_PERIOD`] apart from it. A pair that does not load (a half-written
//! rotation, a key that does not match the certificate) is logged and skipped; the previous
//! certificate is served until a good pair appears.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use anyhow::Context as _;
use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use tokio_rustls::TlsAcceptor;

/// How often the certificate files are checked for a change.
pub(crate) const RELOAD_PERIOD: Duration = Duration::from_secs(2);

/// Larger certificate or key files are refused unread: a chain is a few KiB.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// What `--listen` speaks.
#[derive(Clone)]
pub(crate) enum Transport {
    /// Plain HTTP (`--insecure-plain-http-listen`).
    Plain,
    /// TLS, then HTTP/1.1.
    Tls(TlsAcceptor),
}

/// The serving certificate files, as given by the flags: both, or neither.
#[derive(Clone, Debug, clap::Args)]
#[group(requires_all = ["cert", "key"])]
pub struct CertFiles {
    /// The PEM certificate chain `--listen` serves over TLS (TLS 1.2 or 1.3), e.g. a
    /// cert-manager Certificate's `tls.crt`. The file and `--tls-private-key-file` are read
    /// again when they change, without a restart. Without either, `--listen` serves TLS with
    /// a self-signed certificate made at start (encrypted, but verifiable only by pinning it).
    #[arg(
        long = "tls-cert-file",
        required = false,
        value_name = "FILE",
        conflicts_with = "insecure_plain_http_listen",
        env = "TETHER_TLS_CERT_FILE"
    )]
    pub cert: PathBuf,

    /// The PEM private key of `--tls-cert-file` (PKCS#8, PKCS#1 or SEC1), e.g. `tls.key`.
    #[arg(
        long = "tls-private-key-file",
        required = false,
        value_name = "FILE",
        env = "TETHER_TLS_PRIVATE_KEY_FILE"
    )]
    pub key: PathBuf,
}

/// Hands every handshake the certificate last loaded.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}

impl ReloadingCert {
    fn new(first: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(first)),
        }
    }

    fn replace(&self, next: CertifiedKey) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS acceptor serving `resolver`'s certificate, TLS 1.2 and 1.3, HTTP/1.1 only.
fn acceptor(resolver: Arc<ReloadingCert>) -> anyhow::Result<TlsAcceptor> {
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS versions")?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// TLS with the certificate in `files`, and the task that reloads it when they change (run it
/// beside the server).
///
/// # Errors
/// The files unreadable, not PEM, or a key that does not match the certificate: the collector
/// does not start with a certificate it cannot serve.
pub(crate) fn from_files(
    files: CertFiles,
) -> anyhow::Result<(Transport, impl std::future::Future<Output = ()>)> {
    let (cert_pem, key_pem) = read_pair(&files)?;
    let first = certified_key(&cert_pem, &key_pem)
        .with_context(|| format!("{} and {}", files.cert.display(), files.key.display()))?;
    let resolver = Arc::new(ReloadingCert::new(first));
    let transport = Transport::Tls(acceptor(Arc::clone(&resolver))?);
    let reload = reload(resolver, files, (cert_pem, key_pem), RELOAD_PERIOD);
    Ok((transport, reload))
}

/// TLS with a certificate made now and signed by its own key, for `names`: the traffic is
/// encrypted, but a client can only pin it or skip verifying it (Prometheus'
/// `insecureSkipVerify`); give a certificate from your CA to be verified.
///
/// # Errors
/// Generating the key or the certificate failing.
pub(crate) fn self_signed(names: Vec<String>) -> anyhow::Result<Transport> {
    let generated = rcgen::generate_simple_self_signed(names)
        .context("generating a self-signed certificate")?;
    let key = PrivateKeyDer::Pkcs8(generated.signing_key.serialize_der().into());
    let certified = CertifiedKey::from_der(vec![generated.cert.der().clone()], key, &provider())
        .context("loading the self-signed certificate")?;
    acceptor(Arc::new(ReloadingCert::new(certified))).map(Transport::Tls)
}

/// Polls `files` every `period` and serves a changed pair once it loads.
async fn reload(
    resolver: Arc<ReloadingCert>,
    files: CertFiles,
    mut loaded: (Vec<u8>, Vec<u8>),
    period: Duration,
) {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let to_read = files.clone();
        // Off the runtime's workers: a slow disk delays the next reload, never a handshake.
        let pair = match tokio::task::spawn_blocking(move || read_pair(&to_read)).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(err)) => {
                let error = format!("{err:#}");
                tracing::warn!(%error, "serving certificate files unreadable; the previous stays");
                continue;
            }
            Err(_) => continue,
        };
        if pair == loaded {
            continue;
        }
        match certified_key(&pair.0, &pair.1) {
            Ok(next) => {
                resolver.replace(next);
                loaded = pair;
                tracing::info!(cert = %files.cert.display(), "serving a new certificate");
            }
            // Retried on the next tick: a rotation may have written one file and not yet the
            // other.
            Err(err) => {
                let error = format!("{err:#}");
                tracing::warn!(%error, "changed serving certificate does not load; the previous stays");
            }
        }
    }
}

fn read_pair(files: &CertFiles) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    Ok((read_bounded(&files.cert)?, read_bounded(&files.key)?))
}

fn read_bounded(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_PEM_BYTES + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        u64::try_from(bytes.len()).unwrap_or(u64::MAX) <= MAX_PEM_BYTES,
        "{} is over {MAX_PEM_BYTES} bytes",
        path.display()
    );
    Ok(bytes)
}

/// The chain and key of two PEM files, checked to belong together.
fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("the certificate file is not PEM")?;
    anyhow::ensure!(
        !chain.is_empty(),
        "the certificate file holds no certificate"
    );
    // The key's parse error is not shown: it could quote the key.
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| anyhow::anyhow!("the key file holds no PEM private key"))?;
    CertifiedKey::from_der(chain, key, &provider())
        .context("the key does not load, or does not match the certificate")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        (generated.cert.pem(), generated.signing_key.serialize_pem())
    }

    fn serving(resolver: &ReloadingCert) -> Vec<u8> {
        resolver.current.read().unwrap().cert[0].to_vec()
    }

    #[test]
    fn a_key_of_another_certificate_or_garbage_is_refused() {
        let (cert_a, key_a) = pair("a");
        let (_, key_b) = pair("b");
        assert!(certified_key(cert_a.as_bytes(), key_a.as_bytes()).is_ok());
        let err = certified_key(cert_a.as_bytes(), key_b.as_bytes()).unwrap_err();
        assert!(format!("{err:#}").contains("does not match"), "{err:#}");
        assert!(certified_key(b"", key_a.as_bytes()).is_err());
        let err =
            certified_key(cert_a.as_bytes(), b"-----BEGIN PRIVATE KEY-----\nzz\n").unwrap_err();
        assert!(!format!("{err:#}").contains("zz"), "{err:#}");
    }

    #[tokio::test]
    async fn a_changed_pair_is_served_and_a_half_written_one_is_not() {
        const PERIOD: Duration = Duration::from_millis(20);
        let dir = std::env::temp_dir().join(format!("tls-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = CertFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        let (cert_a, key_a) = pair("a");
        std::fs::write(&files.cert, &cert_a).unwrap();
        std::fs::write(&files.key, &key_a).unwrap();
        let first = read_pair(&files).unwrap();
        let first_key = certified_key(&first.0, &first.1).unwrap();
        let resolver = Arc::new(ReloadingCert::new(first_key));
        let served_a = serving(&resolver);
        let task = tokio::spawn(reload(Arc::clone(&resolver), files.clone(), first, PERIOD));

        // Half a rotation: the new certificate, the old key.
        let (cert_b, key_b) = pair("b");
        std::fs::write(&files.cert, &cert_b).unwrap();
        tokio::time::sleep(PERIOD * 10).await;
        assert_eq!(serving(&resolver), served_a, "a mismatched pair was served");

        std::fs::write(&files.key, &key_b).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while serving(&resolver) == served_a {
            let waiting = tokio::time::Instant::now() < deadline;
            assert!(waiting, "the new pair was never served");
            tokio::time::sleep(PERIOD).await;
        }
        let want = CertificateDer::from_pem_slice(cert_b.as_bytes()).unwrap();
        assert_eq!(serving(&resolver), want.to_vec());
        task.abort();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
