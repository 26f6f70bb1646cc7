//! Attacks on the exec plugin invocation, against the real `collector` binary reading member
//! files, with a hostile endpoint on 127.0.0.2 that records every `Authorization` header:
//!
//! - a member file whose `exec.args` names a file outside the members directory (a made-up
//!   ServiceAccount token) is `ExecNotAllowed`, and that file never reaches the endpoint;
//! - a member file that sets `HOME` to a directory it controls, holding a Python user-site
//!   `.pth`, is `ExecNotAllowed`, and the allowed Python plugin never runs that code;
//! - a plugin run with `--exec-run-as 65534` cannot read a `0600` root-owned token file (the
//!   collector's own ServiceAccount token stands in), so it never reaches the endpoint.

use std::{
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use e2e::{
    collector_run::{collector_check, spawn_healthy, temp_dir},
    kubeconfig_plane::{plugin_path, read_api::process_condition},
};
use testkit::{CollectorProcess, HostileEndpoint, eventually};

const START: Duration = Duration::from_secs(15);
const CONVERGE: Duration = Duration::from_secs(30);
/// A whole `collector check` run: the directory listed, then each member's checks.
const CHECK_LIMIT: Duration = Duration::from_secs(60);
/// Probe periods more in which a refused member must still not have run or sent anything.
const WATCH: Duration = Duration::from_secs(4);
const SA_TOKEN: &str = "made-up-collector-sa-token-0f1e2d";
const MEMBER_TOKEN: &str = "the-members-own-token-9a8b7c";

/// A members directory whose members reach `endpoint` under its CA, and the collector
/// reading it.
struct Fleet {
    dir: PathBuf,
    endpoint: HostileEndpoint,
}

impl Fleet {
    async fn new(name: &str) -> anyhow::Result<Self> {
        let endpoint = HostileEndpoint::start(std::net::Ipv4Addr::new(127, 0, 0, 2)).await?;
        let dir = temp_dir(name)?;
        std::fs::create_dir(dir.join("members"))?;
        std::fs::write(dir.join("members/endpoint-ca.crt"), endpoint.ca_pem())?;
        Ok(Self { dir, endpoint })
    }

    fn members(&self) -> PathBuf {
        self.dir.join("members")
    }

    /// Writes member file `name.yaml` with an `exec` stanza of `exec_yaml` (indented lines).
    fn member(&self, name: &str, exec_yaml: &str) {
        let text = format!(
            "name: {name}\napiEndpoint: {}\ncaFile: endpoint-ca.crt\nexec:\n  apiVersion: \
             client.authentication.k8s.io/v1\n  command: {}\n{exec_yaml}",
            self.endpoint.url(),
            plugin().display()
        );
        let tmp = self.members().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, self.members().join(format!("{name}.yaml"))).unwrap();
    }

    /// Writes `--exec-plugins` declaring the tokenfile plugin with `args` fixed.
    fn declaration(&self, args: &[&Path]) -> String {
        let path = self.dir.join("exec-plugins.yaml");
        let args: Vec<String> = args.iter().map(|a| format!("{:?}", a.display())).collect();
        std::fs::write(
            &path,
            format!(
                "providers:\n- name: tokenfile\n  execConfig:\n    command: {}\n    args: [{}]\n",
                plugin().display(),
                args.join(", ")
            ),
        )
        .unwrap();
        path.display().to_string()
    }

    /// The flags that read the members directory, which may name the endpoint, and `extra`.
    fn flags(&self, extra: &[&str]) -> Vec<String> {
        let members = self.members().display().to_string();
        let allow = self.endpoint.allow_endpoint_arg();
        let source = ["--members-from", "directory", "--members-dir", &members];
        let flags = [&source[..], &["--allow-endpoint", &allow], extra].concat();
        flags.into_iter().map(str::to_owned).collect()
    }

    async fn collector(&self, exec_flags: &[&str]) -> CollectorProcess {
        let serve = ["--insecure-serve-api", "--probe-period", "1"];
        let args = self.flags(&[&serve[..], exec_flags].concat());
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        spawn_healthy(&args, &logs, START).await.unwrap()
    }
}

fn plugin() -> PathBuf {
    plugin_path("tokenfile-plugin.py").unwrap()
}

/// `status/reason: message` of condition `type_` of `member`, if the read API shows it.
async fn condition(process: &CollectorProcess, member: &str, type_: &str) -> Option<String> {
    let found = process_condition(process, member, type_).await?;
    Some(format!("{}: {}", found.short(), found.message))
}

/// Polls until `member`'s `CredentialsValid` starts with `want` (`status/reason`).
async fn wait_credentials(process: &CollectorProcess, member: &str, want: &str) -> String {
    let what = format!(
        "{member}: CredentialsValid is {want} (logs in {})",
        process.log_dir.display()
    );
    let now = eventually(&what, CONVERGE, || async {
        match condition(process, member, "CredentialsValid").await {
            Some(now) if now.starts_with(want) => Ok(now),
            now => Err(format!("{now:?}")),
        }
    })
    .await
    .unwrap();
    println!("{member}: CredentialsValid {now}");
    now
}

/// Whether Python, as the plugin runs it, would process `.pth` files under `home`: writes
/// one there that creates `marker`, runs the plugin directly with that `HOME`, and says
/// whether the marker appeared (removing it again).
fn pth_runs_under(home: &Path, marker: &Path) -> bool {
    let site = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .env_clear()
        .env("HOME", home)
        .output()
        .unwrap();
    let site = PathBuf::from(String::from_utf8(site.stdout).unwrap().trim());
    assert!(site.starts_with(home), "{}", site.display());
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("tether-evil.pth"),
        format!(
            "import os; open({:?}, 'w').write('ran')\n",
            marker.display()
        ),
    )
    .unwrap();
    let _ = std::process::Command::new(plugin())
        .arg("/nonexistent")
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .output()
        .unwrap();
    let ran = marker.exists();
    let _ = std::fs::remove_file(marker);
    ran
}

