//! One run, start to end: the request, the Secret, the credential, the answer.

use std::time::SystemTime;

use cluster_registry::secret_credential::credential_in_secret;
use member_client::exec::wire::{ExecOutput, WriteError, format_rfc3339};
use secrecy::SecretBox;

use crate::{cli::Args, error::Error, exec_info, expiry::ExpiryRule, secret_fetch, served_secret};

/// The `ExecCredential` to print for `exec_info` (the value of `KUBERNETES_EXEC_INFO`), all of
/// it bounded by `--timeout`.
///
/// # Errors
/// Every [`Error`]; the input is read, and can fail, before anything is dialled.
pub(crate) async fn run(args: &Args, exec_info: Option<&str>) -> Result<SecretBox<Vec<u8>>, Error> {
    tokio::time::timeout(args.timeout, answer(args, exec_info))
        .await
        .map_err(|_| Error::Timeout(args.timeout))?
}

async fn answer(args: &Args, exec_info: Option<&str>) -> Result<SecretBox<Vec<u8>>, Error> {
    let request = exec_info::parse(exec_info)?;
    let config = secret_fetch::caller_config(args.kubeconfig.as_deref()).await?;
    let secret = secret_fetch::get_secret(config, &request).await?;
    served_secret::check(&secret, &request)?;
    let credential =
        credential_in_secret(&request.secret, &secret).map_err(|source| Error::Credential {
            member: request.member.clone(),
            secret: request.secret.clone(),
            source: Box::new(source),
        })?;
    let rule = ExpiryRule {
        ttl: args.ttl,
        skew: args.skew,
    };
    let expires_at = rule
        .deadline(credential.expires_at(), SystemTime::now())
        .map_err(|late| Error::Expired {
            member: request.member.clone(),
            secret: request.secret.clone(),
            at: format_rfc3339(late.expires_at).unwrap_or_else(|| "an unwritable time".to_owned()),
            skew: args.skew,
        })?;
    ExecOutput::of_credential(&credential, Some(expires_at))
        .to_json(request.api_version)
        .map_err(|err| match err {
            WriteError::ExpiryOutOfRange => Error::Timestamp,
            WriteError::Serialize(err) => Error::Output(err.into()),
        })
}
