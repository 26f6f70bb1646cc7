//! Rendered deploy manifests as JSON values: where they are in the repository, how to read
//! YAML documents, and what identifies an object ([`ObjectId`]).

use std::{
    fmt,
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use k8s_openapi::serde::{Deserialize as _, de::DeserializeOwned};
use serde_json::Value;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_owned()
}

/// `deploy/kustomize/<rel>`.
pub fn kustomize_dir(rel: &str) -> PathBuf {
    repo_root().join("deploy/kustomize").join(rel)
}

/// Renders the kustomization in `dir` with `kustomize build` of the pinned kustomize
/// ([`testkit::tools::binary`]), as a user would.
///
/// # Errors
/// No kustomize, a failing build (its stderr is in the error), or output that is not YAML.
pub fn kustomize_build(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let kustomize = testkit::tools::binary("kustomize")?;
    let output = std::process::Command::new(&kustomize)
        .arg("build")
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", kustomize.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "kustomize build {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout)?, "kustomize build")
}

/// The generated `Cluster` CRD users apply, `deploy/crds/cluster.karmada.io_clusters.yaml`.
pub fn generated_crd_path() -> PathBuf {
    repo_root().join("deploy/crds/cluster.karmada.io_clusters.yaml")
}

/// The generated `ClusterProfile` CRD, `deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml`.
pub fn clusterprofile_crd_path() -> PathBuf {
    repo_root().join("deploy/crds/multicluster.x-k8s.io_clusterprofiles.yaml")
}

/// The Helm chart, `deploy/helm/tether`.
pub fn chart_dir() -> PathBuf {
    repo_root().join("deploy/helm/tether")
}

/// What identifies an object to kustomize and to the apiserver.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`, `None` for cluster-scoped objects (or namespaced ones left to a
    /// default).
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectId {
    /// The id of `object`.
    ///
    /// # Errors
    /// No `apiVersion`, `kind` or `metadata.name`.
    pub fn of(object: &Value) -> anyhow::Result<Self> {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Ok(Self {
            api_version: text("/apiVersion").context("an object without apiVersion")?,
            kind: text("/kind").context("an object without kind")?,
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name").context("an object without metadata.name")?,
        })
    }

    /// The API group, `""` for the core group.
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The API version without the group.
    pub fn version(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or(self.api_version.as_str(), |(_, version)| version)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)?;
        match &self.namespace {
            Some(ns) => write!(f, " {ns}/{}", self.name),
            None => write!(f, " {}", self.name),
        }
    }
}

/// The YAML documents of `text` as JSON values; empty documents are skipped.
///
/// # Errors
/// Text that is not YAML, or an object without an [`ObjectId`]; `origin` names the source.
pub fn parse_documents(text: &str, origin: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value =
            Value::deserialize(document).with_context(|| format!("parsing YAML in {origin}"))?;
        if !value.is_null() {
            ObjectId::of(&value).with_context(|| format!("an object in {origin}"))?;
            objects.push(value);
        }
    }
    Ok(objects)
}

/// The YAML documents of the file at `path` ([`parse_documents`]).
///
/// # Errors
/// I/O errors, or as [`parse_documents`].
pub fn load_documents(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_documents(&text, &path.display().to_string())
}

/// The objects of `kind` among `objects`.
pub fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects
        .iter()
        .filter(move |o| o.get("kind").and_then(Value::as_str) == Some(kind))
}

/// `object` read as its Kubernetes type.
///
/// # Errors
/// The object does not deserialize as `T`.
pub fn typed<T: DeserializeOwned>(object: &Value) -> anyhow::Result<T> {
    serde_json::from_value(object.clone()).with_context(|| {
        let which =
            ObjectId::of(object).map_or_else(|_| "an object".to_owned(), |id| id.to_string());
        format!("{which} does not read as its type")
    })
}