#[tokio::test]
async fn a_member_file_chooses_neither_the_plugins_args_nor_its_env() -> anyhow::Result<()> {
    let fleet = Fleet::new("security-exec").await?;
    // What the operator's plugin reads for the members: a token file of its own.
    let own_token = fleet.dir.join("member.token");
    std::fs::write(&own_token, MEMBER_TOKEN)?;
    // Outside the members directory, standing for the collector's ServiceAccount token.
    let sa_token = fleet.dir.join("sa-token");
    std::fs::write(&sa_token, SA_TOKEN)?;
    // The attacker's HOME, with a Python user-site `.pth` that leaves a marker.
    let evil_home = fleet.members().join("home");
    let marker = fleet.dir.join("pth-ran");
    assert!(
        pth_runs_under(&evil_home, &marker),
        "the .pth must run under that HOME for this test to mean anything"
    );

    let declaration = fleet.declaration(&[&own_token]);
    let collector = fleet.collector(&["--exec-plugins", &declaration]).await;

    // A member that passes nothing: the plugin runs as declared.
    fleet.member("good", "");
    wait_credentials(&collector, "good", "True/").await;
    assert!(
        fleet.endpoint.saw_bearer(MEMBER_TOKEN),
        "the plugin ran for good"
    );

    // (a) The plugin told to read another file.
    fleet.member(
        "args",
        &format!("  args: [{:?}]\n", sa_token.display().to_string()),
    );
    // (b) The plugin's HOME moved to the attacker's directory.
    fleet.member(
        "home",
        &format!(
            "  env: [{{name: HOME, value: {:?}}}]\n",
            evil_home.display().to_string()
        ),
    );
    // Long enough for either member to have run its plugin and sent its token many times.
    tokio::time::sleep(WATCH).await;
    let seen = fleet.endpoint.authorizations();
    println!(
        "the endpoint saw {} requests, {} Authorization headers",
        fleet.endpoint.requests(),
        seen.len()
    );
    assert!(
        !fleet.endpoint.saw_bearer(SA_TOKEN),
        "the file named in exec.args reached the endpoint as a bearer token"
    );
    assert!(
        seen.iter().all(|a| a == &format!("Bearer {MEMBER_TOKEN}")),
        "{seen:?}"
    );
    assert!(
        !marker.exists(),
        "the plugin ran the .pth in the definition's HOME"
    );

    let args = wait_credentials(&collector, "args", "False/ExecNotAllowed").await;
    let home = wait_credentials(&collector, "home", "False/ExecNotAllowed").await;
    assert!(args.contains("argument 0"), "{args}");
    assert!(!args.contains(&sa_token.display().to_string()), "{args}");
    assert!(home.contains("\"HOME\""), "{home}");
    assert!(!home.contains(&evil_home.display().to_string()), "{home}");

    // `collector check`, as an operator runs it, refuses the same members in the same words.
    let flags = fleet.flags(&["--exec-plugins", &declaration]);
    let check = collector_check(&flags, CHECK_LIMIT).await?;
    assert_eq!(check.code, 1, "{}", check.output);
    // Each names what it refused, never the value the definition gave it.
    for (member, named, value) in [
        ("args", "argument 0", sa_token.display().to_string()),
        ("home", "\"HOME\"", evil_home.display().to_string()),
    ] {
        let row = check.row(member)?;
        assert_eq!(row["reason"], "ExecNotAllowed", "{row:#}");
        let message = row["message"].as_str().unwrap_or_default();
        assert!(message.contains(named), "{row:#}");
        assert!(!message.contains(&value), "{row:#}");
    }
    assert!(!check.output.contains(SA_TOKEN), "{}", check.output);
    Ok(())
}

#[tokio::test]
async fn a_plugin_run_as_another_user_cannot_read_the_collectors_token() -> anyhow::Result<()> {
    assert_eq!(
        std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m))?,
        0,
        "switching the plugin's user needs root (CAP_SETUID) in this test"
    );
    let fleet = Fleet::new("security-exec-run-as").await?;
    // Owned by the collector's user (root here), mode 0600: the ServiceAccount token as the
    // chart mounts it.
    let sa_token = fleet.dir.join("sa-token");
    std::fs::write(&sa_token, SA_TOKEN)?;
    std::fs::set_permissions(&sa_token, std::fs::Permissions::from_mode(0o600))?;
    // The operator's declaration runs the plugin on that file: the worst an operator's
    // plugin could be made to do.
    let declaration = fleet.declaration(&[&sa_token]);
    let collector = fleet
        .collector(&["--exec-plugins", &declaration, "--exec-run-as", "65534"])
        .await;
    fleet.member("sandboxed", "");
    // Long enough for the plugin to have run and its token to have been sent many times.
    tokio::time::sleep(WATCH).await;
    println!(
        "the endpoint saw {} requests, {} Authorization headers",
        fleet.endpoint.requests(),
        fleet.endpoint.authorizations().len()
    );
    assert!(
        !fleet.endpoint.saw_bearer(SA_TOKEN),
        "a plugin run as 65534 read the 0600 token and it reached the endpoint"
    );
    let sandboxed = wait_credentials(&collector, "sandboxed", "False/ExecFailed").await;
    assert!(sandboxed.contains("Permission denied"), "{sandboxed}");
    Ok(())
}
