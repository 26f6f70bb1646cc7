//! A minimal kustomize: renders our kustomizations without a kustomize binary.
//!
//! [`build`] covers only what `deploy/kustomize` uses (`resources` files and directories,
//! `components`, inline JSON 6902 `add` patches with a `target`, `$patch: delete` patches). It
//! refuses anything else rather than render it wrongly. [`kustomize_build`] runs the real
//! thing, the pinned kustomize `hack/tools.sh` builds, for a test that compares the two.

use std::{collections::BTreeSet, path::Path, process::Command};

use anyhow::{Context as _, bail, ensure};
use serde_json::Value;

use crate::manifest::{ObjectId, load_documents, parse_documents};

/// Renders the kustomization in `dir` as `kustomize build` does, for the subset of kustomize
/// our kustomizations use: `resources` (YAML files in or below `dir`, as kustomize's load
/// restrictor demands, and directories holding a kustomization), then `components`
/// (directories holding a `kind: Component` kustomization of the same fields, each adding its
/// resources and patching everything so far), then `patches` that are either inline JSON 6902
/// `add` operations with a `target`, or an inline `$patch: delete`. Any other field is an
/// error, never silently ignored. Output order is the order of `resources`, not kustomize's
/// kind order.
pub fn build(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    render(dir, Kind::Kustomization, &mut objects)?;
    Ok(objects)
}

/// What a `kustomization.yaml` declares itself to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Renders from nothing.
    Kustomization,
    /// Adds to and patches what the kustomization that names it has so far.
    Component,
}

impl Kind {
    fn api_version(self) -> &'static str {
        match self {
            Self::Kustomization => "kustomize.config.k8s.io/v1beta1",
            Self::Component => "kustomize.config.k8s.io/v1alpha1",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Kustomization => "Kustomization",
            Self::Component => "Component",
        }
    }
}

/// Renders the kustomization of `kind` in `dir` onto `objects`.
fn render(dir: &Path, kind: Kind, objects: &mut Vec<Value>) -> anyhow::Result<()> {
    let file = dir.join("kustomization.yaml");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let kustomization: serde_yaml::Mapping =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    for (key, value) in &kustomization {
        match key.as_str() {
            Some("apiVersion") => ensure!(
                value.as_str() == Some(kind.api_version()),
                "{}: apiVersion {value:?}",
                file.display()
            ),
            Some("kind") => ensure!(
                value.as_str() == Some(kind.name()),
                "{}: kind {value:?} where a {} is expected",
                file.display(),
                kind.name()
            ),
            Some("resources" | "components" | "patches") => {}
            other => bail!(
                "{}: `{other:?}` is not implemented by this minimal renderer",
                file.display()
            ),
        }
    }

    let root = dir.canonicalize()?;
    for entry in sequence(&kustomization, "resources")? {
        let rel = entry.as_str().context("a resource that is not a path")?;
        let path = dir.join(rel);
        if path.is_dir() {
            objects.extend(build(&path)?);
        } else {
            let real = path
                .canonicalize()
                .with_context(|| format!("{}: resource {rel}", file.display()))?;
            ensure!(
                real.starts_with(&root),
                "{}: resource {rel} is not in or below the kustomization (kustomize refuses it)",
                file.display()
            );
            objects.extend(load_documents(&real)?);
        }
    }
    for entry in sequence(&kustomization, "components")? {
        let rel = entry.as_str().context("a component that is not a path")?;
        render(&dir.join(rel), Kind::Component, objects)
            .with_context(|| format!("{}: component {rel}", file.display()))?;
    }
    let mut ids = BTreeSet::new();
    for object in objects.iter() {
        let id = ObjectId::of(object)?;
        ensure!(!ids.contains(&id), "{id} is defined twice");
        ids.insert(id);
    }
    for patch in sequence(&kustomization, "patches")? {
        apply_patch(objects, patch).with_context(|| format!("a patch in {}", file.display()))?;
    }
    Ok(())
}

fn sequence<'a>(
    map: &'a serde_yaml::Mapping,
    key: &str,
) -> anyhow::Result<&'a [serde_yaml::Value]> {
    match map.get(key) {
        None => Ok(&[]),
        Some(value) => Ok(value
            .as_sequence()
            .with_context(|| format!("`{key}` is not a list"))?),
    }
}

