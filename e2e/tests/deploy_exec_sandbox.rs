//! The exec plugin sandbox as the Helm chart (`ci/exec-plugins-values.yaml`, and
//! `allowExec` alone in `ci/capi-values.yaml`) and the kustomize overlay `exec-plugins` ship
//! it: the declarations the collector is pointed at parse as `--exec-plugins`, plugins run as
//! another user than the collector, and the collector's ServiceAccount token is a projected
//! volume of mode 0400 that the collector reads and automount does not also expose.

use clap::Parser as _;
use collector::cli::Args;
use e2e::{
    helm::{helm_template, kube_version},
    manifest::{
        chart_dir, generated_crd_path, kustomize_build, kustomize_dir, load_documents, of_kind,
        typed,
    },
    manifest_apply::apply,
};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use member_client::exec::ExecPluginsFile;
use serde_json::Value;
use testkit::Environment;

/// Checks the sandbox in `objects`; `declared` says whether an `--exec-plugins` file is
/// expected.
fn assert_sandbox(objects: &[Value], what: &str, declared: bool) {
    let deployment: Deployment = typed(of_kind(objects, "Deployment").next().unwrap()).unwrap();
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    let argv = std::iter::once("collector".to_owned()).chain(container.args.clone().unwrap());
    let args = Args::try_parse_from(argv).unwrap();

    // Plugins run as someone else than the collector.
    let security = container.security_context.clone().unwrap();
    let collector_uid = security.run_as_user.unwrap();
    let run_as = args
        .exec_run_as
        .unwrap_or_else(|| panic!("{what}: no --exec-run-as"));
    assert_ne!(i64::from(run_as.uid), collector_uid, "{what}");
    let added = security.capabilities.unwrap().add.unwrap_or_default();
    assert_eq!(added, ["SETUID", "SETGID", "CHOWN"], "{what}");
    assert_eq!(security.allow_privilege_escalation, Some(false), "{what}");
    assert_eq!(security.read_only_root_filesystem, Some(true), "{what}");

    // The token the collector reads is the 0400 projected volume, and only that.
    assert_eq!(pod.automount_service_account_token, Some(false), "{what}");
    let mounts = container.volume_mounts.clone().unwrap();
    let token_dir = args.control_plane_token_file.parent().unwrap();
    let mount = (mounts.iter())
        .find(|m| std::path::Path::new(&m.mount_path) == token_dir)
        .unwrap_or_else(|| panic!("{what}: nothing mounted at {}", token_dir.display()));
    let volumes = pod.volumes.clone().unwrap();
    let volume = volumes.iter().find(|v| v.name == mount.name).unwrap();
    let projected = volume.projected.as_ref().unwrap();
    assert_eq!(projected.default_mode, Some(0o400), "{what}");
    assert!(
        (projected.sources.iter().flatten()).any(|s| s.service_account_token.is_some()),
        "{what}"
    );
    // The private HOMEs have a writable /tmp.
    assert!(mounts.iter().any(|m| m.mount_path == "/tmp"), "{what}");

    // The declarations parse as the collector parses them.
    let Some(file) = args.exec_plugins else {
        assert!(!declared, "{what}: no --exec-plugins");
        return;
    };
    assert!(declared, "{what}");
    let key = file.file_name().unwrap().to_str().unwrap();
    let raw = (of_kind(objects, "ConfigMap").map(|c| typed::<ConfigMap>(c).unwrap()))
        .find_map(|c| c.data.and_then(|d| d.get(key).cloned()))
        .unwrap_or_else(|| panic!("{what}: no ConfigMap holds {key}"));
    let plugins = ExecPluginsFile::parse(raw.as_bytes()).unwrap();
    let eks = plugins.declarations().next().unwrap();
    assert_eq!(eks.rules().definition_args.len(), 2, "{what}");
    assert!(
        (mounts.iter()).any(|m| std::path::Path::new(&m.mount_path) == file.parent().unwrap()),
        "{what}: the declarations are mounted where the flag says"
    );
}

#[test]
fn the_chart_and_the_overlay_ship_the_plugin_sandbox() -> anyhow::Result<()> {
    let version = kube_version()?;
    for (values, what, declared) in [
        ("ci/exec-plugins-values.yaml", "helm execPlugins", true),
        ("ci/capi-values.yaml", "helm allowExec", false),
    ] {
        let objects = helm_template(&version, Some(&chart_dir().join(values)))?;
        assert_sandbox(&objects, what, declared);
    }
    let overlay = kustomize_dir("overlays/exec-plugins");
    assert_sandbox(&kustomize_build(&overlay)?, "kustomize exec-plugins", true);
    // The defaults run no plugin, and keep the collector non-root.
    let defaults = helm_template(&version, None)?;
    let deployment: Deployment = typed(of_kind(&defaults, "Deployment").next().unwrap())?;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.automount_service_account_token, Some(true));
    let args = pod.containers[0].args.clone().unwrap();
    assert!(!args.iter().any(|a| a.starts_with("--exec")), "{args:?}");
    Ok(())
}

/// The overlay's pod (the projected token, the capabilities, the memory-backed /tmp) passes a
/// real apiserver's strict validation.
#[tokio::test]
async fn the_kustomize_exec_overlay_is_accepted_by_a_real_apiserver() -> anyhow::Result<()> {
    let env = Environment::with_members(0).await?;
    let client = env.control_plane().admin_client()?;
    let mut objects = load_documents(&generated_crd_path())?;
    objects.extend(kustomize_build(&kustomize_dir("overlays/exec-plugins"))?);
    let accepted = apply(&client, &objects, &["karmada-cluster", "default"]).await?;
    assert_eq!(accepted.len(), objects.len());
    Ok(())
}