fn apply_patch(objects: &mut Vec<Value>, entry: &serde_yaml::Value) -> anyhow::Result<()> {
    let entry = entry
        .as_mapping()
        .context("a patch that is not a mapping")?;
    for key in entry.keys() {
        ensure!(
            matches!(key.as_str(), Some("patch" | "target")),
            "patch field {key:?} is not implemented (only inline `patch` and `target`)"
        );
    }
    let body = entry
        .get("patch")
        .and_then(serde_yaml::Value::as_str)
        .context("only inline `patch:` strings are implemented")?;
    let body: serde_yaml::Value = serde_yaml::from_str(body)?;
    match body {
        serde_yaml::Value::Sequence(operations) => {
            let target = entry
                .get("target")
                .context("a JSON 6902 patch needs a target")?
                .as_mapping()
                .context("target is not a mapping")?;
            let mut matched = 0;
            for object in objects.iter_mut() {
                if targets(target, &ObjectId::of(object)?)? {
                    for operation in &operations {
                        json6902_add(object, operation)?;
                    }
                    matched += 1;
                }
            }
            ensure!(matched > 0, "no object matches the target {target:?}");
        }
        serde_yaml::Value::Mapping(ref delete)
            if delete.get("$patch").and_then(serde_yaml::Value::as_str) == Some("delete") =>
        {
            ensure!(
                entry.get("target").is_none(),
                "`$patch: delete` with a target is not implemented"
            );
            let doomed = ObjectId::of(&serde_json::to_value(&body)?)?;
            let before = objects.len();
            objects.retain(|object| ObjectId::of(object).ok().as_ref() != Some(&doomed));
            ensure!(
                objects.len() + 1 == before,
                "`$patch: delete` of {doomed} matches no object"
            );
        }
        _ => bail!("only JSON 6902 operation lists and `$patch: delete` are implemented"),
    }
    Ok(())
}

/// Whether a patch `target` (group, version, kind, name, namespace) selects `id`.
fn targets(target: &serde_yaml::Mapping, id: &ObjectId) -> anyhow::Result<bool> {
    let mut selected = true;
    for (key, value) in target {
        let value = value
            .as_str()
            .context("a target field that is not a string")?;
        let actual = match key.as_str() {
            Some("group") => id.group(),
            Some("version") => id.version(),
            Some("kind") => id.kind.as_str(),
            Some("name") => id.name.as_str(),
            Some("namespace") => id.namespace.as_deref().unwrap_or(""),
            other => bail!("target field {other:?} is not implemented"),
        };
        selected &= actual == value;
    }
    Ok(selected)
}

/// Applies one JSON 6902 operation; only `add` is implemented.
fn json6902_add(object: &mut Value, operation: &serde_yaml::Value) -> anyhow::Result<()> {
    let operation: Value = serde_json::to_value(operation)?;
    let op = operation.get("op").and_then(Value::as_str);
    ensure!(
        op == Some("add"),
        "JSON 6902 op {op:?} is not implemented (only add)"
    );
    let path = operation
        .get("path")
        .and_then(Value::as_str)
        .context("an operation without a path")?;
    let value = operation
        .get("value")
        .context("an add without a value")?
        .clone();
    let (parent, last) = path
        .rsplit_once('/')
        .context("a path that is not a JSON pointer")?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let parent = object
        .pointer_mut(parent)
        .with_context(|| format!("{parent} does not exist"))?;
    match parent {
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => {
            let index: usize = last.parse().context("an array index")?;
            ensure!(index <= items.len(), "index {index} is out of bounds");
            items.insert(index, value);
        }
        Value::Object(fields) => {
            fields.insert(last, value);
        }
        _ => bail!("{path}: the parent is neither an array nor an object"),
    }
    Ok(())
}

/// Runs `kustomize build` on a kustomization with the pinned kustomize (built or found by
/// `hack/tools.sh`), to compare [`build`] with.
///
/// # Errors
/// No kustomize (it cannot be built), or kustomize failing or printing what does not parse.
pub fn kustomize_build(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let kustomize = testkit::tools::binary("kustomize")?;
    let output = Command::new(&kustomize)
        .arg("build")
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", kustomize.display()))?;
    ensure!(
        output.status.success(),
        "kustomize build {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8(output.stdout)?, "kustomize build")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    #[test]
    fn refuses_what_it_does_not_implement() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "namespace: elsewhere\nresources: []\n",
        )
        .unwrap();
        let err = build(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("not implemented"), "{err:#}");

        // A file above the kustomization is refused, as kustomize's load restrictor does.
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(
            dir.path().join("above.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n",
        )
        .unwrap();
        std::fs::write(
            inner.join("kustomization.yaml"),
            "resources:\n  - ../above.yaml\n",
        )
        .unwrap();
        let err = build(&inner).unwrap_err();
        assert!(format!("{err:#}").contains("not in or below"), "{err:#}");

        // A component must say it is one.
        std::fs::write(
            inner.join("kustomization.yaml"),
            "resources: []\ncomponents:\n  - ../component\n",
        )
        .unwrap();
        let component = dir.path().join("component");
        std::fs::create_dir(&component).unwrap();
        std::fs::write(
            component.join("kustomization.yaml"),
            "kind: Kustomization\n",
        )
        .unwrap();
        let err = build(&inner).unwrap_err();
        assert!(
            format!("{err:#}").contains("where a Component is expected"),
            "{err:#}"
        );
    }
}
